// Adversarial checks of a player's data rights and responsible-gaming guarantees, end to end over HTTP
// (docs/operating.md "Data protection", docs/players.md, contract-engines §3–§5): what an erasure must
// reach beyond the player row (webhook deliveries already written, the live tournament board, a bounce
// reason, campaign work waiting for the player), erasure racing with ingestion of the same external id
// and a re-registration under it, concurrent repeats of the erasure, the export of a player with data in
// every engine (and nothing of another player, brand or tenant), consent per channel on a campaign, and
// blocked players (self-excluded in the batch of the triggering event, suspended, closed) on every path.
import { createServer, type IncomingMessage } from 'node:http'
import { randomUUID } from 'node:crypto'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { sleep, waitFor } from '../helpers/wait.ts'
import { campaign, createCampaign, move, must, segment, template, until } from '../campaigns/helpers.ts'

const h = await startHarness(t, {
  env: {
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_DELAYS: '1,1,1,1',
    DELIVERY_RETRY_DELAYS: '1,1,1,1',
    RATE_LIMIT_INGEST_PER_MIN: '0',
    CAMPAIGN_ENGINE_POLL_MS: '200',
  },
})
const ctx = h.app.ctx
const sql = ctx.sql

// --- helpers ------------------------------------------------------------------------------------------

let seq = 0
const uid = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${(seq++).toString(36)}`

async function ingest(tenant: TestTenant, events: Record<string, unknown>[], key = tenant.key) {
  const res = await h.request('POST', '/events', {
    key,
    body: { events: events.map((e) => ({ event_id: uid('ev'), timestamp: new Date().toISOString(), payload: {}, ...e })) },
  })
  if (res.status !== 200) throw new Error(`events: ${res.status} ${res.text}`)
  await ctx.stream?.idle()
  return res.body
}

async function idOf(brandId: string, external: string): Promise<string> {
  const [row] = await sql<{ id: string }[]>`select id from players where brand_id = ${brandId} and external_id = ${external}`
  if (!row) throw new Error(`no player ${external}`)
  return row.id
}

/** A registered player with personal data (email, name, phone) coming the way production gets it. */
async function registered(tenant: TestTenant, o: { consent?: string[]; country?: string; email?: string } = {}) {
  const ext = uid('p')
  const email = o.email ?? `${ext}@mail.example`
  await ingest(tenant, [
    { player_id: ext, event_type: 'registration', payload: { email, name: `Name ${ext}`, phone: '+39055123456', country: o.country ?? 'IT' } },
    ...(o.consent ?? []).map((channel) => ({ player_id: ext, event_type: 'consent_update', payload: { channel, granted: true } })),
  ])
  return { id: await idOf(tenant.brand.id, ext), ext, email }
}

async function erase(tenant: TestTenant, playerId: string) {
  return (await must(h.request('DELETE', `/players/${playerId}`, { key: tenant.key }), 202)).data as { id: string; status: string }
}

async function erasureDone(tenant: TestTenant, playerId: string, ms = 20_000) {
  return waitFor(`erasure of ${playerId}`, async () => {
    const r = await h.request('GET', `/players/${playerId}/erasure`, { key: tenant.key })
    return r.body.data?.status === 'completed' ? r.body.data : undefined
  }, ms)
}

async function exportOf(tenant: TestTenant, playerId: string) {
  const res = await fetch(`${h.origin}/api/v1/players/${playerId}/export`, { headers: { 'x-api-key': tenant.key } })
  if (res.status !== 200) throw new Error(`export: ${res.status} ${await res.text()}`)
  return (await res.json()) as Record<string, any>
}

const chQuery = <T>(query: string, params: Record<string, unknown>) => ctx.ch.query<T>(query, params)
const flush = async () => {
  await ctx.ingest?.spool.flush('all')
}

// --- peers: a webhook receiver, a Bot API, an SMTP server that refuses some recipients -----------------

const hooks: { at: number; path: string; body: string }[] = []
let hooksFail = true
const receiver = createServer((req: IncomingMessage, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    hooks.push({ at: Date.now(), path: req.url ?? '', body: Buffer.concat(chunks).toString() })
    res.writeHead(hooksFail && req.url === '/failing' ? 500 : 200).end('ok')
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const hookBase = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`

const TOKEN = '515151:AAAdversarialRightsBot_x'
const botCalls: { chat_id: string; text: string }[] = []
const bot = createServer((req: IncomingMessage, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString())
    botCalls.push(body)
    const reply = (status: number, json: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json))
    // Chat ids starting with 9 are "busy": refused with 429 on their first call.
    if (String(body.chat_id).startsWith('9') && botCalls.filter((c) => c.chat_id === body.chat_id).length === 1) {
      return reply(429, { ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } })
    }
    return reply(200, { ok: true, result: { message_id: botCalls.length } })
  })
})
await new Promise<void>((resolve) => bot.listen(0, '127.0.0.1', resolve))
const botUrl = `http://127.0.0.1:${(bot.address() as { port: number }).port}`
const callsTo = (chatId: string) => botCalls.filter((c) => c.chat_id === chatId)

const mails: ParsedMail[] = []
const smtp = new SMTPServer({
  disabledCommands: ['STARTTLS'],
  authOptional: true,
  closeTimeout: 100,
  onAuth(_auth, _session, cb) {
    cb(null, { user: 'u' })
  },
  onRcptTo(address, _session, cb) {
    // What Postfix answers for an unknown mailbox: the address is in the refusal.
    if (address.address.startsWith('bounce-')) {
      const err = Object.assign(new Error(`5.1.1 <${address.address}>: Recipient address rejected: User unknown in virtual mailbox table`), { responseCode: 550 })
      return cb(err)
    }
    cb()
  },
  onData(stream, _session, cb) {
    simpleParser(stream).then((m) => {
      mails.push(m)
      cb()
    }, cb)
  },
})
await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
const smtpPort = (smtp.server.address() as { port: number }).port
const mailsTo = (address: string) => mails.filter((m) => (m.to as { text: string } | undefined)?.text === address)

t.teardown(async () => {
  for (const s of [receiver, bot]) {
    s.closeAllConnections()
    await new Promise<void>((resolve) => s.close(() => resolve()))
  }
  await new Promise<void>((resolve) => smtp.close(() => resolve()))
})

async function channelsTenant() {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: TOKEN, api_base_url: botUrl } }), 200)
  await must(h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://u:p@127.0.0.1:${smtpPort}`, from: 'news@casino.example' } }), 200)
  return tenant
}

let chats = 0
const chatId = (busy = false) => `${busy ? 9 : 1}${process.pid}${String(++chats).padStart(4, '0')}`

const notification = async (tenant: TestTenant, id: string) => (await must(h.request('GET', `/notifications/${id}`, { key: tenant.key }), 200)).data

// --- erasure reaches every copy of the personal data ----------------------------------------------------

t.test('erasure: webhook deliveries written before it carry no personal data any more, in PostgreSQL or on the wire', async (t) => {
  const tenant = await h.createTenant()
  hooksFail = true
  const failing = await must(h.request('POST', '/webhooks', { key: tenant.key, body: { url: `${hookBase}/failing`, events: ['player.created', 'player.updated'] } }), 201)
  const ext = uid('wh')
  const email = `${ext}@mail.example`
  const created = await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: ext, email, phone: '+39066600000', metadata: { nickname: 'Ziggy' } } }), 201)
  await must(h.request('PATCH', `/players/${created.data.id}`, { key: tenant.key, body: { email: `new.${email}` } }), 200)
  // Both deliveries refused once: they wait for their retry (1 s).
  await waitFor('first attempts', async () => {
    const d = (await must(h.request('GET', `/webhooks/${failing.data.id}/deliveries`, { key: tenant.key }), 200)).data as any[]
    return d.length === 2 && d.every((x) => x.attempt_count >= 1 && x.status === 'pending')
  }, 10_000)
  await erase(tenant, created.data.id)
  const erasedAt = Date.now()
  hooksFail = false
  const pii = [ext, email, '+39066600000', 'Ziggy']
  // "In the request's transaction the player's personal data leaves PostgreSQL" (docs/operating.md).
  const stored = await sql<{ body: string }[]>`select body from webhook_deliveries where tenant_id = ${tenant.id}`
  t.equal(stored.length, 2)
  for (const s of pii) t.notOk(stored.some((d) => d.body.includes(s)), `no stored delivery body holds ${s}`)
  // The retries go out after the erasure: none may carry the personal data.
  await waitFor('the retries', async () => {
    const d = (await must(h.request('GET', `/webhooks/${failing.data.id}/deliveries`, { key: tenant.key }), 200)).data as any[]
    return d.every((x) => x.status !== 'pending')
  }, 10_000)
  const after = hooks.filter((x) => x.path === '/failing' && x.at > erasedAt && x.body.includes(created.data.id))
  t.ok(after.length >= 1, 'retried after the erasure')
  for (const s of pii) t.notOk(after.some((x) => x.body.includes(s)), `no webhook after the erasure carries ${s}`)
})

t.test('erasure: the live leaderboard of an active tournament no longer lists the erased player', async (t) => {
  const tenant = await h.createTenant()
  const tr = await must(h.request('POST', '/tournaments', { key: tenant.key, body: { name: 'Weekly', status: 'active', game_config: { metric: 'bet_amount' } } }), 201)
  const gone = await registered(tenant)
  const kept = await registered(tenant)
  await ingest(tenant, [
    { player_id: gone.ext, event_type: 'bet', payload: { amount: 50, currency: 'EUR', game: 'starburst' } },
    { player_id: kept.ext, event_type: 'bet', payload: { amount: 20, currency: 'EUR', game: 'starburst' } },
  ])
  const board = async (query: Record<string, string> = {}) => (await must(h.request('GET', `/tournaments/${tr.data.id}/leaderboard`, { key: tenant.key, query }), 200))
  t.same((await board()).data.map((r: any) => r.external_id), [gone.ext, kept.ext], 'both on the board before')
  await erase(tenant, gone.id)
  // docs/operating.md: tournament entries go with the player; the board is their live view.
  const after = await board()
  t.notOk(JSON.stringify(after).includes(gone.ext), 'the erased external id is not shown')
  t.notOk(JSON.stringify(after).includes(gone.id), 'nor the erased player id')
  t.same(after.data.map((r: any) => [r.rank, r.external_id]), [[1, kept.ext]], 'the remaining player ranks first')
  t.equal(after.total, 1)
  t.equal((await board({ player_id: gone.id })).player, null, 'no rank for the erased player')
})

t.test('erasure: a bounce reason naming the address does not keep it in the outbox', async (t) => {
  const tenant = await channelsTenant()
  const p = await registered(tenant, { consent: ['email'], email: `bounce-${uid('b')}@mail.example` })
  const s = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'email', payload: { subject: 'Hi', body: '<p>hi</p>' } } }), 202)
  const n = await waitFor('the bounce', async () => {
    const x = await notification(tenant, s.notification_id)
    return ['bounced', 'failed', 'delivered'].includes(x.status) ? x : undefined
  }, 10_000)
  t.equal(n.status, 'bounced')
  const before = await sql<{ data: any }[]>`select data from outbox where tenant_id = ${tenant.id} and event = 'message.bounced'`
  t.equal(before.length, 1)
  t.ok(JSON.stringify(before).includes(p.email), 'the refusal names the address (as real SMTP servers do)')
  await erase(tenant, p.id)
  const rows = await sql<{ event: string; data: any }[]>`select event, data from outbox where tenant_id = ${tenant.id}`
  t.ok(rows.length > 0)
  t.notOk(JSON.stringify(rows).includes(p.email), "no outbox row holds the erased player's address")
  t.notOk(JSON.stringify(rows).includes(p.ext), 'nor the external id')
})

// --- the erased player is messaged by no path ------------------------------------------------------------

t.test('erasure: no path messages the erased player — a delayed trigger, a journey wait, a retry, a held email, a one-shot, a direct send — and the others still get theirs', async (t) => {
  const tenant = await channelsTenant()
  const inApp = await template(h, tenant, 'in_app', { name: 'promo' })
  const gone = await registered(tenant, { consent: ['email', 'telegram'] })
  const kept = await registered(tenant, { consent: ['email', 'telegram'] })
  const goneChat = chatId(true)
  const keptChat = chatId()
  await must(h.request('PUT', `/players/${gone.id}/telegram`, { key: tenant.key, body: { chat_id: goneChat } }), 200)
  await must(h.request('PUT', `/players/${kept.id}/telegram`, { key: tenant.key, body: { chat_id: keptChat } }), 200)
  const both = await segment(h, tenant, { player_ids: [gone.id, kept.id] }, 'static')

  // A triggered campaign with a delay, and a journey whose first step waits: both hold the player.
  const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: inApp }, trigger: { event_type: 'deposit' }, delay_seconds: 2 } })
  await move(h, tenant, trig.id, 'running')
  const journey = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: both,
    config: { steps: [{ id: 'breathe', type: 'wait', seconds: 2, next: 'hello' }, { id: 'hello', type: 'send', channel: 'in_app', template_id: inApp, next: null }] },
  })
  await move(h, tenant, journey.id, 'running')
  await until(h, async () => (await must(h.request('GET', `/campaigns/${journey.id}/participants`, { key: tenant.key }), 200)).data.length === 2)
  await ingest(tenant, [gone, kept].map((p) => ({ player_id: p.ext, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } })))
  // A marketing Telegram message refused once (429): queued for its retry.
  const retry = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: gone.id, channel: 'telegram', payload: { body: 'promo' } } }), 202)
  await waitFor('the refused first attempt', async () => callsTo(goneChat).length === 1 && (await notification(tenant, retry.notification_id)).status === 'queued', 8000)
  // A marketing email held by quiet hours around now.
  const hhmm = (d: Date) => d.toISOString().slice(11, 16)
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { quiet_hours: { start: hhmm(new Date(Date.now() - 3600_000)), end: hhmm(new Date(Date.now() + 3600_000)), timezone: 'UTC' } } }), 200)
  const held = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: gone.id, channel: 'email', payload: { subject: 'Held', body: '<p>held</p>' } } }), 202)
  t.equal(held.data.status, 'queued', 'held by the quiet hours')

  await erase(tenant, gone.id)
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: {} }), 200)
  // Both queued messages went with the player: nothing is left to send them from.
  for (const id of [retry.notification_id, held.notification_id]) t.equal((await h.request('GET', `/notifications/${id}`, { key: tenant.key })).status, 404, 'a queued message of the erased player is gone')

  // A direct send and a one-shot after the erasure.
  t.equal((await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: gone.id, channel: 'in_app', class: 'transactional', payload: { body: 'x' } } })).status, 404, 'a direct send: 404')
  const oneShot = await createCampaign(h, tenant, { type: 'one_shot', target_segment_id: both, channels: ['in_app', 'telegram'], config: { templates: { in_app: inApp, telegram: await template(h, tenant, 'telegram', { name: 'tg' }) } } })
  await move(h, tenant, oneShot.id, 'running')
  // From here the background engine works alone (a test round would meet the delayed run of the erased
  // player, a failure of its own, tested below).
  await waitFor('the one-shot completed', async () => (await campaign(h, tenant, oneShot.id)).status === 'completed', 10_000)

  // The others get theirs: the delayed trigger and the journey step for the kept player.
  const keptNotes = async (campaignId: string) => (await must(h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: campaignId, player_id: kept.id } }), 200)).data as any[]
  await waitFor('the kept player\'s messages', async () => (await keptNotes(trig.id)).some((n) => n.status === 'delivered') && (await keptNotes(journey.id)).some((n) => n.status === 'delivered'), 12_000)
  await sleep(1500) // the refused Telegram message's retry time (1 s) has passed
  t.equal((await campaign(h, tenant, oneShot.id)).stats.audience, 1, 'the one-shot audience is the kept player only')
  t.equal(callsTo(goneChat).length, 1, 'the bot was never called again for the erased player')
  const all = await sql<{ player_id: string; status: string }[]>`select player_id, status from notifications where tenant_id = ${tenant.id}`
  t.notOk(all.some((n) => n.player_id === gone.id), 'no message of the erased player exists')
  t.same(await sql`select 1 from campaign_participants where campaign_id = ${journey.id} and player_id = ${gone.id} and status in ('active', 'waiting')`, [], 'the journey ended for them')
  t.ok(callsTo(keptChat).length >= 1, 'the kept player got the one-shot on Telegram')
  await move(h, tenant, trig.id, 'cancelled') // its run for the erased player fails on (see the next test)
})

t.test('erasure during a triggered campaign\'s delay: the held run ends, it does not fail forever', async (t) => {
  const tenant = await h.createTenant()
  const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' }, delay_seconds: 1 } })
  await move(h, tenant, trig.id, 'running')
  const gone = await registered(tenant)
  await ingest(tenant, [{ player_id: gone.ext, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  await erase(tenant, gone.id)
  await sleep(1200)
  // The campaign's queue drains: a run of nobody has nothing left to do (docs/operating.md: the campaign-runs
  // queue depth and failures are what an operator alerts on).
  const left = () => sql`select 1 from campaign_runs where campaign_id = ${trig.id} and state in ('pending', 'selected')`
  const drained = await waitFor('the run', async () => (await left()).length === 0, 3000).then(() => true, () => false)
  t.ok(drained, 'no run of the campaign left pending')
  await move(h, tenant, trig.id, 'cancelled') // whatever happened, leave no failing run to the later tests
})

// --- erasure racing with ingestion; the same external id again ------------------------------------------

/**
 * The race, run once for the two tests below: deposits of one external id keep arriving (and reaching
 * ClickHouse) before, during and after its player's erasure; the job runs while they do.
 */
let raceRun: Promise<Awaited<ReturnType<typeof runRace>>> | undefined
const race = () => (raceRun ??= runRace())
async function runRace() {
  const tenant = await h.createTenant()
  const p = await registered(tenant, { country: 'SE' })
  const sent: { id: string; sentAt: number; ackAt: number }[] = []
  let stop = false
  let deleteSentAt = 0
  let deleteAckAt = 0
  const pump = async (lane: number) => {
    for (let i = 0; !stop; i++) {
      const id = uid(`race${lane}`)
      const sentAt = Date.now()
      const res = await h.request('POST', '/events', { key: tenant.key, body: { event_id: id, player_id: p.ext, event_type: 'deposit', timestamp: new Date().toISOString(), payload: { amount: 1, currency: 'EUR', note: `secret-${i}` } } })
      if (res.status !== 200) throw new Error(res.text)
      sent.push({ id, sentAt, ackAt: Date.now() })
      await sleep(25)
    }
  }
  // The spool reaches ClickHouse every few hundred ms; flushed more often, the events land all through the job.
  const flusher = async () => {
    while (!stop) {
      await flush()
      await sleep(50)
    }
  }
  const pumps = Promise.all([pump(1), pump(2), flusher()])
  await sleep(300)
  deleteSentAt = Date.now()
  const job = await erase(tenant, p.id)
  deleteAckAt = Date.now()
  await erasureDone(tenant, p.id)
  await sleep(200)
  stop = true
  await pumps
  await flush()
  return { tenant, p, job, sent, before: sent.filter((e) => e.ackAt < deleteSentAt), after: sent.filter((e) => e.sentAt > deleteAckAt) }
}

t.test('erasure racing with ingestion of the same external id: every event once, the erased one\'s pseudonymised, the new player\'s kept', async (t) => {
  const { tenant, p, job, sent, before, after } = await race()
  t.ok(before.length >= 3 && after.length >= 3, `events on both sides (${before.length} before, ${after.length} after)`)
  const rows = await chQuery<{ event_id: string; player_id: string; raw: string }>(
    'SELECT event_id, player_id, raw FROM events WHERE tenant_id = {t:UUID} AND event_type = \'deposit\'', { t: tenant.id })
  const where = new Map<string, string[]>()
  for (const r of rows) where.set(r.event_id, [...(where.get(r.event_id) ?? []), r.player_id])
  t.ok(sent.every((e) => where.get(e.id)?.length === 1), 'every acknowledged event stored exactly once')
  const token = where.get(before[0]!.id)?.[0]
  t.match(token, /^erased-[0-9a-f]{32}$/)
  t.ok(before.every((e) => where.get(e.id)?.[0] === token), 'the events acknowledged before the erasure are pseudonymised')
  t.ok(after.every((e) => where.get(e.id)?.[0] === p.ext), 'the events sent after it are the new player\'s, under the external id')
  t.notOk(rows.filter((r) => r.player_id === token).some((r) => r.raw.includes('secret-') || r.raw.includes(p.ext)), 'the copies carry nothing personal')

  // The new player: another id; its export holds its own events only.
  const fresh = await idOf(tenant.brand.id, p.ext)
  t.not(fresh, p.id, 'a new player')
  t.equal((await h.request('GET', `/players/${p.id}`, { key: tenant.key })).status, 404)
  const doc = await exportOf(tenant, fresh)
  const mine = new Set(doc.events.map((e: { event_id: string }) => e.event_id))
  t.ok(after.every((e) => mine.has(e.id)), 'the new player\'s export has every event sent after the erasure')
  t.notOk(before.some((e) => mine.has(e.id)), 'and none of the erased player\'s')
  t.notOk(JSON.stringify(doc).includes(p.email), 'nothing of the erased registration')
  t.equal((await h.request('GET', `/players/${p.id}/erasure`, { key: tenant.key })).body.data.id, job.id)
  const summary = (await must(h.request('GET', '/analytics/summary', { key: tenant.key }), 200)).data
  t.same(summary.deposits, { count: sent.length, amount: { EUR: sent.length } }, 'deposits: every event counted once')
})

t.test('erasure racing with ingestion: the per-player figures count each event of the new player once', async (t) => {
  const { tenant, sent } = await race()
  // docs/analytics.md: "with a later player under the same id, the rollups equal what events gives".
  const totals = await chQuery<{ player_id: string; n: string }>(
    'SELECT player_id, toString(sum(events)) AS n FROM rollup_player_totals WHERE tenant_id = {t:UUID} GROUP BY player_id HAVING sum(events) > 0 ORDER BY player_id', { t: tenant.id })
  const fromEvents = await chQuery<{ player_id: string; n: string }>(
    'SELECT player_id, toString(count()) AS n FROM events WHERE tenant_id = {t:UUID} GROUP BY player_id ORDER BY player_id', { t: tenant.id })
  t.same(totals, fromEvents, 'per-player rollups as the events say')
  const country = (await must(h.request('GET', '/analytics/revenue', { key: tenant.key, query: { dimension: 'country' } }), 200)).data as any[]
  const sum = (rows: any[]) => rows.reduce((a, r) => a + Number(r.deposits?.EUR ?? 0), 0)
  t.equal(sum(country), sent.length, 'revenue by country adds up to the deposits received, once each')
})

t.test('the export of a new player under an erased external id holds nothing of the erased player, also before the erasure job is done', async (t) => {
  const tenant = await h.createTenant()
  const p = await registered(tenant)
  await ingest(tenant, [{ player_id: p.ext, event_type: 'deposit', payload: { amount: 5, currency: 'EUR', method: 'card', card_holder: `Holder ${p.ext}` } }])
  await erase(tenant, p.id)
  // The same external id registers again at once: a new person.
  const fresh = (await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: p.ext, email: `other.${p.email}` } }), 201)).data
  t.not(fresh.id, p.id)
  const doc = await exportOf(tenant, fresh.id)
  const pending = (await h.request('GET', `/players/${p.id}/erasure`, { key: tenant.key })).body.data.status !== 'completed'
  t.comment(`the erasure job was ${pending ? 'still running' : 'already done'} when the export was read`)
  t.same(doc.events, [], 'no event of the erased player')
  t.notOk(JSON.stringify(doc).includes(`Name ${p.ext}`), 'not their name')
  t.notOk(JSON.stringify(doc).includes(`Holder ${p.ext}`), 'not their card holder')
  t.notOk(JSON.stringify(doc).includes(`"email":"${p.email}"`), 'not their email')
  await erasureDone(tenant, p.id)
})

t.test('erasure repeated at once and later is one job; scopes and brands; the figures it changes and keeps; the same external id again is a new player', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const pinned = (await tenant.createKey({ brand: second.slug })).key
  const reader = (await tenant.createKey({ scopes: ['read'] })).key
  const writer = (await tenant.createKey({ scopes: ['events:write'] })).key
  const stranger = await h.createTenant()
  const p = await registered(tenant, { consent: ['email'], country: 'IT' })
  const keep = await registered(tenant, { country: 'IT' })
  await ingest(tenant, [
    { player_id: p.ext, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } },
    { player_id: keep.ext, event_type: 'deposit', payload: { amount: 5, currency: 'EUR' } },
  ])
  await flush()

  for (const [key, status, who] of [[reader, 403, 'a read key'], [writer, 403, 'an ingest key'], [pinned, 404, "another brand's pinned key"], [stranger.key, 404, 'another tenant']] as const) {
    t.equal((await h.request('DELETE', `/players/${p.id}`, { key })).status, status, `${who}: ${status}`)
  }
  t.equal((await h.request('GET', `/players/${keep.id}/erasure`, { key: tenant.key })).status, 404, 'no erasure job for a player never erased')
  t.equal((await h.request('DELETE', `/players/${randomUUID()}`, { key: tenant.key })).status, 404, 'an unknown player: 404')

  const answers = await Promise.all(Array.from({ length: 6 }, () => h.request('DELETE', `/players/${p.id}`, { key: tenant.key })))
  t.same(answers.map((a) => a.status), [202, 202, 202, 202, 202, 202], 'six at once: all 202')
  t.equal(new Set(answers.map((a) => a.body.data.id)).size, 1, 'all answer the same job')
  const done = await erasureDone(tenant, p.id)
  const again = await must(h.request('DELETE', `/players/${p.id}`, { key: tenant.key }), 202)
  t.match(again.data, { id: done.id, status: 'completed' }, 'repeated after it completed: the same job')
  t.equal((await h.request('GET', `/players/${p.id}/erasure`, { key: pinned })).status, 404, "another brand's key does not see the job")
  t.equal((await sql`select 1 from outbox where tenant_id = ${tenant.id} and event = 'player.erased'`).length, 1, 'player.erased fired once')
  t.equal((await sql`select 1 from audit_log where tenant_id = ${tenant.id} and action = 'erasePlayer'`).length, 1, 'one audit row')

  // docs/analytics.md: `players` is PostgreSQL's count and the stages sum to it; event counts and sums stay;
  // reports by status count the erased player's events under `erased`.
  const summary = (await must(h.request('GET', '/analytics/summary', { key: tenant.key }), 200)).data
  t.equal(summary.players, 1)
  t.equal(Object.values(summary.lifecycle_stages as Record<string, number>).reduce((a, b) => a + b, 0), 1, 'the stages sum to players')
  t.same(summary.deposits, { count: 2, amount: { EUR: 15 } }, 'deposits kept')
  t.equal(summary.depositors, 2, 'depositors kept')
  const byStatus = (await must(h.request('GET', '/reports/run', { key: tenant.key, query: { metric: 'events', dimension: 'status' } }), 200)).data
  t.same(byStatus.map((r: any) => [r.key, r.value]), [['active', 2], ['erased', 3]], "the erased player's events under `erased`")

  // The same external id registers again: a new person, with nothing of the erased one.
  await ingest(tenant, [
    { player_id: p.ext, event_type: 'registration', payload: { email: `new.${p.email}`, country: 'DE' } },
    { player_id: p.ext, event_type: 'deposit', payload: { amount: 7, currency: 'EUR' } },
  ])
  const fresh = await idOf(tenant.brand.id, p.ext)
  t.not(fresh, p.id, 'a new service id')
  const got = (await must(h.request('GET', `/players/${fresh}`, { key: tenant.key }), 200)).data
  t.match(got, { email: `new.${p.email}`, status: 'active' })
  t.same(got.profile.consent, {}, 'no consent carried over from the erased player')
  t.match(got.profile, { deposit_count: 1, deposit_total: 7, event_count: 2, country: 'DE' }, 'its own aggregates only')
  const promo = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: fresh, channel: 'email', payload: { subject: 'Hi', body: '<p>x</p>' } } }), 202)
  t.match(promo, { queued: false, data: { status: 'suppressed', reason: 'no_consent' } }, 'marketing email needs its own opt-in')
  t.same((await must(h.request('GET', '/players', { key: tenant.key, query: { search: p.ext } }), 200)).data.map((x: any) => x.id), [fresh])
  await flush()
  const country = (await must(h.request('GET', '/analytics/revenue', { key: tenant.key, query: { dimension: 'country' } }), 200)).data
  t.match(country, [{ key: 'DE', players: 1, deposits: { EUR: 7 } }, { key: 'IT', players: 2, deposits: { EUR: 15 } }], 'the erased (pseudonymous) and the new player are two players')
})

// --- the export ------------------------------------------------------------------------------------------

const P256 = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM'
const AUTH = 'tBHItJI5svbpez7KI4CCXg'

t.test('export: every documented section filled by the engines themselves, nothing of another player, brand or tenant, no secret', async (t) => {
  const tenant = await channelsTenant()
  const second = await tenant.createBrand('second')
  const secondKey = (await tenant.createKey({ brand: second.slug })).key
  const ext = uid('x')
  const twin = { ...tenant, key: secondKey } as TestTenant // the same external id in the second brand
  const lp = await must(h.request('POST', '/gamification/currencies', { key: tenant.key, body: { name: 'LP', symbol: 'LP', type: 'virtual' } }), 201)
  const badge = await must(h.request('POST', '/gamification/badges', { key: tenant.key, body: { name: 'First', criteria: { missions_completed: 99 } } }), 201)
  const mission = await must(h.request('POST', '/gamification/missions', { key: tenant.key, body: { name: 'Deposit', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.data.id, amount: 30 }], badge_ids: [badge.data.id] } } }), 201)
  const tr = await must(h.request('POST', '/tournaments', { key: tenant.key, body: { name: 'T', status: 'active', game_config: { metric: 'bet_amount' } } }), 201)
  const bonus = await must(h.request('POST', '/bonuses', { key: tenant.key, body: { name: 'Reload', type: 'reload', value: 50, value_type: 'percent' } }), 201)
  const off = await must(h.request('POST', '/bonuses', { key: tenant.key, body: { name: 'Old', type: 'custom', value: 5, value_type: 'fixed', active: false } }), 201)
  const personal = (who: string) => ({ email: `${who}.${ext}@mail.example`, name: `Name of ${who}` })
  const own = [
    { player_id: ext, event_type: 'registration', payload: { ...personal('me'), country: 'IT' } },
    { player_id: ext, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } },
    { player_id: ext, event_type: 'bet', payload: { amount: 5, currency: 'EUR', game: 'starburst' } },
  ].map((e) => ({ ...e, event_id: uid('own') }))
  await ingest(tenant, own)
  await ingest(tenant, [{ player_id: `${ext}-z`, event_type: 'registration', payload: personal('zed') }, { player_id: `${ext}-z`, event_type: 'deposit', payload: { amount: 3, currency: 'EUR' } }])
  await ingest(twin, [{ player_id: ext, event_type: 'registration', payload: personal('twin') }, { player_id: ext, event_type: 'deposit', payload: { amount: 4, currency: 'EUR' } }])
  const stranger = await h.createTenant()
  await ingest(stranger, [{ player_id: ext, event_type: 'registration', payload: personal('stranger') }])
  const me = await idOf(tenant.brand.id, ext)
  const zed = await idOf(tenant.brand.id, `${ext}-z`)
  const twinId = await idOf(second.id, ext)

  await must(h.request('PUT', `/players/${me}/telegram`, { key: tenant.key, body: { chat_id: chatId() } }), 200)
  await must(h.request('POST', `/players/${me}/push-subscriptions`, { key: tenant.key, body: { endpoint: 'http://127.0.0.1:9/push/me', keys: { p256dh: P256, auth: AUTH } } }), 201)
  await must(h.request('POST', `/bonuses/${bonus.data.id}/grant`, { key: tenant.key, body: { player_id: me, reason: 'vip' } }), 201)
  t.equal((await h.request('POST', `/bonuses/${off.data.id}/grant`, { key: tenant.key, body: { player_id: me } })).status, 400, 'an inactive bonus: refused (and recorded)')
  const inApp = await template(h, tenant, 'in_app', { name: 'news', body: 'Hello {{ name }}' })
  const oneShot = await createCampaign(h, tenant, { type: 'one_shot', target_segment_id: await segment(h, tenant, { player_ids: [me, zed] }, 'static'), config: { templates: { in_app: inApp } } })
  await move(h, tenant, oneShot.id, 'running')
  const journey = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { player_ids: [me] }, 'static'),
    config: { steps: [{ id: 'later', type: 'wait', seconds: 3600, next: null }] },
  })
  await move(h, tenant, journey.id, 'running')
  await waitFor('the campaigns', async () => (await campaign(h, tenant, oneShot.id)).status === 'completed' &&
    (await must(h.request('GET', `/campaigns/${journey.id}/participants`, { key: tenant.key }), 200)).data[0]?.status === 'waiting', 10_000)

  const doc = await exportOf(tenant, me)
  const text = JSON.stringify(doc)
  // docs/operating.md lists the sections.
  for (const section of ['player', 'profile', 'notifications', 'point_balances', 'missions', 'badges', 'bonus_grants', 'tournaments', 'contacts', 'push_subscriptions', 'campaign_audience', 'campaign_journeys', 'campaign_conversions', 'events']) {
    t.ok(section in doc, `section ${section}`)
  }
  t.match(doc.player, { id: me, external_id: ext, email: personal('me').email })
  t.match(doc.profile, { name: 'Name of me', country: 'IT', deposit_count: 1 })
  t.match(doc.notifications, [{ campaign_id: oneShot.id, channel: 'in_app', status: 'delivered', rendered: { body: 'Hello Name of me' } }], 'the inbox message with its rendered body')
  t.match(doc.point_balances, [{ currency_id: lp.data.id }])
  t.equal(Number(doc.point_balances[0]?.balance), 30)
  t.match(doc.missions, [{ mission_id: mission.data.id }])
  t.match(doc.badges, [{ badge_id: badge.data.id }])
  t.same(doc.bonus_grants.map((g: any) => [g.bonus_id, g.status, g.refusal_reason]).sort(), [[bonus.data.id, 'granted', null], [off.data.id, 'refused', 'bonus_inactive']].sort(), 'granted and refused grants')
  t.match(doc.tournaments, [{ tournament_id: tr.data.id }])
  t.equal(Number(doc.tournaments[0]?.score), 5)
  t.match(doc.contacts, { telegram_chat_id: /^\d+$/ })
  t.match(doc.push_subscriptions, [{ endpoint: 'http://127.0.0.1:9/push/me' }])
  t.same(new Set(doc.campaign_audience.map((a: any) => a.campaign_id)), new Set([oneShot.id, journey.id]))
  t.match(doc.campaign_journeys, [{ campaign_id: journey.id, status: 'waiting' }])
  t.same(doc.events.map((e: any) => e.event_id).sort(), own.map((e) => e.event_id).sort(), 'exactly the player\'s events')
  t.equal(doc.events.find((e: any) => e.event_type === 'registration')?.raw.payload.name, 'Name of me', 'each with its raw event')
  for (const [who, id] of [['zed', zed], ['twin', twinId], ['stranger', '']] as const) {
    t.notOk(text.includes(personal(who).email) || text.includes(personal(who).name), `nothing of ${who}`)
    if (id) t.notOk(text.includes(id), `not ${who}'s id`)
  }
  for (const secret of [P256, AUTH, TOKEN, tenant.key, secondKey]) t.notOk(text.includes(secret), 'no key material')
  t.equal((await h.request('GET', `/players/${me}/export`, { key: secondKey })).status, 404, "another brand's pinned key: 404")
  t.equal((await h.request('GET', `/players/${me}/export`, { key: stranger.key })).status, 404, 'another tenant: 404')
  t.equal((await h.request('GET', `/players/${me}/export`, { key: (await tenant.createKey({ scopes: ['events:write'] })).key })).status, 403, 'an ingest-only key: 403')
  const twinDoc = await exportOf(tenant, twinId)
  t.same(twinDoc.events.map((e: any) => e.raw.payload.email ?? null).filter(Boolean), [personal('twin').email], "the twin's export: its own brand's events only")
})

// --- consent per channel -------------------------------------------------------------------------------

t.test('consent per channel on a multi-channel campaign: an event or an unsubscribe stops that channel only; transactional still goes; a late older grant lifts nothing', async (t) => {
  const tenant = await channelsTenant()
  const mk = async () => {
    const p = await registered(tenant, { consent: ['email', 'telegram'] })
    const chat = chatId()
    await must(h.request('PUT', `/players/${p.id}/telegram`, { key: tenant.key, body: { chat_id: chat } }), 200)
    return { ...p, chat }
  }
  const [mutedEmail, unsubscribed, mutedInApp, mutedTelegram] = [await mk(), await mk(), await mk(), await mk()]
  // The unsubscribe link of a marketing email already received.
  const first = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: unsubscribed.id, channel: 'email', payload: { subject: 'One', body: '<p>one</p>' } } }), 202)
  await waitFor('the first email', async () => (await notification(tenant, first.notification_id)).status === 'delivered' && mailsTo(unsubscribed.email).length === 1, 8000)
  const link = /<(.+)>/.exec(mailsTo(unsubscribed.email)[0]!.headerLines.find((l) => l.key === 'list-unsubscribe')!.line)![1]!
  t.equal((await fetch(h.origin + new URL(link).pathname, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200)
  const ago = new Date(Date.now() - 3600_000).toISOString()
  await ingest(tenant, [
    { player_id: mutedEmail.ext, event_type: 'consent_update', payload: { channel: 'email', granted: false } },
    { player_id: mutedInApp.ext, event_type: 'consent_update', payload: { channel: 'in_app', granted: false } },
    { player_id: mutedTelegram.ext, event_type: 'consent_update', payload: { channel: 'telegram', granted: false } },
  ])
  // Late retries of older grants (contract: the later event time wins, whatever the arrival order).
  await ingest(tenant, [
    { player_id: mutedTelegram.ext, event_type: 'consent_update', timestamp: ago, payload: { channel: 'telegram', granted: true } },
    { player_id: unsubscribed.ext, event_type: 'consent_update', timestamp: ago, payload: { channel: 'email', granted: true } },
  ])
  const all = [mutedEmail, unsubscribed, mutedInApp, mutedTelegram]
  const c = await createCampaign(h, tenant, {
    type: 'one_shot', channels: ['email', 'telegram', 'in_app'], target_segment_id: await segment(h, tenant, { player_ids: all.map((p) => p.id) }, 'static'),
    config: { templates: { email: await template(h, tenant, 'email', { name: 'e' }), telegram: await template(h, tenant, 'telegram', { name: 'tg' }), in_app: await template(h, tenant, 'in_app', { name: 'ia' }) } },
  })
  await move(h, tenant, c.id, 'running')
  const outcome = async () => {
    const rows = (await must(h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: c.id, limit: 100 } }), 200)).data as any[]
    return rows.length === 12 && rows.every((r) => r.status !== 'queued') ? rows : undefined
  }
  const rows = await waitFor('the campaign\'s 12 messages settled', outcome, 12_000)
  const of = (p: { id: string }, channel: string) => rows.find((r) => r.player_id === p.id && r.channel === channel)
  const expect: [typeof all[number], string, string, string | null][] = [
    [mutedEmail, 'email', 'suppressed', 'no_consent'], [mutedEmail, 'telegram', 'delivered', null], [mutedEmail, 'in_app', 'delivered', null],
    [unsubscribed, 'email', 'suppressed', 'unsubscribed'], [unsubscribed, 'telegram', 'delivered', null], [unsubscribed, 'in_app', 'delivered', null],
    [mutedInApp, 'email', 'delivered', null], [mutedInApp, 'telegram', 'delivered', null], [mutedInApp, 'in_app', 'suppressed', 'no_consent'],
    [mutedTelegram, 'email', 'delivered', null], [mutedTelegram, 'telegram', 'suppressed', 'no_consent'], [mutedTelegram, 'in_app', 'delivered', null],
  ]
  for (const [p, channel, status, reason] of expect) t.match(of(p, channel), { status, reason }, `${p.ext} ${channel}: ${status}${reason ? ` (${reason})` : ''}`)
  t.equal(mailsTo(unsubscribed.email).length, 1, 'no campaign email reached the unsubscribed player')
  t.equal(callsTo(mutedTelegram.chat).length, 0, 'the bot was never called for the muted chat')
  // Transactional email skips consent (contract-engines §3).
  for (const p of [mutedEmail, unsubscribed]) {
    const tx = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'email', class: 'transactional', payload: { subject: 'Receipt', body: '<p>r</p>' } } }), 202)
    t.equal((await waitFor('the receipt', async () => {
      const n = await notification(tenant, tx.notification_id)
      return n.status !== 'queued' ? n : undefined
    }, 8000)).status, 'delivered', `a receipt still reaches ${p.ext}`)
  }
  // docs/players.md: the hint names email only when email consent is not refused.
  for (const p of [mutedEmail, unsubscribed]) {
    t.not((await must(h.request('GET', `/players/${p.id}/next-best-action`, { key: tenant.key }), 200)).data.channelHint, 'email', `no email hint for ${p.ext}`)
  }
})

// --- responsible gaming ---------------------------------------------------------------------------------

t.test('self-excluded (in the very batch of the triggering deposit), suspended (PATCH) and closed (a repeated POST /players): no marketing, no reward on any path; refusals recorded', async (t) => {
  const tenant = await h.createTenant()
  const lp = await must(h.request('POST', '/gamification/currencies', { key: tenant.key, body: { name: 'LP', symbol: 'LP', type: 'virtual' } }), 201)
  const badge = await must(h.request('POST', '/gamification/badges', { key: tenant.key, body: { name: 'Depositor', criteria: { missions_completed: 99 } } }), 201)
  const bonus = await must(h.request('POST', '/bonuses', { key: tenant.key, body: { name: 'Welcome', type: 'welcome', value: 10, value_type: 'fixed' } }), 201)
  await must(h.request('POST', '/gamification/missions', { key: tenant.key, body: { name: 'First deposit', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.data.id, amount: 10 }], badge_ids: [badge.data.id], bonus_ids: [bonus.data.id] } } }), 201)
  const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' } } })
  await move(h, tenant, trig.id, 'running')
  const [ex, su, cl, ok] = [await registered(tenant), await registered(tenant), await registered(tenant), await registered(tenant)]
  await must(h.request('PATCH', `/players/${su.id}`, { key: tenant.key, body: { status: 'suspended' } }), 200)
  await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: cl.ext, status: 'closed' } }), 201)
  const deposit = (p: { ext: string }, at = new Date()) => ({ player_id: p.ext, event_type: 'deposit', timestamp: at.toISOString(), payload: { amount: 20, currency: 'EUR' } })
  // The deposit happened a moment before the self-exclusion, and both arrive together.
  await ingest(tenant, [deposit(ex, new Date(Date.now() - 1000)), { player_id: ex.ext, event_type: 'status_change', payload: { status: 'self_excluded' } }, deposit(su), deposit(cl), deposit(ok)])
  const blocked = [[ex, 'self_excluded'], [su, 'suspended'], [cl, 'closed']] as const

  const notes = await waitFor('the trigger sends', async () => {
    const rows = (await must(h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: trig.id } }), 200)).data as any[]
    return rows.length === 4 && rows.every((r) => r.status !== 'queued') ? rows : undefined
  }, 8000)
  t.match(notes.find((n) => n.player_id === ok.id), { status: 'delivered' }, 'the active player got the triggered message')
  for (const [p, status] of blocked) {
    t.match(notes.find((n) => n.player_id === p.id), { status: 'suppressed', reason: status, delivered_at: null }, `${status}: the triggered message suppressed`)
    const direct = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'in_app', payload: { body: 'promo' } } }), 202)
    t.match(direct, { queued: false, data: { status: 'suppressed', reason: status } }, `${status}: a direct marketing send suppressed`)
    const grant = await h.request('POST', `/bonuses/${bonus.data.id}/grant`, { key: tenant.key, body: { player_id: p.id } })
    t.match(grant, { status: 400, body: { details: { reason: 'player_not_active' } } }, `${status}: a manual grant refused`)
    const g = (await must(h.request('GET', `/gamification/player/${p.id}`, { key: tenant.key }), 200)).data
    t.same(g.badges_earned, [], `${status}: no reward badge`)
    t.notOk(g.point_balances.some((b: any) => Number(b.balance) > 0 || Number(b.lifetime) > 0), `${status}: no reward points`)
    const refused = (await must(h.request('GET', `/players/${p.id}/bonuses`, { key: tenant.key, query: { status: 'all' } }), 200)).data as any[]
    t.same(refused.map((r) => [r.status, r.refusal_reason, r.source]).sort(), [['refused', 'player_not_active', 'manual'], ['refused', 'player_not_active', 'mission']], `${status}: both refusals recorded, nothing granted`)
    const nba = (await must(h.request('GET', `/players/${p.id}/next-best-action`, { key: tenant.key }), 200)).data
    t.equal(nba.action, status === 'self_excluded' ? 'respect_exclusion' : 'none', `${status}: no marketing action`)
  }
  const okG = (await must(h.request('GET', `/gamification/player/${ok.id}`, { key: tenant.key }), 200)).data
  t.match(okG, { badges_earned: [{ badge_id: badge.data.id }], point_balances: [{ currency_id: lp.data.id, balance: 10 }] }, 'the active player got the rewards')
  // Transactional messages: still to the self-excluded and suspended, never to the closed (contract-engines §3).
  for (const [p, status] of blocked) {
    const tx = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'in_app', class: 'transactional', payload: { body: 'your withdrawal' } } }), 202)
    const n = await waitFor('the transactional message', async () => {
      const x = await notification(tenant, tx.notification_id)
      return x.status !== 'queued' ? x : undefined
    }, 8000)
    t.match(n, status === 'closed' ? { status: 'suppressed', reason: 'closed' } : { status: 'delivered' }, `${status}: transactional ${status === 'closed' ? 'suppressed' : 'delivered'}`)
    const inbox = (await must(h.request('GET', `/players/${p.id}/inbox`, { key: tenant.key }), 200)).data as any[]
    t.same(inbox.map((i) => i.body), status === 'closed' ? [] : ['your withdrawal'], `${status}: no marketing in the inbox`)
  }
})

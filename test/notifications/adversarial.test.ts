// Adversarial checks of message delivery against contract-engines §3 and docs/delivery.md, with real peers
// (a local Bot API server, smtp-server): the send rules applied again on a retry after a failed attempt
// (self-exclusion, consent withdrawn, a closed account for transactional messages), a paused campaign's
// message that was waiting for its retry, frequency caps across channels, and an unsubscribe reaching
// a marketing email already queued (held by quiet hours).
import { createServer, type IncomingMessage } from 'node:http'
import t from 'tap'
import { waitFor } from '../helpers/wait.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { createCampaign, move, must, template } from '../campaigns/helpers.ts'
import { ingest, makePlayer, send, waitForStatus, startSmtpReceiver } from './delivery-helpers.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', DELIVERY_RETRY_DELAYS: '0,0,0,0', INGEST_ACK_AFTER: 'postgres' } })
const ctx = h.app.ctx

// --- A Bot API: chat ids starting with 9 ("slow") answer 429 with retry_after 2 on their first call ---------------
// (8: on their first two, the second with retry_after 60)

const TOKEN = '424242:AAAdversarialBotToken_x'
const botCalls: { chat_id: string; text: string }[] = []
const limited = new Set<string>()
const bot = createServer((req: IncomingMessage, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString())
    botCalls.push(body)
    const reply = (status: number, json: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json))
    if (req.url !== `/bot${TOKEN}/sendMessage`) return reply(404, { ok: false, error_code: 404, description: 'Not Found' })
    if (String(body.chat_id).startsWith('9') && !limited.has(body.chat_id)) {
      limited.add(body.chat_id)
      return reply(429, { ok: false, error_code: 429, description: 'Too Many Requests: retry after 2', parameters: { retry_after: 2 } })
    }
    // Chat ids starting with 8: refused twice, the second time for a minute.
    const refusals = callsTo(body.chat_id).length
    if (String(body.chat_id).startsWith('8') && refusals <= 2) {
      const after = refusals === 1 ? 1 : 60
      return reply(429, { ok: false, error_code: 429, description: `Too Many Requests: retry after ${after}`, parameters: { retry_after: after } })
    }
    return reply(200, { ok: true, result: { message_id: botCalls.length } })
  })
})
await new Promise<void>((resolve) => bot.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => {
  bot.close(() => resolve())
  bot.closeAllConnections()
}))
const botUrl = `http://127.0.0.1:${(bot.address() as { port: number }).port}`
const callsTo = (chatId: string) => botCalls.filter((c) => c.chat_id === chatId)

async function telegramTenant() {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: TOKEN, api_base_url: botUrl } }), 200)
  return tenant
}

let chats = 0
/** A player with Telegram consent and a chat id (a "slow" one is refused with 429 once). */
async function telegramPlayer(tenant: TestTenant, slow: boolean | 'twice', o: Parameters<typeof makePlayer>[2] = {}) {
  const p = await makePlayer(h, tenant, { consent: ['telegram'], ...o })
  const chatId = `${slow === 'twice' ? 8 : slow ? 9 : 1}${process.pid}${String(++chats).padStart(4, '0')}`
  await must(h.request('PUT', `/players/${p.id}/telegram`, { key: tenant.key, body: { chat_id: chatId } }), 200)
  return { ...p, chatId }
}

const row = (id: string) => ctx.sql<{ status: string; attempts: number; due_at: Date; reason: string | null }[]>`
  select status, attempts, due_at, reason from notifications where id = ${id}`.then((r) => r[0]!)

const untilTrue = (check: () => Promise<boolean> | boolean, ms = 6000) => waitFor('the condition', check, ms)

/** A message refused once with 429: waits for its retry (attempts 1, still queued). */
async function waitingForRetry(id: string) {
  await untilTrue(async () => {
    const r = await row(id)
    return r.status === 'queued' && r.attempts === 1
  })
}

t.test('a retry after a failed attempt is checked again: self-exclusion, withdrawn consent, a closed account', async (t) => {
  const tenant = await telegramTenant()
  const cases = [
    { name: 'self-excluded', cls: 'marketing', change: { event_type: 'status_change', payload: { status: 'self_excluded' } }, reason: 'self_excluded' },
    { name: 'consent withdrawn', cls: 'marketing', change: { event_type: 'consent_update', payload: { channel: 'telegram', granted: false } }, reason: 'no_consent' },
    { name: 'closed (transactional)', cls: 'transactional', change: { event_type: 'status_change', payload: { status: 'closed' } }, reason: 'closed' },
  ]
  const started = await Promise.all(cases.map(async (c) => {
    const p = await telegramPlayer(tenant, true)
    const s = await send(h, tenant, { player_id: p.id, channel: 'telegram', class: c.cls, payload: { body: `to ${c.name}` } })
    return { c, p, id: s.notification_id as string }
  }))
  for (const { id } of started) await waitingForRetry(id)
  for (const { c, p } of started) await ingest(h, tenant, [{ player_id: p.externalId, ...c.change }])
  for (const { c, p, id } of started) {
    const n = await waitForStatus(h, tenant, id, ['delivered', 'suppressed', 'failed'], 8000)
    t.match(n, { status: 'suppressed', reason: c.reason, delivered_at: null }, c.name)
    t.equal(callsTo(p.chatId).length, 1, `${c.name}: the bot was called only for the refused attempt`)
  }
})

t.test('a transactional message retried after a 429 still reaches a self-excluded player', async (t) => {
  const tenant = await telegramTenant()
  const p = await telegramPlayer(tenant, true)
  const s = await send(h, tenant, { player_id: p.id, channel: 'telegram', class: 'transactional', payload: { body: 'your withdrawal' } })
  await waitingForRetry(s.notification_id)
  await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'status_change', payload: { status: 'self_excluded' } }])
  t.match(await waitForStatus(h, tenant, s.notification_id, ['delivered', 'suppressed', 'failed'], 8000), { status: 'delivered', attempts: 2 })
  t.equal(callsTo(p.chatId).length, 2)
})

t.test("a paused campaign's message waiting for its retry goes out at once on resume", async (t) => {
  const tenant = await telegramTenant()
  const c = await createCampaign(h, tenant, {
    type: 'triggered', channels: ['telegram'],
    config: { templates: { telegram: await template(h, tenant, 'telegram', { name: 'tg-promo' }) }, trigger: { event_type: 'deposit' } },
  })
  await move(h, tenant, c.id, 'running')
  const p = await telegramPlayer(tenant, true)
  await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  await ctx.stream!.idle()
  let id = ''
  await untilTrue(async () => {
    id = (await ctx.sql<{ id: string }[]>`select id from notifications where campaign_id = ${c.id}`)[0]?.id ?? ''
    return id !== ''
  })
  await waitingForRetry(id)
  await move(h, tenant, c.id, 'paused')
  // Its retry time comes while paused: the dispatcher keeps it waiting.
  await untilTrue(async () => (await row(id)).due_at.getTime() > Date.now() + 60_000, 8000)
  t.equal((await row(id)).status, 'queued', 'not sent while paused')
  t.equal(callsTo(p.chatId).length, 1)
  await move(h, tenant, c.id, 'running')
  // docs/campaigns.md: "the resume makes them due at once, checked again then".
  const n = await waitForStatus(h, tenant, id, ['delivered', 'suppressed', 'failed'], 3000).catch(() => undefined)
  t.equal(n?.status, 'delivered', 'delivered right after the resume')
})

t.test('a message sent after a resume and refused again keeps its new retry delay through the next pause and resume', async (t) => {
  const tenant = await telegramTenant()
  const c = await createCampaign(h, tenant, {
    type: 'triggered', channels: ['telegram'],
    config: { templates: { telegram: await template(h, tenant, 'telegram', { name: 'tg-promo-2' }) }, trigger: { event_type: 'deposit' } },
  })
  await move(h, tenant, c.id, 'running')
  const p = await telegramPlayer(tenant, 'twice')
  await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  await ctx.stream!.idle()
  let id = ''
  await untilTrue(async () => {
    id = (await ctx.sql<{ id: string }[]>`select id from notifications where campaign_id = ${c.id}`)[0]?.id ?? ''
    return id !== ''
  })
  await waitingForRetry(id)
  await move(h, tenant, c.id, 'paused')
  await untilTrue(async () => (await row(id)).due_at.getTime() > Date.now() + 60_000, 8000)
  await move(h, tenant, c.id, 'running')
  // Sent at once, refused again: now it waits out the bot's retry_after of 60 s (attempts counts the send
  // before the call, so wait for the refusal's retry time itself).
  await untilTrue(async () => (await row(id)).attempts === 2 && (await row(id)).due_at.getTime() > Date.now() + 30_000)
  t.equal(callsTo(p.chatId).length, 2)
  await move(h, tenant, c.id, 'paused')
  await move(h, tenant, c.id, 'running')
  await new Promise((r) => setTimeout(r, 1000))
  const r = await row(id)
  t.equal(r.status, 'queued', 'still waiting for its retry')
  t.ok(r.due_at.getTime() > Date.now() + 30_000, 'the resume left its retry delay alone')
  t.equal(callsTo(p.chatId).length, 2, 'the bot was not called before retry_after')
})

t.test('frequency cap "any" counts marketing across channels, in the same day', async (t) => {
  const tenant = await telegramTenant()
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { frequency_caps: [{ channel: 'any', max: 1, per: 'day' }] } }), 200)
  const p = await telegramPlayer(tenant, false)
  const receipt = await send(h, tenant, { player_id: p.id, channel: 'telegram', class: 'transactional', payload: { body: 'receipt' } })
  t.equal((await waitForStatus(h, tenant, receipt.notification_id, ['delivered', 'failed'])).status, 'delivered')
  const promo = await send(h, tenant, { player_id: p.id, channel: 'telegram', payload: { body: 'promo' } })
  t.equal((await waitForStatus(h, tenant, promo.notification_id, ['delivered', 'failed', 'suppressed'])).status, 'delivered', 'the transactional one did not count')
  const inApp = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'in_app', payload: { body: 'more' } } })
  t.match(inApp.body.data, { status: 'suppressed', reason: 'frequency_cap' }, 'the Telegram promo counts against in-app')
  const tx = await send(h, tenant, { player_id: p.id, channel: 'in_app', class: 'transactional', payload: { body: 'tx' } })
  t.equal((await waitForStatus(h, tenant, tx.notification_id, ['delivered', 'suppressed'])).status, 'delivered', 'transactional is not capped')
})

// --- SMTP --------------------------------------------------------------------------------------------------

const { port: smtpPort, mailsTo } = await startSmtpReceiver(t)

t.test('an unsubscribe reaches a marketing email already queued (held by quiet hours); transactional still goes', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://u:p@127.0.0.1:${smtpPort}`, from: 'news@casino.example' } }), 200)
  const address = `held-${process.pid}-${Date.now()}@example.com`
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const first = await send(h, tenant, { player_id: p.id, channel: 'email', payload: { subject: 'One', body: '<p>one</p>' } })
  await waitForStatus(h, tenant, first.notification_id, ['delivered'])
  await untilTrue(async () => mailsTo(address).length === 1)
  const line = mailsTo(address)[0]!.headerLines.find((l) => l.key === 'list-unsubscribe')!.line
  const unsubscribe = h.origin + new URL(/<(.+)>/.exec(line)![1]!).pathname

  // Quiet hours around now (UTC): the next marketing email is held.
  const hhmm = (d: Date) => d.toISOString().slice(11, 16)
  const now = Date.now()
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { quiet_hours: { start: hhmm(new Date(now - 3600_000)), end: hhmm(new Date(now + 3600_000)), timezone: 'UTC' } } }), 200)
  const held = await send(h, tenant, { player_id: p.id, channel: 'email', payload: { subject: 'Two', body: '<p>two</p>' } })
  t.equal(held.data.status, 'queued')
  t.ok(Date.parse(held.data.scheduled_at) > now + 60_000, 'held until the quiet hours end')

  t.equal((await fetch(unsubscribe, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200)
  const [consent] = await ctx.sql<{ email: { granted: boolean; at: string; source: string } }[]>`select consent->'email' as email from player_profiles where player_id = ${p.id}`
  t.match(consent?.email, { granted: false, source: 'unsubscribe', at: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ }, 'withdrawn, at a time written as the API writes times')
  // The quiet hours end.
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: {} }), 200)
  await ctx.sql`update notifications set due_at = now(), scheduled_at = now() where id = ${held.notification_id}`
  ctx.delivery?.wake()
  t.match(await waitForStatus(h, tenant, held.notification_id, ['delivered', 'suppressed', 'failed']), { status: 'suppressed', reason: 'unsubscribed', delivered_at: null })
  const receipt = await send(h, tenant, { player_id: p.id, channel: 'email', class: 'transactional', payload: { subject: 'Receipt', body: '<p>r</p>' } })
  t.equal((await waitForStatus(h, tenant, receipt.notification_id, ['delivered', 'failed'])).status, 'delivered')
  await untilTrue(async () => mailsTo(address).length >= 2)
  await new Promise((r) => setTimeout(r, 200))
  t.same(mailsTo(address).map((m) => m.subject), ['One', 'Receipt'], 'the held promo never reached the server')
})

// Adversarial checks of contract-engines §3 not covered elsewhere, with real peers (smtp-server + mailparser,
// ws clients, fetch over node:http): rendering of entity-like values in the email text part, settings
// validation and masking (reply_to, header injection in `from`, the audit trail), contact points (duplicate
// push endpoints, a bad P-256 point, scopes), tracking tokens (kinds swapped, tampered, our own unsubscribe
// link left untracked, a link with an entity), unsubscribe then re-consent, lifecycle timestamps, the inbox
// (another player's items, unread cursors, reads), expired WebSocket tokens and a large unicode message.
import t from 'tap'
import { waitFor } from '../helpers/wait.ts'
import { startHarness, type TestResponse, type TestTenant } from '../helpers/harness.ts'
import { ingest, makePlayer, outboxOf, send, waitForStatus, startSmtpReceiver, openInboxSocket } from './delivery-helpers.ts'

let clockOffset = 0
const h = await startHarness(t, {
  env: { WEBHOOK_ALLOW_PRIVATE: 'true', DELIVERY_RETRY_DELAYS: '0,0,0,0' },
  clock: () => new Date(Date.now() + clockOffset),
})
const ctx = h.app.ctx

async function must(p: Promise<TestResponse>, status: number) {
  const res = await p
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`)
  return res.body
}

const untilTrue = (check: () => Promise<boolean> | boolean, ms = 6000) => waitFor('the condition', check, ms)

const fields = (res: TestResponse) => JSON.stringify(res.body)

// --- SMTP peer ----------------------------------------------------------------------------------------------

const { port: smtpPort, mailsTo } = await startSmtpReceiver(t)
let addresses = 0
const newAddress = () => `adv2-${process.pid}-${++addresses}-${Date.now()}@example.com`

async function emailTenant(extra: Record<string, unknown> = {}) {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://u:p@127.0.0.1:${smtpPort}`, from: 'news@casino.example', ...extra } }), 200)
  return tenant
}

async function emailOf(tenant: TestTenant, playerId: string, address: string, payload: Record<string, unknown>, cls = 'marketing') {
  const s = await send(h, tenant, { player_id: playerId, channel: 'email', class: cls, payload })
  const n = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed', 'bounced', 'suppressed'])
    .catch(async () => (await h.request('GET', `/notifications/${s.notification_id}`, { key: tenant.key })).body.data)
  if (n.status !== 'delivered') return { n, mail: undefined }
  const before = mailsTo(address).length
  await untilTrue(() => mailsTo(address).length >= Math.max(1, before))
  return { n, mail: mailsTo(address).find((m) => m.headers.get('x-respin-notification') === s.notification_id) ?? mailsTo(address).at(-1) }
}

// --- Rendering ----------------------------------------------------------------------------------------------

t.test('email text part shows a value that looks like a numeric entity literally (decoded once, not twice)', async (t) => {
  const tenant = await emailTenant()
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const { n, mail } = await emailOf(tenant, p.id, address, { subject: 'Hi', body: '<p>Note: {{ note }}</p>', note: 'I &#60;3 you & <b>bold</b>' })
  t.equal(n.status, 'delivered')
  t.match(mail?.html, /I &amp;#60;3 you &amp; &lt;b&gt;bold&lt;\/b&gt;/, 'HTML part: the value escaped')
  t.equal(mail?.text?.trim(), 'Note: I &#60;3 you & <b>bold</b>', 'text part: the value exactly as given')
})

t.test('locale: an inactive variant in the player language is not used; the given template is', async (t) => {
  const tenant = await h.createTenant()
  const name = `welcome-${Date.now()}`
  const en = await must(h.request('POST', '/notifications/templates', { key: tenant.key, body: { name, channel: 'in_app', locale: 'en', body: 'Hello {{ name }}' } }), 201)
  const it = await must(h.request('POST', '/notifications/templates', { key: tenant.key, body: { name, channel: 'in_app', locale: 'it', body: 'Ciao {{ name }}' } }), 201)
  const es = await must(h.request('POST', '/notifications/templates', { key: tenant.key, body: { name, channel: 'in_app', locale: 'es', body: 'Hola {{ name }}' } }), 201)
  await must(h.request('DELETE', `/notifications/templates/${es.data.id}`, { key: tenant.key }), 200)
  const pIt = await makePlayer(h, tenant, { language: 'it', name: 'Lia' })
  const pEs = await makePlayer(h, tenant, { language: 'es', name: 'Max' })
  const pFr = await makePlayer(h, tenant, { language: 'fr', name: 'Léa' })
  const bodies: string[] = []
  for (const p of [pIt, pEs, pFr]) {
    const s = await send(h, tenant, { player_id: p.id, channel: 'in_app', template_id: en.data.id })
    await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])
    bodies.push((await h.request('GET', `/players/${p.id}/inbox`, { key: tenant.key })).body.data[0]?.body)
  }
  t.same(bodies, ['Ciao Lia', 'Hello Max', 'Hello Léa'])
  t.ok(it.data.id)
})

// --- Settings -----------------------------------------------------------------------------------------------

t.test('email settings: reply_to must be an address, from may not carry header breaks', async (t) => {
  const tenant = await h.createTenant()
  const base = { smtp_url: `smtp://u:p@127.0.0.1:${smtpPort}`, from: 'news@casino.example' }
  const badReply = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { ...base, reply_to: 'not an address at all' } })
  t.equal(badReply.status, 400, 'reply_to that is no address is refused')
  t.match(fields(badReply), /reply_to/, 'the error names reply_to')
  const injected = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { ...base, from: 'Casino\r\nBcc: victim@evil.example <news@casino.example>' } })
  t.equal(injected.status, 400, 'a CRLF in the from name is refused')
  const ok = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { ...base, from: 'Casino Royale <news@casino.example>', reply_to: 'help@casino.example' } })
  t.equal(ok.status, 200)
  t.equal(ok.body.data.reply_to, 'help@casino.example')
})

t.test('an SMTP password with reserved characters never shows in reads nor in the audit trail', async (t) => {
  const tenant = await h.createTenant()
  const secret = 'S3cr%40t%3Apw'
  const res = await must(h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://mailer%40casino:${secret}@127.0.0.1:${smtpPort}`, from: 'a@casino.example' } }), 200)
  const read = await must(h.request('GET', '/settings/channels', { key: (await tenant.createKey({ scopes: ['read'] })).key }), 200)
  for (const text of [JSON.stringify(res), JSON.stringify(read)]) {
    t.notOk(text.includes('S3cr'), 'no password in the response')
  }
  t.equal(read.data.email.smtp_url, `smtp://mailer%40casino:***@127.0.0.1:${smtpPort}`)
  const tg = await must(h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: '987654:ZZsecretTokenPart_zz', api_base_url: 'http://127.0.0.1:9' } }), 200)
  t.equal(tg.data.bot_token, '987654:***')
  const audit = await ctx.sql<{ row: unknown }[]>`select to_jsonb(a) as row from audit_log a where tenant_id = ${tenant.id}`
  t.ok(audit.length >= 2, 'settings changes are audited')
  const trail = JSON.stringify(audit)
  t.notOk(trail.includes('S3cr') || trail.includes('ZZsecret'), 'no secret in the audit trail')
})

// --- Contact points -------------------------------------------------------------------------------------------

const P256 = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM'
const AUTH = 'tBHItJI5svbpez7KI4CCXg'

t.test('push subscriptions: the same endpoint twice is one subscription; scopes and foreign players', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  const other = await makePlayer(h, tenant)
  const sub = { endpoint: 'http://127.0.0.1:9/push/sub/1', keys: { p256dh: P256, auth: AUTH } }
  const a = await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: sub }), 201)
  const b = await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: sub }), 201)
  t.equal(b.data.id, a.data.id, 'the same subscription')
  t.equal((await must(h.request('GET', `/players/${p.id}/push-subscriptions`, { key: tenant.key }), 200)).data.length, 1)
  const ro = (await tenant.createKey({ scopes: ['read'] })).key
  t.equal((await h.request('GET', `/players/${p.id}/push-subscriptions`, { key: ro })).status, 403, 'contact points need full access, even to read')
  t.equal((await h.request('POST', `/players/${p.id}/push-subscriptions`, { key: ro, body: sub })).status, 403)
  t.equal((await h.request('PUT', `/players/${p.id}/telegram`, { key: ro, body: { chat_id: '123' } })).status, 403)
  t.equal((await h.request('DELETE', `/players/${other.id}/push-subscriptions/${a.data.id}`, { key: tenant.key })).status, 404, "not through another player's path")
  const stranger = await h.createTenant()
  t.equal((await h.request('DELETE', `/players/${p.id}/push-subscriptions/${a.data.id}`, { key: stranger.key })).status, 404, 'nor from another tenant')
  t.equal((await must(h.request('GET', `/players/${p.id}/push-subscriptions`, { key: tenant.key }), 200)).data.length, 1, 'still there')
  const badChat = await h.request('PUT', `/players/${p.id}/telegram`, { key: tenant.key, body: { chat_id: '12 34' } })
  t.equal(badChat.status, 400)
  t.match(fields(badChat), /chat_id/)
  t.equal((await h.request('DELETE', `/players/${p.id}/telegram`, { key: tenant.key })).status, 404, 'no chat id to delete')
})

t.test('a push subscription whose p256dh is no P-256 point is refused, or its send ends failed (never stuck queued)', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/push', { key: tenant.key, body: { vapid_subject: 'mailto:ops@casino.example' } }), 200)
  const p = await makePlayer(h, tenant, { consent: ['push'] })
  const notAPoint = Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 0)]).toString('base64url')
  const res = await h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: { endpoint: 'http://127.0.0.1:9/push/x', keys: { p256dh: notAPoint, auth: AUTH } } })
  if (res.status === 400) {
    t.match(fields(res), /p256dh/)
    return
  }
  t.equal(res.status, 201)
  const s = await send(h, tenant, { player_id: p.id, channel: 'push', payload: { subject: 'x', body: 'y' } })
  const n = await waitForStatus(h, tenant, s.notification_id, ['failed', 'delivered'], 6000).catch((e: Error) => ({ status: e.message }))
  t.equal(n.status, 'failed')
})

// --- Tracking -------------------------------------------------------------------------------------------------

t.test('tracking tokens: kinds are not interchangeable, tampering is 404, our unsubscribe link stays untracked, entities in links decoded', async (t) => {
  const tenant = await emailTenant()
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const { n, mail } = await emailOf(tenant, p.id, address, {
    subject: 'Links',
    body: '<p><a href="https://shop.example/a?x=1&amp;y=2#top">shop</a> <a href="{{ unsubscribe_url }}">unsubscribe</a></p>',
  })
  t.equal(n.status, 'delivered')
  const html = mail!.html as string
  const hrefs = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'))
  const click = hrefs.find((u) => u.includes('/t/c/'))!
  const unsubInBody = hrefs.find((u) => u.includes('/t/u/'))
  const pixel = /src="([^"]+\/t\/o\/[^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&')
  const header = /<(.+)>/.exec(mail!.headerLines.find((l) => l.key === 'list-unsubscribe')!.line)![1]!
  t.ok(unsubInBody, 'the unsubscribe_url link is not rewritten to a click link')
  t.equal(unsubInBody, header, 'the body link is the List-Unsubscribe URL')
  t.match(new URL(header).pathname, /^\/t\/u\//, 'at the root of PUBLIC_BASE_URL')
  t.match(mail!.headerLines.find((l) => l.key === 'list-unsubscribe-post')?.line, /^List-Unsubscribe-Post:\s*List-Unsubscribe=One-Click$/i)

  const local = (u: string) => h.origin + new URL(u).pathname
  const tokenOf = (u: string) => new URL(u).pathname.split('/').pop()!.replace(/\.gif$/, '')
  const clickTok = tokenOf(click)
  const openTok = tokenOf(pixel)
  const unsubTok = tokenOf(header)
  const get = (path: string, init: RequestInit = {}) => fetch(h.origin + path, { redirect: 'manual', ...init })
  t.equal((await get(`/t/o/${clickTok}.gif`)).status, 404, 'a click token is no open token')
  t.equal((await get(`/t/c/${openTok}`)).status, 404, 'an open token is no click token')
  t.equal((await get(`/t/u/${clickTok}`, { method: 'POST' })).status, 404, 'a click token does not unsubscribe')
  const [body, mac] = clickTok.split('.') as [string, string]
  const flipped = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1)
  t.equal((await get(`/t/c/${flipped(body)}.${mac}`)).status, 404, 'altered body')
  t.equal((await get(`/t/c/${body}.${flipped(mac)}`)).status, 404, 'altered mac')
  t.equal((await get(`/t/c/${body}`)).status, 404, 'no mac')
  t.equal((await get(`/t/c/${'A'.repeat(300)}.${mac}`)).status, 404, 'overlong')
  t.equal((await fetch(local(header), { method: 'GET' })).status, 200)

  const before = await ctx.sql`select opened_at, clicked_at from notifications where id = ${n.id}`
  t.same([before[0]!.opened_at, before[0]!.clicked_at], [null, null], 'no tampered request recorded anything')
  const r = await fetch(local(click), { redirect: 'manual' })
  t.equal(r.status, 302)
  t.equal(r.headers.get('location'), 'https://shop.example/a?x=1&y=2#top', 'the link as written, entity decoded')
  const gif = await fetch(local(pixel))
  t.equal(gif.status, 200)
  t.match(gif.headers.get('content-type'), /^image\/gif/)
  t.match(Buffer.from(await gif.arrayBuffer()).subarray(0, 6).toString(), /^GIF8[79]a$/)
  const events = (await outboxOf(h, tenant.id)).filter((e) => e.data.notification_id === n.id).map((e) => e.event)
  t.same(events.filter((e) => e !== 'message.delivered').sort(), ['message.clicked', 'message.opened'], 'each once; the pixel after the click adds nothing')
  void unsubTok
})

t.test('unsubscribe, consent granted again, then the same link once more: withdrawn again, event once', async (t) => {
  const tenant = await emailTenant()
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const { mail } = await emailOf(tenant, p.id, address, { subject: 'One', body: '<p>one</p>' })
  const unsub = h.origin + new URL(/<(.+)>/.exec(mail!.headerLines.find((l) => l.key === 'list-unsubscribe')!.line)![1]!).pathname
  t.equal((await fetch(unsub, { method: 'POST', body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status, 200)
  const suppressed = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'email', payload: { subject: 'Two', body: '<p>2</p>' } } })
  t.match(suppressed.body.data, { status: 'suppressed', reason: 'unsubscribed' })
  t.equal(suppressed.body.queued, false)
  await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'consent_update', payload: { channel: 'email', granted: true } }])
  const again = await emailOf(tenant, p.id, address, { subject: 'Three', body: '<p>3</p>' })
  t.equal(again.n.status, 'delivered', 're-consent lifts the unsubscribe')
  t.equal((await fetch(unsub, { method: 'POST' })).status, 200)
  const after = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'email', payload: { subject: 'Four', body: '<p>4</p>' } } })
  t.match(after.body.data, { status: 'suppressed', reason: 'unsubscribed' }, 'the old link withdraws again')
  const unsubs = (await outboxOf(h, tenant.id)).filter((e) => e.event === 'email.unsubscribed')
  t.equal(unsubs.length, 1, 'email.unsubscribed once for that message')
  t.match(unsubs[0]!.data, { player_id: p.id, email: address, channel: 'email' })
})

// --- Lifecycle and the operator list ------------------------------------------------------------------------

t.test('lifecycle timestamps: delivered, suppressed, read; the list validates filters and cursors', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  const s = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { subject: 'S', body: 'B' } })
  const d = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])
  t.match(d, { status: 'delivered', attempts: 1, opened_at: null, clicked_at: null, reason: null, error: null, class: 'marketing' })
  t.ok(Date.parse(d.sent_at) <= Date.parse(d.delivered_at), 'sent_at <= delivered_at')
  t.ok(Date.parse(d.created_at) <= Date.parse(d.sent_at), 'created_at <= sent_at')
  t.ok(Date.parse(d.updated_at) >= Date.parse(d.delivered_at), 'updated_at >= delivered_at')
  const r1 = await must(h.request('POST', `/players/${p.id}/inbox/${s.notification_id}/read`, { key: tenant.key }), 200)
  await new Promise((r) => setTimeout(r, 20))
  const r2 = await must(h.request('POST', `/players/${p.id}/inbox/${s.notification_id}/read`, { key: tenant.key }), 200)
  t.equal(r2.data.read_at, r1.data.read_at, 'a second read changes nothing')
  const read = await must(h.request('GET', `/notifications/${s.notification_id}`, { key: tenant.key }), 200)
  t.ok(read.data.opened_at, 'the first read is the open')
  t.notOk((await outboxOf(h, tenant.id)).some((e) => e.event === 'message.opened'), 'message.opened stays email-only')

  const closed = await makePlayer(h, tenant, { status: 'closed' })
  const sup = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: closed.id, channel: 'in_app', class: 'transactional', payload: { body: 'x' } } })
  t.equal(sup.status, 202)
  t.match(sup.body, { queued: false, data: { status: 'suppressed', reason: 'closed', attempts: 0, sent_at: null, delivered_at: null } })

  for (const query of [{ status: 'bogus' }, { channel: 'sms' }, { limit: 0 }, { limit: 101 }, { player_id: 'nope' }] as Record<string, string | number>[]) {
    const res = await h.request('GET', '/notifications', { key: tenant.key, query })
    t.equal(res.status, 400, `GET /notifications ${JSON.stringify(query)}`)
  }
  await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'second' } })
  const page = await must(h.request('GET', '/notifications', { key: tenant.key, query: { limit: 1, player_id: p.id } }), 200)
  t.ok(page.next_cursor)
  t.equal((await h.request('GET', '/notifications', { key: tenant.key, query: { limit: 1, cursor: page.next_cursor, channel: 'email' } })).status, 400, "another list's cursor")
})

t.test('send validation names each bad field', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  for (const [body, field] of [
    [{ player_id: p.id, channel: 'in_app', class: 'promo', payload: { body: 'x' } }, 'class'],
    [{ player_id: p.id, channel: 'sms', payload: { body: 'x' } }, 'channel'],
    [{ player_id: p.id, channel: 'in_app', payload: [] }, 'payload'],
    [{ player_id: p.id, channel: 'in_app', payload: { body: 42 } }, 'body'],
  ] as const) {
    const res = await h.request('POST', '/notifications/send', { key: tenant.key, body })
    t.equal(res.status, 400, JSON.stringify(body))
    t.match(fields(res), new RegExp(field), `names ${field}`)
  }
  t.equal((await ctx.sql`select 1 from notifications where player_id = ${p.id}`).length, 0, 'nothing stored')
})

// --- The inbox ------------------------------------------------------------------------------------------------

t.test("inbox: another player's item, an email's id, unread filter and its cursor", async (t) => {
  const tenant = await h.createTenant()
  const a = await makePlayer(h, tenant)
  const b = await makePlayer(h, tenant)
  const ids: string[] = []
  for (const body of ['one', 'two', 'three']) {
    const s = await send(h, tenant, { player_id: a.id, channel: 'in_app', payload: { body } })
    await waitForStatus(h, tenant, s.notification_id, ['delivered'])
    ids.push(s.notification_id)
  }
  t.equal((await h.request('POST', `/players/${b.id}/inbox/${ids[0]}/read`, { key: tenant.key })).status, 404, "b cannot read a's item")
  t.equal((await must(h.request('GET', `/notifications/${ids[0]}`, { key: tenant.key }), 200)).data.opened_at, null, 'and nothing was recorded')
  t.equal((await h.request('POST', `/players/${a.id}/inbox/00000000-0000-4000-8000-000000000000/read`, { key: tenant.key })).status, 404)
  await must(h.request('POST', `/players/${a.id}/inbox/${ids[2]}/read`, { key: tenant.key }), 200)
  const unread = await must(h.request('GET', `/players/${a.id}/inbox`, { key: tenant.key, query: { unread: true, limit: 1 } }), 200)
  t.same(unread.data.map((i: any) => i.body), ['two'])
  t.ok(unread.next_cursor)
  const rest = await must(h.request('GET', `/players/${a.id}/inbox`, { key: tenant.key, query: { unread: true, limit: 1, cursor: unread.next_cursor } }), 200)
  t.same(rest.data.map((i: any) => i.body), ['one'])
  t.equal((await h.request('GET', `/players/${a.id}/inbox`, { key: tenant.key, query: { limit: 1, cursor: unread.next_cursor } })).status, 400, 'the unread list cursor is no good for the full list')
  t.equal((await h.request('GET', `/players/${b.id}/inbox`, { key: tenant.key, query: { unread: true, limit: 1, cursor: unread.next_cursor } })).status, 400, "nor for another player's inbox")
  for (const limit of [0, 101]) t.equal((await h.request('GET', `/players/${a.id}/inbox`, { key: tenant.key, query: { limit } })).status, 400, `limit ${limit}`)
  const all = await must(h.request('GET', `/players/${b.id}/inbox`, { key: tenant.key }), 200)
  t.same(all.data, [], "b's inbox is empty")
})

t.test('WebSocket: an expired token is refused; messages delivered while closed are listed; a large unicode message arrives whole', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  const tok = (await must(h.request('POST', `/players/${p.id}/inbox/token`, { key: tenant.key }), 201)).data
  t.ok(Date.parse(tok.expires_at) - Date.now() <= 15 * 60_000 + 5000, 'expires in 15 minutes')
  clockOffset = 16 * 60_000
  try {
    await t.rejects(openInboxSocket(h, tok.token), /401/, 'expired')
  } finally {
    clockOffset = 0
  }
  const whileClosed = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'while closed' } })
  await waitForStatus(h, tenant, whileClosed.notification_id, ['delivered'])
  const socket = await openInboxSocket(h, tok.token)
  t.teardown(() => socket.ws.close())
  const big = `${'🎰 Große Gewinne — ñ '.repeat(400)}end` // ~10 kB of UTF-8, fewer than 8000 characters
  t.ok(Buffer.byteLength(big) > 8000 && big.length < 9000)
  const s = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { subject: 'Große 🎰', body: big } })
  const got = await socket.next()
  t.equal(got.type, 'message')
  t.equal(got.data.id, s.notification_id, 'the new message, not the one delivered while closed')
  t.equal(got.data.body, big, 'whole, unicode intact')
  t.equal(got.data.subject, 'Große 🎰')
  const list = await must(h.request('GET', `/players/${p.id}/inbox`, { key: tenant.key }), 200)
  t.same(list.data.map((i: any) => i.id), [s.notification_id, whileClosed.notification_id])
})

// Last: the message it leaves stuck in the queue must not hold up the tests above.
t.test('a value that looks like an out-of-range code point does not break the email', async (t) => {
  const tenant = await emailTenant()
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'], name: 'Zoë &#99999999; 🎰' })
  const { n, mail } = await emailOf(tenant, p.id, address, { subject: 'Olá {{ name }}', body: '<p>Hi {{ name }}</p>' })
  t.equal(n.status, 'delivered', `delivered (got ${n.status}, attempts ${n.attempts}, ${n.error ?? ''})`)
  if (mail) {
    t.equal(mail.subject, 'Olá Zoë &#99999999; 🎰', 'subject: unicode and the value raw')
    t.match(mail.text, /Hi Zoë &#99999999; 🎰/)
  }
})

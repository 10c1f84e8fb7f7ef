// Adversarial checks of contract-engines §3 (message delivery) that the other notification tests leave
// out, against real protocol peers: `ws` clients and raw TCP for the inbox WebSocket (many sockets per
// player, reconnects, read state against GET /inbox, held, suppressed and expired messages, brand-pinned
// and read-only keys, malformed frames, a consumer that stops reading, refusals in the error shape, an
// Upgrade on an ordinary route), on both HTTP engines (uWS in a child process); a campaign's in-app
// message on the socket; a local Web Push service (RFC 8030 status codes and size, the VAPID JWT checked,
// the payload decrypted with http_ece as the browser would, one RFC 8291 record, several subscriptions);
// tracking (racing opens and clicks, push clicks, re-encoded tokens); the unsubscribe link (email consent
// only, its webhook once, opt-out policy); rendering (values that look like placeholders, escaping per
// channel, header breaks in an email subject, missing variables); and the Bot API's length limit.
// Product bugs are todo (see `bug` below); RESPIN_RUN_TODO=1 runs them.
import { createECDH, createPublicKey, randomBytes, verify } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import ece from 'http_ece'
import t, { type Test } from 'tap'
import WebSocket from 'ws'
import { sleep, waitFor } from '../helpers/wait.ts'
import { startHarness, type Harness, type TestResponse, type TestTenant } from '../helpers/harness.ts'
import { spawnServer } from '../helpers/processes.ts'
import { parseResponses, rawRequest } from '../helpers/raw-http.ts'
import { ingest, makePlayer, outboxOf, send, startSmtpReceiver, waitForStatus } from './delivery-helpers.ts'

/** A check that fails because the product is wrong: todo unless RESPIN_RUN_TODO is set. */
const bug = (why: string) => (process.env.RESPIN_RUN_TODO ? {} : { todo: `product bug: ${why}` })

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', DELIVERY_RETRY_DELAYS: '0,0,0,0' } })
const ctx = h.app.ctx

async function must(p: Promise<TestResponse>, status: number) {
  const res = await p
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`)
  return res.body
}
const untilTrue = (check: () => Promise<boolean> | boolean, ms = 8000) => waitFor('the condition', check, ms)

/** A local HTTP peer; `handler` answers each request with its whole body read. */
async function listen(handler: (req: IncomingMessage, body: Buffer) => { status: number; body?: string; headers?: Record<string, string> }): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const out = handler(req, Buffer.concat(chunks))
      res.writeHead(out.status, { 'content-type': 'application/json', ...out.headers }).end(out.body ?? '')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  }))
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` }
}

// --- Peers: an SMTP server, a webhook receiver, a Bot API (the push service is set up with its tests) ---

const { port: smtpPort, mailsTo } = await startSmtpReceiver(t)
let addresses = 0
const newAddress = () => `adv3-${process.pid}-${++addresses}-${Date.now()}@example.com`

/** The player's consent map, wherever GET /players/{id} puts the profile. */
const consentOf = (data: any): Record<string, { granted: boolean }> => data.consent ?? data.profile?.consent ?? {}

const webhookBodies: any[] = []
const webhookReceiver = await listen((_req, body) => {
  webhookBodies.push(JSON.parse(body.toString()))
  return { status: 200 }
})

const TOKEN = '777777:AdversarialThreeBotToken_x'
const botCalls: { chat_id: string; text: string; parse_mode: string }[] = []
const bot = await listen((req, raw) => {
  const body = JSON.parse(raw.toString())
  botCalls.push(body)
  if (req.url !== `/bot${TOKEN}/sendMessage`) return { status: 404, body: JSON.stringify({ ok: false, error_code: 404, description: 'Not Found' }) }
  // The Bot API: "Text of the message to be sent, 1-4096 characters after entities parsing".
  if ([...String(body.text).replace(/<[^>]+>/g, '')].length > 4096) return { status: 400, body: JSON.stringify({ ok: false, error_code: 400, description: 'Bad Request: message is too long' }) }
  return { status: 200, body: JSON.stringify({ ok: true, result: { message_id: botCalls.length } }) }
})
let chats = 0


// --- The inbox WebSocket -------------------------------------------------------------------------------

interface Sock {
  ws: WebSocket
  items: any[]
  closed: Promise<number>
  isClosed(): boolean
}

function openSocket(token: string, hh: { origin: string } = h): Promise<Sock> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${hh.origin.replace('http', 'ws')}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
    const items: any[] = []
    let closed = false
    const closedP = new Promise<number>((r) => ws.on('close', (code) => {
      closed = true
      r(code)
    }))
    ws.on('message', (raw) => items.push(JSON.parse(String(raw))))
    ws.on('open', () => resolve({ ws, items, closed: closedP, isClosed: () => closed }))
    ws.on('unexpected-response', (_req, res) => reject(new Error(`status ${res.statusCode}`)))
    ws.on('error', reject)
  })
}

const tokenOf = async (tenant: TestTenant, playerId: string, hh: Harness = h) =>
  (await must(hh.request('POST', `/players/${playerId}/inbox/token`, { key: tenant.key }), 201)).data.token as string
const inboxOf = async (tenant: TestTenant, playerId: string, query: Record<string, string | number | boolean> = {}) =>
  (await must(h.request('GET', `/players/${playerId}/inbox`, { key: tenant.key, query: { limit: 100, ...query } }), 200)).data as any[]
const idsOf = (s: Sock) => s.items.map((m) => m.data.id as string)

t.test('inbox socket: every socket of a player hears each new message exactly once, as GET /inbox lists it; other players hear none', async (t) => {
  const tenant = await h.createTenant()
  const stranger = await h.createTenant()
  const p = await makePlayer(h, tenant, { name: 'Zoë' })
  const sibling = await makePlayer(h, tenant)
  const foreign = await makePlayer(h, stranger)
  const token = await tokenOf(tenant, p.id)
  // Three sockets on one token, one on a second token of the same player.
  const mine = [await openSocket(token), await openSocket(token), await openSocket(token), await openSocket(await tokenOf(tenant, p.id))]
  const others = [await openSocket(await tokenOf(tenant, sibling.id)), await openSocket(await tokenOf(stranger, foreign.id))]
  t.teardown(() => [...mine, ...others].forEach((s) => s.ws.close()))

  // Sent together (one dispatcher batch), one of them over NOTIFY's 8000 bytes (announced by id, read back).
  const big = `${'Große Gewinne 🎰 — '.repeat(500)}end`
  const bodies = ['one {{ name }}', 'two', big, 'four <b>&</b>', 'five']
  const sent = await Promise.all(bodies.map((body, i) => send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { subject: `s${i}`, body } })))
  const ids = sent.map((s) => s.notification_id as string)
  await untilTrue(() => mine.every((s) => s.items.length >= ids.length))
  await sleep(300) // a duplicate would arrive now
  const inbox = await inboxOf(tenant, p.id)
  t.same(inbox.map((i) => i.id).sort(), [...ids].sort(), 'all five listed')
  for (const [k, s] of mine.entries()) {
    t.equal(s.items.length, ids.length, `socket ${k}: five frames, no duplicate`)
    t.same([...idsOf(s)].sort(), [...ids].sort(), `socket ${k}: each message once`)
    t.ok(s.items.every((m) => m.type === 'message'), `socket ${k}: { type: "message" }`)
    // §3 In-app inbox: the socket's `data` is the inbox item, the same as GET /players/{id}/inbox gives.
    for (const m of s.items) t.same(m.data, inbox.find((i) => i.id === m.data.id), `socket ${k}: ${m.data.subject} as listed`)
  }
  t.equal(mine[0]!.items.find((m) => m.data.subject === 's0')?.data.body, 'one Zoë', 'rendered')
  t.equal(mine[0]!.items.find((m) => m.data.subject === 's2')?.data.body, big, 'the large one whole')
  t.same(others.map((s) => s.items.length), [0, 0], "another player's and another tenant's sockets hear nothing")
})

t.test('inbox socket: a reconnect replays nothing and loses nothing; messages in causal order; read state agrees with GET /inbox and ?unread', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  const token = await tokenOf(tenant, p.id)
  const deliver = async (body: string) => {
    const s = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body } })
    await waitForStatus(h, tenant, s.notification_id, ['delivered'])
    return s.notification_id as string
  }
  const first = await openSocket(token)
  const m1 = await deliver('m1')
  await untilTrue(() => first.items.length === 1)
  first.ws.close()
  await first.closed
  const m2 = await deliver('m2 (while no socket is open)')
  // The same token again (valid for 15 minutes), and a fresh one.
  const again = await openSocket(token)
  const fresh = await openSocket(await tokenOf(tenant, p.id))
  t.teardown(() => [again, fresh].forEach((s) => s.ws.close()))
  const m3 = await deliver('m3')
  const m4 = await deliver('m4')
  const m5 = await deliver('m5')
  await untilTrue(() => again.items.length >= 3 && fresh.items.length >= 3)
  await sleep(300)
  t.same(idsOf(first), [m1])
  t.same(idsOf(again), [m3, m4, m5], 'the reconnected socket: only what came after, in order, nothing replayed')
  t.same(idsOf(fresh), [m3, m4, m5])
  t.ok(again.items.every((m) => m.data.read_at === null), 'new messages arrive unread')

  await must(h.request('POST', `/players/${p.id}/inbox/${m1}/read`, { key: tenant.key }), 200)
  await must(h.request('POST', `/players/${p.id}/inbox/${m4}/read`, { key: tenant.key }), 200)
  const all = await inboxOf(tenant, p.id)
  t.same(all.map((i) => i.id), [m5, m4, m3, m2, m1], 'the whole inbox, newest first')
  t.same(all.filter((i) => i.read_at === null).map((i) => i.id), [m5, m3, m2])
  t.same((await inboxOf(tenant, p.id, { unread: true })).map((i) => i.id), [m5, m3, m2], '?unread agrees with read_at')
  for (const m of again.items) {
    const listed = all.find((i) => i.id === m.data.id)
    t.same({ ...m.data, read_at: listed.read_at }, listed, 'the socket item is the listed item (read_at aside, it was read since)')
  }
})

t.test('inbox: a message held by quiet hours or suppressed is neither listed, readable nor pushed; the held one is pushed when it goes', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  const socket = await openSocket(await tokenOf(tenant, p.id))
  t.teardown(() => socket.ws.close())
  const hhmm = (d: Date) => d.toISOString().slice(11, 16)
  const now = Date.now()
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { quiet_hours: { start: hhmm(new Date(now - 3600_000)), end: hhmm(new Date(now + 3600_000)), timezone: 'UTC' } } }), 200)
  const held = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'promo' } })
  t.equal(held.data.status, 'queued', 'held (§3: queued, scheduled_at says until when)')
  t.ok(Date.parse(held.data.scheduled_at) > now + 60_000)
  // Transactional skips quiet hours: delivered and pushed now.
  const receipt = await send(h, tenant, { player_id: p.id, channel: 'in_app', class: 'transactional', payload: { body: 'receipt' } })
  await untilTrue(() => socket.items.length >= 1)
  await sleep(300)
  t.same(idsOf(socket), [receipt.notification_id], 'only the transactional message is pushed')
  t.same((await inboxOf(tenant, p.id)).map((i) => i.id), [receipt.notification_id], 'the inbox lists delivered messages only')
  t.equal((await h.request('POST', `/players/${p.id}/inbox/${held.notification_id}/read`, { key: tenant.key })).status, 404, 'a held message cannot be read')
  t.equal((await must(h.request('GET', `/notifications/${held.notification_id}`, { key: tenant.key }), 200)).data.opened_at, null)

  // The quiet hours end.
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: {} }), 200)
  await ctx.sql`update notifications set due_at = now(), scheduled_at = now() where id = ${held.notification_id}`
  ctx.delivery?.wake()
  await waitForStatus(h, tenant, held.notification_id, ['delivered', 'suppressed', 'failed'])
  await untilTrue(() => socket.items.length >= 2)
  t.same(idsOf(socket), [receipt.notification_id, held.notification_id], 'pushed once it is delivered')

  // Withdrawn in-app consent: a marketing message is suppressed, never pushed nor listed.
  await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'consent_update', payload: { channel: 'in_app', granted: false } }])
  const sup = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'in_app', payload: { body: 'no' } } })
  t.match(sup.body, { queued: false, data: { status: 'suppressed', reason: 'no_consent' } })
  await sleep(300)
  t.equal(socket.items.length, 2, 'nothing pushed')
  t.equal((await h.request('POST', `/players/${p.id}/inbox/${sup.body.notification_id}/read`, { key: tenant.key })).status, 404)
  t.equal((await inboxOf(tenant, p.id)).length, 2)
})

t.test('inbox: a message past the brand\'s retention is no longer listed, and no longer readable', async (t) => {
  // docs/delivery.md: "the inbox lists delivered in-app messages younger than the brand's retention_days";
  // POST /players/{id}/inbox/{notificationId}/read acts on an inbox item (held, suppressed or hidden ones are 404).
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/in_app', { key: tenant.key, body: { retention_days: 1 } }), 200)
  const p = await makePlayer(h, tenant)
  const old = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'old' } })
  const fresh = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'fresh' } })
  for (const s of [old, fresh]) await waitForStatus(h, tenant, s.notification_id, ['delivered'])
  // Two days pass for the old one.
  await ctx.sql`update notifications set created_at = created_at - interval '2 days', delivered_at = delivered_at - interval '2 days' where id = ${old.notification_id}`
  t.same((await inboxOf(tenant, p.id)).map((i) => i.id), [fresh.notification_id], 'only the fresh one is listed')
  t.same((await inboxOf(tenant, p.id, { unread: true })).map((i) => i.id), [fresh.notification_id])
  t.equal((await h.request('POST', `/players/${p.id}/inbox/${old.notification_id}/read`, { key: tenant.key })).status, 404, 'the expired one cannot be read')
  t.equal((await must(h.request('GET', `/notifications/${old.notification_id}`, { key: tenant.key }), 200)).data.opened_at, null, 'no open recorded')
})

t.test('inbox tokens and reads: brand-pinned keys of another brand, read-only keys, unknown players, tokens elsewhere', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const p = await makePlayer(h, tenant)
  const s = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'x' } })
  await waitForStatus(h, tenant, s.notification_id, ['delivered'])
  // contract.md "Brands and visibility": a brand-pinned key sees only its own brand's resources; anything else is 404.
  const pinnedOther = (await tenant.createKey({ brand: second.slug })).key
  t.equal((await h.request('POST', `/players/${p.id}/inbox/token`, { key: pinnedOther })).status, 404, 'no token through another brand')
  t.equal((await h.request('GET', `/players/${p.id}/inbox`, { key: pinnedOther })).status, 404)
  t.equal((await h.request('POST', `/players/${p.id}/inbox/${s.notification_id}/read`, { key: pinnedOther })).status, 404)
  const pinnedOwn = (await tenant.createKey({ brand: tenant.brand.slug })).key
  t.equal((await h.request('POST', `/players/${p.id}/inbox/token`, { key: pinnedOwn })).status, 201, 'its own brand')
  // contract-engines: GET needs read, writes need full access.
  const ro = (await tenant.createKey({ scopes: ['read'] })).key
  t.equal((await h.request('GET', `/players/${p.id}/inbox`, { key: ro })).status, 200, 'a read key lists')
  t.equal((await h.request('POST', `/players/${p.id}/inbox/token`, { key: ro })).status, 403, 'a read key issues no token')
  t.equal((await h.request('POST', `/players/${p.id}/inbox/${s.notification_id}/read`, { key: ro })).status, 403, 'nor marks read')
  t.equal((await must(h.request('GET', `/notifications/${s.notification_id}`, { key: tenant.key }), 200)).data.opened_at, null, 'nothing recorded')
  t.equal((await h.request('POST', '/players/00000000-0000-4000-8000-000000000000/inbox/token', { key: tenant.key })).status, 404)
  t.ok([400, 404].includes((await h.request('POST', '/players/not-a-uuid/inbox/token', { key: tenant.key })).status), 'no uuid: refused')
  t.equal((await h.request('POST', `/players/${p.id}/inbox/token`)).status, 401)

  const token = await tokenOf(tenant, p.id)
  const wsUrl = `${h.origin.replace('http', 'ws')}/api/v1/inbox/ws`
  const refused = (url: string) => new Promise<number>((resolve) => {
    const ws = new WebSocket(url)
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0)
      ws.terminate()
    })
    ws.on('open', () => {
      resolve(101)
      ws.close()
    })
    ws.on('error', () => resolve(-1))
  })
  t.equal(await refused(wsUrl), 401, 'no token')
  t.equal(await refused(`${wsUrl}?tok=${encodeURIComponent(token)}`), 401, 'the token under another name')
  t.equal(await refused(`${wsUrl}?token=${encodeURIComponent(s.notification_id)}`), 401, 'a notification id is no token')
  const cursor = (await must(h.request('GET', `/players/${p.id}/inbox`, { key: tenant.key, query: { limit: 1 } }), 200)).next_cursor
  if (cursor) t.equal(await refused(`${wsUrl}?token=${encodeURIComponent(cursor)}`), 401, "the inbox list's cursor is no token")
  t.equal(await refused(`${h.origin.replace('http', 'ws')}/api/v1/inbox/wsx?token=${encodeURIComponent(token)}`), 404, 'another path')
  t.equal(await refused(`${wsUrl}?token=${encodeURIComponent(token)}`), 101, 'the token itself opens')
})

t.test('a refused inbox upgrade answers in the error shape, with a request id', async (t) => {
  // docs/errors.md: "Every error response has the body { error, code, details?, request_id } and an x-request-id header".
  const res = await rawRequest(h.app.port, [
    'GET /api/v1/inbox/ws?token=forged HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  ], { waitMs: 3000, responses: 1 })
  const [r] = parseResponses(res.text)
  t.equal(r?.status, 401)
  t.match(JSON.parse(r?.body ?? '{}'), { error: String, code: 'UNAUTHORIZED', request_id: String })
  t.ok(r?.headers['x-request-id'], 'x-request-id header')
})

t.test('an Upgrade the server does not speak, sent to an ordinary route, is ignored: the route answers', async (t) => {
  // RFC 9110 §7.8: "A server MAY ignore a received Upgrade header field"; curl --http2 sends exactly this
  // to an http:// URL. GET /health answers 200 (spec); the node engine faces clients directly (docs/http.md).
  const res = await rawRequest(h.app.port, [
    'GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n',
  ], { waitMs: 3000, responses: 1 })
  t.equal(res.statuses[0], 200, 'GET /health with Upgrade: h2c')
  t.equal(parseResponses(res.text)[0]?.headers['connection'], 'close', 'on a connection that closes after the answer')
  // With a body, left unparsed on the socket by node once it saw the Upgrade: refused in the error shape.
  const body = '{"events":[]}'
  const withBody = await rawRequest(h.app.port, [
    `POST /api/v1/events HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
  ], { waitMs: 3000, responses: 1 })
  const [refused] = parseResponses(withBody.text)
  t.equal(refused?.status, 400, 'an upgrade carrying a body: 400')
  t.match(JSON.parse(refused?.body ?? '{}'), { code: 'BAD_REQUEST', request_id: String })
})

t.test("a campaign's in-app message reaches the socket with its campaign_id, as GET /inbox lists it, and its events carry the campaign", async (t) => {
  const tenant = await h.createTenant()
  const tpl = await must(h.request('POST', '/notifications/templates', { key: tenant.key, body: { name: 'welcome-deposit', channel: 'in_app', subject: 'Thanks {{ name }}', body: 'You deposited {{ amount | something }} — enjoy 🎰' } }), 201)
  const c = (await must(h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'c', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl.data.id }, trigger: { event_type: 'deposit' } } } }), 201)).data
  await must(h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } }), 200)
  const p = await makePlayer(h, tenant, { name: 'Zoë' })
  const socket = await openSocket(await tokenOf(tenant, p.id))
  t.teardown(() => socket.ws.close())
  await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  await ctx.stream?.idle()
  await untilTrue(() => socket.items.length >= 1, 10_000)
  const item = socket.items[0].data
  t.equal(item.campaign_id, c.id, 'campaign_id on the socket item')
  t.equal(item.subject, 'Thanks Zoë')
  const listed = await inboxOf(tenant, p.id)
  t.same(listed, [item], 'the same item as GET /inbox')
  const events = (await outboxOf(h, tenant.id)).filter((e) => e.data.notification_id === item.id)
  t.same(events.map((e) => e.event), ['message.delivered'])
  // §3: "Every message.* event's data carries notification_id, and campaign_id when a campaign sent it (campaign_send_id of the spec = the notification id)".
  t.match(events[0]?.data, { campaign_id: c.id, campaign_send_id: item.id, channel: 'in_app', player_id: p.id })
  await sleep(300)
  t.equal(socket.items.length, 1, 'once')
})

// Raw TCP: the frames a WebSocket library never sends.
function rawSocket(token: string, api: Api = local): Promise<{ sock: net.Socket; closed: Promise<boolean> }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(api.port, '127.0.0.1')
    let head = ''
    let done = false
    let ended = false
    const closed = new Promise<boolean>((r) => {
      sock.on('close', () => {
        ended = true
        r(true)
      })
      setTimeout(() => r(ended), 4000).unref()
    })
    sock.on('error', () => {})
    sock.on('data', (d) => {
      if (done) return
      head += d.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      done = true
      if (!head.startsWith('HTTP/1.1 101')) return reject(new Error(head.split('\r\n')[0]))
      resolve({ sock, closed })
    })
    sock.write(
      `GET /api/v1/inbox/ws?token=${encodeURIComponent(token)} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    )
  })
}

function frame(o: { opcode: number; payload?: Buffer; fin?: boolean; rsv?: number; mask?: boolean; length?: bigint }): Buffer {
  const payload = o.payload ?? Buffer.alloc(0)
  const mask = o.mask ?? true
  const len = o.length ?? BigInt(payload.length)
  const b0 = ((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | o.opcode
  let lenBytes: Buffer
  if (len < 126n) lenBytes = Buffer.from([(mask ? 0x80 : 0) | Number(len)])
  else if (len < 65536n) {
    lenBytes = Buffer.alloc(3)
    lenBytes[0] = (mask ? 0x80 : 0) | 126
    lenBytes.writeUInt16BE(Number(len), 1)
  } else {
    lenBytes = Buffer.alloc(9)
    lenBytes[0] = (mask ? 0x80 : 0) | 127
    lenBytes.writeBigUInt64BE(len, 1)
  }
  if (!mask) return Buffer.concat([Buffer.from([b0]), lenBytes, payload])
  const key = randomBytes(4)
  const masked = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!))
  return Buffer.concat([Buffer.from([b0]), lenBytes, key, masked])
}

type T = Test

/** What the socket checks below need of a running app: this file's harness, or a child process. */
interface Api {
  origin: string
  port: number
  request: Harness['request']
  tenant(): Promise<{ key: string }>
  player(tenant: { key: string }): Promise<{ id: string }>
}
const local: Api = {
  origin: h.origin,
  port: h.app.port,
  request: (...a) => h.request(...a),
  tenant: () => h.createTenant(),
  player: (tenant) => makePlayer(h, tenant as TestTenant),
}

/** An API process started with `npm start`'s command (test/helpers/processes.ts), reached over HTTP only. */
async function childApi(t: T, env: Record<string, string>): Promise<Api> {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-adv3-'))
  const child = await spawnServer({ DATA_DIR: dataDir, ...env })
  t.teardown(async () => {
    child.proc.kill('SIGTERM')
    await child.exited
    rmSync(dataDir, { recursive: true, force: true })
  })
  const request: Harness['request'] = async (method, path, o = {}) => {
    const url = new URL(`/api/v1${path}`, child.origin)
    for (const [k, v] of Object.entries(o.query ?? {})) url.searchParams.set(k, String(v))
    const res = await fetch(url, { method, headers: { 'content-type': 'application/json', ...(o.key ? { 'x-api-key': o.key } : {}) }, body: o.body === undefined ? undefined : JSON.stringify(o.body) })
    const text = await res.text()
    let body: any = text
    try {
      body = JSON.parse(text)
    } catch {
      // not JSON
    }
    return { status: res.status, body, text, headers: res.headers }
  }
  const admin = (method: string, path: string, body: unknown) => request(method, `/admin${path}`, { key: child.adminKey, body })
  let n = 0
  return {
    origin: child.origin,
    port: child.port,
    request,
    async tenant() {
      const slug = `adv3-${process.pid}-${++n}-${randomBytes(3).toString('hex')}`
      const tenant = (await must(admin('POST', '/tenants', { name: slug, slug }), 201)).data
      await must(admin('POST', `/tenants/${tenant.id}/brands`, { name: 'main', slug: 'main' }), 201)
      return { key: (await must(admin('POST', `/tenants/${tenant.id}/keys`, { name: 'full' }), 201)).data.key as string }
    },
    async player(tenant) {
      return (await must(request('POST', '/players', { key: tenant.key, body: { external_id: `p-${randomBytes(4).toString('hex')}` } }), 201)).data
    },
  }
}

const inboxToken = async (api: Api, tenant: { key: string }, playerId: string) =>
  (await must(api.request('POST', `/players/${playerId}/inbox/token`, { key: tenant.key }), 201)).data.token as string
const sendVia = async (api: Api, tenant: { key: string }, body: Record<string, unknown>) =>
  (await must(api.request('POST', '/notifications/send', { key: tenant.key, body }), 202)) as { notification_id: string }

/**
 * docs/operating.md: "An inbox WebSocket client sending a frame over 4 KB or a malformed one loses its
 * socket; the process and every other socket live on".
 */
async function malformedFrames(t: T, api: Api, only?: (name: string) => boolean) {
  const tenant = await api.tenant()
  const p = await api.player(tenant)
  const token = await inboxToken(api, tenant, p.id)
  const good = await openSocket(token, api)
  t.teardown(() => good.ws.close())
  const cases: [string, Buffer[]][] = [
    ['a frame over 4 KB', [frame({ opcode: 1, payload: Buffer.alloc(5000, 0x61) })]],
    ['an unmasked client frame', [frame({ opcode: 1, payload: Buffer.from('hello'), mask: false })]],
    ['a reserved opcode', [frame({ opcode: 3 })]],
    ['RSV1 without an extension', [frame({ opcode: 1, rsv: 4, payload: Buffer.from('x') })]],
    ['a text frame that is not UTF-8', [frame({ opcode: 1, payload: Buffer.from([0xc3, 0x28, 0xff]) })]],
    ['a ping over 125 bytes', [frame({ opcode: 9, payload: Buffer.alloc(200, 1) })]],
    ['a fragmented control frame', [frame({ opcode: 9, fin: false, payload: Buffer.from('p') })]],
    ['fragments under 4 KB each, over it together', [frame({ opcode: 1, fin: false, payload: Buffer.alloc(3000, 0x61) }), frame({ opcode: 0, payload: Buffer.alloc(3000, 0x61) })]],
    ['a continuation with nothing to continue', [frame({ opcode: 0, payload: Buffer.from('x') })]],
    ['a length of 2^63 - 1', [frame({ opcode: 2, length: 2n ** 63n - 1n }).subarray(0, 10)]],
  ].filter(([name]) => !only || only(name as string)) as [string, Buffer[]][]
  const closedFor = await Promise.all(cases.map(async ([, frames]) => {
    const { sock, closed } = await rawSocket(token, api)
    for (const f of frames) sock.write(f)
    const was = await closed
    sock.destroy()
    return was
  }))
  for (const [i, [name]] of cases.entries()) t.ok(closedFor[i], `${name}: that socket is closed`)
  t.equal((await api.request('GET', '/health/live')).status, 200, 'the process lives on')
  t.notOk(good.isClosed(), 'the well-behaved socket is still open')
  const s = await sendVia(api, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'still here' } })
  await untilTrue(() => good.items.length >= 1)
  t.same(idsOf(good), [s.notification_id], 'and still hears its player')
}

/**
 * A socket whose client stops reading while `n` messages of `size` bytes are delivered. §3: the socket
 * "receives { type: message, data } for each new message": once it reads again it must get every one,
 * unless the server closed it (the client then knows to list the inbox); an open socket with a gap is a
 * silent loss.
 */
async function slowConsumer(t: T, api: Api, n: number, size: number) {
  const tenant = await api.tenant()
  const p = await api.player(tenant)
  const token = await inboxToken(api, tenant, p.id)
  const fast = await openSocket(token, api)
  const slow = await openSocket(token, api)
  t.teardown(() => [fast, slow].forEach((s) => s.ws.terminate()))
  const raw = (slow.ws as unknown as { _socket: net.Socket })._socket
  raw.pause()
  const body = 'x'.repeat(size)
  const ids: string[] = []
  for (let i = 0; i < n; i += 4) {
    const batch = await Promise.all(Array.from({ length: Math.min(4, n - i) }, (_, k) => sendVia(api, tenant, { player_id: p.id, channel: 'in_app', payload: { subject: `#${i + k}`, body } })))
    ids.push(...batch.map((b) => b.notification_id))
  }
  await untilTrue(() => fast.items.length >= n, 15_000)
  t.same([...idsOf(fast)].sort(), [...ids].sort(), 'the reading socket got every message')
  const started = Date.now()
  t.equal((await api.request('GET', `/players/${p.id}/inbox`, { key: tenant.key, query: { limit: 1 } })).status, 200)
  t.ok(Date.now() - started < 2000, 'the API answers promptly')
  raw.resume()
  // Until everything came, or nothing more comes for a second.
  for (let last = -1, since = Date.now(); slow.items.length < n && !slow.isClosed() && Date.now() - since < 1000; await sleep(50)) {
    if (slow.items.length !== last) [last, since] = [slow.items.length, Date.now()]
  }
  await sleep(300)
  if (!slow.isClosed()) {
    t.equal(slow.items.length, n, `the slow socket, still open, got every message (${slow.items.length} of ${n})`)
    t.same([...new Set(idsOf(slow))].sort(), [...ids].sort(), 'each once')
    t.ok(slow.items.every((m) => m.data.body === body), 'each whole')
  } else {
    t.pass(`the slow socket was closed (${slow.items.length} messages before): no silent gap`)
  }
}

t.test('inbox socket: malformed frames lose only their own socket; the process and the other sockets live on', (t) => malformedFrames(t, local))

t.test('inbox socket: a consumer that stops reading holds up neither the other sockets nor the API; reading again, it gets every message or is closed', (t) =>
  slowConsumer(t, local, 12, 400_000))

t.test('HTTP_ENGINE=uws (docs/http.md: a supported engine): the same inbox socket guarantees', async (t) => {
  // A second API process on the uWS engine (one chDB per process). With a server it shares this file's
  // database: its messages may be delivered by either process and reach its sockets through NOTIFY.
  const api = await childApi(t, { HTTP_ENGINE: 'uws' })
  await t.test('tokens are checked; a good one opens and hears its player, a large message whole', async (t) => {
    const tenant = await api.tenant()
    const p = await api.player(tenant)
    await t.rejects(openSocket('', api), /401/)
    await t.rejects(openSocket('nope.nope', api), /401/)
    const s = await openSocket(await inboxToken(api, tenant, p.id), api)
    t.teardown(() => s.ws.close())
    const sent = await sendVia(api, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'ü'.repeat(5000) } })
    await untilTrue(() => s.items.length >= 1)
    t.equal(s.items[0].data.id, sent.notification_id)
    t.equal(s.items[0].data.body, 'ü'.repeat(5000), 'a message over NOTIFY size, whole')
  })
  const lenient = ['an unmasked client frame', 'a length of 2^63 - 1']
  await t.test('malformed frames lose only their own socket', (t) => malformedFrames(t, api, (name) => !lenient.includes(name)))
  // RFC 6455 §5.1: "The server MUST close the connection upon receiving a frame that is not masked"; a
  // declared length over maxPayloadLength (4096) is over the limit before its payload comes.
  await t.test('an unmasked frame, or a frame declaring 2^63 - 1 bytes, loses its socket', bug('uWS (inbox-socket.ts attach()) keeps such a socket open (until its 120 s idle timeout)'), (t) =>
    malformedFrames(t, api, (name) => lenient.includes(name)))
  await t.test('a consumer that stops reading gets every message once it reads again, or is closed', (t) =>
    slowConsumer(t, api, 12, 400_000))
})

// --- Web Push --------------------------------------------------------------------------------------------

interface PushCall { path: string; headers: IncomingHttpHeaders; body: Buffer; status: number; payload?: any; jwt?: any; error?: string }
const pushCalls: PushCall[] = []
/** The browser side of each subscription: its ECDH key pair and auth secret, by endpoint path. */
const browsers = new Map<string, { ecdh: ReturnType<typeof createECDH>; auth: Buffer }>()
const seenPaths = new Set<string>()

function verifyVapid(req: IncomingMessage, origin: string): any {
  const m = /^vapid t=([^,]+),\s*k=(.+)$/.exec(String(req.headers.authorization))
  if (!m) throw new Error('no vapid authorization')
  const [header, claims, signature] = m[1]!.split('.')
  const raw = Buffer.from(m[2]!, 'base64url')
  const key = createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33).toString('base64url') }, format: 'jwk' })
  if (!verify('sha256', Buffer.from(`${header}.${claims}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature!, 'base64url'))) throw new Error('bad vapid signature')
  const payload = JSON.parse(Buffer.from(claims!, 'base64url').toString())
  if (payload.aud !== origin || payload.exp * 1000 < Date.now()) throw new Error('bad vapid claims')
  return payload
}

/** The aes128gcm header (RFC 8188 §2.1): salt, record size, key id; and how many records follow. */
function eceHeader(body: Buffer) {
  const rs = body.readUInt32BE(16)
  const idlen = body[20]!
  const headerLength = 21 + idlen
  return { rs, idlen, records: Math.ceil((body.length - headerLength) / rs) }
}

// Behaviour by the endpoint's last path segment: notfound 404, gone 410, flaky 503 on the first call,
// down 500 always; otherwise a push service as RFC 8030 describes it (413 over 4096 bytes), checking the
// VAPID JWT and decrypting with the subscription's keys.
const pushService = await listen((req, body) => {
  const path = req.url!
  const name = path.split('/').pop()
  const first = !seenPaths.has(path)
  seenPaths.add(path)
  const call: PushCall = { path, headers: req.headers, body, status: 0 }
  pushCalls.push(call)
  const answer = (status: number, text = '', headers?: Record<string, string>) => {
    call.status = status
    return { status, body: text, headers }
  }
  if (name === 'notfound') return answer(404, 'no such subscription')
  if (name === 'gone') return answer(410)
  if (name === 'down') return answer(500, 'push service down')
  if (name === 'flaky' && first) return answer(503, 'try later')
  if (body.length > 4096) return answer(413, 'payload too large')
  try {
    call.jwt = verifyVapid(req, pushService.url)
    if (req.headers['content-encoding'] !== 'aes128gcm') throw new Error('not aes128gcm')
    const browser = browsers.get(path)
    if (!browser) throw new Error('unknown subscription')
    const plain = ece.decrypt(body, { version: 'aes128gcm', privateKey: browser.ecdh, authSecret: browser.auth.toString('base64url') })
    call.payload = JSON.parse(plain.toString())
    return answer(201)
  } catch (err) {
    call.error = (err as Error).message
    return answer(400, (err as Error).message)
  }
})
const callsTo = (endpoint: string) => pushCalls.filter((c) => c.path === new URL(endpoint).pathname)

/** A browser subscribing: new keys; `endpoint` to re-subscribe at the same one. */
function subscription(name: string, endpoint?: string) {
  const ecdh = createECDH('prime256v1')
  ecdh.generateKeys()
  const auth = randomBytes(16)
  const url = endpoint ?? `${pushService.url}/push/${randomBytes(6).toString('hex')}/${name}`
  browsers.set(new URL(url).pathname, { ecdh, auth })
  // PushSubscription.toJSON() as browsers give it (expirationTime included).
  return { endpoint: url, expirationTime: null, keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') } }
}

async function pushTenant() {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/push', { key: tenant.key, body: { vapid_subject: 'mailto:ops@casino.example' } }), 200)
  return tenant
}
const subsOf = async (tenant: TestTenant, playerId: string) =>
  (await must(h.request('GET', `/players/${playerId}/push-subscriptions`, { key: tenant.key }), 200)).data as { id: string; endpoint: string }[]

t.test("push: a browser's subscription JSON is accepted; re-subscribed with new keys, the payload is for the new keys, one RFC 8291 record, with a TTL", async (t) => {
  const tenant = await pushTenant()
  const p = await makePlayer(h, tenant, { name: 'Ada' })
  for (const [body, field] of [
    [{ ...subscription('ok'), endpoint: 'ftp://127.0.0.1/push/x' }, 'endpoint'],
    [{ endpoint: `${pushService.url}/push/x` }, 'keys'],
  ] as const) {
    const res = await h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body })
    t.equal(res.status, 400, `refused: ${field}`)
    t.match(JSON.stringify(res.body.details ?? {}), field, `names ${field}`)
  }
  const old = subscription('ok')
  const a = await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: old }), 201)
  const renewed = subscription('ok', old.endpoint)
  const b = await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: renewed }), 201)
  t.equal(b.data.id, a.data.id, 'the same endpoint is the same subscription')
  // A second browser of the player: docs/delivery.md "Every subscription of the player gets it".
  const laptop = subscription('ok')
  await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: laptop }), 201)
  const s = await send(h, tenant, { player_id: p.id, channel: 'push', payload: { subject: 'Hi {{ name }}', body: '<b>Tom & Jerry</b> 🎰 {{ note }}', note: '{{ email }}' } })
  const n = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])
  const call = callsTo(old.endpoint).at(-1)
  t.equal(n.status, 'delivered', `delivered (${n.error ?? ''}; push service: ${call?.error ?? call?.status})`)
  t.ok(call?.payload, 'decrypted with the keys the browser gave last')
  // §3 Rendering: "Push: the encrypted payload (RFC 8291, VAPID RFC 8292) is JSON { notification_id, title, body, url }".
  t.same(call?.payload, { notification_id: s.notification_id, title: 'Hi Ada', body: '<b>Tom & Jerry</b> 🎰 {{ email }}', url: null },
    'exactly those fields; no url given: null; a value that looks like a placeholder stays as it is')
  // RFC 8030 §5.2: the TTL header is required; RFC 8291 §4: "An application server MUST encrypt a push message with a single record".
  t.match(String(call?.headers.ttl), /^\d+$/, 'TTL header')
  // RFC 8292 §2: the JWT's exp "MUST NOT be more than 24 hours from the time of the request"; sub: the brand's vapid_subject.
  t.ok(call?.jwt && call.jwt.exp * 1000 - Date.now() <= 24 * 3600_000, 'VAPID exp within 24 hours')
  t.equal(call?.jwt?.sub, 'mailto:ops@casino.example')
  t.equal(eceHeader(call!.body).records, 1, 'one record')
  t.equal(eceHeader(call!.body).idlen, 65, 'keyid: the application server key (RFC 8291 §4)')
  t.same(callsTo(laptop.endpoint).map((c) => c.payload), [call?.payload], 'the other browser got the same payload, decrypted with its own keys')
  const delivered = (await outboxOf(h, tenant.id)).filter((e) => e.event === 'message.delivered' && e.data.notification_id === s.notification_id)
  t.equal(delivered.length, 1, 'message.delivered once')
})

t.test('push: 404 on one subscription and 503 on another: the 404 one is removed and not called again, the other retried until delivered', async (t) => {
  const tenant = await pushTenant()
  const p = await makePlayer(h, tenant)
  const missing = subscription('notfound')
  const flaky = subscription('flaky')
  await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: missing }), 201)
  await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: flaky }), 201)
  const s = await send(h, tenant, { player_id: p.id, channel: 'push', payload: { subject: 'x', body: 'y' } })
  const n = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])
  t.match(n, { status: 'delivered', attempts: 2 }, '5xx retried (docs/delivery.md outcome table)')
  t.equal(callsTo(missing.endpoint).length, 1, 'the 404 subscription: called once')
  t.same(callsTo(flaky.endpoint).map((c) => c.status), [503, 201])
  t.same((await subsOf(tenant, p.id)).map((x) => x.endpoint), [flaky.endpoint], 'only the 404 one is removed')
})

t.test('push: 5xx on every attempt ends failed after 5 attempts naming the cause; a 413 is not retried; neither removes the subscription', async (t) => {
  const tenant = await pushTenant()
  const p = await makePlayer(h, tenant)
  const down = subscription('down')
  await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: down }), 201)
  const s = await send(h, tenant, { player_id: p.id, channel: 'push', payload: { body: 'y' } })
  const n = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'], 20_000)
  t.match(n, { status: 'failed', attempts: 5, error: /500/ }, '§3: failed after 5 attempts, error saying the last cause')
  t.equal(callsTo(down.endpoint).length, 5)
  t.equal((await subsOf(tenant, p.id)).length, 1, 'a 5xx does not remove the subscription')

  // A body no push service takes (RFC 8030 §7.2: 413 over 4096 bytes): a permanent refusal.
  const q = await makePlayer(h, tenant)
  const sub = subscription('ok')
  await must(h.request('POST', `/players/${q.id}/push-subscriptions`, { key: tenant.key, body: sub }), 201)
  const long = await send(h, tenant, { player_id: q.id, channel: 'push', payload: { subject: 'long', body: 'é'.repeat(2500) } })
  const ln = await waitForStatus(h, tenant, long.notification_id, ['delivered', 'failed'])
  t.equal(ln.attempts, 1, 'not retried')
  if (ln.status === 'delivered') {
    const call = callsTo(sub.endpoint).at(-1)!
    t.ok(call.body.length <= 4096 && eceHeader(call.body).records === 1, 'fitted into one record the push service takes')
  } else {
    t.match(ln, { status: 'failed', error: /413/ })
  }
  t.equal((await subsOf(tenant, q.id)).length, 1, 'the subscription stays')
  // Just under the limit: one record, whole.
  const fits = await send(h, tenant, { player_id: q.id, channel: 'push', payload: { subject: 'fits', body: 'a'.repeat(3600) } })
  t.equal((await waitForStatus(h, tenant, fits.notification_id, ['delivered', 'failed'])).status, 'delivered')
  const call = callsTo(sub.endpoint).at(-1)!
  t.equal(call.payload?.body, 'a'.repeat(3600))
  t.equal(eceHeader(call.body).records, 1, 'one record')
})

t.test('push: the tracked url redirects to the given link only; racing clicks fire message.clicked once and no message.opened', async (t) => {
  const tenant = await pushTenant()
  const p = await makePlayer(h, tenant)
  const sub = subscription('ok')
  await must(h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: sub }), 201)
  const link = 'https://casino.example/promo?a=1&b=2#spins'
  const s = await send(h, tenant, { player_id: p.id, channel: 'push', payload: { subject: 'Spins', body: 'go', url: link } })
  t.equal((await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])).status, 'delivered')
  const url = callsTo(sub.endpoint).at(-1)!.payload.url as string
  t.match(new URL(url).pathname, /^\/t\/c\//, 'through click tracking')
  const clicks = await Promise.all(Array.from({ length: 8 }, () => fetch(h.origin + new URL(url).pathname, { redirect: 'manual' })))
  t.same(clicks.map((r) => r.status), Array(8).fill(302))
  t.same([...new Set(clicks.map((r) => r.headers.get('location')))], [link], 'every click goes to that link, and only there')
  const n = await must(h.request('GET', `/notifications/${s.notification_id}`, { key: tenant.key }), 200)
  t.ok(n.data.clicked_at, 'clicked_at')
  const events = (await outboxOf(h, tenant.id)).filter((e) => e.data.notification_id === s.notification_id).map((e) => e.event)
  // §3: first click fires message.clicked once per notification; message.opened is an email open (spec catalog).
  t.same(events.sort(), ['message.clicked', 'message.delivered'])
})

// --- Email: tracking, unsubscribe, rendering ---------------------------------------------------------------

async function emailTenant() {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://u:p@127.0.0.1:${smtpPort}`, from: 'news@casino.example' } }), 200)
  return tenant
}

async function emailOf(tenant: TestTenant, playerId: string, address: string, payload: Record<string, unknown>, cls = 'marketing') {
  const s = await send(h, tenant, { player_id: playerId, channel: 'email', class: cls, payload })
  const n = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed', 'bounced', 'suppressed'])
  if (n.status !== 'delivered') return { n, mail: undefined }
  const mail = await waitFor('the mail', () => mailsTo(address).find((m) => m.headers.get('x-respin-notification') === s.notification_id))
  return { n, mail }
}
const unsubscribeUrlOf = (mail: { headerLines: readonly { key: string; line: string }[] }) =>
  h.origin + new URL(/<(.+)>/.exec(mail.headerLines.find((l) => l.key === 'list-unsubscribe')!.line)![1]!).pathname

t.test('email tracking: racing opens and clicks on two links fire message.opened and message.clicked once each; each token redirects to its own link', async (t) => {
  const tenant = await emailTenant()
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const { n, mail } = await emailOf(tenant, p.id, address, {
    subject: 'Two links',
    body: '<p><a href="https://a.example/one">one</a> <a href="https://b.example/two?x=1">two</a> <a href="https://a.example/one">one again</a></p>',
  })
  t.equal(n.status, 'delivered')
  const html = mail!.html as string
  const clicks = [...html.matchAll(/href="([^"]+\/t\/c\/[^"]+)"/g)].map((m) => h.origin + new URL(m[1]!.replace(/&amp;/g, '&')).pathname)
  const pixel = h.origin + new URL(/src="([^"]+\/t\/o\/[^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&')).pathname
  t.equal(clicks.length, 3)
  t.equal(clicks[0], clicks[2], 'a repeated link is one tracked link')
  const results = await Promise.all([
    ...Array.from({ length: 5 }, () => fetch(pixel)),
    ...clicks.flatMap((c) => Array.from({ length: 4 }, () => fetch(c, { redirect: 'manual' }))),
  ])
  t.ok(results.slice(0, 5).every((r) => r.status === 200), 'every pixel request answered')
  const locations = results.slice(5).map((r) => `${r.status} ${r.headers.get('location')}`)
  t.same(locations, [
    ...Array(4).fill('302 https://a.example/one'),
    ...Array(4).fill('302 https://b.example/two?x=1'),
    ...Array(4).fill('302 https://a.example/one'),
  ], 'each tracked link goes to its own address')
  const events = (await outboxOf(h, tenant.id)).filter((e) => e.data.notification_id === n.id)
  t.same(events.map((e) => e.event).sort(), ['message.clicked', 'message.delivered', 'message.opened'], '§3: each fires once per notification')
  const clicked = events.find((e) => e.event === 'message.clicked')!
  t.match(clicked.data, { player_id: p.id, channel: 'email', notification_id: n.id })
})

t.test('tracking tokens: a valid token written with other unused base64url bits, or padded, is an alteration: 404, records nothing', async (t) => {
  // docs/delivery.md "Tracking": "a token of one kind is no good as another, any alteration is a 404".
  const tenant = await emailTenant()
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const { mail, n } = await emailOf(tenant, p.id, address, { subject: 'x', body: '<p><a href="https://a.example/">a</a></p>' })
  const html = mail!.html as string
  const tok = (re: RegExp) => new URL(re.exec(html)![1]!.replace(/&amp;/g, '&')).pathname.split('/').pop()!.replace(/\.gif$/, '')
  const click = tok(/href="([^"]+\/t\/c\/[^"]+)"/)
  const open = tok(/src="([^"]+\/t\/o\/[^"]+)"/)
  const unsub = new URL(unsubscribeUrlOf(mail!)).pathname.split('/').pop()!
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
  // The MAC is 16 bytes: 22 characters whose last one carries 2 bits; flipping its lowest bit decodes the same.
  const otherBits = (token: string) => token.slice(0, -1) + B64[B64.indexOf(token.at(-1)!) ^ 1]
  for (const [name, variant] of [['other unused bits', otherBits], ['padded', (x: string) => `${x}=`]] as const) {
    t.equal((await fetch(`${h.origin}/t/c/${variant(click)}`, { redirect: 'manual' })).status, 404, `click, ${name}`)
    t.equal((await fetch(`${h.origin}/t/o/${variant(open)}.gif`)).status, 404, `open, ${name}`)
    t.equal((await fetch(`${h.origin}/t/u/${variant(unsub)}`, { method: 'POST' })).status, 404, `unsubscribe, ${name}`)
  }
  const row = await must(h.request('GET', `/notifications/${n.id}`, { key: tenant.key }), 200)
  t.same([row.data.opened_at, row.data.clicked_at], [null, null], 'nothing recorded')
  const player = await must(h.request('GET', `/players/${p.id}`, { key: tenant.key }), 200)
  t.equal(consentOf(player.data).email?.granted, true, 'consent not withdrawn')
})

t.test('unsubscribe: racing POSTs withdraw the email consent only, fire one email.unsubscribed webhook with brand_id; email marketing stops, the rest goes on', async (t) => {
  const tenant = await emailTenant()
  await must(h.request('POST', '/webhooks', { key: tenant.key, body: { url: `${webhookReceiver.url}/hooks/${tenant.id}`, events: ['email.unsubscribed'] } }), 201)
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email', 'telegram', 'push'] })
  const { mail } = await emailOf(tenant, p.id, address, { subject: 'News', body: '<p>news</p>' })
  const unsub = unsubscribeUrlOf(mail!)
  const posts = await Promise.all(Array.from({ length: 6 }, () => fetch(unsub, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' })))
  t.same(posts.map((r) => r.status), Array(6).fill(200), 'RFC 8058 one-click: 200, every time')
  const consent = consentOf((await must(h.request('GET', `/players/${p.id}`, { key: tenant.key }), 200)).data)
  t.equal(consent.email?.granted, false, 'email consent withdrawn')
  t.equal(consent.telegram?.granted, true, 'telegram consent untouched')
  t.equal(consent.push?.granted, true, 'push consent untouched')
  const promo = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'email', payload: { subject: 'Promo', body: '<p>p</p>' } } })
  t.match(promo.body, { queued: false, data: { status: 'suppressed', reason: 'unsubscribed' } })
  const inApp = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'in-app promo' } })
  t.equal((await waitForStatus(h, tenant, inApp.notification_id, ['delivered', 'suppressed'])).status, 'delivered', 'in-app marketing still goes')
  const receipt = await emailOf(tenant, p.id, address, { subject: 'Receipt', body: '<p>r</p>' }, 'transactional')
  t.equal(receipt.n.status, 'delivered', 'transactional email still goes')

  const mine = () => webhookBodies.filter((b) => b.event === 'email.unsubscribed' && b.data?.player_id === p.id)
  await untilTrue(() => mine().length >= 1, 10_000)
  await sleep(700)
  t.equal(mine().length, 1, '§3: fires email.unsubscribed once')
  // Spec catalog: player_id, email, channel; contract-engines §2: every data also carries brand_id.
  t.match(mine()[0].data, { player_id: p.id, email: address, channel: 'email', brand_id: tenant.brand.id })
})

t.test('unsubscribe under an opt-out email policy (no consent event ever): later marketing email is suppressed unsubscribed', async (t) => {
  const tenant = await emailTenant()
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { consent_policy: { email: 'opt_out', telegram: 'opt_in', push: 'opt_out', in_app: 'opt_out' } } }), 200)
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address })
  const { n, mail } = await emailOf(tenant, p.id, address, { subject: 'Hello', body: '<p>hi</p>' })
  t.equal(n.status, 'delivered', 'opt-out: sent without a consent event')
  t.equal((await fetch(unsubscribeUrlOf(mail!), { method: 'POST' })).status, 200)
  const next = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'email', payload: { subject: 'Again', body: '<p>again</p>' } } })
  t.match(next.body.data, { status: 'suppressed', reason: 'unsubscribed' })
})

// --- Rendering across channels, and the Bot API's limit ---------------------------------------------------

t.test('rendering: values that look like placeholders stay literal, 0 and false render, escaping per channel, no header break from a subject value', async (t) => {
  const tenant = await emailTenant()
  await must(h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: TOKEN, api_base_url: bot.url } }), 200)
  const address = newAddress()
  const p = await makePlayer(h, tenant, { email: address, consent: ['email', 'telegram'], name: 'Ann' })
  const chatId = `5${process.pid}${++chats}`
  await must(h.request('PUT', `/players/${p.id}/telegram`, { key: tenant.key, body: { chat_id: chatId } }), 200)
  const values = { note: '{{ email }} <i>x</i> & ü $&', zero: 0, no: false }

  // Email: values HTML-escaped in the body; the subject is a header and must not gain a line.
  const { n, mail } = await emailOf(tenant, p.id, address, {
    subject: 'Hi {{ who }}', body: '<p>{{ note }} {{ zero }} {{ no }}</p>', who: 'Ann\r\nBcc: victim@evil.example', ...values,
  })
  t.equal(n.status, 'delivered', `email delivered (${n.error ?? ''})`)
  if (mail) {
    t.match(mail.html, /<p>\{\{ email \}\} &lt;i&gt;x&lt;\/i&gt; &amp; ü \$&amp; 0 false<\/p>/, 'the HTML part: escaped, literal, 0 and false')
    t.notOk(String(mail.html).includes(address), "the player's email is not substituted through a value")
    t.notOk(mail.headerLines.some((l) => l.key === 'bcc'), 'no Bcc header injected')
    t.match(mail.subject, /^Hi Ann/)
    t.notMatch(mail.subject ?? '', /[\r\n]/)
  }

  // Telegram (parse_mode HTML): escaped, subject in bold.
  const tg = await send(h, tenant, { player_id: p.id, channel: 'telegram', payload: { subject: 'A & B <c>', body: 'x {{ note }} {{ zero }}', ...values } })
  t.equal((await waitForStatus(h, tenant, tg.notification_id, ['delivered', 'failed'])).status, 'delivered')
  t.same(botCalls.filter((c) => c.chat_id === chatId).at(-1), { chat_id: chatId, text: '<b>A &amp; B &lt;c&gt;</b>\nx {{ email }} &lt;i&gt;x&lt;/i&gt; &amp; ü $&amp; 0', parse_mode: 'HTML' })

  // In-app: stored as rendered, values as given.
  const ia = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { subject: '{{ note }}', body: '{{ note }} {{ zero }} {{ no }}', ...values } })
  await waitForStatus(h, tenant, ia.notification_id, ['delivered'])
  const item = (await inboxOf(tenant, p.id)).find((i) => i.id === ia.notification_id)
  t.same([item?.subject, item?.body], ['{{ email }} <i>x</i> & ü $&', '{{ email }} <i>x</i> & ü $& 0 false'])

  // A missing variable (in the subject) fails the message before any channel call.
  const before = botCalls.length
  const missing = await send(h, tenant, { player_id: p.id, channel: 'telegram', payload: { subject: 'Code {{ promo_code }}', body: 'use it' } })
  t.match(await waitForStatus(h, tenant, missing.notification_id, ['delivered', 'failed']), { status: 'failed', error: 'missing variable: promo_code' })
  t.equal(botCalls.length, before, 'the bot was not called')
})

t.test('telegram: a text over the Bot API limit is not retried as if transient; what is sent fits', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: TOKEN, api_base_url: bot.url } }), 200)
  const p = await makePlayer(h, tenant, { consent: ['telegram'] })
  const chatId = `6${process.pid}${++chats}`
  await must(h.request('PUT', `/players/${p.id}/telegram`, { key: tenant.key, body: { chat_id: chatId } }), 200)
  const s = await send(h, tenant, { player_id: p.id, channel: 'telegram', payload: { body: 'é'.repeat(5000) } })
  const n = await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])
  const calls = botCalls.filter((c) => c.chat_id === chatId)
  if (n.status === 'delivered') {
    t.ok(calls.every((c) => [...c.text].length <= 4096), 'split or cut to what the Bot API takes')
  } else {
    // docs/delivery.md: only network errors, 5xx and 429 are retried; any other refusal is permanent.
    t.match(n, { status: 'failed', attempts: 1, error: /400.*too long/ })
    t.equal(calls.length, 1, 'one call')
  }
  const ok = await send(h, tenant, { player_id: p.id, channel: 'telegram', payload: { body: 'é'.repeat(4000) } })
  t.equal((await waitForStatus(h, tenant, ok.notification_id, ['delivered', 'failed'])).status, 'delivered', '4000 characters fit')
})

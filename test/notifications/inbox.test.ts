// In-app: stored in the inbox, pushed over the inbox WebSocket (a `ws` client), read (first read = open),
// listed with cursors, tokens checked, tenants isolated.
import t from 'tap'
import WebSocket from 'ws'
import { startHarness } from '../helpers/harness.ts'
import { rawRequest } from '../helpers/raw-http.ts'
import { makePlayer, outboxOf, send, waitForStatus } from './delivery-helpers.ts'

const h = await startHarness(t)

function openSocket(token: string): Promise<{ ws: WebSocket; messages: any[]; next(): Promise<any> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${h.origin.replace('http', 'ws')}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
    const messages: any[] = []
    const waiters: ((m: any) => void)[] = []
    ws.on('message', (raw) => {
      const m = JSON.parse(String(raw))
      const w = waiters.shift()
      if (w) w(m)
      else messages.push(m)
    })
    ws.on('open', () =>
      resolve({ ws, messages, next: () => (messages.length ? Promise.resolve(messages.shift()) : new Promise((r) => waiters.push(r))) }),
    )
    ws.on('unexpected-response', (_req, res) => reject(new Error(`status ${res.statusCode}`)))
    ws.on('error', reject)
  })
}

t.test('an in-app message is delivered to the inbox and pushed to the open socket', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant, { name: 'Ada' })
  const tok = await h.request('POST', `/players/${player.id}/inbox/token`, { key: tenant.key })
  t.equal(tok.status, 201)
  t.ok(Date.parse(tok.body.data.expires_at) > Date.now() + 14 * 60_000)
  const socket = await openSocket(tok.body.data.token)
  t.teardown(() => socket.ws.close())

  const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { subject: 'Hi {{name}}', body: 'Welcome <{{ bonus | a gift }}>' } })
  t.equal(sent.queued, true)
  const pushed = await socket.next()
  t.equal(pushed.type, 'message')
  t.match(pushed.data, { id: sent.notification_id, subject: 'Hi Ada', body: 'Welcome <a gift>', campaign_id: null, read_at: null })

  const n = await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  t.ok(n.delivered_at && n.sent_at)
  t.equal(n.attempts, 1)
  const inbox = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
  t.same(inbox.body.data.map((i: any) => i.id), [sent.notification_id])
  t.same(Object.keys(inbox.body.data[0]).sort(), ['body', 'campaign_id', 'created_at', 'id', 'read_at', 'subject'])

  const read = await h.request('POST', `/players/${player.id}/inbox/${sent.notification_id}/read`, { key: tenant.key })
  t.equal(read.status, 200)
  t.ok(read.body.data.read_at)
  const again = await h.request('POST', `/players/${player.id}/inbox/${sent.notification_id}/read`, { key: tenant.key })
  t.equal(again.body.data.read_at, read.body.data.read_at, 'the first read stays')
  const after = await h.request('GET', `/notifications/${sent.notification_id}`, { key: tenant.key })
  t.ok(after.body.data.opened_at, 'the first read counts as the open')
  const unread = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { unread: true } })
  t.same(unread.body.data, [])

  const events = await outboxOf(h, tenant.id)
  t.same(events.map((e) => e.event), ['message.delivered'], 'no message.opened for in-app')
  t.match(events[0]!.data, { notification_id: sent.notification_id, player_id: player.id, channel: 'in_app' })
})

t.test('inbox paging with cursors, newest first', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant)
  const ids: string[] = []
  for (let i = 0; i < 3; i++) ids.push((await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: `m${i}` } })).notification_id)
  for (const id of ids) await waitForStatus(h, tenant, id, ['delivered'])
  const p1 = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 2 } })
  t.same(p1.body.data.map((i: any) => i.body), ['m2', 'm1'])
  const p2 = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 2, cursor: p1.body.next_cursor } })
  t.same(p2.body.data.map((i: any) => i.body), ['m0'])
  t.equal(p2.body.next_cursor, null)
  const forged = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { cursor: 'x.y' } })
  t.equal(forged.status, 400)
  const list = await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, limit: 2 } })
  t.same(list.body.data.map((n: any) => n.id), [ids[2], ids[1]])
  const rest = await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, limit: 2, cursor: list.body.next_cursor } })
  t.same(rest.body.data.map((n: any) => n.id), [ids[0]])
  const byStatus = await h.request('GET', '/notifications', { key: tenant.key, query: { status: 'delivered', channel: 'in_app' } })
  t.equal(byStatus.body.data.length, 3)
  const bad = await h.request('GET', '/notifications', { key: tenant.key, query: { status: 'sent' } })
  t.equal(bad.status, 400)

  // A cursor is a position in the list it came from only: another player's inbox, another filter, another tenant: 400.
  const other = await makePlayer(h, tenant)
  const elsewhere = await h.request('GET', `/players/${other.id}/inbox`, { key: tenant.key, query: { limit: 2, cursor: p1.body.next_cursor } })
  t.equal(elsewhere.status, 400, "one player's inbox cursor in another's")
  t.equal((await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 2, unread: true, cursor: p1.body.next_cursor } })).status, 400, 'with another filter')
  t.equal((await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, status: 'delivered', limit: 2, cursor: list.body.next_cursor } })).status, 400, 'a list cursor with another filter')
  const stranger = await h.createTenant()
  t.equal((await h.request('GET', '/notifications', { key: stranger.key, query: { player_id: player.id, limit: 2, cursor: list.body.next_cursor } })).status, 400, "another tenant's cursor")
})

t.test('paging never skips rows created in the same millisecond', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant)
  const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'first' } })
  await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  // Four copies of it, 100 µs apart within one millisecond: every page boundary falls inside that millisecond.
  await h.app.ctx.sql`
    insert into notifications (tenant_id, brand_id, player_id, channel, class, status, rendered, delivered_at, created_at, updated_at)
    select tenant_id, brand_id, player_id, channel, class, status, jsonb_build_object('subject', null, 'body', 'copy ' || i), delivered_at,
      date_trunc('milliseconds', now()) + i * interval '100 microseconds', now()
    from notifications, generate_series(1, 4) as i where id = ${sent.notification_id}`
  const seen: string[] = []
  for (let cursor: string | undefined, pages = 0; pages < 10; pages++) {
    const page = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 1, ...(cursor ? { cursor } : {}) } })
    t.equal(page.status, 200)
    seen.push(...page.body.data.map((i: any) => i.body))
    if (!page.body.next_cursor) break
    cursor = page.body.next_cursor
  }
  t.same(seen, ['copy 4', 'copy 3', 'copy 2', 'copy 1', 'first'])
  const listed: string[] = []
  for (let cursor: string | undefined, pages = 0; pages < 10; pages++) {
    const page = await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, limit: 2, ...(cursor ? { cursor } : {}) } })
    listed.push(...page.body.data.map((n: any) => n.id))
    if (!page.body.next_cursor) break
    cursor = page.body.next_cursor
  }
  t.equal(new Set(listed).size, 5, 'the list too: every row once')
})

t.test('GET /notifications lists the resolved brand only', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const inMain = await makePlayer(h, tenant)
  const [row] = await h.app.ctx.sql<{ id: string }[]>`
    insert into players (tenant_id, brand_id, external_id) values (${tenant.id}, ${second.id}, 'in-second') returning id`
  await h.app.ctx.sql`insert into player_profiles (player_id, tenant_id, brand_id) values (${row!.id}, ${tenant.id}, ${second.id})`
  const a = await send(h, tenant, { player_id: inMain.id, channel: 'in_app', payload: { body: 'main' } })
  const b = await send(h, tenant, { player_id: row!.id, channel: 'in_app', payload: { body: 'second' } })
  const ids = async (opts: { headers?: Record<string, string>; query?: Record<string, string> }, key = tenant.key) =>
    (await h.request('GET', '/notifications', { key, ...opts })).body.data.map((n: { id: string }) => n.id)
  t.same(await ids({}), [a.notification_id], 'the default brand')
  t.same(await ids({ headers: { 'x-brand': 'second' } }), [b.notification_id], 'x-brand')
  t.same(await ids({ query: { brand: second.id } }), [b.notification_id], 'brand query')
  const pinned = await tenant.createKey({ brand: second.slug })
  t.same(await ids({ query: { brand: tenant.brand.slug } }, pinned.key), [b.notification_id], 'a pinned key: its brand whatever the hint')
})

t.test('marketing leaves the inbox of a player who self-excludes; transactional messages stay', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant)
  const promo = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'promo' } })
  const receipt = await send(h, tenant, { player_id: player.id, channel: 'in_app', class: 'transactional', payload: { body: 'receipt' } })
  for (const s of [promo, receipt]) await waitForStatus(h, tenant, s.notification_id, ['delivered'])
  const before = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
  t.same(before.body.data.map((i: any) => i.body).sort(), ['promo', 'receipt'])

  const patched = await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { status: 'self_excluded' } })
  t.equal(patched.status, 200)
  const after = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
  t.same(after.body.data.map((i: any) => i.body), ['receipt'])
  t.equal((await h.request('POST', `/players/${player.id}/inbox/${promo.notification_id}/read`, { key: tenant.key })).status, 404, 'nor can it be read')
  t.equal((await h.request('POST', `/players/${player.id}/inbox/${receipt.notification_id}/read`, { key: tenant.key })).status, 200)

  await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { status: 'active' } })
  const back = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
  t.same(back.body.data.map((i: any) => i.body).sort(), ['promo', 'receipt'], 'shown again once active')
})

t.test('socket tokens: forged or foreign are refused; a socket only hears its own player', async (t) => {
  const tenant = await h.createTenant()
  const a = await makePlayer(h, tenant)
  const b = await makePlayer(h, tenant)
  await t.rejects(openSocket('nope'), /401/)
  const tokA = (await h.request('POST', `/players/${a.id}/inbox/token`, { key: tenant.key })).body.data.token
  await t.rejects(openSocket(`${tokA}x`), /401/)
  const socket = await openSocket(tokA)
  t.teardown(() => socket.ws.close())
  const toB = await send(h, tenant, { player_id: b.id, channel: 'in_app', payload: { body: 'for b' } })
  const toA = await send(h, tenant, { player_id: a.id, channel: 'in_app', payload: { body: 'for a' } })
  await waitForStatus(h, tenant, toB.notification_id, ['delivered'])
  const got = await socket.next()
  t.equal(got.data.id, toA.notification_id)
  t.equal(socket.messages.length, 0)
})

t.test('a frame over the size limit closes that socket only; the process and other sockets live on', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant)
  const token = (await h.request('POST', `/players/${player.id}/inbox/token`, { key: tenant.key })).body.data.token
  const other = await openSocket(token)
  t.teardown(() => other.ws.close())
  const rude = await openSocket(token)
  rude.ws.on('error', () => {})
  const closed = new Promise<number>((resolve) => rude.ws.on('close', (code) => resolve(code)))
  rude.ws.send('x'.repeat(5000))
  t.ok(await closed, 'the sender\'s socket is closed')
  t.equal((await h.request('GET', '/health/live')).status, 200, 'the process lives on')
  const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'still here' } })
  t.equal((await other.next()).data.id, sent.notification_id, 'the other socket still hears its player')
})

t.test('tenant isolation on the inbox, notification and contact routes', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant()
  const player = await makePlayer(h, tenant)
  const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'x' } })
  await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  const k = other.key
  t.equal((await h.request('GET', `/notifications/${sent.notification_id}`, { key: k })).status, 404)
  t.same((await h.request('GET', '/notifications', { key: k, query: { player_id: player.id } })).body.data, [])
  t.equal((await h.request('GET', `/players/${player.id}/inbox`, { key: k })).status, 404)
  t.equal((await h.request('POST', `/players/${player.id}/inbox/${sent.notification_id}/read`, { key: k })).status, 404)
  t.equal((await h.request('POST', `/players/${player.id}/inbox/token`, { key: k })).status, 404)
  t.equal((await h.request('PUT', `/players/${player.id}/telegram`, { key: k, body: { chat_id: '1' } })).status, 404)
  t.equal((await h.request('DELETE', `/players/${player.id}/telegram`, { key: k })).status, 404)
  t.equal((await h.request('GET', `/players/${player.id}/push-subscriptions`, { key: k })).status, 404)
  const otherPlayer = await makePlayer(h, other)
  t.equal((await h.request('POST', `/players/${otherPlayer.id}/inbox/${sent.notification_id}/read`, { key: k })).status, 404, "another tenant's message id")
})

t.test('an upgrade request with a target no URL parser takes is a 400, and the server lives on', async (t) => {
  for (const target of ['//example.com:99999/', '//%zz/']) {
    const res = await rawRequest(h.app.port, [`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`], { waitMs: 3000 })
    t.equal(res.statuses[0], 400, target)
  }
  t.equal((await h.request('GET', '/health')).status, 200, 'still serving')
})

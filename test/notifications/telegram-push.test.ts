// Telegram against a local HTTP server speaking the Bot API (sendMessage, 429 retry_after, 403 blocked),
// and Web Push against a local push service that verifies the VAPID JWT (RFC 8292) and decrypts the
// payload with http_ece (RFC 8291); 404/410 remove the subscription, Retry-After is honoured.
import { createECDH, createPublicKey, randomBytes, verify } from 'node:crypto'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import ece from 'http_ece'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { makePlayer, send, waitForStatus } from './delivery-helpers.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', DELIVERY_RETRY_DELAYS: '0,0,0,0' } })

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
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` }
}

// --- Telegram --------------------------------------------------------------------------------------------

const TOKEN = '123456789:AAExampleBotTokenForTests_x'
const botCalls: { path: string; body: any }[] = []
const rateLimited = new Set<string>()
const bot = await listen((req, raw) => {
  const body = JSON.parse(raw.toString())
  botCalls.push({ path: req.url!, body })
  if (req.url !== `/bot${TOKEN}/sendMessage`) return { status: 404, body: JSON.stringify({ ok: false, error_code: 404, description: 'Not Found' }) }
  if (body.chat_id === '403') return { status: 403, body: JSON.stringify({ ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' }) }
  if (body.chat_id === '429' && !rateLimited.has(body.chat_id)) {
    rateLimited.add(body.chat_id)
    return { status: 429, body: JSON.stringify({ ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } }) }
  }
  return { status: 200, body: JSON.stringify({ ok: true, result: { message_id: botCalls.length } }) }
})

async function telegramTenant() {
  const tenant = await h.createTenant()
  const res = await h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: TOKEN, api_base_url: bot.url } })
  if (res.status !== 200) throw new Error(res.text)
  return tenant
}

t.test('telegram: sendMessage with HTML escaping; the token is write-only', async (t) => {
  const tenant = await telegramTenant()
  const read = await h.request('GET', '/settings/channels', { key: tenant.key })
  t.same(read.body.data.telegram.bot_token, '123456789:***')
  t.notMatch(read.text, /AAExample/)
  const player = await makePlayer(h, tenant, { consent: ['telegram'], name: 'Bob & <Co>' })
  t.equal((await h.request('PUT', `/players/${player.id}/telegram`, { key: tenant.key, body: { chat_id: '111' } })).status, 200)
  const sent = await send(h, tenant, { player_id: player.id, channel: 'telegram', payload: { subject: 'News', body: 'Hi {{name}}' } })
  t.equal((await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed'])).status, 'delivered')
  const call = botCalls.find((c) => c.body.chat_id === '111')!
  t.same(call.body, { chat_id: '111', text: '<b>News</b>\nHi Bob &amp; &lt;Co&gt;', parse_mode: 'HTML' })
})

t.test('telegram: 429 waits retry_after and tries again', async (t) => {
  const tenant = await telegramTenant()
  const player = await makePlayer(h, tenant, { consent: ['telegram'] })
  await h.request('PUT', `/players/${player.id}/telegram`, { key: tenant.key, body: { chat_id: '429' } })
  const started = Date.now()
  const sent = await send(h, tenant, { player_id: player.id, channel: 'telegram', payload: { body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed'])
  t.equal(n.status, 'delivered')
  t.equal(n.attempts, 2)
  t.ok(Date.now() - started >= 1000, 'not before retry_after')
})

t.test('telegram: 403 blocked fails and removes the chat id', async (t) => {
  const tenant = await telegramTenant()
  const player = await makePlayer(h, tenant, { consent: ['telegram'] })
  await h.request('PUT', `/players/${player.id}/telegram`, { key: tenant.key, body: { chat_id: '403' } })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'telegram', payload: { body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed'])
  t.match(n, { status: 'failed', attempts: 1, error: /403.*blocked/ })
  const next = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: player.id, channel: 'telegram', payload: { body: 'x' } } })
  t.match(next.body.data, { status: 'suppressed', reason: 'no_address' }, 'the chat id was removed')
  t.equal((await h.request('DELETE', `/players/${player.id}/telegram`, { key: tenant.key })).status, 404)
})

t.test('telegram: a refusal quoting the request path does not put the bot token in the stored error', async (t) => {
  // A proxy in front of the Bot API whose error page repeats the requested path (the token is in it).
  const proxy = await listen((req) => ({ status: 404, headers: { 'content-type': 'text/html' }, body: `<h1>Not Found</h1><p>${req.url} was not found</p>` }))
  const tenant = await h.createTenant()
  t.equal((await h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: TOKEN, api_base_url: proxy.url } })).status, 200)
  const player = await makePlayer(h, tenant, { consent: ['telegram'] })
  await h.request('PUT', `/players/${player.id}/telegram`, { key: tenant.key, body: { chat_id: '222' } })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'telegram', payload: { body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed'])
  t.match(n, { status: 'failed', error: /404: .*\/bot\*\*\*\/sendMessage was not found/ })
  t.notMatch(JSON.stringify(n), /AAExample/, 'not in the API answer')
  const [row] = await h.app.ctx.sql<{ error: string }[]>`select error from notifications where id = ${sent.notification_id as string}`
  t.notMatch(row?.error ?? '', /AAExample/, 'not stored')
})

// --- Web Push --------------------------------------------------------------------------------------------

interface Received { path: string; payload: any; jwt: any }
const received: Received[] = []
const busyOnce = new Set<string>()
/** The browser side of each subscription: its ECDH key pair and auth secret, by endpoint path. */
const browsers = new Map<string, { ecdh: ReturnType<typeof createECDH>; auth: Buffer }>()

function verifyVapid(req: IncomingMessage, origin: string): any {
  const m = /^vapid t=([^,]+),\s*k=(.+)$/.exec(String(req.headers.authorization))
  if (!m) throw new Error('no vapid authorization')
  const [header, claims, signature] = m[1]!.split('.')
  const raw = Buffer.from(m[2]!, 'base64url')
  const key = createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33).toString('base64url') }, format: 'jwk' })
  const ok = verify('sha256', Buffer.from(`${header}.${claims}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature!, 'base64url'))
  if (!ok) throw new Error('bad vapid signature')
  const payload = JSON.parse(Buffer.from(claims!, 'base64url').toString())
  if (payload.aud !== origin || payload.exp * 1000 < Date.now()) throw new Error('bad vapid claims')
  return { ...payload, k: m[2] }
}

const pushService = await listen((req, body) => {
  const path = req.url!
  if (path.endsWith('/gone')) return { status: 410 }
  if (path.endsWith('/busy') && !busyOnce.has(path)) {
    busyOnce.add(path)
    return { status: 429, headers: { 'retry-after': '1' } }
  }
  try {
    const jwt = verifyVapid(req, pushService.url)
    if (req.headers['content-encoding'] !== 'aes128gcm') throw new Error('not aes128gcm')
    const browser = browsers.get(path)!
    const plain = ece.decrypt(body, { version: 'aes128gcm', privateKey: browser.ecdh, authSecret: browser.auth.toString('base64url') })
    received.push({ path, payload: JSON.parse(plain.toString()), jwt })
    return { status: 201 }
  } catch (err) {
    return { status: 400, body: (err as Error).message }
  }
})

function subscription(name: string) {
  const ecdh = createECDH('prime256v1')
  ecdh.generateKeys()
  const auth = randomBytes(16)
  const path = `/push/${randomBytes(4).toString('hex')}/${name}`
  browsers.set(path, { ecdh, auth })
  return { endpoint: pushService.url + path, keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') } }
}

async function pushTenant() {
  const tenant = await h.createTenant()
  const res = await h.request('PUT', '/settings/channels/push', { key: tenant.key, body: { vapid_subject: 'mailto:ops@casino.example' } })
  if (res.status !== 200) throw new Error(res.text)
  return { tenant, publicKey: res.body.data.vapid_public_key as string }
}

t.test('push: VAPID-signed, RFC 8291-encrypted payload with a tracked url; the private key is never shown', async (t) => {
  const { tenant, publicKey } = await pushTenant()
  const read = await h.request('GET', '/settings/channels', { key: tenant.key })
  t.same(Object.keys(read.body.data.push).sort(), ['updated_at', 'vapid_public_key', 'vapid_subject'])
  t.equal(read.body.data.push.vapid_public_key, publicKey)
  const player = await makePlayer(h, tenant)
  const sub = subscription('ok')
  const added = await h.request('POST', `/players/${player.id}/push-subscriptions`, { key: tenant.key, body: sub })
  t.equal(added.status, 201)
  t.same(Object.keys(added.body.data).sort(), ['created_at', 'endpoint', 'id'])
  // Contact points are full-access, reads included (contract-engines §0).
  const readOnly = await tenant.createKey({ scopes: ['read'] })
  t.equal((await h.request('GET', `/players/${player.id}/push-subscriptions`, { key: readOnly.key })).status, 403)
  t.equal((await h.request('GET', `/players/${player.id}/push-subscriptions`, { key: tenant.key })).body.data.length, 1)
  const sent = await send(h, tenant, { player_id: player.id, channel: 'push', payload: { subject: 'Free spins', body: 'For {{name}}', url: 'https://casino.example/spins' } })
  t.equal((await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed'])).status, 'delivered')
  const got = received.find((r) => r.path === new URL(sub.endpoint).pathname)!
  t.match(got.payload, { notification_id: sent.notification_id, title: 'Free spins', body: 'For Ada' })
  t.equal(got.jwt.k, publicKey, 'signed with the brand key')
  t.equal(got.jwt.sub, 'mailto:ops@casino.example')
  const click = await fetch(h.origin + new URL(got.payload.url).pathname, { redirect: 'manual' })
  t.equal(click.status, 302)
  t.equal(click.headers.get('location'), 'https://casino.example/spins')
})

t.test('push: 410 removes the subscription and fails; Retry-After is honoured', async (t) => {
  const { tenant } = await pushTenant()
  const player = await makePlayer(h, tenant)
  const gone = await h.request('POST', `/players/${player.id}/push-subscriptions`, { key: tenant.key, body: subscription('gone') })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'push', payload: { body: 'x' } })
  t.match(await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed']), { status: 'failed', error: /410/ })
  t.same((await h.request('GET', `/players/${player.id}/push-subscriptions`, { key: tenant.key })).body.data, [], `subscription ${gone.body.data.id} removed`)

  const busy = subscription('busy')
  await h.request('POST', `/players/${player.id}/push-subscriptions`, { key: tenant.key, body: busy })
  const started = Date.now()
  const again = await send(h, tenant, { player_id: player.id, channel: 'push', payload: { body: 'y' } })
  const n = await waitForStatus(h, tenant, again.notification_id, ['delivered', 'failed'])
  t.match(n, { status: 'delivered', attempts: 2 })
  t.ok(Date.now() - started >= 1000, 'waited for Retry-After')
})

t.test('push subscriptions: validated, listed, removed', async (t) => {
  const { tenant } = await pushTenant()
  const player = await makePlayer(h, tenant)
  const bad = await h.request('POST', `/players/${player.id}/push-subscriptions`, { key: tenant.key, body: { endpoint: 'not a url', keys: { p256dh: 'A'.repeat(80), auth: 'B'.repeat(20) } } })
  t.equal(bad.status, 400)
  t.same(bad.body.details.errors.map((e: any) => e.field).sort(), ['endpoint', 'keys.auth', 'keys.p256dh'])
  const a = await h.request('POST', `/players/${player.id}/push-subscriptions`, { key: tenant.key, body: subscription('ok') })
  const list = await h.request('GET', `/players/${player.id}/push-subscriptions`, { key: tenant.key })
  t.same(list.body.data.map((s: any) => s.id), [a.body.data.id])
  const other = await h.createTenant()
  t.equal((await h.request('DELETE', `/players/${player.id}/push-subscriptions/${a.body.data.id}`, { key: other.key })).status, 404)
  t.equal((await h.request('DELETE', `/players/${player.id}/push-subscriptions/${a.body.data.id}`, { key: tenant.key })).status, 204)
  t.equal((await h.request('DELETE', `/players/${player.id}/push-subscriptions/${a.body.data.id}`, { key: tenant.key })).status, 404)
})

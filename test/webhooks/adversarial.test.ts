// Adversarial checks of what contract.md ("Webhook endpoint", "Delivery"), contract-engines.md §2, the
// spec's Webhooks section and docs/webhooks.md promise, beyond webhooks.test.ts: status classes, retry
// schedule, headers across retries, the attempt log's limits, redeliver, filters, brand scope, PATCH/DELETE
// with pending deliveries, secrets, validation. Real receivers (node:http), third-party verifiers.
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import * as q from '../../src/webhooks/queries.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { sleep, startReceiver, waitFor, type Received } from './helpers.ts'

const TIMEOUT_MS = 800

async function setup(t: Test, retryDelays: string) {
  const h = await startHarness(t, {
    env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_DELAYS: retryDelays, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), SEGMENT_RECOMPUTE_INTERVAL_MS: '300' },
  })
  const rx = await startReceiver(t)
  let n = 0
  const path = () => `/adv-${++n}`

  async function endpoint(tenant: TestTenant, body: Record<string, unknown>, key = tenant.key) {
    const res = await h.request('POST', '/webhooks', { key, body })
    if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
    return res.body.data as { id: string; secret: string; brand_id: string | null; url: string; events: string[] }
  }
  const deliveries = async (tenant: TestTenant, id: string, query: Record<string, string | number> = {}) =>
    (await h.request('GET', `/webhooks/${id}/deliveries`, { key: tenant.key, query })).body
  const ping = async (tenant: TestTenant, id: string) => {
    const res = await h.request('POST', `/webhooks/${id}/ping`, { key: tenant.key })
    if (res.status !== 202) throw new Error(`ping: ${res.status} ${res.text}`)
    return res.body.data as { id: string }
  }
  const finished = (tenant: TestTenant, id: string, deliveryId: string, timeoutMs = 15_000) =>
    waitFor(`delivery ${deliveryId} finished`, async () => {
      const d = (await deliveries(tenant, id, { limit: 100 })).data.find((x: { id: string }) => x.id === deliveryId)
      return d && d.status !== 'pending' && d
    }, timeoutMs)
  const verifies = async (secret: string, r: Received) => {
    let std = false
    try {
      std = !!new Webhook(secret).verify(r.body, r.headers as Record<string, string>)
    } catch {
      std = false
    }
    return std && (await verifyGithubStyle(secret, r.body, r.headers['x-respin-signature'] as string))
  }
  const isSpecError = (body: any) => typeof body?.error === 'string' && typeof body?.code === 'string'

  return { h, rx, path, endpoint, deliveries, ping, finished, verifies, isSpecError }
}

// Retry delays 0,2,1,1 s: the second delay is distinguishable.
t.test('webhooks, adversarial', async (t) => {
  const { h, rx, path, endpoint, deliveries, ping, finished, verifies, isSpecError } = await setup(t, '0,2,1,1')

  t.test('attempt log: response_body is the first 1 KB as answered (multi-byte, NUL, large bodies)', async (t) => {
    const tenant = await h.createTenant()
    const [pUtf, pNul, pBig] = [path(), path(), path()]
    const utf = 'x' + 'é'.repeat(600) // the 1024th byte falls inside a two-byte character
    rx.on(pUtf, (_r, res) => { res.statusCode = 200; res.setHeader('content-type', 'text/plain; charset=utf-8'); res.end(utf) })
    rx.on(pNul, (_r, res) => { res.statusCode = 200; res.end('ok\u0000done') })
    rx.on(pBig, (_r, res) => { res.statusCode = 200; res.end('y'.repeat(200_000)) })
    const eUtf = await endpoint(tenant, { url: rx.url(pUtf), events: ['campaign.created'] })
    const eNul = await endpoint(tenant, { url: rx.url(pNul), events: ['campaign.created'] })
    const eBig = await endpoint(tenant, { url: rx.url(pBig), events: ['campaign.created'] })
    const [dUtf, dNul, dBig] = [await ping(tenant, eUtf.id), await ping(tenant, eNul.id), await ping(tenant, eBig.id)]

    const big = await finished(tenant, eBig.id, dBig.id)
    t.equal(big.status, 'successful', 'a 2xx with a large body is successful')
    t.equal(big.attempts[0].response_body, 'y'.repeat(1024))

    const u = await finished(tenant, eUtf.id, dUtf.id)
    t.equal(u.status, 'successful')
    const body = u.attempts[0].response_body as string
    t.ok(Buffer.byteLength(body) <= 1024, `at most 1 KB (${Buffer.byteLength(body)} bytes)`)
    t.notOk(body.includes('\uFFFD'), 'no replacement character: only what the receiver answered')
    t.ok(utf.startsWith(body.replace(/\uFFFD$/, '')), 'a prefix of the answer')

    // A receiver that answers a NUL byte: PostgreSQL jsonb cannot hold \u0000. The attempt must still be
    // recorded (the delivery is successful), not lost with its outcome.
    const nul = await waitFor('NUL delivery recorded', async () => {
      const x = (await deliveries(tenant, eNul.id)).data.find((y: { id: string }) => y.id === dNul.id)
      return x && x.attempt_count > 0 && x
    }, 3000).catch(() => undefined)
    if (!nul) {
      const [row] = await h.app.ctx.sql<{ status: string; attempt_count: number; lease_owner: string | null }[]>`
        select status, attempt_count, lease_owner from webhook_deliveries where id = ${dNul.id}`
      t.comment(`NUL delivery after 3 s: ${JSON.stringify(row)}; receiver saw ${rx.at(pNul).length} request(s)`)
    }
    t.ok(nul, 'the attempt answered with a NUL byte is logged')
    if (nul) {
      t.equal(nul.status, 'successful')
      t.equal(rx.at(pNul).length, 1, 'sent once')
    }
  })

  t.test('retries follow WEBHOOK_RETRY_DELAYS per attempt; webhook-id and body stable, timestamp per attempt, signatures valid', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    rx.on(p, (_r, res) => { res.statusCode = 503; res.end('busy') })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['campaign.created'] })
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'retry-me', type: 'one_shot', channels: ['email'] } })
    const log = await waitFor('3 attempts', async () => {
      const x = (await deliveries(tenant, e.id)).data[0]
      return x?.attempt_count >= 3 && x
    }, 20_000)
    const got = rx.at(p).slice(0, 3)
    t.equal(got.length, 3)
    t.equal(log.status, 'pending', 'attempts left: still pending')
    t.ok(log.next_attempt_at, 'with its next attempt time')
    t.equal(new Set(got.map((r) => r.headers['webhook-id'])).size, 1, 'webhook-id the same on every retry')
    t.equal(got[0]!.headers['webhook-id'], log.id, 'webhook-id is the delivery id')
    t.equal(new Set(got.map((r) => r.body)).size, 1, 'identical body on every retry')
    t.comment(`attempts: ${JSON.stringify(log.attempts.map((a: any, i: number) => ({ at: a.at, ms: a.duration_ms, rx: new Date(got[i]!.at).toISOString(), ts: got[i]!.headers['webhook-timestamp'] })))}`)
    for (const [i, r] of got.entries()) {
      t.ok(await verifies(e.secret, r), 'each attempt verifies with both schemes')
      const ts = Number(r.headers['webhook-timestamp'])
      t.equal(ts, Math.floor(Date.parse(log.attempts[i].at) / 1000), `webhook-timestamp is attempt ${i + 1}'s time in Unix seconds`)
      t.ok(r.at / 1000 - ts < 3 + log.attempts[i].duration_ms / 1000, 'and the request was sent then')
      t.equal(r.headers['x-respin-event'], 'campaign.created')
    }
    // 0,2 s (±10 %): the second delay before attempt 3, never sooner. Later by at most the work loop's
    // re-look at a failing endpoint (LIMITED_IDLE_MS, 2 s) plus polling: negligible against 60 s+ delays.
    const gaps = [1, 2].map((i) => Date.parse(log.attempts[i].at) - Date.parse(log.attempts[i - 1].at))
    t.ok(gaps[1]! >= 1800, `gap before attempt 3 at least ~2 s (${gaps})`)
    t.ok(gaps.every((g, i) => g <= [0, 2200][i]! + 2600), `none much later than its delay (${gaps})`)
    t.not(got[2]!.headers['webhook-timestamp'], got[0]!.headers['webhook-timestamp'], 'timestamp changes between attempts')
  })

  t.test('payload shapes of catalog events: the fields the spec and contract name', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    const of = (name: string) => rx.at(p).filter((r) => r.json?.event === name).map((r) => r.json)
    const player = (await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'shape-1' } })).body.data
    await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { status: 'suspended' } })
    const campaign = (await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'shape', type: 'one_shot', channels: ['email'] } })).body.data
    const segment = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 'all', type: 'dynamic', rules: {} } })).body.data
    await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'shape-ftd', event_type: 'deposit', event_id: `ftd-${Date.now()}`, payload: { amount: 5, currency: 'EUR' } } })
    await waitFor('events', () => ['player.created', 'player.updated', 'player.status_changed', 'campaign.created', 'segment.recomputed', 'player.converted'].every((x) => of(x).length), 15_000)
    for (const r of rx.at(p)) {
      t.same(Object.keys(r.json).sort(), ['created_at', 'data', 'event'], `${r.json.event}: body keys`)
      t.ok(!Number.isNaN(Date.parse(r.json.created_at)), 'created_at a date-time')
      t.equal(r.json.data.brand_id, tenant.brand.id, `${r.json.event}: brand_id`)
      t.equal(r.headers['content-type'], 'application/json')
      t.match(r.headers['user-agent'], /^Respin-Webhooks\//)
    }
    t.match(of('player.created').find((x) => x.data.external_id === 'shape-1').data, { player_id: player.id, external_id: 'shape-1' })
    t.match(of('player.status_changed')[0].data, { player_id: player.id, status: 'suspended' })
    t.match(of('player.updated')[0].data, { player_id: player.id })
    t.match(of('campaign.created')[0].data, { campaign_id: campaign.id })
    t.match(of('segment.recomputed')[0].data, { segment_id: segment.id, player_count: Number })
    const conv = of('player.converted')[0].data
    t.match(conv, { player_id: String, external_id: 'shape-ftd' })
    t.equal(typeof conv.player_id, 'string')
    t.not(conv.player_id, 'shape-ftd', 'player_id is the internal id')
  })

  t.test('subscription filters: exact types, "*", a type added later and removed; pings only to their endpoint', async (t) => {
    const tenant = await h.createTenant()
    const [pExact, pAll] = [path(), path()]
    const exact = await endpoint(tenant, { url: rx.url(pExact), events: ['campaign.created'] })
    const all = await endpoint(tenant, { url: rx.url(pAll), events: ['*'] })
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'f-1' } })
    await ping(tenant, all.id)
    await waitFor('all got both', () => rx.at(pAll).length >= 2)
    await sleep(300)
    t.equal(rx.at(pExact).length, 0, 'exact: neither the player event nor another endpoint\'s ping')
    // Added later.
    const patched = await h.request('PATCH', `/webhooks/${exact.id}`, { key: tenant.key, body: { events: ['campaign.created', 'player.created'] } })
    t.same(patched.body.data.events, ['campaign.created', 'player.created'])
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'f-2' } })
    await waitFor('added type delivered', () => rx.at(pExact).some((r) => r.json.data.external_id === 'f-2'))
    // Removed again.
    await h.request('PATCH', `/webhooks/${exact.id}`, { key: tenant.key, body: { events: ['campaign.created'] } })
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'f-3' } })
    await waitFor('all got f-3', () => rx.at(pAll).some((r) => r.json.data.external_id === 'f-3'))
    await sleep(300)
    t.notOk(rx.at(pExact).some((r) => r.json.data.external_id === 'f-3'), 'removed type no longer delivered')
    t.notOk(rx.at(pExact).some((r) => r.json.data.external_id === 'f-1'), 'not delivered retroactively')
    for (const events of [['webhook.ping'], ['*', '*'], 'player.created', [1], ['Player.Created']]) {
      const res = await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(), events } })
      t.equal(res.status, 400, `events ${JSON.stringify(events)}`)
      t.ok(isSpecError(res.body))
    }
  })

  t.test('brand scope: pinned keys, brand hints, brand-scoped ping, unknown brand', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = (await tenant.createKey({ brand: second.id })).key
    const wide = await endpoint(tenant, { url: rx.url(path()), events: ['*'] })
    // A pinned key ignores a body brand / x-brand naming another brand.
    const viaBody = await h.request('POST', '/webhooks', { key: pinned, body: { url: rx.url(path()), events: ['*'], brand: tenant.brand.slug } })
    t.equal(viaBody.status, 201)
    t.equal(viaBody.body.data.brand_id, second.id, 'pinned key: body brand ignored')
    const viaHeader = await h.request('POST', '/webhooks', { key: pinned, headers: { 'x-brand': tenant.brand.id }, body: { url: rx.url(path()), events: ['*'] } })
    t.equal(viaHeader.body.data.brand_id, second.id, 'pinned key: x-brand ignored')
    // The tenant-wide endpoint is not the pinned key's.
    for (const [method, sub] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['GET', '/deliveries'], ['POST', '/ping']] as const) {
      const res = await h.request(method, `/webhooks/${wide.id}${sub}`, { key: pinned, body: method === 'PATCH' ? { active: false } : undefined })
      t.equal(res.status, 404, `pinned key ${method} ${sub} on a tenant-wide endpoint`)
    }
    t.equal((await h.request('GET', `/webhooks/${wide.id}`, { key: tenant.key })).body.data.active, true, 'untouched')
    const unknown = await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(), events: ['*'], brand: 'no-such-brand' } })
    t.equal(unknown.status, 400)
    t.equal(unknown.body.code, 'BAD_REQUEST')
    // A brand-scoped ping carries its brand.
    const pp = path()
    const scoped = await endpoint(tenant, { url: rx.url(pp), events: ['campaign.created'], brand: second.slug })
    await ping(tenant, scoped.id)
    const got = await waitFor('scoped ping', () => rx.at(pp)[0])
    t.same(got.json.data, { endpoint_id: scoped.id, brand_id: second.id })
    // A brand-scoped endpoint gets nothing of the default brand.
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'main-brand', type: 'one_shot', channels: ['email'] } })
    await h.request('POST', '/campaigns', { key: tenant.key, headers: { 'x-brand': 'second' }, body: { name: 'second-brand', type: 'one_shot', channels: ['email'] } })
    await waitFor('second brand campaign', () => rx.at(pp).some((r) => r.json.event === 'campaign.created'))
    await sleep(400)
    t.same(rx.at(pp).filter((r) => r.json.event === 'campaign.created').map((r) => r.json.data.name), ['second-brand'])
  })

  t.test('PATCH url while a delivery is pending: the next retry goes to the new URL, same webhook-id', async (t) => {
    const tenant = await h.createTenant()
    const [pOld, pNew] = [path(), path()]
    rx.on(pOld, (_r, res) => { res.statusCode = 500; res.end() })
    const e = await endpoint(tenant, { url: rx.url(pOld), events: ['campaign.created'] })
    const d = await ping(tenant, e.id)
    await waitFor('first attempt failed', () => rx.at(pOld).length >= 1)
    const patched = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { url: rx.url(pNew) } })
    t.equal(patched.status, 200)
    const atPatch = rx.at(pOld).length
    const moved = await waitFor('retry at the new URL', () => rx.at(pNew)[0], 8000)
    t.equal(moved.headers['webhook-id'], d.id)
    t.ok(await verifies(e.secret, moved))
    t.ok(rx.at(pOld).length <= atPatch + 1, 'at most an in-flight attempt still went to the old URL')
    const log = await finished(tenant, e.id, d.id)
    t.equal(log.status, 'successful')
    // URL validation on PATCH (spec error shape, naming the field, never 500).
    for (const url of ['ftp://example.com/x', 'not a url', '', 'https://', 42, null]) {
      const res = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { url } })
      t.equal(res.status, 400, `PATCH url ${JSON.stringify(url)}`)
      t.ok(isSpecError(res.body))
    }
    t.equal((await h.request('GET', `/webhooks/${e.id}`, { key: tenant.key })).body.data.url, rx.url(pNew), 'unchanged by refused PATCHes')
  })

  t.test('DELETE with pending deliveries: no further attempts, log and redeliver gone', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    rx.on(p, (_r, res) => { res.statusCode = 500; res.end() })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['campaign.created'] })
    const d = await ping(tenant, e.id)
    await waitFor('first attempt', () => rx.at(p).length >= 1)
    t.equal((await h.request('DELETE', `/webhooks/${e.id}`, { key: tenant.key })).status, 200)
    const atDelete = rx.at(p).length
    await sleep(3500)
    t.ok(rx.at(p).length <= atDelete + 1, `no retries after the delete (${atDelete} -> ${rx.at(p).length})`)
    t.equal((await h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key })).status, 404)
    t.equal((await h.request('POST', `/webhooks/${e.id}/deliveries/${d.id}/redeliver`, { key: tenant.key })).status, 404)
    t.equal((await h.request('DELETE', `/webhooks/${e.id}`, { key: tenant.key })).status, 404, 'second DELETE')
    const [left] = await h.app.ctx.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where endpoint_id = ${e.id}`
    t.equal(left!.n, 0, 'its deliveries went with it')
  })

  t.test('PATCH active:false holds pending deliveries and takes no new ones; active:true resumes at once', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    let fail = true
    rx.on(p, (_r, res) => { res.statusCode = fail ? 500 : 200; res.end() })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['campaign.created'] })
    const d = await ping(tenant, e.id)
    await waitFor('first attempt', () => rx.at(p).length >= 1)
    t.equal((await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { active: false } })).body.data.active, false)
    const before = rx.at(p).length
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'while-off', type: 'one_shot', channels: ['email'] } })
    await sleep(2500)
    t.ok(rx.at(p).length <= before + 1, 'no attempts while inactive')
    t.equal((await deliveries(tenant, e.id, { event: 'campaign.created' })).data.length, 0, 'no new delivery while inactive')
    fail = false
    t.equal((await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { active: true } })).body.data.active, true)
    const log = await finished(tenant, e.id, d.id, 5000)
    t.equal(log.status, 'successful', 'the held delivery went out after resume')
  })

  t.test('secret: shown at create and rotate only; rotate_secret false rotates nothing', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['campaign.created'] })
    const noRotate = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: false, events: ['campaign.created', 'player.created'] } })
    t.equal(noRotate.status, 200)
    t.notOk('secret' in noRotate.body.data)
    await sleep(1100)
    await ping(tenant, e.id)
    const first = await waitFor('ping', () => rx.at(p)[0])
    t.ok(await verifies(e.secret, first), 'still the original secret')
    t.equal((first.headers['webhook-signature'] as string).split(' ').length, 1, 'one signature: nothing rotated')
    const rotated = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: true } })
    const secret = rotated.body.data.secret as string
    t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
    const reads = [
      (await h.request('GET', `/webhooks/${e.id}`, { key: tenant.key })).text,
      (await h.request('GET', '/webhooks', { key: tenant.key })).text,
      (await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { active: true } })).text,
      (await h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key })).text,
      (await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })).text,
    ]
    for (const text of reads) {
      t.notOk(text.includes(secret.slice(6)), 'the new secret never again')
      t.notOk(text.includes(e.secret.slice(6)), 'nor the old one')
      t.notOk(/"secret"/.test(text))
    }
    const after = await waitFor('ping after rotation', () => rx.at(p)[1])
    t.ok(await verifies(secret, after), 'the new secret signs')
  })

  t.test('validation: spec error shape, never 500', async (t) => {
    const tenant = await h.createTenant()
    const e = await endpoint(tenant, { url: rx.url(path()), events: ['*'] })
    const cases: Array<[string, string, Record<string, unknown>]> = [
      ['POST', '/webhooks', { rawBody: '{not json', headers: { 'content-type': 'application/json' } }],
      ['POST', '/webhooks', { body: {} }],
      ['POST', '/webhooks', { body: { url: rx.url() } }],
      ['POST', '/webhooks', { body: { events: ['*'] } }],
      ['POST', '/webhooks', { body: { url: rx.url(), events: ['*'], brand: '' } }],
      ['POST', '/webhooks', { body: { url: `https://example.com/${'a'.repeat(3000)}`, events: ['*'] } }],
      ['POST', '/webhooks', { body: { url: rx.url(), events: Array.from({ length: 101 }, () => '*') } }],
      ['POST', '/webhooks', { body: [] }],
      ['GET', '/webhooks/not-a-uuid', {}],
      ['PATCH', `/webhooks/${e.id}`, { body: { active: 'yes' } }],
      ['PATCH', `/webhooks/${e.id}`, { body: { events: [] } }],
      ['PATCH', `/webhooks/${e.id}`, { body: { rotate_secret: 'true' } }],
      ['PATCH', `/webhooks/${e.id}`, { rawBody: 'null', headers: { 'content-type': 'application/json' } }],
      ['GET', `/webhooks/${e.id}/deliveries`, { query: { limit: 0 } }],
      ['GET', `/webhooks/${e.id}/deliveries`, { query: { limit: 'abc' } }],
      ['GET', `/webhooks/${e.id}/deliveries`, { query: { limit: 1.5 } }],
      ['GET', `/webhooks/${e.id}/deliveries`, { query: { cursor: 'eyJ4IjoxfQ' } }],
      ['GET', '/webhooks/not-a-uuid/deliveries', {}],
      ['POST', '/webhooks/not-a-uuid/ping', {}],
    ]
    for (const [method, p, opts] of cases) {
      const res = await h.request(method, p, { key: tenant.key, ...opts })
      t.ok(res.status === 400 || (res.status === 404 && p.includes('not-a-uuid')), `${method} ${p} ${JSON.stringify(opts).slice(0, 80)}: ${res.status}`)
      t.ok(isSpecError(res.body), `error shape: ${res.text.slice(0, 120)}`)
    }
  })

  t.test('deliveries list: default limit 20, pending filter, cursor of another endpoint refused', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    const e2 = await endpoint(tenant, { url: rx.url(path()), events: ['campaign.created'] })
    await h.app.ctx.sql`
      insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, completed_at, created_at)
      select ${tenant.id}, ${e.id}, 'webhook.ping', '{}', 'successful', now(), now() - i * interval '1 second'
      from generate_series(1, 25) as i`
    const page = await deliveries(tenant, e.id)
    t.equal(page.data.length, 20, 'default limit 20')
    t.type(page.next_cursor, 'string')
    const createdAts = page.data.map((d: { created_at: string }) => Date.parse(d.created_at))
    t.same(createdAts, [...createdAts].sort((a, b) => b - a), 'newest first')
    t.same(Object.keys(page.data[0]).sort(), ['attempt_count', 'attempts', 'completed_at', 'created_at', 'endpoint_id', 'event', 'id', 'next_attempt_at', 'redelivery_of', 'status'])
    const rest = await deliveries(tenant, e.id, { cursor: page.next_cursor })
    t.equal(rest.data.length, 5)
    t.equal(rest.next_cursor, null)
    const foreign = await h.request('GET', `/webhooks/${e2.id}/deliveries`, { key: tenant.key, query: { cursor: page.next_cursor } })
    t.equal(foreign.status, 400, 'a cursor of another endpoint')
    // A pending delivery: status filter and next_attempt_at.
    rx.on('/hang-adv', () => {})
    const hang = await endpoint(tenant, { url: rx.url('/hang-adv'), events: ['campaign.created'] })
    const d = await ping(tenant, hang.id)
    const pending = (await deliveries(tenant, hang.id, { status: 'pending' })).data
    t.same(pending.map((x: { id: string }) => x.id), [d.id])
    t.ok(pending[0].next_attempt_at, 'pending: next_attempt_at set')
    t.same((await deliveries(tenant, hang.id, { status: 'successful' })).data, [])
  })

  t.test('retention: pending deliveries are never pruned, however old; old failed ones are', async (t) => {
    const tenant = await h.createTenant()
    rx.on('/hang-ret', () => {})
    const e = await endpoint(tenant, { url: rx.url('/hang-ret'), events: ['campaign.created'] })
    const sql = h.app.ctx.sql
    const [oldPending] = await sql<{ id: string }[]>`
      insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, created_at, run_at)
      values (${tenant.id}, ${e.id}, 'webhook.ping', '{}', 'pending', now() - interval '60 days', now() + interval '1 hour') returning id`
    const [oldFailed] = await sql<{ id: string }[]>`
      insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, attempt_count, created_at, completed_at)
      values (${tenant.id}, ${e.id}, 'webhook.ping', '{}', 'failed', 5, now() - interval '60 days', now() - interval '31 days') returning id`
    const [recentFailed] = await sql<{ id: string }[]>`
      insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, attempt_count, created_at, completed_at)
      values (${tenant.id}, ${e.id}, 'webhook.ping', '{}', 'failed', 5, now() - interval '60 days', now() - interval '29 days') returning id`
    await q.prune(sql, 30, 100_000)
    const ids = (await sql<{ id: string }[]>`select id from webhook_deliveries where endpoint_id = ${e.id}`).map((r) => r.id)
    t.ok(ids.includes(oldPending!.id), 'pending stays')
    t.notOk(ids.includes(oldFailed!.id), 'completed over 30 days ago: pruned')
    t.ok(ids.includes(recentFailed!.id), 'completed 29 days ago: kept')
  })
})

// Retries at once (0,0,0,0): the status classes and redeliver of a failed delivery run to the end fast.
t.test('webhooks, adversarial, immediate retries', async (t) => {
  const { h, rx, path, endpoint, deliveries, ping, finished, verifies, isSpecError } = await setup(t, '0,0,0,0')

  const statusCases = (title: string, cases: Array<[string, (r: Received, res: any) => void, 'successful' | 'failed']>) => t.test(title, async (t) => {
    const tenant = await h.createTenant()
    const made = []
    for (const [name, respond, expected] of cases) {
      const p = path()
      rx.on(p, respond)
      const e = await endpoint(tenant, { url: rx.url(p), events: ['campaign.created'] })
      made.push({ name, p, e, expected })
    }
    const d = await Promise.all(made.map(async (m) => ({ ...m, d: await ping(tenant, m.e.id) })))
    for (const m of d) {
      const log = await finished(tenant, m.e.id, m.d.id, 20_000)
      t.equal(log.status, m.expected, `${m.name}: ${m.expected}`)
      t.equal(log.next_attempt_at, null, `${m.name}: no next attempt once final`)
      t.ok(log.completed_at, `${m.name}: completed_at set`)
      if (m.expected === 'successful') {
        t.equal(log.attempt_count, 1, `${m.name}: one attempt`)
        t.equal(log.attempts[0].error, null)
      } else {
        t.equal(log.attempt_count, 5, `${m.name}: 5 attempts`)
        t.equal(log.attempts.length, 5)
        t.same(log.attempts.map((a: { n: number }) => a.n), [1, 2, 3, 4, 5], `${m.name}: attempts numbered`)
        t.ok(log.attempts.every((a: { error: string | null }) => typeof a.error === 'string' && a.error.length > 0), `${m.name}: each attempt has an error`)
        if (m.name === 'reset') t.ok(log.attempts.every((a: { response_code: number | null }) => a.response_code === null), 'reset: no response code')
        else t.ok(log.attempts.every((a: { response_code: number }) => a.response_code === Number(m.name)), `${m.name}: response code logged`)
        t.equal(rx.at(m.p).length, 5, `${m.name}: the receiver saw 5 requests`)
      }
    }
    t.equal(rx.at('/never').length, 0, 'no redirect followed')
    await sleep(1000)
    for (const m of d) if (m.expected === 'failed') t.equal(rx.at(m.p).length, 5, `${m.name}: no 6th attempt`)
    for (const m of d) if (m.expected === 'failed') t.equal(new Set(rx.at(m.p).map((r) => r.headers['webhook-id'])).size, 1, `${m.name}: one webhook-id over 5 attempts`)
  })
  statusCases('any 2xx is successful', [
    ['201', (_r, res) => { res.statusCode = 201; res.end('created') }, 'successful'],
    ['204', (_r, res) => { res.statusCode = 204; res.end() }, 'successful'],
    ['299', (_r, res) => { res.statusCode = 299; res.end('odd') }, 'successful'],
  ])
  statusCases('3xx, 4xx, 5xx and a connection reset are failed attempts, 5 in all', [
    ['301', (_r, res) => { res.writeHead(301, { location: rx.url('/never') }); res.end() }, 'failed'],
    ['304', (_r, res) => { res.statusCode = 304; res.end() }, 'failed'],
    ['308', (_r, res) => { res.writeHead(308, { location: rx.url('/never') }); res.end() }, 'failed'],
    ['400', (_r, res) => { res.statusCode = 400; res.end('bad') }, 'failed'],
    ['410', (_r, res) => { res.statusCode = 410; res.end('gone') }, 'failed'],
    ['429', (_r, res) => { res.writeHead(429, { 'retry-after': '1' }); res.end('slow down') }, 'failed'],
    ['500', (_r, res) => { res.statusCode = 500; res.end('boom') }, 'failed'],
    ['reset', (_r, res) => { res.socket?.destroy() }, 'failed'],
  ])

  t.test('redeliver a successful and a failed delivery: new delivery, identical body, new webhook-id, verifiable', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    let fail = true
    rx.on(p, (_r, res) => { res.statusCode = fail ? 500 : 200; res.end(fail ? 'no' : 'yes') })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    const other = await endpoint(tenant, { url: rx.url(path()), events: ['player.created'] })
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'redeliver-1' } })
    const failed = await waitFor('failed', async () => {
      const x = (await deliveries(tenant, e.id)).data[0]
      return x?.status === 'failed' && x
    }, 20_000)
    fail = false
    const original = rx.at(p)[0]!
    const again = await h.request('POST', `/webhooks/${e.id}/deliveries/${failed.id}/redeliver`, { key: tenant.key })
    t.equal(again.status, 202)
    t.match(again.body.data, { event: 'player.created', status: 'pending', attempt_count: 0, redelivery_of: failed.id, endpoint_id: e.id })
    const r1 = await waitFor('redelivery of the failed', () => rx.at(p).find((r) => r.headers['webhook-id'] === again.body.data.id))
    t.equal(r1.body, original.body, 'identical body, created_at included')
    t.ok(await verifies(e.secret, r1))
    const ok = await finished(tenant, e.id, again.body.data.id)
    t.equal(ok.status, 'successful')
    const stillFailed = (await deliveries(tenant, e.id, { limit: 100 })).data.find((x: { id: string }) => x.id === failed.id)
    t.equal(stillFailed.status, 'failed', 'the original keeps its outcome')
    t.equal(stillFailed.attempt_count, 5)

    // Redeliver the successful one.
    const twice = await h.request('POST', `/webhooks/${e.id}/deliveries/${ok.id}/redeliver`, { key: tenant.key })
    t.equal(twice.status, 202)
    t.equal(twice.body.data.redelivery_of, ok.id)
    const r2 = await waitFor('redelivery of the successful', () => rx.at(p).find((r) => r.headers['webhook-id'] === twice.body.data.id))
    t.equal(r2.body, original.body)
    t.ok(await verifies(e.secret, r2))

    // Another endpoint's delivery through this endpoint; bad ids.
    const otherLog = await waitFor('other delivered', async () => (await deliveries(tenant, other.id)).data[0])
    t.equal((await h.request('POST', `/webhooks/${e.id}/deliveries/${otherLog.id}/redeliver`, { key: tenant.key })).status, 404)
    const badId = await h.request('POST', `/webhooks/${e.id}/deliveries/not-a-uuid/redeliver`, { key: tenant.key })
    t.ok(badId.status === 400 || badId.status === 404, `bad delivery id: ${badId.status}`)
    t.ok(isSpecError(badId.body), 'spec error shape')
    const stranger = await h.createTenant()
    t.equal((await h.request('POST', `/webhooks/${e.id}/deliveries/${ok.id}/redeliver`, { key: stranger.key })).status, 404, 'across tenants')
  })
})

// Outbound webhooks end to end: the real server, a real receiver on 127.0.0.1 (WEBHOOK_ALLOW_PRIVATE),
// signatures checked by third-party libraries, catalog events from their real causes.
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods'
import { Webhook } from 'standardwebhooks'
import t from 'tap'
import { fanOut, FANOUT_MIN } from '../../src/webhooks/dispatcher.ts'
import * as q from '../../src/webhooks/queries.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { sleep, startReceiver, waitFor } from './helpers.ts'

const TIMEOUT_MS = 600

t.test('outbound webhooks', async (t) => {
  const h = await startHarness(t, {
    env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_DELAYS: '1,1,1,1', WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), SEGMENT_RECOMPUTE_INTERVAL_MS: '300' },
  })
  const rx = await startReceiver(t)
  let n = 0
  const path = () => `/hook-${++n}`

  async function endpoint(tenant: TestTenant, body: Record<string, unknown>) {
    const res = await h.request('POST', '/webhooks', { key: tenant.key, body })
    if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
    return res.body.data as { id: string; secret: string; brand_id: string | null; url: string }
  }
  const deliveries = async (tenant: TestTenant, id: string, query: Record<string, string | number> = {}) =>
    (await h.request('GET', `/webhooks/${id}/deliveries`, { key: tenant.key, query })).body
  const DAY_S = 24 * 3600
  /** Seconds until a rotation's previous secret stops signing, by the database's clock. */
  const overlapLeft = async (id: string) => {
    const [row] = await h.app.ctx.sql<{ left: number | null }[]>`
      select extract(epoch from previous_secret_until - now())::float8 as left from webhook_endpoints where id = ${id}`
    return row?.left ?? Number.NaN
  }

  t.test('create, get, list, PATCH, DELETE; secret once and sealed; scopes; tenant isolation', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant()
    const e = await endpoint(tenant, { url: rx.url(path()), events: ['player.created'] })
    t.match(e.secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
    t.equal(Buffer.from(e.secret.slice(6), 'base64').length, 32)
    t.equal(e.brand_id, null, 'no brand hint: tenant-wide')
    const got = await h.request('GET', `/webhooks/${e.id}`, { key: tenant.key })
    t.equal(got.status, 200)
    t.notOk('secret' in got.body.data, 'the secret is shown once')
    t.same(Object.keys(got.body.data).sort(), ['active', 'brand_id', 'created_at', 'events', 'id', 'updated_at', 'url'])
    const [row] = await h.app.ctx.sql<{ secret_sealed: string }[]>`select secret_sealed from webhook_endpoints where id = ${e.id}`
    t.notOk(row!.secret_sealed.includes(e.secret.slice(6, 20)), 'not stored in clear')
    t.equal(h.app.ctx.secretBox.open(row!.secret_sealed), e.secret)
    const list = await h.request('GET', '/webhooks', { key: tenant.key })
    t.same(list.body.data.map((x: { id: string }) => x.id), [e.id])

    // Reads too need full access: the spec's webhook section "requires the write scope" as a whole.
    const readKey = (await tenant.createKey({ scopes: ['read'] })).key
    for (const path of ['/webhooks', `/webhooks/${e.id}`, `/webhooks/${e.id}/deliveries`]) {
      t.equal((await h.request('GET', path, { key: readKey })).body.code, 'FORBIDDEN', `GET ${path} with a read key`)
    }
    t.equal((await h.request('POST', '/webhooks', { key: readKey, body: { url: rx.url(), events: ['player.created'] } })).body.code, 'FORBIDDEN')
    t.equal((await h.request('PATCH', `/webhooks/${e.id}`, { key: readKey, body: { active: false } })).status, 403)
    t.equal((await h.request('POST', `/webhooks/${e.id}/ping`, { key: readKey })).status, 403)

    for (const [method, p] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['GET', '/deliveries'], ['POST', '/ping']] as const) {
      const res = await h.request(method, `/webhooks/${e.id}${p}`, { key: other.key, body: method === 'PATCH' ? { active: false } : undefined })
      t.equal(res.status, 404, `${method} ${p} across tenants`)
    }
    t.same((await h.request('GET', '/webhooks', { key: other.key })).body.data, [])

    const bad = await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(), events: ['player.craeted'] } })
    t.equal(bad.status, 400)
    t.equal(bad.body.code, 'BAD_REQUEST')
    t.equal((await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(), events: [] } })).status, 400)
    t.equal((await h.request('POST', '/webhooks', { key: tenant.key, body: { url: 'ftp://x', events: ['*'] } })).status, 400)

    const patched = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { events: ['player.created', 'campaign.created'], active: false } })
    t.same(patched.body.data.events, ['player.created', 'campaign.created'])
    t.equal(patched.body.data.active, false)
    t.notOk('secret' in patched.body.data)
    t.same((await h.request('DELETE', `/webhooks/${e.id}`, { key: tenant.key })).body, { data: { id: e.id } })
    t.equal((await h.request('GET', `/webhooks/${e.id}`, { key: tenant.key })).status, 404)
  })

  t.test('a delivery verifies with standardwebhooks and @octokit/webhooks-methods; ping body', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    const created = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'sig-1' } })
    const got = await waitFor('player.created', () => rx.at(p)[0])
    t.equal(got.json.event, 'player.created')
    t.same(got.json.data, { player_id: created.body.data.id, external_id: 'sig-1', brand_id: tenant.brand.id, source: 'api' })
    t.ok(Date.parse(got.json.created_at) > Date.now() - 60_000)
    t.ok(new Webhook(e.secret).verify(got.body, got.headers as Record<string, string>), 'standardwebhooks verifies')
    t.ok(await verifyGithubStyle(e.secret, got.body, got.headers['x-respin-signature'] as string), 'X-Respin-Signature verifies')
    t.equal(got.headers['content-type'], 'application/json')
    t.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(got.body, got.headers as Record<string, string>))
    t.notOk(await verifyGithubStyle(e.secret, got.body.replace('sig-1', 'sig-2'), got.headers['x-respin-signature'] as string))

    const ping = await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    t.equal(ping.status, 202)
    t.equal(ping.body.data.event, 'webhook.ping')
    t.equal(ping.body.data.status, 'pending')
    const pinged = await waitFor('ping', () => rx.at(p).find((r) => r.json?.event === 'webhook.ping'))
    t.same(pinged.json.data, { endpoint_id: e.id, brand_id: null })
    t.equal(pinged.headers['webhook-id'], ping.body.data.id, 'webhook-id is the delivery id')
    t.ok(new Webhook(e.secret).verify(pinged.body, pinged.headers as Record<string, string>))
    const log = await waitFor('ping logged', async () => {
      const d = (await deliveries(tenant, e.id, { event: 'webhook.ping' })).data[0]
      return d?.status === 'successful' && d
    })
    t.equal(log.attempt_count, 1)
    t.match(log.attempts[0], { n: 1, response_code: 200, error: null, response_body: 'ok' })
    t.equal(log.next_attempt_at, null)
  })

  t.test('outcomes recorded in a batch keep each attempt as an object in the log', async (t) => {
    const tenant = await h.createTenant()
    const e = await endpoint(tenant, { url: rx.url(path()), events: ['player.created'] })
    const ids: string[] = []
    for (let i = 0; i < 2; i++) ids.push((await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })).body.data.id)
    await waitFor('pings delivered', async () => (await deliveries(tenant, e.id)).data.filter((d: { status: string }) => d.status === 'successful').length === 2)
    // Leased again, as if a second attempt were in flight, and settled by the batch form (one statement).
    await h.app.ctx.sql`update webhook_deliveries set status = 'pending', lease_owner = 'test-owner' where id = any(${ids}::uuid[])`
    await q.recordOutcomes(h.app.ctx.sql, ids.map((id) => ({
      id,
      owner: 'test-owner',
      status: 'successful' as const,
      attempt: { n: 2, at: new Date().toISOString(), response_code: 204, duration_ms: 3, error: null, response_body: '' },
    })))
    for (const d of (await deliveries(tenant, e.id)).data) {
      t.equal(d.attempt_count, 2)
      t.match(d.attempts[1], { n: 2, response_code: 204, error: null }, 'the batched attempt is an object, not a JSON string')
    }
  })

  t.test('the fan-out takes no more outbox rows than the dispatcher has room for (at least FANOUT_MIN)', async (t) => {
    const tenant = await h.createTenant()
    await endpoint(tenant, { url: rx.url(path()), events: ['player.created'] })
    const keyId = h.app.ctx.secretBox.keyId
    const Rollback = class extends Error {}
    // All in one transaction the test rolls back: the app's own fan-out never sees these rows.
    await h.app.ctx.sql
      .begin(async (tx) => {
        await tx`
          insert into outbox (tenant_id, brand_id, event, data)
          select ${tenant.id}, null, 'player.created', jsonb_build_object('n', i) from generate_series(1, 120) i`
        const onTx = { sql: { begin: (fn: (s: typeof tx) => unknown) => fn(tx) } } as never
        let adopted = 0
        const loop = (room: number) => ({
          reserve: () => ({ token: `test-${room}`, at: Date.now(), take: () => room-- > 0, get room() { return room } }),
          adopt: (rows: unknown[]) => void (adopted += rows.length),
        })
        const first = await fanOut(onTx, 500, { loop: loop(60), keyId, leaseMs: 60_000 })
        t.same(first, { rows: 60, limit: 60, claimable: 0 }, 'as many rows as there is room, every delivery leased')
        t.equal(adopted, 60)
        const second = await fanOut(onTx, 500, { loop: loop(0), keyId, leaseMs: 60_000 })
        t.same(second, { rows: FANOUT_MIN, limit: FANOUT_MIN, claimable: FANOUT_MIN }, 'no room: FANOUT_MIN rows, their deliveries left for a claim')
        t.equal(adopted, 60)
        const [left] = await tx<{ n: number }[]>`select count(*)::int as n from outbox where tenant_id = ${tenant.id} and dispatched_at is null`
        t.equal(left!.n, 120 - 60 - FANOUT_MIN, 'the rest wait in the outbox')
        throw new Rollback()
      })
      .catch((err: unknown) => {
        if (!(err instanceof Rollback)) throw err
      })
  })

  t.test('rotation: the old secret keeps signing (second signature) for 24 hours', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    const rotated = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: true } })
    const secret = rotated.body.data.secret as string
    t.match(secret, /^whsec_/)
    t.not(secret, e.secret)
    // The overlap ends 24 hours after the rotation (contract-engines §2), not sooner or later.
    const left = await overlapLeft(e.id)
    t.ok(left > DAY_S - 120 && left <= DAY_S, `the old secret signs for 24 h after the rotation (${left} s left)`)
    await sleep(1100) // the dispatcher's endpoint cache
    await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    const got = await waitFor('ping after rotation', () => rx.at(p)[0])
    const sigs = (got.headers['webhook-signature'] as string).split(' ')
    t.equal(sigs.length, 2, 'two v1 signatures')
    t.ok(sigs.every((s) => s.startsWith('v1,')))
    // Each signature on its own, checked by the library: the first is the new secret's only, the second
    // the old secret's only (the contract's order).
    const only = (sig: string) => ({ ...(got.headers as Record<string, string>), 'webhook-signature': sig })
    t.ok(new Webhook(secret).verify(got.body, only(sigs[0]!)), 'first signature: the new secret')
    t.throws(() => new Webhook(e.secret).verify(got.body, only(sigs[0]!)), 'first signature: not the old secret')
    t.ok(new Webhook(e.secret).verify(got.body, only(sigs[1]!)), 'second signature: the old secret')
    t.throws(() => new Webhook(secret).verify(got.body, only(sigs[1]!)), 'second signature: not the new secret')
    t.ok(await verifyGithubStyle(secret, got.body, got.headers['x-respin-signature'] as string), 'X-Respin-Signature carries the new one')
    t.notOk(await verifyGithubStyle(e.secret, got.body, got.headers['x-respin-signature'] as string), 'X-Respin-Signature: not the old one')
    // After the overlap (its end moved to the past: 24 hours are not waited for) only the new secret signs.
    await h.app.ctx.sql`update webhook_endpoints set previous_secret_until = now() - interval '1 second' where id = ${e.id}`
    await sleep(1100)
    await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    const later = await waitFor('ping after overlap', () => rx.at(p)[1])
    t.equal((later.headers['webhook-signature'] as string).split(' ').length, 1)
    t.ok(new Webhook(secret).verify(later.body, later.headers as Record<string, string>))
    t.throws(() => new Webhook(e.secret).verify(later.body, later.headers as Record<string, string>))
  })

  t.test('retries with the attempt log; 3xx and timeouts are failures; 5 attempts then failed; redeliver', async (t) => {
    const tenant = await h.createTenant()
    const flaky = path()
    const redirect = path()
    const slow = path()
    let calls = 0
    rx.on(flaky, (_r, res) => {
      calls++
      res.statusCode = calls <= 2 ? 503 : 200
      res.end(calls <= 2 ? `busy ${'x'.repeat(3000)}` : 'fine')
    })
    rx.on(redirect, (_r, res) => {
      res.writeHead(302, { location: rx.url('/never') })
      res.end()
    })
    rx.on(slow, (_r, res) => setTimeout(() => res.end('late'), TIMEOUT_MS * 3))
    const a = await endpoint(tenant, { url: rx.url(flaky), events: ['campaign.created'] })
    const b = await endpoint(tenant, { url: rx.url(redirect), events: ['campaign.created'] })
    const c = await endpoint(tenant, { url: rx.url(slow), events: ['campaign.created'] })
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'c', type: 'one_shot', channels: ['email'] } })

    const flakyLog = await waitFor('flaky delivered', async () => {
      const d = (await deliveries(tenant, a.id)).data[0]
      return d?.status === 'successful' && d
    })
    t.equal(flakyLog.attempt_count, 3)
    t.same(flakyLog.attempts.map((x: { response_code: number }) => x.response_code), [503, 503, 200])
    t.equal(flakyLog.attempts[0].error, 'HTTP 503')
    t.equal(Buffer.byteLength(flakyLog.attempts[0].response_body), 1024, 'first 1 KB of the body')
    const gaps = [1, 2].map((i) => Date.parse(flakyLog.attempts[i].at) - Date.parse(flakyLog.attempts[i - 1].at))
    t.ok(gaps.every((g) => g >= 850 && g < 4000), `retried after ~1 s (${gaps})`)
    t.equal(new Set(rx.at(flaky).map((r) => r.headers['webhook-id'])).size, 1, 'webhook-id stable across retries')

    const failed = await waitFor('redirect failed', async () => {
      const d = (await deliveries(tenant, b.id)).data[0]
      return d?.status === 'failed' && d
    }, 30_000)
    t.equal(failed.attempt_count, 5)
    t.ok(failed.attempts.every((x: { response_code: number; error: string }) => x.response_code === 302 && /redirect/.test(x.error)))
    t.equal(rx.at('/never').length, 0, 'the redirect was not followed')
    t.equal(rx.at(redirect).length, 5)

    const timedOut = await waitFor('timeout logged', async () => {
      const d = (await deliveries(tenant, c.id)).data[0]
      return d?.attempt_count >= 1 && d
    })
    t.match(timedOut.attempts[0], { n: 1, response_code: null, error: `timeout after ${TIMEOUT_MS} ms` })
    // The error says the timeout ended it (the receiver answers only after 3× the timeout). No upper bound on
    // the duration: it is timed on the main thread, which a loaded CI machine stalled 1.5 s past it once.
    t.ok(timedOut.attempts[0].duration_ms >= TIMEOUT_MS - 50, `waited the timeout (${timedOut.attempts[0].duration_ms} ms)`)

    // Redeliver: a new delivery with the identical body, created_at included.
    const original = rx.at(flaky).at(-1)!
    const res = await h.request('POST', `/webhooks/${a.id}/deliveries/${flakyLog.id}/redeliver`, { key: tenant.key })
    t.equal(res.status, 202)
    t.not(res.body.data.id, flakyLog.id)
    t.equal(res.body.data.redelivery_of, flakyLog.id)
    const again = await waitFor('redelivered', () => rx.at(flaky).find((r) => r.headers['webhook-id'] === res.body.data.id))
    t.equal(again.body, original.body, 'identical body')
    t.ok(new Webhook(a.secret).verify(again.body, again.headers as Record<string, string>))
    t.equal((await h.request('POST', `/webhooks/${a.id}/deliveries/${c.id}/redeliver`, { key: tenant.key })).status, 404)
  })

  t.test('deliveries list: status and event filters, cursor', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    for (let i = 0; i < 3; i++) await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'list-1' } })
    await waitFor('4 delivered', async () => (await deliveries(tenant, e.id, { status: 'successful' })).data.length === 4)
    const pings = await deliveries(tenant, e.id, { event: 'webhook.ping' })
    t.equal(pings.data.length, 3)
    t.equal((await deliveries(tenant, e.id, { event: 'player.created' })).data.length, 1)
    t.equal((await deliveries(tenant, e.id, { status: 'failed' })).data.length, 0)
    const seen: string[] = []
    let cursor: string | undefined
    do {
      const page = await deliveries(tenant, e.id, { limit: 1, ...(cursor ? { cursor } : {}) })
      seen.push(...page.data.map((d: { id: string }) => d.id))
      cursor = page.next_cursor ?? undefined
    } while (cursor)
    t.equal(seen.length, 4)
    t.equal(new Set(seen).size, 4)
    const all = await deliveries(tenant, e.id)
    t.same(seen, all.data.map((d: { id: string }) => d.id), 'newest first, same order through the cursor')
    const bad = await h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key, query: { cursor: 'nope' } })
    t.equal(bad.status, 400)
    // Rows created in one millisecond, 100 µs apart (completed: no dispatcher touches them): a page
    // boundary inside that millisecond skips none (the cursor's time is exact text, not a driver Date).
    await h.app.ctx.sql`
      insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, completed_at, created_at)
      select ${tenant.id}, ${e.id}, 'webhook.ping', '{}', 'successful', now(), date_trunc('milliseconds', now()) + i * interval '100 microseconds'
      from generate_series(1, 4) as i`
    const paged: string[] = []
    cursor = undefined
    do {
      const page = await deliveries(tenant, e.id, { limit: 1, ...(cursor ? { cursor } : {}) })
      paged.push(...page.data.map((d: { id: string }) => d.id))
      cursor = page.next_cursor ?? undefined
    } while (cursor)
    t.equal(new Set(paged).size, 8, 'every delivery once through the cursor')
    t.equal((await h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key, query: { limit: 101 } })).status, 400)
    t.equal((await h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key, query: { status: 'nope' } })).status, 400)
  })

  t.test('brand scope and subscription filter', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const [pWide, pMain, pSecond, pCampaigns] = [path(), path(), path(), path()]
    const wide = await endpoint(tenant, { url: rx.url(pWide), events: ['player.created'] })
    const main = await endpoint(tenant, { url: rx.url(pMain), events: ['player.created'], brand: tenant.brand.slug })
    const bySecond = await endpoint(tenant, { url: rx.url(pSecond), events: ['player.created'], brand: second.id })
    await endpoint(tenant, { url: rx.url(pCampaigns), events: ['campaign.created'] })
    t.equal(wide.brand_id, null)
    t.equal(main.brand_id, tenant.brand.id)
    t.equal(bySecond.brand_id, second.id)
    const pinned = (await tenant.createKey({ brand: second.id })).key
    const viaPinned = await h.request('POST', '/webhooks', { key: pinned, body: { url: rx.url(pSecond), events: ['bonus.granted'] } })
    t.equal(viaPinned.body.data.brand_id, second.id, 'a brand-pinned key creates endpoints of its brand')
    t.same((await h.request('GET', '/webhooks', { key: pinned })).body.data.map((x: { id: string }) => x.id).sort(), [bySecond.id, viaPinned.body.data.id].sort())
    t.equal((await h.request('GET', `/webhooks/${main.id}`, { key: pinned })).status, 404)
    for (const [how, opts] of [['x-brand header', { headers: { 'x-brand': 'second' } }], ['brand query', { query: { brand: 'second' } }]] as const) {
      const hinted = await h.request('POST', '/webhooks', { key: tenant.key, ...opts, body: { url: rx.url(path()), events: ['bonus.granted'] } })
      t.equal(hinted.body.data.brand_id, second.id, `the ${how} scopes the endpoint`)
      await h.request('DELETE', `/webhooks/${hinted.body.data.id}`, { key: tenant.key })
    }

    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'in-main' } })
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'in-second', brand: 'second' } })
    await waitFor('wide gets both', () => rx.at(pWide).length === 2)
    await waitFor('scoped get theirs', () => rx.at(pMain).length === 1 && rx.at(pSecond).length === 1)
    await sleep(500)
    t.equal(rx.at(pMain).length, 1)
    t.equal(rx.at(pMain)[0]!.json.data.external_id, 'in-main')
    t.equal(rx.at(pSecond).length, 1)
    t.equal(rx.at(pSecond)[0]!.json.data.external_id, 'in-second')
    t.equal(rx.at(pCampaigns).length, 0, 'not subscribed to player.created')
  })

  t.test('tenant isolation of deliveries: another tenant\'s all-events endpoint gets none of this tenant\'s events', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const rxB = await startReceiver(t) // B's own receiver: anything on it was sent to B's endpoint
    const pA = path()
    const eA = await endpoint(a, { url: rx.url(pA), events: ['*'] })
    const eB = await endpoint(b, { url: rxB.url('/b'), events: ['*'] })
    // A's events from several causes: players (API and ingestion), a campaign, a ping of A's endpoint.
    for (let i = 0; i < 3; i++) t.equal((await h.request('POST', '/players', { key: a.key, body: { external_id: `a-${i}` } })).status, 201)
    t.equal((await h.request('POST', '/events', { key: a.key, body: { player_id: 'a-ing', event_type: 'registration', event_id: `iso-${Date.now()}` } })).status, 200)
    t.equal((await h.request('POST', '/campaigns', { key: a.key, body: { name: 'a-campaign', type: 'one_shot', channels: ['email'] } })).status, 201)
    t.equal((await h.request('POST', `/webhooks/${eA.id}/ping`, { key: a.key })).status, 202)
    const aEvents = () => rx.at(pA).map((r) => `${r.json.event}:${r.json.data.external_id ?? r.json.data.name ?? ''}`).sort()
    const expected = ['campaign.created:a-campaign', 'player.created:a-0', 'player.created:a-1', 'player.created:a-2', 'player.created:a-ing', 'webhook.ping:']
    await waitFor('A\'s endpoint gets A\'s events', () => expected.every((x) => aEvents().includes(x)))
    // Every outbox row of A fanned out (none left that could still reach B later).
    await waitFor('A\'s outbox dispatched', async () => {
      const [r] = await h.app.ctx.sql<{ n: number }[]>`select count(*)::int as n from outbox where tenant_id = ${a.id} and dispatched_at is null`
      return r!.n === 0
    })
    // B's own event afterwards: B's endpoint works, and what reached it by then is B's alone.
    t.equal((await h.request('POST', '/players', { key: b.key, body: { external_id: 'b-0' } })).status, 201)
    await waitFor('B\'s own event', () => rxB.received.length >= 1)
    await sleep(500)
    t.same(rxB.received.map((r) => `${r.json.event}:${r.json.data.external_id}:${r.json.data.brand_id}`), [`player.created:b-0:${b.brand.id}`], 'B\'s receiver got B\'s event only')
    t.ok(rx.at(pA).every((r) => r.json.data.brand_id === a.brand.id || r.json.data.brand_id === null), 'A\'s endpoint got nothing of B')
    t.notOk(rx.at(pA).some((r) => r.json.data.external_id === 'b-0'))
    const logB = (await deliveries(b, eB.id)).data as { event: string }[]
    t.same(logB.map((d) => d.event), ['player.created'], 'B\'s delivery log holds only its own event')
  })

  t.test('every catalog event fires from its real cause', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    const events = (name: string) => rx.at(p).filter((r) => r.json.event === name).map((r) => r.json.data)
    const player = (await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'api-1', email: 'a@example.com' } })).body.data
    await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { status: 'self_excluded' } })
    const ingest = await h.request('POST', '/events', {
      key: tenant.key,
      body: {
        events: [
          { player_id: 'ing-1', event_type: 'registration', event_id: `r-${Date.now()}`, payload: { email: 'i@example.com' } },
          { player_id: 'ing-1', event_type: 'deposit', event_id: `d-${Date.now()}`, payload: { amount: 10, currency: 'EUR' } },
          { player_id: 'ing-1', event_type: 'status_change', event_id: `s-${Date.now()}`, payload: { status: 'suspended', reason: 'kyc' } },
        ],
      },
    })
    t.equal(ingest.status, 200, ingest.text)
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'welcome', type: 'one_shot', channels: ['email'] } })
    await h.request('POST', '/segments', { key: tenant.key, body: { name: 'everyone', type: 'dynamic', rules: {} } })
    await waitFor('all catalog events', () =>
      ['player.created', 'player.updated', 'player.status_changed', 'player.converted', 'segment.recomputed', 'campaign.created'].every((e) => events(e).length > 0),
      30_000,
    )
    t.same(events('player.created').map((d) => d.external_id).sort(), ['api-1', 'ing-1'], 'from the API and from ingestion')
    t.match(events('player.updated')[0], { player_id: player.id, status: 'self_excluded', changed: ['status'] })
    const statuses = events('player.status_changed')
    t.ok(statuses.some((d) => d.player_id === player.id && d.status === 'self_excluded' && d.previous_status === 'active'), 'from PATCH')
    t.ok(statuses.some((d) => d.external_id === 'ing-1' && d.status === 'suspended' && d.reason === 'kyc'), 'from a status_change event')
    t.match(events('player.converted')[0], { external_id: 'ing-1', conversion: 'first_deposit', brand_id: tenant.brand.id })
    t.match(events('segment.recomputed')[0], { player_count: 2, brand_id: tenant.brand.id })
    t.match(events('campaign.created')[0], { name: 'welcome', brand_id: tenant.brand.id })
    t.ok(rx.at(p).every((r) => typeof r.json.data.brand_id === 'string'), 'every data carries brand_id')
  })

  t.test('an endpoint failing for 5 days is deactivated; PATCH active resumes it', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    rx.on(p, (_r, res) => {
      res.statusCode = 500
      res.end()
    })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['campaign.created'] })
    await h.app.ctx.sql`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where id = ${e.id}`
    await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    await waitFor('deactivated', async () => (await h.request('GET', `/webhooks/${e.id}`, { key: tenant.key })).body.data.active === false)
    // No new deliveries while inactive.
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'x', type: 'one_shot', channels: ['email'] } })
    await sleep(800)
    t.equal((await deliveries(tenant, e.id, { event: 'campaign.created' })).data.length, 0)
    const attemptsBefore = rx.at(p).length
    await sleep(1500)
    t.equal(rx.at(p).length, attemptsBefore, 'its pending delivery waits')
    rx.on(p, (_r, res) => res.end('back'))
    // A delivery whose attempt is in flight (a live lease) keeps it: cleared, another claim would send it again.
    const [inFlight] = await h.app.ctx.sql<{ id: string }[]>`
      insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, lease_owner, run_at)
      values (${tenant.id}, ${e.id}, 'webhook.ping', '{}', 'pending', 'in-flight:1', now() + interval '1 minute') returning id`
    const resumed = await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { active: true } })
    t.equal(resumed.body.data.active, true)
    const [held] = await h.app.ctx.sql<{ lease_owner: string | null; later: boolean }[]>`
      select lease_owner, run_at > now() as later from webhook_deliveries where id = ${inFlight!.id}`
    t.same(held, { lease_owner: 'in-flight:1', later: true }, 'the in-flight attempt keeps its lease')
    await h.app.ctx.sql`delete from webhook_deliveries where id = ${inFlight!.id}`
    const ok = await waitFor('pending ping delivered after resume', async () => (await deliveries(tenant, e.id, { status: 'successful' })).data[0])
    t.equal(ok.event, 'webhook.ping')
    const [row] = await h.app.ctx.sql<{ failing_since: Date | null }[]>`select failing_since from webhook_endpoints where id = ${e.id}`
    t.equal(row!.failing_since, null)
  })

  t.test('retention prunes completed deliveries and dispatched outbox rows', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'old-1' } })
    await waitFor('delivered', async () => (await deliveries(tenant, e.id, { status: 'successful' })).data.length === 1)
    const sql = h.app.ctx.sql
    await sql`update webhook_deliveries set completed_at = now() - interval '31 days' where endpoint_id = ${e.id}`
    await sql`update outbox set dispatched_at = now() - interval '31 days' where tenant_id = ${tenant.id}`
    const kept = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'new-1' } })
    await waitFor('delivered', async () => (await deliveries(tenant, e.id, { status: 'successful' })).data.length === 2)
    const pruned = await q.prune(sql, 30, 100_000)
    t.ok(pruned.deliveries >= 1 && pruned.outbox >= 1, JSON.stringify(pruned))
    const left = (await deliveries(tenant, e.id)).data
    t.equal(left.length, 1)
    const outbox = (await sql<{ outbox: number }[]>`select count(*)::int as outbox from outbox where tenant_id = ${tenant.id}`)[0]!.outbox
    t.equal(outbox, 1, `the recent outbox row stays (${kept.body.data.id})`)
    // A rotation's previous secret is forgotten once its 24 hours are over, not before.
    t.equal((await h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: true } })).status, 200)
    const previous = async () => (await sql<{ sealed: string | null }[]>`select previous_secret_sealed as sealed from webhook_endpoints where id = ${e.id}`)[0]!.sealed
    await q.prune(sql, 30, 100_000)
    t.ok(await previous(), 'kept within its 24 hours')
    const overlap = await overlapLeft(e.id)
    t.ok(overlap > DAY_S - 120 && overlap <= DAY_S, `its 24 hours run from the rotation (${overlap} s left)`)
    await sql`update webhook_endpoints set previous_secret_until = now() - interval '1 second' where id = ${e.id}`
    await q.prune(sql, 30, 100_000)
    t.equal(await previous(), null, 'forgotten after them')
  })
})


// One tenant's endpoints that hang until the timeout must not hold the process's attempt slots: after its
// first failure an endpoint gets one attempt at a time, so another tenant's delivery goes out at once.
t.test('32 endpoints that hang do not stall another tenant\'s webhooks', async (t) => {
  const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_DELAYS: '60,60,60,60', WEBHOOK_TIMEOUT_MS: '3000' } })
  const rx = await startReceiver(t)
  const noisy = await h.createTenant()
  const quiet = await h.createTenant()
  const hung: string[] = []
  for (let i = 0; i < 32; i++) {
    rx.on(`/hang-${i}`, () => {}) // never answers
    const res = await h.request('POST', '/webhooks', { key: noisy.key, body: { url: rx.url(`/hang-${i}`), events: ['player.created'] } })
    hung.push(res.body.data.id)
  }
  t.equal((await h.request('POST', '/webhooks', { key: quiet.key, body: { url: rx.url('/quiet'), events: ['player.created'] } })).status, 201)
  // 20 deliveries per hanging endpoint: enough to keep 8 of each in flight through several timeouts.
  for (let i = 0; i < 20; i++) await h.request('POST', '/players', { key: noisy.key, body: { external_id: `noisy-${i}` } })
  const sql = h.app.ctx.sql
  await waitFor('every hanging endpoint failed once', async () => {
    const [r] = await sql<{ n: number }[]>`select count(distinct endpoint_id)::int as n from webhook_deliveries where endpoint_id = any(${hung}::uuid[]) and attempt_count > 0`
    return r!.n === 32
  }, 30_000)
  const started = Date.now()
  await h.request('POST', '/players', { key: quiet.key, body: { external_id: 'quiet-1' } })
  await waitFor('the quiet tenant\'s delivery', () => rx.at('/quiet').length === 1, 15_000)
  const ms = Date.now() - started
  t.ok(ms < 1500, `delivered in ${ms} ms, not after the hanging attempts' 3 s timeout`)
})

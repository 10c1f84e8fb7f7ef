// The players' routes and their adversarial checks, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness, type Harness, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t)

t.test('routes', async (t) => {
  async function createPlayer(h: Harness, tenant: TestTenant, body: Record<string, unknown>, key = tenant.key) {
    const res = await h.request('POST', '/players', { key, body })
    if (res.status !== 201) throw new Error(`create player: ${res.status} ${res.text}`)
    return res.body.data
  }

  async function outbox(h: Harness, tenantId: string) {
    return h.app.ctx.sql<{ event: string; brand_id: string | null; data: any }[]>`
    select event, brand_id, data from outbox where tenant_id = ${tenantId} order by id`
  }

  t.test('POST /players creates a player with defaults and a profile', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'ext-1', email: 'Ann@Example.com' } })
    t.equal(res.status, 201)
    const p = res.body.data
    t.match(p, { external_id: 'ext-1', email: 'Ann@Example.com', phone: null, status: 'active', metadata: {} })
    t.match(p.id, /^[0-9a-f-]{36}$/)
    t.ok(Date.parse(p.created_at) && Date.parse(p.updated_at))
    t.notOk('profile' in p)

    const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
    t.equal(got.status, 200)
    t.match(got.body.data, { id: p.id, external_id: 'ext-1', profile: { language: 'en', currency: 'EUR', lifecycle_stage: 'new', deposit_count: 0, consent: {} } })

    const events = await outbox(h, tenant.id)
    t.same(events.map((e) => e.event), ['player.created'])
    t.match(events[0]!.data, { player_id: p.id, external_id: 'ext-1' })
    t.equal(events[0]!.brand_id, tenant.brand.id)
  })

  t.test('POST /players is idempotent on (brand, external_id) and syncs language and currency', async (t) => {
    const tenant = await h.createTenant()
    const first = await createPlayer(h, tenant, { external_id: 'p1', email: 'a@x.io', language: 'it', currency: 'usd', metadata: { a: 1, b: 2 } })
    const again = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'p1', phone: '+3912345', metadata: { b: 3 } } })
    t.equal(again.status, 201)
    t.equal(again.body.data.id, first.id)
    t.match(again.body.data, { email: 'a@x.io', phone: '+3912345', metadata: { a: 1, b: 3 } })
    let got = (await h.request('GET', `/players/${first.id}`, { key: tenant.key })).body.data
    t.match(got.profile, { language: 'it', currency: 'USD' }, 'a repeat without language keeps it')
    await createPlayer(h, tenant, { external_id: 'p1', language: 'es', currency: 'GBP' })
    got = (await h.request('GET', `/players/${first.id}`, { key: tenant.key })).body.data
    t.match(got.profile, { language: 'es', currency: 'GBP' })

    // An identical repeat changes nothing and emits nothing.
    await createPlayer(h, tenant, { external_id: 'p1', email: 'a@x.io' })
    const events = (await outbox(h, tenant.id)).map((e) => e.event)
    t.same(events, ['player.created', 'player.updated'])

    const list = await h.request('GET', '/players', { key: tenant.key })
    t.equal(list.body.pagination.total, 1)

    // The same external_id in another brand is another player.
    const other = await tenant.createBrand('second')
    const inOther = await createPlayer(h, tenant, { external_id: 'p1', brand: other.slug })
    t.not(inOther.id, first.id)
  })

  t.test('POST /players validates its body', async (t) => {
    const tenant = await h.createTenant()
    const cases: [string, unknown][] = [
      ['external_id', {}],
      ['external_id', { external_id: '' }],
      ['email', { external_id: 'x', email: 'not-an-email' }],
      ['status', { external_id: 'x', status: 'banned' }],
      ['language', { external_id: 'x', language: 'fr' }],
      ['currency', { external_id: 'x', currency: 'EURO' }],
      ['metadata', { external_id: 'x', metadata: 'nope' }],
    ]
    for (const [field, body] of cases) {
      const res = await h.request('POST', '/players', { key: tenant.key, body })
      t.equal(res.status, 400, `${JSON.stringify(body)} → 400`)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.ok(res.body.details.errors.some((e: { field: string }) => e.field === field), `names ${field}`)
    }
    const unknownBrand = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'x', brand: 'nope' } })
    t.equal(unknownBrand.status, 400)
  })

  t.test('GET /players pages, counts, searches and filters', async (t) => {
    const tenant = await h.createTenant()
    for (let i = 1; i <= 5; i++) {
      await createPlayer(h, tenant, { external_id: `EXT-${i}`, email: `user${i}@Mail.test`, status: i === 5 ? 'suspended' : 'active' })
    }
    let res = await h.request('GET', '/players', { key: tenant.key })
    t.equal(res.status, 200)
    t.same(res.body.pagination, { page: 1, limit: 20, total: 5, pages: 1 })
    t.equal(res.body.data[0].external_id, 'EXT-5', 'newest first')

    res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 2, page: 2 } })
    t.same(res.body.pagination, { page: 2, limit: 2, total: 5, pages: 3 })
    t.same(res.body.data.map((p: { external_id: string }) => p.external_id), ['EXT-3', 'EXT-2'])
    res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 2, page: 3 } })
    t.equal(res.body.data.length, 1)
    res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 2, page: 4 } })
    t.equal(res.status, 200)
    t.same(res.body.data, [], 'a page beyond the last is empty')
    t.same(res.body.pagination, { page: 4, limit: 2, total: 5, pages: 3 })
    res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 100 } })
    t.equal(res.status, 200)

    res = await h.request('GET', '/players', { key: tenant.key, query: { search: 'mail.TEST' } })
    t.equal(res.body.pagination.total, 5, 'search is case-insensitive on email')
    res = await h.request('GET', '/players', { key: tenant.key, query: { search: 'ext-3' } })
    t.same(res.body.data.map((p: { external_id: string }) => p.external_id), ['EXT-3'], 'and on external_id')
    res = await h.request('GET', '/players', { key: tenant.key, query: { search: '%' } })
    t.equal(res.body.pagination.total, 0, 'LIKE wildcards match literally')
    res = await h.request('GET', '/players', { key: tenant.key, query: { status: 'suspended' } })
    t.same(res.body.data.map((p: { external_id: string }) => p.external_id), ['EXT-5'])

    for (const query of [{ limit: 0 }, { limit: 101 }, { page: 0 }, { limit: 'ten' }, { status: 'gone' }] as Record<string, string | number>[]) {
      const bad = await h.request('GET', '/players', { key: tenant.key, query })
      t.equal(bad.status, 400, `${JSON.stringify(query)} → 400`)
      t.equal(bad.body.code, 'BAD_REQUEST')
    }

    const empty = await h.createTenant()
    res = await h.request('GET', '/players', { key: empty.key })
    t.same(res.body, { data: [], pagination: { page: 1, limit: 20, total: 0, pages: 0 } }, "another tenant's players are not listed")
  })

  t.test('PATCH /players/{id} updates fields, shallow-merges metadata and writes the outbox', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(h, tenant, { external_id: 'm1', email: 'm@x.io', metadata: { tier: 'gold', tags: ['a'], keep: true } })
    const res = await h.request('PATCH', `/players/${p.id}`, {
      key: tenant.key,
      body: { metadata: { tier: 'platinum', tags: ['b'], added: 1 }, phone: '555', status: 'self_excluded' },
    })
    t.equal(res.status, 200)
    t.same(res.body.data.metadata, { tier: 'platinum', tags: ['b'], keep: true, added: 1 })
    t.equal(res.body.data.phone, '555')
    t.equal(res.body.data.status, 'self_excluded')
    t.ok(Date.parse(res.body.data.updated_at) >= Date.parse(p.updated_at))

    const cleared = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { email: null } })
    t.equal(cleared.body.data.email, null)

    const events = await outbox(h, tenant.id)
    t.same(events.map((e) => e.event), ['player.created', 'player.updated', 'player.status_changed', 'player.updated'])
    t.match(events[1]!.data, { player_id: p.id, external_id: 'm1', status: 'self_excluded', phone: '555', metadata: { tier: 'platinum', keep: true } })
    t.same(events[1]!.data.changed.sort(), ['metadata', 'phone', 'status'])
    t.match(events[2]!.data, { player_id: p.id, status: 'self_excluded', previous_status: 'active' })

    for (const body of [{ email: 'bad' }, { status: 'nope' }, { metadata: [1] }]) {
      const bad = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body })
      t.equal(bad.status, 400, `${JSON.stringify(body)} → 400`)
    }
    const missing = await h.request('PATCH', '/players/00000000-0000-4000-8000-000000000000', { key: tenant.key, body: { phone: '1' } })
    t.equal(missing.status, 404)
    t.equal(missing.body.code, 'NOT_FOUND')
  })

  t.test('GET /players/{id} returns 404 for an id that is no uuid (an external_id, say) and for an unknown one', async (t) => {
    const tenant = await h.createTenant()
    const bad = await h.request('GET', '/players/not-a-uuid', { key: tenant.key })
    t.equal(bad.status, 404)
    t.equal(bad.body.code, 'NOT_FOUND')
    t.match(bad.body.details.errors[0], { in: 'path', field: 'id' })
    const missing = await h.request('GET', '/players/00000000-0000-4000-8000-000000000000', { key: tenant.key })
    t.equal(missing.status, 404)
    t.equal(missing.body.code, 'NOT_FOUND')
    const nba = await h.request('GET', '/players/00000000-0000-4000-8000-000000000000/next-best-action', { key: tenant.key })
    t.equal(nba.status, 404)
  })

  t.test("another tenant's key gets 404 on every by-id route; no key gets 401", async (t) => {
    const owner = await h.createTenant()
    const stranger = await h.createTenant()
    const p = await createPlayer(h, owner, { external_id: 'secret' })
    for (const [method, path, body] of [
      ['GET', `/players/${p.id}`],
      ['PATCH', `/players/${p.id}`, { phone: '1' }],
      ['GET', `/players/${p.id}/next-best-action`],
    ] as const) {
      const res = await h.request(method, path, { key: stranger.key, body })
      t.equal(res.status, 404, `${method} ${path}`)
      t.equal(res.body.code, 'NOT_FOUND')
      const anon = await h.request(method, path, { body })
      t.equal(anon.status, 401)
    }
    const list = await h.request('GET', '/players', { key: stranger.key, query: { search: 'secret' } })
    t.same(list.body.data, [])
  })

  t.test('a brand-pinned key sees only its own brand', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = await tenant.createKey({ brand: second.slug })
    const inMain = await createPlayer(h, tenant, { external_id: 'main-1' })
    // The pinned key writes to its brand even when asked for another.
    const inSecond = await createPlayer(h, tenant, { external_id: 'second-1', brand: tenant.brand.slug }, pinned.key)
    const listPinned = await h.request('GET', '/players', { key: pinned.key, headers: { 'x-brand': tenant.brand.slug } })
    t.same(listPinned.body.data.map((p: { id: string }) => p.id), [inSecond.id])
    const listMain = await h.request('GET', '/players', { key: tenant.key })
    t.same(listMain.body.data.map((p: { id: string }) => p.id), [inMain.id])
    const listSecond = await h.request('GET', '/players', { key: tenant.key, query: { brand: second.id } })
    t.same(listSecond.body.data.map((p: { id: string }) => p.id), [inSecond.id])

    t.equal((await h.request('GET', `/players/${inMain.id}`, { key: pinned.key })).status, 404)
    t.equal((await h.request('PATCH', `/players/${inMain.id}`, { key: pinned.key, body: { phone: '1' } })).status, 404)
    t.equal((await h.request('GET', `/players/${inMain.id}/next-best-action`, { key: pinned.key })).status, 404)
    t.equal((await h.request('GET', `/players/${inSecond.id}`, { key: pinned.key })).status, 200)
    // A tenant-wide key finds a player of any brand by id.
    t.equal((await h.request('GET', `/players/${inSecond.id}`, { key: tenant.key })).status, 200)
  })

  t.test('a read-only key can GET but not write', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(h, tenant, { external_id: 'r1' })
    const { key } = await tenant.createKey({ scopes: ['read'] })
    t.equal((await h.request('GET', '/players', { key })).status, 200)
    t.equal((await h.request('GET', `/players/${p.id}`, { key })).status, 200)
    t.equal((await h.request('GET', `/players/${p.id}/next-best-action`, { key })).status, 200)
    const post = await h.request('POST', '/players', { key, body: { external_id: 'r2' } })
    t.equal(post.status, 403)
    t.equal(post.body.code, 'FORBIDDEN')
    const patch = await h.request('PATCH', `/players/${p.id}`, { key, body: { phone: '1' } })
    t.equal(patch.status, 403)
    const ingest = await tenant.createKey({ scopes: ['events:write'] })
    t.equal((await h.request('GET', '/players', { key: ingest.key })).status, 403)
  })

  t.test('GET /players/{id} joins the profile aggregates ingestion maintains', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(h, tenant, { external_id: 'agg', email: 'agg@x.io' })
    const now = Date.now()
    await h.app.ctx.sql`
    update player_profiles set country = 'IT', name = 'Ann Agg', deposit_count = 3, deposit_total = 120.5,
      first_deposit_at = ${new Date(now - 10 * 86_400_000)}, last_deposit_at = ${new Date(now - 86_400_000)},
      last_seen_at = ${new Date(now - 3_600_000)}, bet_total = 300, win_total = 250, event_count = 42,
      consent = ${h.app.ctx.sql.json({ email: { granted: true, at: '2026-01-01T00:00:00.000Z' }, push: { granted: false, at: '2026-01-02T00:00:00.000Z' } })}
    where player_id = ${p.id}`
    const got = (await h.request('GET', `/players/${p.id}`, { key: tenant.key })).body.data
    t.match(got.profile, {
      country: 'IT', name: 'Ann Agg', deposit_count: 3, deposit_total: 120.5, bet_total: 300, win_total: 250, ggr: 50,
      event_count: 42, lifecycle_stage: 'active',
      consent: { email: { granted: true, at: '2026-01-01T00:00:00.000Z' }, push: { granted: false } },
    })
    t.type(got.profile.scores.churn, 'number')
  })

  t.test('next best action: never marketing for a blocked player', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(h, tenant, { external_id: 'nba', email: 'n@x.io' })
    let res = await h.request('GET', `/players/${p.id}/next-best-action`, { key: tenant.key })
    t.equal(res.status, 200)
    t.match(res.body.data, { player_id: p.id, action: 'ftd_welcome_offer', priority: 'high', channelHint: 'email' })
    t.same(Object.keys(res.body.data).sort(), ['action', 'channelHint', 'player_id', 'priority', 'reason'])

    await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status: 'self_excluded' } })
    res = await h.request('GET', `/players/${p.id}/next-best-action`, { key: tenant.key })
    t.match(res.body.data, { player_id: p.id, action: 'respect_exclusion', priority: 'low' })
    t.match(res.body.data.reason, /self-excluded/)

    for (const status of ['suspended', 'closed']) {
      await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status } })
      res = await h.request('GET', `/players/${p.id}/next-best-action`, { key: tenant.key })
      t.equal(res.body.data.action, 'none', status)
    }
  })

  t.test('the OpenAPI Player schema carries the spec formats: uuid id, email or null, date-times', async (t) => {
    const doc = (await h.request('GET', '/openapi.json')).body
    const player = doc.components.schemas.Player
    t.match(player.properties.id, { format: 'uuid' })
    t.match(player.properties.email.anyOf, [{ type: 'string', format: 'email' }, { type: 'null' }])
    t.match(player.properties.created_at, { format: 'date-time' })
    t.match(player.properties.updated_at, { format: 'date-time' })
  })
})

// Adversarial checks of docs/players.md and the spec's Players section.
t.test('adversarial', async (t) => {
  const sql = h.app.ctx.sql

  async function createPlayer(tenant: TestTenant, body: Record<string, unknown>) {
    const res = await h.request('POST', '/players', { key: tenant.key, body })
    if (res.status !== 201) throw new Error(`create player: ${res.status} ${res.text}`)
    return res.body.data as { id: string; external_id: string; updated_at: string; metadata: any }
  }
  const outbox = (tenantId: string) =>
    sql<{ event: string; data: any }[]>`select event, data from outbox where tenant_id = ${tenantId} order by id`

  t.test('metadata merge: one level deep, nested objects replaced whole, null kept, absent keys kept', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(tenant, { external_id: 'm', metadata: { a: { x: 1, y: 2 }, b: [1, 2], c: 'keep', d: 5 } })
    const res = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { metadata: { a: { z: 3 }, b: [], d: null } } })
    t.equal(res.status, 200, res.text)
    t.same(res.body.data.metadata, { a: { z: 3 }, b: [], c: 'keep', d: null })
    const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
    t.same(got.body.data.metadata, { a: { z: 3 }, b: [], c: 'keep', d: null }, 'the merge is stored')
    // A repeated POST merges the same way.
    const again = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'm', metadata: { e: true } } })
    t.equal(again.status, 201)
    t.equal(again.body.data.id, p.id)
    t.same(again.body.data.metadata, { a: { z: 3 }, b: [], c: 'keep', d: null, e: true })
  })

  t.test('a write that changes nothing emits nothing and keeps updated_at', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(tenant, { external_id: 'n', email: 'n@x.io', phone: '1', metadata: { k: 1 } })
    await new Promise((r) => setTimeout(r, 20))
    const same = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { email: 'n@x.io', phone: '1', status: 'active', metadata: { k: 1 } } })
    t.equal(same.status, 200)
    t.equal(same.body.data.updated_at, p.updated_at, 'updated_at untouched')
    const empty = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { metadata: {} } })
    t.equal(empty.status, 200)
    t.equal(empty.body.data.updated_at, p.updated_at)
    const repeat = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'n', email: 'n@x.io' } })
    t.equal(repeat.status, 201)
    t.equal(repeat.body.data.updated_at, p.updated_at)
    t.same((await outbox(tenant.id)).map((e) => e.event), ['player.created'])
    // A real change: only the changed field is named.
    const real = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { phone: '2', email: 'n@x.io' } })
    t.ok(Date.parse(real.body.data.updated_at) > Date.parse(p.updated_at))
    const events = await outbox(tenant.id)
    t.same(events.map((e) => e.event), ['player.created', 'player.updated'])
    t.same(events[1]?.data.changed, ['phone'])
  })

  t.test('PATCH validation: wrong types are 400 and change nothing; external_id is not patchable', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(tenant, { external_id: 'v', email: 'v@x.io', metadata: { k: 1 } })
    for (const body of [{ metadata: null }, { metadata: 'x' }, { status: null }, { email: 42 }, { phone: 5 }, { status: 'ACTIVE' }, { email: 'v@x.io', status: 'nope' }]) {
      const bad = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body })
      t.equal(bad.status, 400, `${JSON.stringify(body)} → 400`)
      t.equal(bad.body.code, 'BAD_REQUEST')
    }
    const bodyless = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, rawBody: '[1]', headers: { 'content-type': 'application/json' } })
    t.equal(bodyless.status, 400, 'an array body is 400')
    const ext = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { external_id: 'hijack' } })
    t.ok(ext.status === 200 || ext.status === 400)
    const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
    t.match(got.body.data, { external_id: 'v', email: 'v@x.io', status: 'active', metadata: { k: 1 } })
  })

  t.test('POST /players: currency upper-cased; a repeat never resets the profile learnt from events', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(tenant, { external_id: 'cur', currency: 'usd', language: 'es' })
    let got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
    t.match(got.body.data.profile, { currency: 'USD', language: 'es' })
    const ev = await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'cur', event_type: 'profile_update', payload: { language: 'it', country: 'IT' } } })
    t.equal(ev.status, 200)
    await createPlayer(tenant, { external_id: 'cur', phone: '9' })
    got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
    t.match(got.body.data.profile, { currency: 'USD', language: 'it', country: 'IT' }, 'language kept when not given')
    t.equal(got.body.data.phone, '9')
  })

  t.test('GET /players: search treats _ literally; ties in created_at page without loss or repeat', async (t) => {
    const tenant = await h.createTenant()
    await createPlayer(tenant, { external_id: 'a_b' })
    await createPlayer(tenant, { external_id: 'axb' })
    const s = await h.request('GET', '/players', { key: tenant.key, query: { search: 'a_b' } })
    t.same(s.body.data.map((p: { external_id: string }) => p.external_id), ['a_b'])
    // 30 players created by one ingestion batch share one transaction's created_at.
    const events = Array.from({ length: 30 }, (_, i) => ({ player_id: `tie-${i}`, event_type: 'login' }))
    t.equal((await h.request('POST', '/events', { key: tenant.key, body: { events } })).status, 200)
    const seen: string[] = []
    for (let page = 1; page <= 5; page++) {
      const res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 7, page, search: 'tie-' } })
      t.equal(res.body.pagination.total, 30)
      t.equal(res.body.pagination.pages, 5)
      seen.push(...res.body.data.map((p: { external_id: string }) => p.external_id))
    }
    t.equal(seen.length, 30)
    t.equal(new Set(seen).size, 30, 'every player exactly once over the pages')
  })

  t.test('status: PATCH then a status_change event to the same status fires no second status_changed', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(tenant, { external_id: 'st' })
    const patched = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status: 'closed' } })
    t.equal(patched.body.data.status, 'closed')
    await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'st', event_type: 'status_change', payload: { status: 'closed' } } })
    await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'st', event_type: 'status_change', payload: { status: 'active', reason: 'reopened' } } })
    const changes = (await outbox(tenant.id)).filter((e) => e.event === 'player.status_changed')
    t.same(changes.map((c) => [c.data.previous_status, c.data.status]), [['active', 'closed'], ['closed', 'active']])
    const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
    t.equal(got.body.data.status, 'active')
  })
})

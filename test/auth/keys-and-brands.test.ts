// API keys and brands, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { hashApiKey } from '../../src/auth/keys.ts'
import { startHarness } from '../helpers/harness.ts'
import { probeRoutes } from '../helpers/probe-routes.ts'

const h = await startHarness(t, { extraRoutes: probeRoutes })

t.test('keys', async (t) => {
  t.test('a key is accepted from x-api-key, Bearer and the api_key query parameter', async (t) => {
    const tenant = await h.createTenant()
    t.equal((await h.request('GET', '/_probe/whoami', { headers: { 'x-api-key': tenant.key } })).status, 200)
    t.equal((await h.request('GET', '/_probe/whoami', { headers: { authorization: `Bearer ${tenant.key}` } })).status, 200)
    t.equal((await h.request('GET', '/_probe/whoami', { query: { api_key: tenant.key } })).status, 200)
  })

  t.test('x-api-key wins over Bearer, which wins over the query parameter', async (t) => {
    const tenant = await h.createTenant()
    const bad = 'rsp_not-a-real-key-000000000000000000000'
    let res = await h.request('GET', '/_probe/whoami', { headers: { 'x-api-key': bad, authorization: `Bearer ${tenant.key}` } })
    t.equal(res.status, 401, 'the x-api-key header is used even when Bearer is valid')
    res = await h.request('GET', '/_probe/whoami', { headers: { authorization: `Bearer ${bad}` }, query: { api_key: tenant.key } })
    t.equal(res.status, 401, 'Bearer is used before the query parameter')
    res = await h.request('GET', '/_probe/whoami', { headers: { authorization: `Bearer ${tenant.key}` }, query: { api_key: bad } })
    t.equal(res.status, 200)
  })

  t.test('a missing, malformed or unknown key is 401 UNAUTHORIZED', async (t) => {
    const cases: Record<string, string>[] = [{}, { 'x-api-key': 'nope' }, { 'x-api-key': 'rsp_0000000000000000000000000000000000000000' }, { authorization: 'Basic abc' }]
    for (const headers of cases) {
      const res = await h.request('GET', '/_probe/whoami', { headers })
      t.equal(res.status, 401)
      t.equal(res.body.code, 'UNAUTHORIZED')
      t.type(res.body.error, 'string')
    }
  })

  t.test('keys start with rsp_, are shown once and stored only as SHA-256', async (t) => {
    const tenant = await h.createTenant()
    const created = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'ci' })
    t.equal(created.status, 201)
    const key: string = created.body.data.key
    t.match(key, /^rsp_[0-9A-Za-z]{40}$/)
    t.equal(created.body.data.prefix, key.slice(0, 12))
    const listed = await h.admin('GET', `/tenants/${tenant.id}/keys`)
    t.equal(listed.status, 200)
    t.notOk(JSON.stringify(listed.body).includes(key), 'listing never shows the key')
    t.notOk(listed.body.data.some((k: Record<string, unknown>) => 'key' in k || 'key_hash' in k))
    const rows = await h.app.ctx.sql`select key_hash from api_keys where id = ${created.body.data.id}`
    t.equal(rows[0]?.key_hash, hashApiKey(key))
    const leak = await h.app.ctx.sql`select count(*)::int as n from api_keys where key_hash = ${key} or prefix = ${key}`
    t.equal(leak[0]?.n, 0, 'the raw key is in no column')
  })

  t.test('scopes: events:write only ingests, read only reads, empty is full access', async (t) => {
    const tenant = await h.createTenant()
    const ingest = (await tenant.createKey({ scopes: ['events:write'] })).key
    const read = (await tenant.createKey({ scopes: ['read'] })).key
    const both = (await tenant.createKey({ scopes: ['read', 'events:write'] })).key

    t.equal((await h.request('POST', '/_probe/ingest', { key: ingest })).status, 200)
    const r1 = await h.request('GET', '/_probe/whoami', { key: ingest })
    t.equal(r1.status, 403)
    t.equal(r1.body.code, 'FORBIDDEN')
    t.equal((await h.request('POST', '/_probe/echo', { key: ingest, body: { n: 1 } })).status, 403)

    t.equal((await h.request('GET', '/_probe/whoami', { key: read })).status, 200)
    t.equal((await h.request('POST', '/_probe/ingest', { key: read })).body.code, 'FORBIDDEN')
    t.equal((await h.request('POST', '/_probe/echo', { key: read, body: { n: 1 } })).status, 403)

    t.equal((await h.request('GET', '/_probe/whoami', { key: both })).status, 200)
    t.equal((await h.request('POST', '/_probe/ingest', { key: both })).status, 200)
    t.equal((await h.request('POST', '/_probe/echo', { key: both, body: { n: 1 } })).status, 403, 'writes need full access')

    t.equal((await h.request('POST', '/_probe/echo', { key: tenant.key, body: { n: 1 } })).status, 201)
    t.equal((await h.request('POST', '/_probe/ingest', { key: tenant.key })).status, 200)
  })

  t.test('an expired key is 401', async (t) => {
    const tenant = await h.createTenant()
    const soon = new Date(Date.now() + 1500).toISOString()
    const { key } = await tenant.createKey({ expires_at: soon })
    t.equal((await h.request('GET', '/_probe/whoami', { key })).status, 200)
    await new Promise((r) => setTimeout(r, 1700))
    const res = await h.request('GET', '/_probe/whoami', { key })
    t.equal(res.status, 401)
    t.equal(res.body.code, 'UNAUTHORIZED')
  })

  t.test('expires_at in the past is refused at creation', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'x', expires_at: '2001-01-01T00:00:00Z' })
    t.equal(res.status, 400)
    t.equal(res.body.code, 'BAD_REQUEST')
  })

  t.test('revocation is immediate, even for a key that was just used (cached)', async (t) => {
    const tenant = await h.createTenant()
    const { id, key } = await tenant.createKey()
    t.equal((await h.request('GET', '/_probe/whoami', { key })).status, 200)
    const revoked = await h.admin('DELETE', `/keys/${id}`)
    t.equal(revoked.status, 200)
    t.equal(revoked.body.data.id, id)
    t.ok(Date.parse(revoked.body.data.revoked_at))
    t.equal((await h.request('GET', '/_probe/whoami', { key })).status, 401)
    const again = await h.admin('DELETE', `/keys/${id}`)
    t.equal(again.body.data.revoked_at, revoked.body.data.revoked_at, 'revoking twice keeps the first time')
    t.equal((await h.request('GET', '/_probe/whoami', { key: tenant.key })).status, 200, 'other keys still work')
    t.equal((await h.admin('DELETE', '/keys/00000000-0000-4000-8000-000000000000')).status, 404)
  })
})

t.test('brands', async (t) => {
  const whoami = (key: string, opts: { headers?: Record<string, string>; query?: Record<string, string> } = {}) =>
    h.request('GET', '/_probe/whoami', { key, ...opts })

  t.test('a tenant-wide key uses the default brand unless a hint names another', async (t) => {
    const tenant = await h.createTenant()
    const vip = await tenant.createBrand('vip')
    t.equal((await whoami(tenant.key)).body.brand.id, tenant.brand.id)
    t.equal((await whoami(tenant.key, { headers: { 'x-brand': 'vip' } })).body.brand.id, vip.id, 'header by slug')
    t.equal((await whoami(tenant.key, { headers: { 'x-brand': vip.id } })).body.brand.id, vip.id, 'header by id')
    t.equal((await whoami(tenant.key, { query: { brand: 'vip' } })).body.brand.id, vip.id, 'query by slug')
    t.equal((await whoami(tenant.key, { query: { brand: vip.id.toUpperCase() } })).body.brand.id, vip.id, 'query by id, any case')
    const echo = await h.request('POST', '/_probe/echo', { key: tenant.key, body: { n: 1, brand: 'vip' } })
    t.equal(echo.status, 201)
    t.equal(echo.body.brand.id, vip.id, 'body brand on create endpoints')
  })

  t.test('an unknown or inactive brand hint is 400', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant()
    for (const hint of ['nope', '00000000-0000-4000-8000-000000000000', other.brand.id, other.brand.slug === tenant.brand.slug ? 'zzz' : other.brand.slug]) {
      const res = await whoami(tenant.key, { headers: { 'x-brand': hint } })
      t.equal(res.status, 400, `hint ${hint}`)
      t.equal(res.body.code, 'BAD_REQUEST')
    }
    const off = await tenant.createBrand('off')
    t.equal((await h.admin('PATCH', `/brands/${off.id}`, { active: false })).status, 200)
    t.equal((await whoami(tenant.key, { headers: { 'x-brand': 'off' } })).status, 400)
  })

  t.test("another tenant's brand is never reachable by id", async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const res = await whoami(a.key, { headers: { 'x-brand': b.brand.id } })
    t.equal(res.status, 400)
  })

  t.test('a brand-pinned key ignores every hint', async (t) => {
    const tenant = await h.createTenant()
    const vip = await tenant.createBrand('vip')
    const { key } = await tenant.createKey({ brand: 'vip' })
    t.equal((await whoami(key)).body.brand.id, vip.id)
    t.equal((await whoami(key, { headers: { 'x-brand': 'main' } })).body.brand.id, vip.id)
    t.equal((await whoami(key, { query: { brand: 'nonexistent' } })).body.brand.id, vip.id, 'even an unknown hint')
    const echo = await h.request('POST', '/_probe/echo', { key, body: { n: 1, brand: tenant.brand.id } })
    t.equal(echo.body.brand.id, vip.id)
    t.equal((await whoami(key)).body.principal.brandId, vip.id)
  })

  t.test('a tenant with no active brand gets 400', async (t) => {
    const tenant = await h.createTenant({ brand: null })
    const res = await whoami(tenant.key)
    t.equal(res.status, 400)
    t.equal(res.body.code, 'BAD_REQUEST')
    const b = await tenant.createBrand('first')
    t.equal((await whoami(tenant.key)).body.brand.id, b.id, 'the first brand becomes the default at once')
    t.equal((await h.admin('PATCH', `/brands/${b.id}`, { active: false })).status, 200)
    t.equal((await whoami(tenant.key)).status, 400, 'deactivating the only brand takes effect on the next request')
  })

  t.test('moving the default brand takes effect on the next request', async (t) => {
    const tenant = await h.createTenant()
    const vip = await tenant.createBrand('vip')
    t.equal((await whoami(tenant.key)).body.brand.id, tenant.brand.id)
    const res = await h.admin('PATCH', `/brands/${vip.id}`, { is_default: true, name: 'VIP' })
    t.equal(res.status, 200)
    t.equal(res.body.data.is_default, true)
    t.equal(res.body.data.name, 'VIP')
    t.equal((await whoami(tenant.key)).body.brand.id, vip.id)
    const rows = await h.app.ctx.sql`select count(*)::int as n from brands where tenant_id = ${tenant.id} and is_default`
    t.equal(rows[0]?.n, 1, 'exactly one default')
  })

  t.test('a brand query parameter given twice is 400 for a tenant-wide key (was: silently the default brand)', async (t) => {
    const tenant = await h.createTenant()
    await tenant.createBrand('vip')
    const twice = await h.request('GET', '/_probe/whoami?brand=vip&brand=vip', { key: tenant.key })
    t.equal(twice.status, 400)
    t.equal(twice.body.code, 'BAD_REQUEST')
    t.match(twice.body.details.errors, [{ in: 'query', field: 'brand' }])
    // A brand-pinned key ignores every hint, repeated ones included.
    const { key } = await tenant.createKey({ brand: 'vip' })
    t.equal((await h.request('GET', '/_probe/whoami?brand=main&brand=x', { key })).status, 200)
  })

  t.test('with the default brand deactivated, a request without a hint is 400, never written to another brand', async (t) => {
    // spec, Authentication: "the tenant's default brand is used when omitted".
    const tenant = await h.createTenant()
    const other = await tenant.createBrand('other')
    t.equal((await h.admin('PATCH', `/brands/${tenant.brand.id}`, { active: false })).status, 200)
    const res = await whoami(tenant.key)
    t.equal(res.status, 400)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.match(res.body.error, /default brand is not active/)
    t.equal((await whoami(tenant.key, { headers: { 'x-brand': other.slug } })).body.brand.id, other.id, 'a hint still works')
  })
})

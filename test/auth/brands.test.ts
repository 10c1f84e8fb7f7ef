import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { probeRoutes } from '../helpers/probe-routes.ts'

const h = await startHarness(t, { extraRoutes: probeRoutes })
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

import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)

t.test('the admin API needs the ADMIN_KEY: none or wrong is 401, an operator key is 403', async (t) => {
  const tenant = await h.createTenant()
  t.equal((await h.request('GET', '/admin/tenants')).status, 401)
  const wrong = await h.request('GET', '/admin/tenants', { key: 'admin-wrong' })
  t.equal(wrong.status, 401)
  t.equal(wrong.body.code, 'UNAUTHORIZED')
  const operator = await h.request('GET', '/admin/tenants', { key: tenant.key })
  t.equal(operator.status, 403)
  t.equal(operator.body.code, 'FORBIDDEN')
  t.equal((await h.request('GET', '/admin/tenants', { headers: { authorization: `Bearer ${h.adminKey}` } })).status, 200)
  t.equal((await h.request('GET', '/admin/tenants', { query: { api_key: h.adminKey } })).status, 200)
})

t.test('with no ADMIN_KEY the admin API says it is off, whatever key is tried', async (t) => {
  const config = h.app.ctx.config as { adminKey?: string }
  const adminKey = config.adminKey
  config.adminKey = undefined
  t.teardown(() => {
    config.adminKey = adminKey
  })
  for (const key of [undefined, 'admin-anything', adminKey]) {
    const res = await h.request('GET', '/admin/tenants', { key })
    t.equal(res.status, 401)
    t.equal(res.body.code, 'UNAUTHORIZED')
    t.match(res.body.error, /admin API is off: start the server with ADMIN_KEY/)
  }
})

t.test('tenants: create with or without slug, list', async (t) => {
  const a = await h.admin('POST', '/tenants', { name: 'Lucky Spins Ltd' })
  t.equal(a.status, 201)
  t.match(a.body.data, { name: 'Lucky Spins Ltd', slug: /^lucky-spins-ltd/ })
  t.match(a.body.data.id, /^[0-9a-f-]{36}$/)
  const b = await h.admin('POST', '/tenants', { name: 'Lucky Spins Ltd' })
  t.equal(b.status, 201, 'a derived slug that collides gets a suffix')
  t.not(b.body.data.slug, a.body.data.slug)
  const slug = `explicit-${Date.now()}`
  t.equal((await h.admin('POST', '/tenants', { name: 'X', slug })).status, 201)
  const dup = await h.admin('POST', '/tenants', { name: 'Y', slug })
  t.equal(dup.status, 400, 'an explicit slug that is taken is refused')
  t.equal(dup.body.details.reason, 'ALREADY_EXISTS')
  const bad = await h.admin('POST', '/tenants', { name: '' })
  t.equal(bad.status, 400)
  t.equal(bad.body.details.errors[0].field, 'name')
  const list = await h.admin('GET', '/tenants')
  t.ok(list.body.data.some((x: { id: string }) => x.id === a.body.data.id))
})

t.test('brands: first is the default, slugs validated and unique per tenant', async (t) => {
  const tenant = await h.createTenant({ brand: null })
  const first = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'Main', slug: 'main' })
  t.equal(first.status, 201)
  t.match(first.body.data, { tenant_id: tenant.id, slug: 'main', is_default: true, active: true })
  const second = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'Sport', slug: 'sport' })
  t.equal(second.body.data.is_default, false)
  t.equal((await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'Again', slug: 'main' })).status, 400)
  for (const slug of ['Main', '-x', 'a b', 'x'.repeat(65)]) {
    const res = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'n', slug })
    t.equal(res.status, 400, `slug ${slug}`)
    t.equal(res.body.details.errors[0].field, 'slug')
  }
  t.equal((await h.admin('POST', '/tenants/00000000-0000-4000-8000-000000000000/brands', { name: 'n', slug: 'n' })).status, 404)
  t.equal((await h.admin('POST', '/tenants/not-a-uuid/brands', { name: 'n', slug: 'n' })).status, 404)
  t.equal((await h.admin('PATCH', '/brands/00000000-0000-4000-8000-000000000000', { active: false })).status, 404)
})

t.test('keys: scopes validated, pinned to a brand, listed without the key', async (t) => {
  const tenant = await h.createTenant()
  const bad = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'k', scopes: ['admin'] })
  t.equal(bad.status, 400)
  t.equal(bad.body.details.errors[0].field, 'scopes.0')
  t.equal((await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'k', brand: 'nope' })).status, 400)
  const pinned = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'k', brand: 'main', scopes: ['read'] })
  t.equal(pinned.status, 201)
  t.match(pinned.body.data, { brand_id: tenant.brand.id, scopes: ['read'], expires_at: null })
  const list = await h.admin('GET', `/tenants/${tenant.id}/keys`)
  t.equal(list.body.data.length, 2)
  t.match(list.body.data[1], { id: pinned.body.data.id, brand_id: tenant.brand.id, revoked_at: null })
  t.equal((await h.admin('GET', '/tenants/00000000-0000-4000-8000-000000000000/keys')).status, 404)
})

t.test('event mapping: empty by default, validated, stored and read back', async (t) => {
  const tenant = await h.createTenant()
  const empty = await h.admin('GET', `/brands/${tenant.brand.id}/event-mapping`)
  t.same(empty.body.data, { rules: [], default_action: 'accept' })
  const mapping = {
    rules: [
      { match: 'dep_ok', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.cur' } },
      { match: 'heartbeat', action: 'ignore' },
      { match: 'test_*', action: 'reject' },
    ],
    default_action: 'accept',
  }
  const put = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, mapping)
  t.equal(put.status, 200)
  t.same(put.body.data, mapping)
  t.same((await h.admin('GET', `/brands/${tenant.brand.id}/event-mapping`)).body.data, mapping)
  const badField = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'x', type: 'deposit', fields: { amountz: 'payload.a' } }] })
  t.equal(badField.status, 400)
  t.equal(badField.body.details.errors[0].field, 'rules.0.fields.amountz')
  const badAction = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'x', action: 'drop' }] })
  t.equal(badAction.status, 400)
  t.equal(badAction.body.details.errors[0].field, 'rules.0.action')
  t.equal((await h.admin('PUT', '/brands/00000000-0000-4000-8000-000000000000/event-mapping', { rules: [] })).status, 404)
  const operator = await h.request('PUT', `/admin/brands/${tenant.brand.id}/event-mapping`, { key: tenant.key, body: { rules: [] } })
  t.equal(operator.status, 403, 'mapping configuration is for the platform owner only')
})

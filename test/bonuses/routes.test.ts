import t from 'tap'
import { expect400, sharedResourceTests } from '../gamification/shared.ts'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)
const path = '/bonuses'

sharedResourceTests(t, h, {
  path,
  create: { name: 'Welcome 100%', type: 'welcome', value: 100, value_type: 'percent', wagering_requirement: 35, config: { max: 200 }, expires_in_hours: 168 },
  patch: { active: false, value: 150.5, wagering_requirement: 0, expires_in_hours: null, config: {} },
})

t.test('a bonus is created with the spec fields and defaults: wagering 0, active true, numbers as numbers', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Cashback', type: 'cashback', value: 10.25, value_type: 'percent' } })
  t.equal(res.status, 201)
  const b = res.body.data
  t.same(Object.keys(b).sort(), ['active', 'config', 'created_at', 'expires_in_hours', 'id', 'name', 'type', 'value', 'value_type', 'wagering_requirement'])
  t.same([b.value, b.wagering_requirement, b.active, b.expires_in_hours, b.config, b.value_type], [10.25, 0, true, null, {}, 'percent'])
  t.equal(typeof b.value, 'number')
  t.equal(typeof b.wagering_requirement, 'number')
  const listed = await h.request('GET', path, { key: tenant.key })
  t.same(listed.body, { data: [b] })
  const zero = await h.request('POST', path, { key: tenant.key, body: { name: 'Spins', type: 'free_spins', value: 0, value_type: 'spins', active: false } })
  t.equal(zero.status, 201)
  t.same([zero.body.data.value, zero.body.data.active], [0, false])
  const patched = await h.request('PATCH', `${path}/${b.id}`, { key: tenant.key, body: { name: 'Cashback 2' } })
  t.same([patched.body.data.active, patched.body.data.wagering_requirement], [true, 0], 'a patch does not reset defaults')
  for (const type of ['welcome', 'reload', 'cashback', 'free_spins', 'no_deposit', 'custom']) {
    t.equal((await h.request('POST', path, { key: tenant.key, body: { name: type, type, value: 1, value_type: 'fixed' } })).status, 201, type)
  }
})

t.test('bonus validation: required fields, type enum, value ≥ 0, wagering ≥ 0, expires_in_hours integer ≥ 1', async (t) => {
  const tenant = await h.createTenant()
  const ok = { name: 'B', type: 'reload', value: 50, value_type: 'fixed' }
  for (const field of ['name', 'type', 'value', 'value_type']) {
    const { [field as keyof typeof ok]: _, ...body } = ok
    await expect400(t, h, tenant.key, 'POST', path, body, field)
  }
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, type: 'loyalty' }, 'type')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, value: -1 }, 'value')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, value: '50' }, 'value')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, wagering_requirement: -0.5 }, 'wagering_requirement')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, expires_in_hours: 0 }, 'expires_in_hours')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, expires_in_hours: 1.5 }, 'expires_in_hours')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, active: 'yes' }, 'active')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, config: 'x' }, 'config')
  const created = await h.request('POST', path, { key: tenant.key, body: ok })
  const item = `${path}/${created.body.data.id}`
  await expect400(t, h, tenant.key, 'PATCH', item, { value: -5 }, 'value')
  await expect400(t, h, tenant.key, 'PATCH', item, { type: 'x' }, 'type')
  await expect400(t, h, tenant.key, 'PATCH', item, { expires_in_hours: 0 }, 'expires_in_hours')
  t.same((await h.request('GET', item, { key: tenant.key })).body.data, created.body.data)
})

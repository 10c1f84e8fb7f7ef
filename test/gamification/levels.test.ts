import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { expect400, sharedResourceTests } from './shared.ts'

const h = await startHarness(t)
const path = '/gamification/levels'

sharedResourceTests(t, h, {
  path,
  create: { name: 'Bronze', tier: 1, min_points: 0, max_points: 999, benefits: { cashback: 0.05 } },
  patch: { name: 'Bronze+', benefits: { cashback: 0.06, perks: ['chat'] }, max_points: null },
})

t.test('a level is created with exactly the spec fields; benefits defaults to {} and max_points to null', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Gold', tier: 3, min_points: 5000 } })
  t.equal(res.status, 201)
  t.same(Object.keys(res.body.data).sort(), ['benefits', 'created_at', 'id', 'max_points', 'min_points', 'name', 'tier'])
  t.same(res.body.data.benefits, {})
  t.equal(res.body.data.max_points, null)
  t.equal(res.body.data.tier, 3)
  t.equal(res.body.data.min_points, 5000)
})

t.test('levels are listed by tier, whatever the creation order', async (t) => {
  const tenant = await h.createTenant()
  for (const [name, tier, min] of [['Gold', 3, 5000], ['Bronze', 1, 0], ['Platinum', 4, 20000], ['Silver', 2, 1000]] as const) {
    t.equal((await h.request('POST', path, { key: tenant.key, body: { name, tier, min_points: min } })).status, 201)
  }
  const res = await h.request('GET', path, { key: tenant.key })
  t.equal(res.status, 200)
  t.same(res.body.data.map((l: { name: string }) => l.name), ['Bronze', 'Silver', 'Gold', 'Platinum'])
  t.same(Object.keys(res.body).sort(), ['data'])
})

t.test('create validation: required fields, tier ≥ 1, min_points ≥ 0, integers, max_points ≥ 0 and ≥ min_points', async (t) => {
  const tenant = await h.createTenant()
  const ok = { name: 'L', tier: 1, min_points: 0 }
  await expect400(t, h, tenant.key, 'POST', path, { tier: 1, min_points: 0 }, 'name')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'L', min_points: 0 }, 'tier')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'L', tier: 1 }, 'min_points')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, tier: 0 }, 'tier')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, tier: 1.5 }, 'tier')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, tier: '1' }, 'tier')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, min_points: -1 }, 'min_points')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, max_points: -1 }, 'max_points')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, min_points: 100, max_points: 99 }, 'max_points')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, benefits: [] }, 'benefits')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, name: '' }, 'name')
  const equal = await h.request('POST', path, { key: tenant.key, body: { ...ok, min_points: 100, max_points: 100 } })
  t.equal(equal.status, 201, 'max_points equal to min_points is allowed')
  const malformed = await h.request('POST', path, { key: tenant.key, rawBody: '{"name":', headers: { 'content-type': 'application/json' } })
  t.equal(malformed.status, 400)
  t.same((await h.request('GET', path, { key: tenant.key })).body.data.length, 1, 'nothing invalid was stored')
})

t.test('patch validation checks max_points against the stored min_points (and the other way round)', async (t) => {
  const tenant = await h.createTenant()
  const created = await h.request('POST', path, { key: tenant.key, body: { name: 'Silver', tier: 2, min_points: 1000, max_points: 4999 } })
  const item = `${path}/${created.body.data.id}`
  await expect400(t, h, tenant.key, 'PATCH', item, { max_points: 999 }, 'max_points')
  await expect400(t, h, tenant.key, 'PATCH', item, { min_points: 5000 }, 'max_points')
  await expect400(t, h, tenant.key, 'PATCH', item, { min_points: 10, max_points: 9 }, 'max_points')
  await expect400(t, h, tenant.key, 'PATCH', item, { tier: 0 }, 'tier')
  await expect400(t, h, tenant.key, 'PATCH', item, { min_points: -1 }, 'min_points')
  await expect400(t, h, tenant.key, 'PATCH', item, { name: null }, 'name')
  const unchanged = await h.request('GET', item, { key: tenant.key })
  t.same(unchanged.body.data, created.body.data, 'failed patches change nothing')

  const raise = await h.request('PATCH', item, { key: tenant.key, body: { min_points: 6000, max_points: null } })
  t.equal(raise.status, 200)
  t.equal(raise.body.data.min_points, 6000)
  t.equal(raise.body.data.max_points, null)
  const both = await h.request('PATCH', item, { key: tenant.key, body: { min_points: 100, max_points: 200, tier: 7 } })
  t.equal(both.status, 200)
  t.same([both.body.data.min_points, both.body.data.max_points, both.body.data.tier, both.body.data.name], [100, 200, 7, 'Silver'])
})

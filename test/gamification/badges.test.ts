import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { expect400, sharedResourceTests } from './shared.ts'

const h = await startHarness(t)
const path = '/gamification/badges'

sharedResourceTests(t, h, {
  path,
  create: { name: 'High roller', description: 'Bet 1000 in a day', icon_url: 'https://cdn.example.com/b/hr.png', criteria: { event_type: 'bet', measure: 'sum', target: 1000 }, rarity: 'epic' },
  patch: { rarity: 'legendary', icon_url: null, criteria: { event_type: 'bet', measure: 'sum', target: 5000 } },
})

t.test('a badge is created with the spec fields; rarity defaults to common', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', path, { key: tenant.key, body: { name: 'First deposit' } })
  t.equal(res.status, 201)
  t.same(Object.keys(res.body.data).sort(), ['created_at', 'criteria', 'description', 'icon_url', 'id', 'name', 'rarity'])
  t.same([res.body.data.rarity, res.body.data.description, res.body.data.icon_url, res.body.data.criteria], ['common', null, null, {}])
  const patched = await h.request('PATCH', `${path}/${res.body.data.id}`, { key: tenant.key, body: { name: 'First deposit!' } })
  t.equal(patched.body.data.rarity, 'common')
  const rare = await h.request('PATCH', `${path}/${res.body.data.id}`, { key: tenant.key, body: { rarity: 'rare' } })
  t.equal(rare.body.data.rarity, 'rare')
  t.equal(rare.body.data.name, 'First deposit!')
})

t.test('badge validation: name required, rarity enum, icon_url must be a URI', async (t) => {
  const tenant = await h.createTenant()
  await expect400(t, h, tenant.key, 'POST', path, {}, 'name')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'B', rarity: 'mythic' }, 'rarity')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'B', icon_url: 'not a url' }, 'icon_url')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'B', icon_url: 'icon.png' }, 'icon_url')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'B', criteria: [1] }, 'criteria')
  const created = await h.request('POST', path, { key: tenant.key, body: { name: 'B' } })
  await expect400(t, h, tenant.key, 'PATCH', `${path}/${created.body.data.id}`, { icon_url: 'nope' }, 'icon_url')
  await expect400(t, h, tenant.key, 'PATCH', `${path}/${created.body.data.id}`, { rarity: 'COMMON' }, 'rarity')
})

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

t.test('criteria are validated on PATCH too: 400 naming the field, the stored badge unchanged', async (t) => {
  const tenant = await h.createTenant()
  const created = await h.request('POST', path, { key: tenant.key, body: { name: 'Bettor', rarity: 'rare', criteria: { event_type: 'bet', measure: 'sum', target: 100, filters: [{ field: 'game', op: 'eq', value: 'starburst' }] } } })
  t.equal(created.status, 201, created.text)
  const item = `${path}/${created.body.data.id}`
  const refused = async (body: Record<string, unknown>, field: string) => {
    await expect400(t, h, tenant.key, 'PATCH', item, body, field)
    t.same((await h.request('GET', item, { key: tenant.key })).body.data, created.body.data, `unchanged after the refused ${JSON.stringify(body)}`)
  }
  await refused({ criteria: { event_type: 'bet' } }, 'criteria.target')
  await refused({ criteria: { event_type: 'bet', target: 0 } }, 'criteria.target')
  await refused({ criteria: { target: 5 } }, 'criteria.event_type')
  await refused({ criteria: { event_type: 'bet', target: 5, measure: 'avg' } }, 'criteria.measure')
  await refused({ criteria: { event_type: 'bet', target: 5, filters: [{ field: 'colour', op: 'eq', value: 1 }] } }, 'criteria.filters.0.field')
  await refused({ criteria: { event_type: 'bet', target: 5, filters: [{ field: 'amount', op: 'like', value: 1 }] } }, 'criteria.filters.0.op')
  await refused({ criteria: { missions_completed: 0 } }, 'criteria.missions_completed')
  await refused({ criteria: { level_tier: 1.5 } }, 'criteria.level_tier')
  await refused({ criteria: [1] }, 'criteria')
  // A refused field refuses the whole patch: the valid fields beside it are not written either.
  await refused({ name: 'Renamed', rarity: 'legendary', criteria: { event_type: 'bet', measure: 'sum' } }, 'criteria.target')
  // The same shapes, valid, are accepted.
  const ok = await h.request('PATCH', item, { key: tenant.key, body: { criteria: { missions_completed: 2 } } })
  t.equal(ok.status, 200, ok.text)
  t.same(ok.body.data.criteria, { missions_completed: 2 })
})

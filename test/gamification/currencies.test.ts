import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { expect400, sharedResourceTests } from './shared.ts'

const h = await startHarness(t)
const path = '/gamification/currencies'

sharedResourceTests(t, h, {
  path,
  create: { name: 'Loyalty points', symbol: 'LP', type: 'virtual' },
  patch: { name: 'Respin points', symbol: 'RP' },
})

t.test('a currency is created with exactly the spec fields', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Euro', symbol: '€', type: 'real' } })
  t.equal(res.status, 201)
  t.same(Object.keys(res.body.data).sort(), ['created_at', 'id', 'name', 'symbol', 'type'])
  t.same([res.body.data.name, res.body.data.symbol, res.body.data.type], ['Euro', '€', 'real'])
  const bonus = await h.request('PATCH', `${path}/${res.body.data.id}`, { key: tenant.key, body: { type: 'bonus' } })
  t.equal(bonus.body.data.type, 'bonus')
})

t.test('currency validation: name, symbol and type required; type enum', async (t) => {
  const tenant = await h.createTenant()
  await expect400(t, h, tenant.key, 'POST', path, { symbol: 'X', type: 'virtual' }, 'name')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'X', type: 'virtual' }, 'symbol')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'X', symbol: 'X' }, 'type')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'X', symbol: 'X', type: 'crypto' }, 'type')
  const created = await h.request('POST', path, { key: tenant.key, body: { name: 'X', symbol: 'X', type: 'virtual' } })
  await expect400(t, h, tenant.key, 'PATCH', `${path}/${created.body.data.id}`, { type: 'points' }, 'type')
})

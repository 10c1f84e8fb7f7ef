import t from 'tap'
import { expect400, sharedResourceTests } from '../gamification/shared.ts'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)
const path = '/tournaments'

sharedResourceTests(t, h, {
  path,
  create: {
    name: 'Spring slots race', description: 'Top 10 win', game_config: { metric: 'bet_amount', games: ['starburst'] }, prize_pool: { prizes: [{ from_rank: 1, to_rank: 10 }] },
    max_participants: 500, starts_at: '2026-04-01T00:00:00.000Z', ends_at: '2026-04-08T00:00:00.000Z',
  },
  patch: { status: 'active', max_participants: null, ends_at: '2026-04-15T00:00:00.000Z' },
})

t.test('a tournament is created with the spec fields; status defaults to draft', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Weekend cup' } })
  t.equal(res.status, 201)
  const x = res.body.data
  t.same(Object.keys(x).sort(), [
    'created_at', 'description', 'ends_at', 'game_config', 'id', 'max_participants', 'name', 'prize_pool', 'starts_at', 'status', 'updated_at',
  ])
  t.same([x.status, x.description, x.game_config, x.prize_pool, x.max_participants, x.starts_at, x.ends_at], ['draft', null, {}, {}, null, null, null])
  for (const status of ['draft', 'active', 'ended', 'cancelled']) {
    t.equal((await h.request('POST', path, { key: tenant.key, body: { name: status, status } })).status, 201, status)
  }
  const patched = await h.request('PATCH', `${path}/${x.id}`, { key: tenant.key, body: { description: 'x' } })
  t.equal(patched.body.data.status, 'draft', 'a patch does not reset the status')
  t.same((await h.request('GET', path, { key: tenant.key })).body.data.length, 5)
})

t.test('tournament validation: name, status enum, max_participants ≥ 1, date-times, ends_at after starts_at', async (t) => {
  const tenant = await h.createTenant()
  await expect400(t, h, tenant.key, 'POST', path, { description: 'x' }, 'name')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', status: 'running' }, 'status')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', max_participants: 0 }, 'max_participants')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', max_participants: 2.5 }, 'max_participants')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', starts_at: '01/04/2026' }, 'starts_at')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', ends_at: 'soon' }, 'ends_at')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', prize_pool: 100 }, 'prize_pool')
  const at = '2026-04-01T00:00:00Z'
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', starts_at: at, ends_at: '2026-03-31T23:59:59Z' }, 'ends_at')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'T', starts_at: at, ends_at: at }, 'ends_at')
  const yearZero = await h.request('POST', path, { key: tenant.key, body: { name: 'T', starts_at: '0000-01-01T00:00:00Z' } })
  t.equal(yearZero.status, 400, 'a date PostgreSQL cannot store is 400, not 500')
  t.equal(yearZero.body.code, 'BAD_REQUEST')
  t.equal(yearZero.body.details.reason, 'VALUE_REJECTED')
  t.equal((await h.request('GET', path, { key: tenant.key })).body.data.length, 0)

  const onlyStart = await h.request('POST', path, { key: tenant.key, body: { name: 'T', starts_at: at } })
  t.equal(onlyStart.status, 201, 'one bound alone is fine')
  const item = `${path}/${onlyStart.body.data.id}`
  await expect400(t, h, tenant.key, 'PATCH', item, { ends_at: '2026-03-01T00:00:00Z' }, 'ends_at')
  const withEnd = await h.request('PATCH', item, { key: tenant.key, body: { ends_at: '2026-04-02T00:00:00Z' } })
  t.equal(withEnd.status, 200)
  await expect400(t, h, tenant.key, 'PATCH', item, { starts_at: '2026-04-03T00:00:00Z' }, 'ends_at')
  const moved = await h.request('PATCH', item, { key: tenant.key, body: { starts_at: '2026-05-01T00:00:00Z', ends_at: '2026-05-02T00:00:00Z' } })
  t.equal(moved.status, 200, 'both bounds moved together')
  const cleared = await h.request('PATCH', item, { key: tenant.key, body: { starts_at: null } })
  t.equal(cleared.status, 200)
  t.equal(cleared.body.data.starts_at, null)
  await expect400(t, h, tenant.key, 'PATCH', item, { max_participants: 0 }, 'max_participants')
  await expect400(t, h, tenant.key, 'PATCH', item, { status: 'paused' }, 'status')
})

t.test('game_config and prize_pool are validated on PATCH too: 400 naming the field, the stored tournament unchanged', async (t) => {
  const tenant = await h.createTenant()
  const lp = (await h.request('POST', '/gamification/currencies', { key: tenant.key, body: { name: 'LP', symbol: 'LP', type: 'virtual' } })).body.data
  const bonus = (await h.request('POST', '/bonuses', { key: tenant.key, body: { name: 'Prize', type: 'custom', value: 10, value_type: 'fixed' } })).body.data
  const second = await tenant.createBrand('second')
  const otherBrandBonus = (await h.request('POST', '/bonuses', { key: tenant.key, body: { name: 'Elsewhere', type: 'custom', value: 10, value_type: 'fixed', brand: second.slug } })).body.data
  t.ok(lp?.id && bonus?.id && otherBrandBonus?.id)
  const created = await h.request('POST', path, {
    key: tenant.key,
    body: {
      name: 'Race', status: 'active', game_config: { metric: 'bet_amount', games: ['starburst'], currency: 'EUR', min_bet: 1 },
      prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: bonus.id, points: [{ currency_id: lp.id, amount: 100 }] }, { from_rank: 2, to_rank: 5, points: [{ currency_id: lp.id, amount: 10 }] }] },
    },
  })
  t.equal(created.status, 201, created.text)
  const item = `${path}/${created.body.data.id}`
  const refused = async (body: Record<string, unknown>, field: string) => {
    await expect400(t, h, tenant.key, 'PATCH', item, body, field)
    t.same((await h.request('GET', item, { key: tenant.key })).body.data, created.body.data, `unchanged after the refused ${JSON.stringify(body)}`)
  }
  const missing = '00000000-0000-4000-8000-000000000000'
  await refused({ game_config: { metric: 'rtp' } }, 'game_config.metric')
  await refused({ game_config: { games: ['starburst'] } }, 'game_config.metric')
  await refused({ game_config: { metric: 'bet_amount', games: 'starburst' } }, 'game_config.games')
  await refused({ game_config: { metric: 'bet_amount', providers: [] } }, 'game_config.providers')
  await refused({ game_config: { metric: 'bet_amount', categories: [7] } }, 'game_config.categories')
  await refused({ game_config: { metric: 'bet_amount', currency: 'EUR-O' } }, 'game_config.currency')
  await refused({ game_config: { metric: 'bet_amount', min_bet: -1 } }, 'game_config.min_bet')
  await refused({ prize_pool: { prizes: 'all' } }, 'prize_pool.prizes')
  await refused({ prize_pool: { prizes: [{ from_rank: 0, to_rank: 1 }] } }, 'prize_pool.prizes.0.from_rank')
  await refused({ prize_pool: { prizes: [{ from_rank: 3, to_rank: 1 }] } }, 'prize_pool.prizes.0.to_rank')
  await refused({ prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: 'nope' }] } }, 'prize_pool.prizes.0.bonus_id')
  await refused({ prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: missing }] } }, 'prize_pool.prizes.0.bonus_id')
  await refused({ prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: otherBrandBonus.id }] } }, 'prize_pool.prizes.0.bonus_id')
  await refused({ prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, points: [{ currency_id: missing, amount: 5 }] }] } }, 'prize_pool.prizes.0.points.0.currency_id')
  await refused({ prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, points: [{ currency_id: lp.id, amount: 0 }] }] } }, 'prize_pool.prizes.0.points.0.amount')
  await refused({ prize_pool: [] }, 'prize_pool')
  // A refused field refuses the whole patch: the valid fields beside it are not written either.
  await refused({ name: 'Renamed', status: 'cancelled', max_participants: 3, game_config: { metric: 'ggr', min_bet: 'x' } }, 'game_config.min_bet')
  const ok = await h.request('PATCH', item, { key: tenant.key, body: { game_config: { metric: 'ggr' }, prize_pool: { prizes: [] } } })
  t.equal(ok.status, 200, ok.text)
  t.same([ok.body.data.game_config, ok.body.data.prize_pool], [{ metric: 'ggr' }, { prizes: [] }])
})

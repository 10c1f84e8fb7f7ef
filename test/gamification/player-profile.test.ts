import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t)
const sql = h.app.ctx.sql

// The players API lives in another feature: insert the row directly.
async function makePlayer(tenant: TestTenant, brandId = tenant.brand.id): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into players (tenant_id, brand_id, external_id) values (${tenant.id}, ${brandId}, ${`ext-${Math.random()}`})
    returning id`
  return row!.id
}

const post = async (tenant: TestTenant, path: string, body: Record<string, unknown>) => {
  const res = await h.request('POST', path, { key: tenant.key, body })
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`)
  return res.body.data
}

t.test('a fresh player in a bare brand: no level, nothing held, nothing active, no badges', async (t) => {
  const tenant = await h.createTenant()
  const playerId = await makePlayer(tenant)
  const res = await h.request('GET', `/gamification/player/${playerId}`, { key: tenant.key })
  t.equal(res.status, 200)
  t.same(res.body, {
    data: { player_id: playerId, current_level: null, point_balances: [], active_missions: [], badges_earned: [] },
  })
})

t.test('the profile: level from lifetime points in the virtual currencies, balances, missions, badges', async (t) => {
  const tenant = await h.createTenant()
  const playerId = await makePlayer(tenant)
  const url = `/gamification/player/${playerId}`
  const get = async () => {
    const res = await h.request('GET', url, { key: tenant.key })
    t.equal(res.status, 200)
    return res.body.data
  }

  const bronze = await post(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0, max_points: 999 })
  const silver = await post(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 1000 })
  const euro = await post(tenant, '/gamification/currencies', { name: 'Euro', symbol: 'EUR', type: 'real' })
  const lp = await post(tenant, '/gamification/currencies', { name: 'Loyalty', symbol: 'LP', type: 'virtual' })
  const coins = await post(tenant, '/gamification/currencies', { name: 'Coins', symbol: 'C', type: 'virtual' })
  const daily = await post(tenant, '/gamification/missions', { name: 'Daily', type: 'daily', rules: { event_type: 'login', target: 2 }, rewards: { points: [{ currency_id: lp.id, amount: 10 }] } })
  const once = await post(tenant, '/gamification/missions', { name: 'Once', type: 'one_time', max_completions_per_player: 1, rules: { event_type: 'login', target: 1 } })
  await post(tenant, '/gamification/missions', { name: 'Cancelled', type: 'daily', status: 'cancelled' })
  await post(tenant, '/gamification/missions', { name: 'Over', type: 'daily', starts_at: '2020-01-01T00:00:00Z', ends_at: '2020-02-01T00:00:00Z' })
  await post(tenant, '/gamification/missions', { name: 'Future', type: 'daily', starts_at: '2999-01-01T00:00:00Z' })
  const badge = await post(tenant, '/gamification/badges', { name: 'Welcome', rarity: 'rare', icon_url: 'https://x.example/w.png' })

  let p = await get()
  t.same(p.current_level, bronze, 'zero points reach the level whose min_points is 0')
  t.same(
    p.point_balances.map((b: { currency_id: string; balance: number; lifetime_earned: number }) => [b.currency_id, b.balance, b.lifetime_earned]),
    [[euro.id, 0, 0], [lp.id, 0, 0], [coins.id, 0, 0]],
    'one zero balance per brand currency',
  )
  t.same(p.point_balances[1], { currency_id: lp.id, name: 'Loyalty', symbol: 'LP', type: 'virtual', balance: 0, lifetime: 0, lifetime_earned: 0 })
  t.same(p.active_missions.map((m: { mission_id: string }) => m.mission_id), [daily.id, once.id])
  t.same(p.active_missions[0], {
    mission_id: daily.id, name: 'Daily', description: null, type: 'daily', rewards: { points: [{ currency_id: lp.id, amount: 10 }] },
    max_completions_per_player: null, starts_at: null, ends_at: null, progress: 0, target: 2, stage: 0, completions: 0,
    period_start: `${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`, opt_in: false, joined: true,
  })
  t.same(p.badges_earned, [])

  // State as the engine writes it: points in real (or bonus) currencies do not count toward the level,
  // lifetime points of every virtual currency do.
  await sql`insert into player_point_balances (player_id, currency_id, tenant_id, balance, lifetime_earned)
            values (${playerId}, ${euro.id}, ${tenant.id}, 5000, 5000), (${playerId}, ${coins.id}, ${tenant.id}, 0, 600)`
  p = await get()
  t.equal(p.current_level.id, bronze.id)
  await sql`insert into player_point_balances (player_id, currency_id, tenant_id, balance, lifetime_earned)
            values (${playerId}, ${lp.id}, ${tenant.id}, 200.5, 400.5)`
  const today = new Date(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`)
  await sql`insert into player_missions (player_id, mission_id, tenant_id, value, period_start, completions)
            values (${playerId}, ${once.id}, ${tenant.id}, 1, null, 1),
                   (${playerId}, ${daily.id}, ${tenant.id}, 1, ${today}, 3)`
  await sql`insert into player_badges (player_id, badge_id, tenant_id, earned_at)
            values (${playerId}, ${badge.id}, ${tenant.id}, '2026-03-01T10:00:00Z')`
  p = await get()
  t.same(p.current_level, silver, 'spent points do not lower the level: lifetime earned counts')
  t.same(p.point_balances[1], { currency_id: lp.id, name: 'Loyalty', symbol: 'LP', type: 'virtual', balance: 200.5, lifetime: 400.5, lifetime_earned: 400.5 })
  t.same(p.active_missions.map((m: { mission_id: string; completions: number; progress: unknown }) => [m.mission_id, m.completions, m.progress]), [
    [daily.id, 3, 1],
  ], 'a mission completed max_completions_per_player times is no longer active for the player')
  t.same(p.badges_earned, [
    { badge_id: badge.id, name: 'Welcome', description: null, icon_url: 'https://x.example/w.png', rarity: 'rare', earned_at: '2026-03-01T10:00:00.000Z' },
  ])

  // Deleting definitions removes them from the profile.
  await h.request('DELETE', `/gamification/levels/${silver.id}`, { key: tenant.key })
  await h.request('DELETE', `/gamification/badges/${badge.id}`, { key: tenant.key })
  p = await get()
  t.equal(p.current_level.id, bronze.id)
  t.same(p.badges_earned, [])
})

t.test('no level when every level needs more points than the player has', async (t) => {
  const tenant = await h.createTenant()
  const playerId = await makePlayer(tenant)
  await post(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 1000 })
  const res = await h.request('GET', `/gamification/player/${playerId}`, { key: tenant.key })
  t.equal(res.body.data.current_level, null)
})

t.test("the player's own brand supplies levels, currencies and missions", async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const playerId = await makePlayer(tenant, second.id)
  await post(tenant, '/gamification/levels', { name: 'Main level', tier: 1, min_points: 0 })
  await post(tenant, '/gamification/missions', { name: 'Main mission', type: 'daily' })
  const level = await post(tenant, '/gamification/levels', { name: 'Second level', tier: 1, min_points: 0, brand: 'second' })
  const res = await h.request('GET', `/gamification/player/${playerId}`, { key: tenant.key })
  t.equal(res.status, 200)
  t.equal(res.body.data.current_level.id, level.id)
  t.same(res.body.data.active_missions, [])
})

t.test('visibility: unknown player, another tenant, another brand for a pinned key → 404; read key may read', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant()
  await tenant.createBrand('second')
  const playerId = await makePlayer(tenant)
  const path = `/gamification/player/${playerId}`
  const unknown = await h.request('GET', '/gamification/player/00000000-0000-4000-8000-000000000000', { key: tenant.key })
  t.equal(unknown.status, 404)
  t.equal(unknown.body.code, 'NOT_FOUND')
  const foreign = await h.request('GET', path, { key: other.key })
  t.equal(foreign.status, 404)
  t.equal(foreign.body.code, 'NOT_FOUND')
  const pinnedElsewhere = await tenant.createKey({ brand: 'second' })
  t.equal((await h.request('GET', path, { key: pinnedElsewhere.key })).status, 404)
  const pinnedHere = await tenant.createKey({ brand: 'main' })
  t.equal((await h.request('GET', path, { key: pinnedHere.key })).status, 200)
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await h.request('GET', path, { key: reader.key })).status, 200)
  t.equal((await h.request('GET', '/gamification/player/not-a-uuid', { key: tenant.key })).status, 404)
  t.equal((await h.request('GET', path)).status, 401)
})

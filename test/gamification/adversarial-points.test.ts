// Adversarial checks of the points ledger and levels (contract-engines §5): exact decimals, the limits of
// a manual adjustment, debits and credits racing (never below 0, the ledger always adding up to the
// balance, each balance_after following the previous one), levels only from lifetime virtual points and
// only upward, level_changed chained through previous_level_id.
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { engineHelpers } from './engine-helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
const { create, send, profile, outbox, playerId, sql } = engineHelpers(h)

async function player(tenant: TestTenant, ext = 'p1') {
  await send(tenant, [{ player_id: ext, event_type: 'login' }])
  return playerId(tenant, ext)
}
const move = (tenant: TestTenant, pid: string, currency_id: string, amount: number, reason?: string) =>
  h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id, amount, ...(reason ? { reason } : {}) } })

t.test('decimals are exact: 0.1 + 0.2 is 0.3, ten decimals kept, a debit of the exact balance leaves 0', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const pid = await player(tenant)
  t.equal((await move(tenant, pid, lp.id, 0.1)).body.data.balance_after, 0.1)
  const second = await move(tenant, pid, lp.id, 0.2)
  t.equal(second.status, 201, second.text)
  t.equal(second.body.data.balance_after, 0.3, 'not 0.30000000000000004')
  const tiny = await move(tenant, pid, lp.id, 0.0000000001)
  t.equal(tiny.status, 201, tiny.text)
  t.equal(tiny.body.data.amount, 1e-10)
  const [bal] = await sql<{ balance: string; lifetime_earned: string }[]>`select balance::text, lifetime_earned::text from player_point_balances where player_id = ${pid}`
  t.same([Number(bal?.balance), Number(bal?.lifetime_earned)], [0.3000000001, 0.3000000001])
  const all = await move(tenant, pid, lp.id, -0.3000000001)
  t.equal(all.status, 201, all.text)
  t.equal(all.body.data.balance_after, 0)
  t.equal((await move(tenant, pid, lp.id, -0.0000000001)).status, 400, 'nothing left to debit')
  const p = await profile(tenant, 'p1')
  t.match(p.point_balances[0], { balance: 0, lifetime: 0.3000000001 })
})

t.test('limits: |amount| ≤ 1e12 accepted, beyond it 400 naming amount; huge balances stay exact', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const pid = await player(tenant)
  for (const amount of [1e12 + 1, -1e12 - 1, 1e300]) {
    const res = await move(tenant, pid, lp.id, amount)
    t.equal(res.status, 400, `${amount}: ${res.text}`)
    t.ok(res.body.details?.errors?.some((e: { field: string }) => e.field === 'amount'), 'names amount')
  }
  t.equal((await move(tenant, pid, lp.id, 1e12)).status, 201)
  const second = await move(tenant, pid, lp.id, 1e12)
  t.equal(second.body.data.balance_after, 2e12)
  const odd = await move(tenant, pid, lp.id, 0.5)
  t.equal(odd.body.data.balance_after, 2000000000000.5)
  const [bal] = await sql<{ balance: string }[]>`select balance::text from player_point_balances where player_id = ${pid}`
  t.equal(bal?.balance, '2000000000000.5')
  const refused = await move(tenant, pid, lp.id, -1e12)
  t.equal(refused.status, 201, 'a debit within the balance')
  t.equal(refused.body.data.balance_after, 1000000000000.5)
  t.same(await sql`select count(*)::int as n from point_ledger where player_id = ${pid}`, [{ n: 4 }], 'the refused adjustments left no entry')
})

t.test('a debit on a currency the player never held is 400 and writes nothing; a currency of another brand is 400', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const second = await tenant.createBrand('second')
  const theirs = await create(tenant, '/gamification/currencies', { name: 'Theirs', symbol: 'T', type: 'virtual', brand: second.slug })
  const pid = await player(tenant)
  const res = await move(tenant, pid, lp.id, -1)
  t.equal(res.status, 400)
  t.equal(res.body.details.errors[0].field, 'amount')
  const foreign = await move(tenant, pid, theirs.id, 5)
  t.equal(foreign.status, 400)
  t.equal(foreign.body.details.errors[0].field, 'currency_id')
  t.same(await sql`select 1 from point_ledger where player_id = ${pid}`, [])
  t.same(await sql`select balance::text from player_point_balances where player_id = ${pid}`, [], 'no balance row appeared')
  const pinned = await tenant.createKey({ brand: second.slug })
  t.equal((await h.request('POST', `/gamification/player/${pid}/points`, { key: pinned.key, body: { currency_id: theirs.id, amount: 5 } })).status, 404, 'a key pinned to another brand does not see the player')
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await h.request('POST', `/gamification/player/${pid}/points`, { key: reader.key, body: { currency_id: lp.id, amount: 5 } })).status, 403)
})

t.test('credits and debits racing: never below 0, the ledger sums to the balance, each balance_after follows the one before', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gems = await create(tenant, '/gamification/currencies', { name: 'Gems', symbol: 'G', type: 'virtual' })
  const pid = await player(tenant)
  await move(tenant, pid, lp.id, 30)
  await move(tenant, pid, gems.id, 7.5)
  const ops: [string, number][] = []
  for (let i = 0; i < 12; i++) ops.push([lp.id, -10.25])
  for (let i = 0; i < 4; i++) ops.push([lp.id, 5.5])
  for (let i = 0; i < 6; i++) ops.push([gems.id, -2.5])
  const results = await Promise.all(ops.map(([c, a]) => move(tenant, pid, c, a)))
  t.ok(results.every((r) => r.status === 201 || r.status === 400), results.map((r) => r.status).join(','))
  t.equal(results.filter((r, i) => ops[i]?.[1] === 5.5 && r.status === 201).length, 4, 'every credit went through')
  t.equal(results.filter((r, i) => ops[i]?.[0] === gems.id && r.status === 201).length, 3, 'gems: exactly 7.5 / 2.5 debits')
  const okDebits = results.filter((r, i) => ops[i]?.[1] === -10.25 && r.status === 201).length
  // 30 + 22 = 52 at most: 5 debits of 10.25 at most, and at least 2 (30 covers them whatever the order).
  t.ok(okDebits >= 2 && okDebits <= 5, `${okDebits} debits of 10.25`)
  for (const c of [lp.id, gems.id]) {
    const ledger = await sql<{ amount: string; balance_after: string }[]>`
      select amount::text, balance_after::text from point_ledger where player_id = ${pid} and currency_id = ${c} order by id`
    let running = 0
    let chained = true
    for (const row of ledger) {
      running = Math.round((running + Number(row.amount)) * 1e6) / 1e6
      if (Number(row.balance_after) !== running || running < 0) chained = false
    }
    t.ok(chained, `${c === lp.id ? 'LP' : 'Gems'}: each balance_after = the previous + amount, never negative`)
    const [bal] = await sql<{ balance: string }[]>`select balance::text from player_point_balances where player_id = ${pid} and currency_id = ${c}`
    t.equal(Number(bal?.balance), running, 'the balance is the ledger\'s sum')
  }
  const [lifetime] = await sql<{ l: string }[]>`select lifetime_earned::text as l from player_point_balances where player_id = ${pid} and currency_id = ${lp.id}`
  t.equal(Number(lifetime?.l), 52, 'lifetime: the credits only')
})

t.test('levels: only virtual lifetime points count (bonus and real do not); each change chains previous_level_id; never down', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const promo = await create(tenant, '/gamification/currencies', { name: 'Promo', symbol: 'PR', type: 'bonus' })
  const cash = await create(tenant, '/gamification/currencies', { name: 'Cash', symbol: 'EUR', type: 'real' })
  const bronze = await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 10 })
  const silver = await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 100 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 1000 })
  const pid = await player(tenant)
  await move(tenant, pid, promo.id, 5000)
  await move(tenant, pid, cash.id, 5000)
  t.equal((await profile(tenant, 'p1')).current_level, null, 'bonus and real points reach no level')
  t.same(await outbox(tenant, 'gamification.level_changed'), [])
  await move(tenant, pid, lp.id, 99.999999)
  t.equal((await profile(tenant, 'p1')).current_level.id, bronze.id, '99.999999 is short of 100')
  await move(tenant, pid, lp.id, 0.000001)
  t.equal((await profile(tenant, 'p1')).current_level.id, silver.id, 'exactly 100: silver')
  await move(tenant, pid, lp.id, -100)
  await move(tenant, pid, lp.id, 900)
  t.equal((await profile(tenant, 'p1')).current_level.id, gold.id, 'lifetime 1000 after spending 100: gold')
  const changes = (await outbox(tenant, 'gamification.level_changed')).map((e) => [e.data.previous_level_id, e.data.level_id, e.data.tier])
  t.same(changes, [[null, bronze.id, 1], [bronze.id, silver.id, 2], [silver.id, gold.id, 3]], 'one change per step, chained')
  await move(tenant, pid, lp.id, -900)
  t.equal((await profile(tenant, 'p1')).current_level.id, gold.id, 'spending everything keeps gold')
  t.equal((await outbox(tenant, 'gamification.level_changed')).length, 3)
  const [g] = await sql<{ level_id: string }[]>`select level_id from player_gamification where player_id = ${pid}`
  t.equal(g?.level_id, gold.id, 'the engine\'s level agrees with the profile')
})

t.test('one batch crossing two thresholds through a progressive mission: both stage rewards, one level change, ledger in order', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
  await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 50 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 150 })
  const pid = await player(tenant)
  await move(tenant, pid, lp.id, 1)
  const m = await create(tenant, '/gamification/missions', {
    name: 'Ladder', type: 'progressive', rules: {
      event_type: 'deposit', measure: 'sum',
      stages: [{ target: 10, rewards: { points: [{ currency_id: lp.id, amount: 60 }] } }, { target: 20, rewards: { points: [{ currency_id: lp.id, amount: 100.5 }] } }],
    },
  })
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 25, currency: 'EUR' } }])
  const ledger = await sql<{ amount: string; balance_after: string; source: string; source_id: string | null }[]>`
    select amount::text, balance_after::text, source, source_id from point_ledger where player_id = ${pid} order by id`
  t.same(ledger.map((r) => [Number(r.amount), Number(r.balance_after), r.source, r.source_id]), [[1, 1, 'manual', null], [60, 61, 'mission', m.id], [100.5, 161.5, 'mission', m.id]])
  const changes = (await outbox(tenant, 'gamification.level_changed')).map((e) => e.data.tier)
  t.same(changes, [1, 3], 'bronze on the first credit, then straight to gold for the batch')
  t.equal((await profile(tenant, 'p1')).current_level.id, gold.id)
  t.same((await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.stage), [1, 2])
})

t.test('the ledger route: newest first, currency filter, limit and offset; another tenant 404', async (t) => {
  const tenant = await h.createTenant()
  const a = await create(tenant, '/gamification/currencies', { name: 'A', symbol: 'A', type: 'virtual' })
  const b = await create(tenant, '/gamification/currencies', { name: 'B', symbol: 'B', type: 'virtual' })
  const pid = await player(tenant)
  for (const [c, amount] of [[a.id, 1], [b.id, 2], [a.id, 3], [a.id, -1], [b.id, 5]] as const) t.equal((await move(tenant, pid, c, amount, `r${amount}`)).status, 201)
  const get = async (query: Record<string, string | number>) => (await h.request('GET', `/gamification/player/${pid}/points`, { key: tenant.key, query })).body.data
  t.same((await get({})).map((e: { amount: number }) => e.amount), [5, -1, 3, 2, 1])
  t.same((await get({ currency_id: a.id })).map((e: { amount: number; balance_after: number }) => [e.amount, e.balance_after]), [[-1, 3], [3, 4], [1, 1]])
  t.same((await get({ limit: 2, offset: 1 })).map((e: { reason: string }) => e.reason), ['r-1', 'r3'])
  const other = await h.createTenant()
  t.equal((await h.request('GET', `/gamification/player/${pid}/points`, { key: other.key })).status, 404)
})

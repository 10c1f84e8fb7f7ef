// Points ledger, levels, badges and bonus grants (contract-engines §5): manual credits and debits, no
// negative balance under concurrent debits, levels up and never down on spending, each badge criterion,
// grants and their recorded refusals, the webhooks in the outbox.
import t from 'tap'
import { grantBonus } from '../../src/gamification/rewards.ts'
import { startHarness } from '../helpers/harness.ts'
import { engineHelpers } from './engine-helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
const { create, send, profile, outbox, playerId, sql } = engineHelpers(h)

t.test('manual credit and debit: ledger entries, balances, lifetime; a debit past the balance is 400', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const pid = await playerId(tenant, 'p1')
  const move = (amount: number, extra: Record<string, unknown> = {}) =>
    h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount, ...extra } })
  const credit = await move(100.5, { reason: 'goodwill' })
  t.equal(credit.status, 201, credit.text)
  t.match(credit.body.data, { player_id: pid, currency_id: lp.id, amount: 100.5, balance_after: 100.5, source: 'manual', reason: 'goodwill' })
  t.equal((await move(-40)).body.data.balance_after, 60.5)
  const over = await move(-61)
  t.equal(over.status, 400)
  t.equal(over.body.details.errors[0].field, 'amount')
  t.equal((await move(0)).status, 400, 'amount 0 is refused')
  t.equal((await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: '00000000-0000-4000-8000-000000000000', amount: 1 } })).body.details.errors[0].field, 'currency_id')
  const p = await profile(tenant, 'p1')
  t.match(p.point_balances[0], { balance: 60.5, lifetime: 100.5 })
  const ledger = await h.request('GET', `/gamification/player/${pid}/points`, { key: tenant.key })
  t.same(ledger.body.data.map((e: { amount: number }) => e.amount), [-40, 100.5], 'the ledger, newest first; the refused debit left no entry')
  const other = await h.createTenant()
  t.equal((await h.request('POST', `/gamification/player/${pid}/points`, { key: other.key, body: { currency_id: lp.id, amount: 1 } })).status, 404)
})

t.test('concurrent debits never overdraw: exactly balance / amount of them succeed', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const pid = await playerId(tenant, 'p1')
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: 100 } })
  const results = await Promise.all(
    Array.from({ length: 25 }, () => h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: -10 } })),
  )
  t.equal(results.filter((r) => r.status === 201).length, 10)
  t.equal(results.filter((r) => r.status === 400).length, 15)
  const [bal] = await sql<{ balance: string }[]>`select balance from player_point_balances where player_id = ${pid}`
  t.equal(bal?.balance, '0')
  const [sum] = await sql<{ s: string }[]>`select sum(amount) as s from point_ledger where player_id = ${pid}`
  t.equal(sum?.s, '0', 'the ledger sums to the balance')
})

t.test('levels from lifetime virtual points: up with earning, never down with spending; level_changed, level_tier badge', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const real = await create(tenant, '/gamification/currencies', { name: 'Cash', symbol: 'EUR', type: 'real' })
  const bronze = await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
  const silver = await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 100 })
  const tierBadge = await create(tenant, '/gamification/badges', { name: 'Silver club', criteria: { level_tier: 2 } })
  await create(tenant, '/gamification/missions', { name: 'Bet 2', type: 'one_time', rules: { event_type: 'bet', target: 2 }, rewards: { points: [{ currency_id: lp.id, amount: 60 }] } })
  await create(tenant, '/gamification/missions', { name: 'Deposit', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 50 }, { currency_id: real.id, amount: 1000 }] } })
  await send(tenant, [{ player_id: 'p1', event_type: 'bet', payload: { amount: 1 } }, { player_id: 'p1', event_type: 'bet', payload: { amount: 1 } }])
  const pid = await playerId(tenant, 'p1')
  t.equal((await profile(tenant, 'p1')).current_level.id, bronze.id, '60 points: bronze')
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 10 } }])
  let p = await profile(tenant, 'p1')
  t.equal(p.current_level.id, silver.id, '110 virtual points: silver (the real currency does not count)')
  const changed = await outbox(tenant, 'gamification.level_changed')
  t.same(changed.map((e) => [e.data.level_id, e.data.previous_level_id, e.data.tier]), [[bronze.id, null, 1], [silver.id, bronze.id, 2]])
  t.ok(p.badges_earned.some((b: { badge_id: string }) => b.badge_id === tierBadge.id), 'level_tier badge earned')
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: -100 } })
  p = await profile(tenant, 'p1')
  t.equal(p.current_level.id, silver.id, 'spending keeps the level')
  t.equal((await outbox(tenant, 'gamification.level_changed')).length, 2, 'no level change announced on spending')
})

t.test('badges: event criteria (count and sum over all time), missions completed; each earned once', async (t) => {
  const tenant = await h.createTenant()
  const roller = await create(tenant, '/gamification/badges', { name: 'Roller', criteria: { event_type: 'bet', measure: 'sum', target: 50, filters: [{ field: 'currency', op: 'eq', value: 'eur' }] } })
  const loginer = await create(tenant, '/gamification/badges', { name: 'Regular', criteria: { event_type: 'login', target: 3 } })
  const finisher = await create(tenant, '/gamification/badges', { name: 'Finisher', criteria: { missions_completed: 2 } })
  // The stream's pre-test on the ingest worker asks only for what a badge could count: the roller's bets
  // behind its filter (a USD bet makes no stream row), their rollbacks whole, logins bare.
  const interest = (await h.app.ctx.gamification!.consumer.interest(sql, [tenant.brand.id])).get(tenant.brand.id)
  const typeOf = (x: unknown) => (typeof x === 'string' ? x : (x as { type: string }).type)
  t.same([...(interest ?? [])].sort((a, b) => (typeOf(a) < typeOf(b) ? -1 : 1)), [{ type: 'bet', filters: [{ field: 'currency', op: 'eq', value: 'eur' }] }, 'bet_rollback', 'login'])
  await create(tenant, '/gamification/missions', { name: 'M1', type: 'one_time', rules: { event_type: 'login', target: 1 } })
  await create(tenant, '/gamification/missions', { name: 'M2', type: 'one_time', rules: { event_type: 'login', target: 2 } })
  await send(tenant, [{ player_id: 'p1', event_type: 'bet', payload: { amount: 30, currency: 'EUR' } }, { player_id: 'p1', event_type: 'bet', payload: { amount: 30, currency: 'USD' } }, { player_id: 'p1', event_type: 'login' }])
  let earned = (await profile(tenant, 'p1')).badges_earned.map((b: { badge_id: string }) => b.badge_id)
  t.same(earned, [], 'nothing yet: 30 EUR, one login, one mission')
  await send(tenant, [{ player_id: 'p1', event_type: 'bet', payload: { amount: 20, currency: 'EUR' } }, { player_id: 'p1', event_type: 'login' }])
  earned = (await profile(tenant, 'p1')).badges_earned.map((b: { badge_id: string }) => b.badge_id)
  t.same(new Set(earned), new Set([roller.id, finisher.id]), '50 EUR reached; two missions completed')
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }, { player_id: 'p1', event_type: 'login' }, { player_id: 'p1', event_type: 'bet', payload: { amount: 100, currency: 'EUR' } }])
  earned = (await profile(tenant, 'p1')).badges_earned.map((b: { badge_id: string }) => b.badge_id)
  t.same(new Set(earned), new Set([roller.id, finisher.id, loginer.id]))
  const webhooks = await outbox(tenant, 'gamification.badge_earned')
  t.equal(webhooks.length, 3, 'each badge announced once')
  t.ok(webhooks.every((w) => w.data.brand_id === tenant.brand.id && typeof w.data.player_id === 'string'))
})

t.test('bonus grants: 201 and bonus.granted; inactive bonus and non-active player refused (400) and recorded; rewards skip them', async (t) => {
  const tenant = await h.createTenant()
  const bonus = await create(tenant, '/bonuses', { name: 'Reload', type: 'reload', value: 50, value_type: 'percent', wagering_requirement: 35, expires_in_hours: 48 })
  const off = await create(tenant, '/bonuses', { name: 'Old', type: 'custom', value: 5, value_type: 'fixed', active: false })
  await create(tenant, '/gamification/missions', { name: 'Deposit', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { bonus_ids: [bonus.id] } })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }, { player_id: 'p2', event_type: 'login' }])
  const p1 = await playerId(tenant, 'p1')
  const p2 = await playerId(tenant, 'p2')
  const granted = await h.request('POST', `/bonuses/${bonus.id}/grant`, { key: tenant.key, body: { player_id: p1, reason: 'vip' } })
  t.equal(granted.status, 201, granted.text)
  t.match(granted.body.data, { bonus_id: bonus.id, player_id: p1, status: 'granted' })
  t.ok(Math.abs(Date.parse(granted.body.data.expires_at) - Date.now() - 48 * 3600_000) < 60_000, 'expires_in_hours applied')
  const [event] = await outbox(tenant, 'bonus.granted')
  t.same(event?.data, {
    grant_id: granted.body.data.id, bonus_id: bonus.id, player_id: p1, external_id: 'p1', type: 'reload', value: 50, value_type: 'percent',
    wagering_requirement: 35, expires_at: granted.body.data.expires_at, brand_id: tenant.brand.id,
  })
  const inactive = await h.request('POST', `/bonuses/${off.id}/grant`, { key: tenant.key, body: { player_id: p1 } })
  t.equal(inactive.status, 400)
  t.equal(inactive.body.details.reason, 'bonus_inactive')
  // p2 self-excludes: nothing is granted any more, by hand or as a reward.
  await send(tenant, [{ player_id: 'p2', event_type: 'status_change', payload: { status: 'self_excluded' } }])
  const refused = await h.request('POST', `/bonuses/${bonus.id}/grant`, { key: tenant.key, body: { player_id: p2 } })
  t.equal(refused.status, 400)
  t.equal(refused.body.details.reason, 'player_not_active')
  await send(tenant, [{ player_id: 'p2', event_type: 'deposit', payload: { amount: 10 } }, { player_id: 'p1', event_type: 'deposit', payload: { amount: 10 } }])
  const list = async (id: string, status?: string) =>
    (await h.request('GET', `/players/${id}/bonuses`, { key: tenant.key, query: status ? { status } : {} })).body.data
  t.same((await list(p1)).map((g: { source: string }) => g.source), ['mission', 'manual'], 'p1: the mission reward and the manual grant')
  t.same(await list(p2), [], 'p2: nothing granted')
  t.same((await list(p2, 'refused')).map((g: { refusal_reason: string; source: string }) => [g.source, g.refusal_reason]), [['mission', 'player_not_active'], ['manual', 'player_not_active']], 'both refusals recorded')
  t.equal((await outbox(tenant, 'bonus.granted')).length, 2)
  const other = await h.createTenant()
  t.equal((await h.request('POST', `/bonuses/${bonus.id}/grant`, { key: other.key, body: { player_id: p1 } })).status, 404)
  t.equal((await h.request('GET', `/players/${p1}/bonuses`, { key: other.key })).status, 404)
})

t.test('a bonus of another brand of the tenant is granted to nobody and recorded nowhere, as an unknown bonus', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const theirs = await h.request('POST', '/bonuses', { key: tenant.key, query: { brand: second.id }, body: { name: 'Theirs', type: 'custom', value: 5, value_type: 'fixed' } })
  t.equal(theirs.status, 201, theirs.text)
  t.same(await sql`select brand_id from bonuses where id = ${theirs.body.data.id as string}`, [{ brand_id: second.id }])
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const p1 = await playerId(tenant, 'p1')
  // Every caller checks the bonus's brand first; grantBonus itself must not trust them to.
  const out = await sql.begin((tx) => grantBonus(tx, { playerId: p1, tenantId: tenant.id, brandId: tenant.brand.id, bonusId: theirs.body.data.id, source: 'manual' }))
  t.match(out, { id: '', status: 'refused', refusal_reason: 'bonus_not_found' })
  t.same(await sql`select 1 from bonus_grants where player_id = ${p1}`, [], 'nothing recorded')
  t.same(await outbox(tenant, 'bonus.granted'), [], 'no webhook')
  const viaRoute = await h.request('POST', `/bonuses/${theirs.body.data.id}/grant`, { key: tenant.key, body: { player_id: p1 } })
  t.equal(viaRoute.status, 400, viaRoute.text)
  t.equal(viaRoute.body.details.errors[0].field, 'player_id', 'the route checks first: the player is not in the bonus\'s brand')
  t.same(await sql`select 1 from bonus_grants where player_id = ${p1}`, [], 'still nothing recorded')
})

t.test('several completions of one player in one batch: ledger in order with a running balance, one level change', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gems = await create(tenant, '/gamification/currencies', { name: 'Gems', symbol: 'GEM', type: 'virtual' })
  await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 100 })
  // All three completed by the same event, so in one batch (in whatever order the engine folds them).
  const a = await create(tenant, '/gamification/missions', { name: 'A', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 30 }] } })
  const b = await create(tenant, '/gamification/missions', { name: 'B', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 45.5 }, { currency_id: gems.id, amount: 7 }] } })
  const c = await create(tenant, '/gamification/missions', { name: 'C', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 40 }] } })
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 10 } }, { player_id: 'p2', event_type: 'deposit', payload: { amount: 10 } }])
  const pid = await playerId(tenant, 'p1')
  const ledger = await sql<{ currency_id: string; amount: string; balance_after: string; source_id: string }[]>`
    select currency_id, amount::text, balance_after::text, source_id from point_ledger where player_id = ${pid} order by id`
  const lpRows = ledger.filter((r) => r.currency_id === lp.id)
  t.same(lpRows.map((r) => Number(r.amount)).sort((x, y) => x - y), [30, 40, 45.5], 'one ledger row per mission reward')
  let running = 0
  for (const r of lpRows) {
    running += Number(r.amount)
    t.equal(Number(r.balance_after), running, `balance_after runs in ledger order (${r.source_id})`)
  }
  t.same(ledger.filter((r) => r.currency_id === gems.id).map((r) => [Number(r.amount), Number(r.balance_after), r.source_id]), [[7, 7, b.id]])
  t.same(new Set(ledger.map((r) => r.source_id)), new Set([a.id, b.id, c.id]))
  const p = await profile(tenant, 'p1')
  t.same(p.point_balances.map((x: { currency_id: string; balance: number }) => [x.currency_id, x.balance]).sort(), [[lp.id, 115.5], [gems.id, 7]].sort())
  t.equal(p.current_level.id, gold.id, '122.5 virtual points: gold')
  const changes = (await outbox(tenant, 'gamification.level_changed')).filter((e) => e.data.player_id === pid)
  t.equal(changes.length, 1, 'one level change for the batch')
  t.equal(changes[0]?.data.level_id, gold.id)
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 6, 'three completions each for p1 and p2')
})

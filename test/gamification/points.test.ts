// Points: the engine's ledger and its adversarial checks, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { grantBonus } from '../../src/gamification/rewards.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { engineHelpers } from './engine-helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })

// Points ledger, levels, badges and bonus grants (contract-engines §5): manual credits and debits, no
// negative balance under concurrent debits, levels up and never down on spending, each badge criterion,
// grants and their recorded refusals, the webhooks in the outbox.
t.test('engine-points', async (t) => {
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
})

// Adversarial checks of the points ledger and levels (contract-engines §5): exact decimals, the limits of
// a manual adjustment, debits and credits racing (never below 0, the ledger always adding up to the
// balance, each balance_after following the previous one), levels only from lifetime virtual points and
// only upward, level_changed chained through previous_level_id.
t.test('adversarial-points', async (t) => {
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
})

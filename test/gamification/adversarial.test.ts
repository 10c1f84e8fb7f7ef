// Adversarial checks of the gamification engine (contract-engines §1 and §5, docs/gamification.md) that
// the other files do not make: exact window and period boundaries, late events, duplicates inside one
// request, other brands, definitions changed or deleted while players hold progress, partial rollbacks
// of badge progress, milestone badges reached through every kind of completion, rewards to players who
// are not active, custom and mapped event types.
import t from 'tap'
import { periodStart } from '../../src/gamification/periods.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { at, eid, engineHelpers } from './engine-helpers.ts'

// Error logs are kept: a batch of the event stream that fails (and is then applied event by event) logs one.
const errors: string[] = []
const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', LOG_LEVEL: 'error' }, logDestination: { write: (line: string) => void errors.push(line) } })
const { create, send, settle, profile, mission, outbox, playerId, state, sql } = engineHelpers(h)

const bet = (player: string, amount: number, extra: Record<string, unknown> = {}, time?: string) => ({
  player_id: player, event_type: 'bet', ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR', game: 'starburst', ...extra },
})
/** Events to a brand named by hint (x-brand), waiting until the stream applied them. */
async function sendTo(tenant: TestTenant, brand: string, events: Record<string, unknown>[]) {
  const res = await h.request('POST', '/events', { key: tenant.key, headers: { 'x-brand': brand }, body: { events: events.map((e) => ({ event_id: eid(), ...e })) } })
  if (res.status !== 200) throw new Error(`events: ${res.status} ${res.text}`)
  await settle()
  return res.body
}
const badgeIds = async (tenant: TestTenant, ext: string) => (await profile(tenant, ext)).badges_earned.map((b: { badge_id: string }) => b.badge_id)

t.test('window boundaries: events exactly at starts_at and at ends_at count, 1 ms outside them does not', async (t) => {
  const tenant = await h.createTenant()
  const start = Date.now() - 3600_000
  const end = Date.now() + 3600_000
  const m = await create(tenant, '/gamification/missions', {
    name: 'Window', type: 'one_time', rules: { event_type: 'bet', target: 100 }, starts_at: at(start), ends_at: at(end),
  })
  await send(tenant, [bet('p1', 1, {}, at(start - 1)), bet('p1', 1, {}, at(start)), bet('p1', 1, {}, at(end)), bet('p1', 1, {}, at(end + 1))])
  t.equal((await state(await playerId(tenant, 'p1'), m.id))?.value, '2', 'inclusive [starts_at, ends_at]: the two events on the bounds')
})

t.test('daily period in a half-hour zone (Asia/Kolkata): an event 1 ms before local midnight is yesterday, one at 00:00 today', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'Daily IST', type: 'daily', rules: { event_type: 'bet', target: 5, timezone: 'Asia/Kolkata' } })
  // Local midnight of two days ago in IST: 18:30 UTC of the day before.
  const d = new Date(Date.now() - 2 * 86_400_000)
  const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) - 5.5 * 3600_000
  await send(tenant, [bet('p1', 1, {}, at(midnight - 3600_000)), bet('p1', 1, {}, at(midnight - 1))])
  const pid = await playerId(tenant, 'p1')
  t.match(await state(pid, m.id), { value: '2', period_start: new Date(midnight - 86_400_000) }, 'both in the day before')
  await send(tenant, [bet('p1', 1, {}, at(midnight))])
  t.match(await state(pid, m.id), { value: '1', period_start: new Date(midnight) }, 'local 00:00:00.000 starts the new day')
  // A late event of the day before, now that the new day has begun: not counted (docs: that period is over).
  await send(tenant, [bet('p1', 1, {}, at(midnight - 2))])
  t.match(await state(pid, m.id), { value: '1', period_start: new Date(midnight) }, 'late event of the previous period ignored')
  // A late event inside the current period still counts.
  await send(tenant, [bet('p1', 1, {}, at(midnight + 1000)), bet('p1', 1, {}, at(midnight + 10))])
  t.match(await state(pid, m.id), { value: '3' }, 'out-of-order events of the current period count')
})

t.test('a duplicated event_id inside one request and across requests counts once; another brand\'s events do not count', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const m = await create(tenant, '/gamification/missions', { name: 'Sum', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  const badge = await create(tenant, '/gamification/badges', { name: 'Ten bets', criteria: { event_type: 'bet', target: 2 } })
  const theirs = await create(tenant, '/gamification/missions', { name: 'Theirs', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 }, brand: second.slug })
  const dup = eid()
  const res = await send(tenant, [{ ...bet('p1', 7.25), event_id: dup }, { ...bet('p1', 7.25), event_id: dup }])
  t.equal(res.deduped, 1, 'the second copy is a duplicate')
  await send(tenant, [{ ...bet('p1', 7.25), event_id: dup }])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.value, '7.25', 'counted once')
  t.same(await badgeIds(tenant, 'p1'), [], 'one bet only: no badge')
  // The same external id and event_id in the second brand: another player, dedupe is per brand.
  await sendTo(tenant, second.slug, [{ ...bet('p1', 100), event_id: dup }, bet('p1', 1)])
  t.equal((await state(pid, m.id))?.value, '7.25', 'the second brand\'s bets do not move the main brand\'s mission')
  t.same(await badgeIds(tenant, 'p1'), [], 'nor its badge')
  const theirPlayer = await playerId(tenant, 'p1', second.id)
  t.equal((await state(theirPlayer, theirs.id))?.value, '101', 'the second brand\'s mission counts both (dedupe is per brand)')
  t.equal(await state(theirPlayer, m.id), undefined, 'and the main brand\'s mission holds nothing for that player')
  t.same((await outbox(tenant, 'gamification.badge_earned')).length, 0, 'no badge for anybody: the badge lives in the main brand')
  t.ok(badge.id)
})

t.test('mission PATCH while players have progress: a new event_type counts at once, a lower target completes on the next event', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const m = await create(tenant, '/gamification/missions', {
    name: 'Bets', type: 'one_time', rules: { event_type: 'bet', target: 10 }, rewards: { points: [{ currency_id: lp.id, amount: 5 }] },
  })
  await send(tenant, [bet('p1', 1), bet('p1', 1), bet('p1', 1)])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.value, '3')
  const lower = await h.request('PATCH', `/gamification/missions/${m.id}`, { key: tenant.key, body: { rules: { event_type: 'bet', target: 4 } } })
  t.equal(lower.status, 200, lower.text)
  await send(tenant, [bet('p1', 1)])
  t.match(await state(pid, m.id), { value: '4', completions: 1 }, 'the patched target applies at once')
  t.equal((await profile(tenant, 'p1')).point_balances[0].balance, 5)
  // A second mission whose type is switched from bet to deposit: deposits count immediately after the 200.
  const m2 = await create(tenant, '/gamification/missions', { name: 'Switch', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  await send(tenant, [bet('p1', 10)])
  const sw = await h.request('PATCH', `/gamification/missions/${m2.id}`, { key: tenant.key, body: { rules: { event_type: 'deposit', measure: 'sum', target: 1000 } } })
  t.equal(sw.status, 200, sw.text)
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 20, currency: 'EUR' } }, bet('p1', 500)])
  t.equal((await state(pid, m2.id))?.value, '30', 'the deposit counts, the bet no longer does')
  // Cancelled, then active again: events while cancelled never count.
  await h.request('PATCH', `/gamification/missions/${m2.id}`, { key: tenant.key, body: { status: 'cancelled' } })
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 20, currency: 'EUR' } }])
  t.equal((await state(pid, m2.id))?.value, '30', 'cancelled: not counted')
  await h.request('PATCH', `/gamification/missions/${m2.id}`, { key: tenant.key, body: { status: 'active' } })
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 1.5, currency: 'EUR' } }])
  t.equal((await state(pid, m2.id))?.value, '31.5', 'active again: counted')
})

t.test('deleting a mission and a badge that players have progress in: 200, gone from the profile, the stream goes on', async (t) => {
  const tenant = await h.createTenant()
  const gone = await create(tenant, '/gamification/missions', { name: 'Gone', type: 'one_time', rules: { event_type: 'bet', target: 10 } })
  const kept = await create(tenant, '/gamification/missions', { name: 'Kept', type: 'one_time', rules: { event_type: 'bet', target: 10 } })
  const badge = await create(tenant, '/gamification/badges', { name: 'B', criteria: { event_type: 'bet', target: 10 } })
  await send(tenant, [bet('p1', 1, { round_id: 'r1' }), bet('p1', 1)])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, gone.id))?.value, '2')
  for (const path of [`/gamification/missions/${gone.id}`, `/gamification/badges/${badge.id}`]) {
    const del = await h.request('DELETE', path, { key: tenant.key })
    t.equal(del.status, 200, `${path}: ${del.text}`)
  }
  t.same(await sql`select 1 from player_missions where mission_id = ${gone.id}`, [], 'its progress went with it')
  t.same(await sql`select 1 from player_badge_progress where badge_id = ${badge.id}`, [], 'the badge progress too')
  await send(tenant, [bet('p1', 1), { player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 1, currency: 'EUR', round_id: 'r1' } }, bet('p1', 1)])
  const p = await profile(tenant, 'p1')
  t.same(p.active_missions.map((x: { mission_id: string }) => x.mission_id), [kept.id])
  t.equal((await mission(tenant, 'p1', kept.id)).progress, 3, 'the other mission kept counting (4 bets, one rolled back)')
  t.same(p.badges_earned, [])
})

t.test('badge sum progress: a partial rollback takes back the rollback\'s amount (§1: sum −amount), as for missions', async (t) => {
  const tenant = await h.createTenant()
  const badge = await create(tenant, '/gamification/badges', { name: 'Wager 100', criteria: { event_type: 'bet', measure: 'sum', target: 100 } })
  const m = await create(tenant, '/gamification/missions', { name: 'Wager 100', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 100 } })
  await send(tenant, [bet('p1', 60, { round_id: 'r1' })])
  // The operator cancels 10 of the 60 wagered in round r1.
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 10, currency: 'EUR', round_id: 'r1' } }])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.value, '50', 'mission: 60 − 10')
  const [progress] = await sql<{ value: string }[]>`select value::text from player_badge_progress where player_id = ${pid} and badge_id = ${badge.id}`
  t.equal(progress?.value, '50', 'badge: 60 − 10 as well')
  await send(tenant, [bet('p1', 50)])
  t.same(await badgeIds(tenant, 'p1'), [badge.id], '50 + 50 = 100: earned')
  t.equal((await state(pid, m.id))?.completions, 1, 'the mission completed at 100')
})

t.test('missions_completed badges: reached through a collaborative completion as through any other', async (t) => {
  const tenant = await h.createTenant()
  const first = await create(tenant, '/gamification/badges', { name: 'First mission', criteria: { missions_completed: 1 } })
  const m = await create(tenant, '/gamification/missions', { name: 'Together', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 50 } })
  await send(tenant, [bet('a', 20)])
  await send(tenant, [bet('b', 40)])
  const [row] = await sql<{ status: string }[]>`select status from gamification_missions where id = ${m.id}`
  t.equal(row?.status, 'completed')
  const a = await playerId(tenant, 'a')
  const [g] = await sql<{ missions_completed: number }[]>`select missions_completed from player_gamification where player_id = ${a}`
  t.equal(g?.missions_completed, 1, 'the completion is counted for a')
  for (const p of ['a', 'b']) {
    t.same(await badgeIds(tenant, p), [first.id], `${p}: one mission completed earns the badge`)
  }
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 2, 'both contributors are announced')
})

t.test('milestone badges: level_tier is earned when a level jump skips its tier; missions_completed counts daily completions', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
  await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 100 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 200 })
  const silverClub = await create(tenant, '/gamification/badges', { name: 'Silver club', criteria: { level_tier: 2 } })
  const twice = await create(tenant, '/gamification/badges', { name: 'Two', criteria: { missions_completed: 2 } })
  await create(tenant, '/gamification/missions', { name: 'Daily login', type: 'daily', rules: { event_type: 'login', target: 1 } })
  await send(tenant, [{ player_id: 'p1', event_type: 'login', timestamp: at(Date.now() - 86_400_000) }])
  const pid = await playerId(tenant, 'p1')
  const credit = await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: 250 } })
  t.equal(credit.status, 201, credit.text)
  let p = await profile(tenant, 'p1')
  t.equal(p.current_level.id, gold.id)
  t.same(p.badges_earned.map((b: { badge_id: string }) => b.badge_id), [silverClub.id], 'tier 3 ≥ 2: the silver badge, though silver was never held')
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  p = await profile(tenant, 'p1')
  t.same(new Set(p.badges_earned.map((b: { badge_id: string }) => b.badge_id)), new Set([silverClub.id, twice.id]), 'yesterday\'s and today\'s daily completions: two')
  const changes = (await outbox(tenant, 'gamification.level_changed')).map((e) => e.data.tier)
  t.same(changes, [3], 'one change, straight to tier 3')
  // More credits in the same tier, and debits: no further change, no badge twice.
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: 1 } })
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: -251 } })
  t.equal((await outbox(tenant, 'gamification.level_changed')).length, 1)
  t.equal((await outbox(tenant, 'gamification.badge_earned')).length, 2, 'each badge announced once')
  t.equal((await profile(tenant, 'p1')).current_level.id, gold.id, 'a balance of 0 keeps gold')
})

t.test('a badge from rewards, criteria and a milestone at once is earned and announced once', async (t) => {
  const tenant = await h.createTenant()
  const badge = await create(tenant, '/gamification/badges', { name: 'Star', criteria: { event_type: 'deposit', target: 1 } })
  await create(tenant, '/gamification/missions', { name: 'A', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { badge_ids: [badge.id] } })
  await create(tenant, '/gamification/missions', { name: 'B', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { badge_ids: [badge.id, badge.id] } })
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  t.same(await badgeIds(tenant, 'p1'), [badge.id])
  t.equal((await outbox(tenant, 'gamification.badge_earned')).length, 1)
})

t.test('rewards skip players who are not active, but the mission still completes and is announced', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const badge = await create(tenant, '/gamification/badges', { name: 'Reward badge' })
  const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'reload', value: 10, value_type: 'fixed' })
  await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 1 })
  const m = await create(tenant, '/gamification/missions', {
    name: 'Deposit', type: 'one_time', rules: { event_type: 'deposit', target: 1 },
    rewards: { points: [{ currency_id: lp.id, amount: 10 }], badge_ids: [badge.id], bonus_ids: [bonus.id] },
  })
  await send(tenant, [{ player_id: 'p1', event_type: 'status_change', payload: { status: 'suspended' } }])
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.completions, 1, 'completed')
  const p = await profile(tenant, 'p1')
  t.equal(p.point_balances[0].balance, 0, 'no points')
  t.same(p.badges_earned, [], 'no reward badge')
  t.equal(p.current_level, null, 'no level')
  t.same(await sql`select 1 from point_ledger where player_id = ${pid}`, [], 'no ledger entry')
  const grants = await sql<{ status: string; refusal_reason: string; source: string; source_id: string }[]>`
    select status, refusal_reason, source, source_id from bonus_grants where player_id = ${pid}`
  t.same(grants, [{ status: 'refused', refusal_reason: 'player_not_active', source: 'mission', source_id: m.id }], 'the bonus refusal recorded')
  t.same((await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.mission_id), [m.id])
  t.same(await outbox(tenant, 'bonus.granted'), [])
  t.same(await outbox(tenant, 'gamification.level_changed'), [])
})

t.test('a custom (non-canonical) event type with a payload filter, and a mapped type with a mapped amount, drive missions', async (t) => {
  const tenant = await h.createTenant()
  const custom = await create(tenant, '/gamification/missions', {
    name: 'Tutorial', type: 'one_time', rules: { event_type: 'tutorial_step', target: 2, filters: [{ field: 'payload.step.kind', op: 'in', value: ['video', 'quiz'] }, { field: 'payload.score', op: 'gte', value: 50 }] },
  })
  const mapped = await create(tenant, '/gamification/missions', { name: 'Deposit 100', type: 'one_time', rules: { event_type: 'deposit', measure: 'sum', target: 100, filters: [{ field: 'currency', op: 'eq', value: 'usd' }] } })
  const put = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, {
    rules: [{ match: 'dep_ok', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.cur' } }], default_action: 'accept',
  })
  t.equal(put.status, 200, put.text)
  await send(tenant, [
    { player_id: 'p1', event_type: 'tutorial_step', payload: { step: { kind: 'video' }, score: 80 } },
    { player_id: 'p1', event_type: 'tutorial_step', payload: { step: { kind: 'text' }, score: 80 } },
    { player_id: 'p1', event_type: 'tutorial_step', payload: { step: { kind: 'quiz' }, score: 49.99 } },
    { player_id: 'p1', event_type: 'dep_ok', payload: { amt: '33.333333', cur: 'usd' } },
    { player_id: 'p1', event_type: 'dep_ok', payload: { amt: 40.5, cur: 'EUR' } },
  ])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, custom.id))?.value, '1', 'only the video step with score ≥ 50')
  t.equal((await state(pid, mapped.id))?.value, '33.333333', 'the mapped USD deposit, its mapped amount exactly')
  await send(tenant, [{ player_id: 'p1', event_type: 'tutorial_step', payload: { step: { kind: 'quiz' }, score: 50 } }])
  t.equal((await state(pid, custom.id))?.completions, 1)
})

t.test('weekly mission with max_completions_per_player 1: completes once across weeks; a daily completes on two days in one request', async (t) => {
  const tenant = await h.createTenant()
  const weekly = await create(tenant, '/gamification/missions', { name: 'Weekly', type: 'weekly', rules: { event_type: 'login', target: 1 }, max_completions_per_player: 1 })
  const daily = await create(tenant, '/gamification/missions', { name: 'Daily', type: 'daily', rules: { event_type: 'login', target: 2 } })
  const day = 86_400_000
  const now = Date.now()
  await send(tenant, [
    { player_id: 'p1', event_type: 'login', timestamp: at(now - 15 * day) },
    { player_id: 'p1', event_type: 'login', timestamp: at(now - 15 * day + 60_000) },
    { player_id: 'p1', event_type: 'login', timestamp: at(now - 8 * day) },
    { player_id: 'p1', event_type: 'login', timestamp: at(now - 8 * day + 60_000) },
    { player_id: 'p1', event_type: 'login', timestamp: at(now - 60_000) },
  ])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, weekly.id))?.completions, 1, 'capped at 1 over three weeks')
  t.equal((await state(pid, daily.id))?.completions, 2, 'two days with two logins each')
  const done = (await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.mission_id)
  t.equal(done.filter((x) => x === weekly.id).length, 1)
  t.equal(done.filter((x) => x === daily.id).length, 2)
  const [g] = await sql<{ missions_completed: number }[]>`select missions_completed from player_gamification where player_id = ${pid}`
  t.equal(g?.missions_completed, 3)
})

t.test('collaborative: a rollback lowers the brand total; amounts with six decimals sum exactly', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'Pool', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 1 } })
  await send(tenant, [bet('a', 0.333333, { round_id: 'ra' })])
  await send(tenant, [bet('b', 0.333333, { round_id: 'rb' })])
  await send(tenant, [{ player_id: 'a', event_type: 'bet_rollback', payload: { amount: 0.333333, currency: 'EUR', round_id: 'ra' } }])
  const [row] = await sql<{ status: string; total: string }[]>`select status, total::text from gamification_missions where id = ${m.id}`
  t.same(row, { status: 'active', total: '0.333333' })
  await send(tenant, [bet('c', 0.666667)])
  const [done] = await sql<{ status: string; total: string }[]>`select status, total::text from gamification_missions where id = ${m.id}`
  t.same([done?.status, Number(done?.total)], ['completed', 1], '0.333333 + 0.666667 = 1 exactly: completed')
  const rewarded = (await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.player_id).sort()
  t.same(rewarded, [await playerId(tenant, 'b'), await playerId(tenant, 'c')].sort(), 'a, whose contribution was rolled back to 0, is no contributor')
})

t.test('two bets of one round in one request both count, and each rollback takes back one of them (count −1, sum −amount)', async (t) => {
  const tenant = await h.createTenant()
  const cnt = await create(tenant, '/gamification/missions', { name: 'Count', type: 'one_time', rules: { event_type: 'bet', target: 100 } })
  const sum = await create(tenant, '/gamification/missions', { name: 'Sum', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  const before = errors.length
  await send(tenant, [bet('p1', 10, { round_id: 'multi' }), bet('p1', 20, { round_id: 'multi' }), bet('p1', 5, { round_id: 'other' })])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, cnt.id))?.value, '3', 'three bets counted')
  t.equal((await state(pid, sum.id))?.value, '35', 'sum of the three')
  // A round with several bets (a split, a re-bet) is ordinary input: the batch must not fail over it
  // (it did: two credits of one round in one INSERT ... ON CONFLICT DO UPDATE, and the stream then applied
  // the whole batch, up to 500 events of any players, one transaction per event).
  t.same(errors.slice(before).filter((l) => l.includes('batch failed')).map((l) => JSON.parse(l).err?.message), [], 'no failed batch')
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 10, currency: 'EUR', round_id: 'multi' } }])
  t.equal((await state(pid, cnt.id))?.value, '2', 'count −1 for one rollback')
  t.equal((await state(pid, sum.id))?.value, '25', 'sum −10')
})

t.test('progressive: a rollback below a passed stage and crossing it again grants that stage once', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const m = await create(tenant, '/gamification/missions', {
    name: 'Ladder', type: 'progressive', rules: {
      event_type: 'bet', measure: 'sum',
      stages: [{ target: 10, rewards: { points: [{ currency_id: lp.id, amount: 1 }] } }, { target: 100, rewards: { points: [{ currency_id: lp.id, amount: 10 }] } }],
    },
  })
  await send(tenant, [bet('p1', 12, { round_id: 'r1' })])
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 12, currency: 'EUR', round_id: 'r1' } }])
  const pid = await playerId(tenant, 'p1')
  t.match(await state(pid, m.id), { value: '0', stage: 1 }, 'progress back to 0, the stage reached stays')
  await send(tenant, [bet('p1', 15)])
  t.match(await state(pid, m.id), { value: '15', stage: 1 })
  t.equal((await profile(tenant, 'p1')).point_balances[0].balance, 1, 'stage 1 rewarded once')
  t.same((await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.stage), [1])
})

t.test('a future-dated event (clock skew, accepted up to a day ahead) does not stop today\'s events counting in today\'s period', async (t) => {
  const tenant = await h.createTenant()
  // A zone whose next local midnight is 1 to 22 hours away, so that "tomorrow 00:30 local" is accepted.
  const now = Date.now()
  let tz = 'UTC'
  let next = 0
  for (let off = -12; off <= 12; off++) {
    const zone = off === 0 ? 'UTC' : `Etc/GMT${off > 0 ? '+' : '-'}${Math.abs(off)}`
    const start = (periodStart('daily', zone, new Date(now)) as Date).getTime()
    const n = start + 86_400_000
    if (n - now > 3600_000 && n - now < 22 * 3600_000) {
      tz = zone
      next = n
      break
    }
  }
  t.ok(next > 0, `zone ${tz}`)
  const m = await create(tenant, '/gamification/missions', { name: 'Daily 3', type: 'daily', rules: { event_type: 'bet', target: 3, timezone: tz } })
  await send(tenant, [bet('p1', 1, {}, at(next + 30 * 60_000))])
  await send(tenant, [bet('p1', 1, {}, at(now)), bet('p1', 1, {}, at(now + 1)), bet('p1', 1, {}, at(now + 2))])
  const pid = await playerId(tenant, 'p1')
  const row = await state(pid, m.id)
  t.equal(row?.completions, 1, `§1: each event counts in the period of its own event_time: today's three bets complete today's mission (got ${JSON.stringify(row)})`)
})

t.test('huge amounts (at the 1e9 ingest limit) sum exactly in a player\'s progress and a collaborative total', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'High roller', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1e15 } })
  const c = await create(tenant, '/gamification/missions', { name: 'Pool', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 1e15 } })
  // Beyond ~9e9 units a micro-unit no longer fits a double's integer range (2^53): the sums stop below it.
  await send(tenant, Array.from({ length: 8 }, () => bet('p1', 999999999.999999)))
  await send(tenant, [bet('p1', 0.000001), bet('p2', 1e9)])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.value, '7999999999.999993', '8 × 999999999.999999 + 0.000001, to the micro-unit')
  t.equal((await state(await playerId(tenant, 'p2'), m.id))?.value, '1000000000', 'an amount of exactly 1e9 counts')
  const [row] = await sql<{ total: string }[]>`select total::text from gamification_missions where id = ${c.id}`
  t.match(row?.total, /^8999999999\.9999930*$/, 'the collaborative total, to the micro-unit')
  await send(tenant, [bet('p3', 1e9 + 1)])
  t.equal(await state(await playerId(tenant, 'p3'), m.id), undefined, 'beyond 1e9 an amount is not summed (docs/ingestion.md)')
})

t.test('a round rolled back and bet again in one batch keeps the new bet\'s credit for its own rollback', async (t) => {
  const tenant = await h.createTenant()
  const cnt = await create(tenant, '/gamification/missions', { name: 'Count', type: 'one_time', rules: { event_type: 'bet', target: 100 } })
  await send(tenant, [bet('p1', 10, { round_id: 'r' })])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, cnt.id))?.value, '1')
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 10, currency: 'EUR', round_id: 'r' } }, bet('p1', 10, { round_id: 'r' })])
  t.equal((await state(pid, cnt.id))?.value, '1', 'rolled back, then bet again')
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 10, currency: 'EUR', round_id: 'r' } }])
  t.equal((await state(pid, cnt.id))?.value, '0', 'the new bet\'s rollback takes it back (its credit was not lost to the first rollback\'s leftover)')
})

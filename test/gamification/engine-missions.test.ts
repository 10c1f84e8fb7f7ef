// Missions driven by ingested events (contract-engines §5): every type from a known event stream with
// exact progress, periods in a non-UTC zone across midnight and a Monday, stages in order, collaborative
// rewards to contributors only, opt-in, windows, rollbacks, max completions, duplicates, tenants.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { periodStart } from '../../src/gamification/periods.ts'
import { startHarness } from '../helpers/harness.ts'
import { at, eid, engineHelpers } from './engine-helpers.ts'

// The app's clock (the profile's "now", the engine's timers): the real one, unless a test pins it.
let pinnedNow: number | null = null
const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' }, clock: () => new Date(pinnedNow ?? Date.now()) })
const { create, send, profile, mission, outbox, playerId, state, sql } = engineHelpers(h)

const bet = (player: string, amount: number, extra: Record<string, unknown> = {}, time?: string) => ({
  player_id: player, event_type: 'bet', ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR', game: 'starburst', ...extra },
})

t.test('one_time, count and sum, filters: exact progress, completes once, rewards once, webhook', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'Loyalty', symbol: 'LP', type: 'virtual' })
  const count = await create(tenant, '/gamification/missions', {
    name: 'Three starburst bets', type: 'one_time',
    rules: { event_type: 'bet', filters: [{ field: 'game', op: 'eq', value: 'starburst' }, { field: 'amount', op: 'gte', value: 1 }], target: 3 },
    rewards: { points: [{ currency_id: lp.id, amount: 50 }] },
  })
  const sum = await create(tenant, '/gamification/missions', {
    name: 'Wager 100', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 100 },
  })
  await send(tenant, [bet('p1', 10), bet('p1', 0.5), bet('p1', 20, { game: 'other' }), { player_id: 'p1', event_type: 'login' }])
  t.equal((await mission(tenant, 'p1', count.id)).progress, 1, 'only the matching bet counts (game, amount ≥ 1)')
  t.equal((await mission(tenant, 'p1', sum.id)).progress, 30.5, 'sum adds exact amounts of every bet')
  await send(tenant, [bet('p1', 5), bet('p1', 5), bet('p1', 5)])
  const p = await profile(tenant, 'p1')
  t.notOk(p.active_missions.find((m: { mission_id: string }) => m.mission_id === count.id), 'completed: no longer active (one_time)')
  const pid = await playerId(tenant, 'p1')
  t.same(await state(pid, count.id), { value: '3', stage: 0, completions: 1, period_start: null }, 'stopped at the target')
  t.same(p.point_balances.map((b: { balance: number }) => b.balance), [50], 'reward credited once')
  const done = await outbox(tenant, 'gamification.mission_completed')
  t.same(done.map((e) => e.data), [{ player_id: pid, mission_id: count.id, stage: 1, brand_id: tenant.brand.id }])
  t.equal((await mission(tenant, 'p1', sum.id)).progress, 45.5)
})

t.test('daily and weekly periods in Europe/Berlin: reset at local midnight and at local Monday 00:00', async (t) => {
  const tenant = await h.createTenant()
  const tz = 'Europe/Berlin'
  const daily = await create(tenant, '/gamification/missions', { name: 'Daily', type: 'daily', rules: { event_type: 'bet', target: 3, timezone: tz } })
  const dailyUtc = await create(tenant, '/gamification/missions', { name: 'Daily UTC', type: 'daily', rules: { event_type: 'bet', target: 10 } })
  const weekly = await create(tenant, '/gamification/missions', { name: 'Weekly', type: 'weekly', rules: { event_type: 'bet', target: 10, timezone: tz } })
  // The app's "now" is pinned to local noon of a day at least 36 hours back: every event below (minutes
  // around that day's midnight or its week's Monday 00:00) is in the past, and no midnight passes during the
  // test, whatever the time of day it runs (with the wall clock, "midnight + 10 min" was a future event
  // from 00:00 to 00:10, and a test started just before midnight read its profile in the next day).
  const wallNow = Date.now()
  const noon = (periodStart('daily', tz, new Date(wallNow - 2 * 86_400_000)) as Date).getTime() + 12 * 3600_000
  pinnedNow = noon
  t.teardown(() => {
    pinnedNow = null
  })
  const now = new Date(noon)
  const midnight = periodStart('daily', tz, now) as Date
  const monday = periodStart('weekly', tz, now) as Date
  // Independent check of the boundaries: local 00:00, and a Monday.
  const local = new Intl.DateTimeFormat('en-GB', { timeZone: tz, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
  t.equal(local.format(midnight).replace(/^\w+ /, ''), '00:00')
  t.match(local.format(monday), /^Mon,? 00:00$/)
  t.match(local.format(now), /^\w+,? 1[1-3]:00$/, 'the pinned now: local noon (11:00 or 13:00 on a DST change day)')
  const min = 60_000
  t.ok(Math.max(midnight.getTime(), monday.getTime()) + 10 * min < noon && noon < wallNow - 24 * 3600_000, 'every event time is in the past')
  // Two bets before local midnight (yesterday), one after: today's progress is 1; yesterday's 2 never
  // reached 3. In UTC the three bets may fall into one day, depending on the hour: checked below.
  await send(tenant, [bet('p1', 1, {}, at(midnight.getTime() - 40 * min)), bet('p1', 1, {}, at(midnight.getTime() - 20 * min))])
  const pid = await playerId(tenant, 'p1')
  t.same((await state(pid, daily.id))?.value, '2')
  t.equal((await state(pid, daily.id))?.period_start?.toISOString(), (periodStart('daily', tz, new Date(midnight.getTime() - 40 * min)) as Date).toISOString(), 'yesterday\'s period')
  await send(tenant, [bet('p1', 1, {}, at(midnight.getTime() + 10 * min))])
  const d = await mission(tenant, 'p1', daily.id)
  t.equal(d.progress, 1, 'reset at local midnight')
  t.equal(d.period_start, midnight.toISOString())
  t.equal(d.completions, 0)
  const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10)
  const sameUtcDay = utcDay(midnight.getTime() - 40 * min) === utcDay(midnight.getTime() + 10 * min)
  t.equal((await state(pid, dailyUtc.id))?.value, sameUtcDay ? '3' : '1', 'a UTC mission splits the same bets at UTC midnight instead')

  // Weekly: Sunday 23:30 local then Monday 00:10 local.
  await send(tenant, [bet('p2', 1, {}, at(monday.getTime() - 30 * min)), bet('p2', 1, {}, at(monday.getTime() - 10 * min)), bet('p2', 1, {}, at(monday.getTime() + 10 * min))])
  const w = await mission(tenant, 'p2', weekly.id)
  t.equal(w.progress, 1, 'reset at Monday 00:00 local')
  t.equal(w.period_start, monday.toISOString())

  // A daily mission completes at most once per period, and again the next day.
  await send(tenant, [0, 1, 2, 3].map(() => bet('p3', 1, {}, at(midnight.getTime() - 30 * min))))
  await send(tenant, [0, 1, 2].map(() => bet('p3', 1, {}, at(midnight.getTime() + 5 * min))))
  const p3 = await playerId(tenant, 'p3')
  t.same(await state(p3, daily.id), { value: '3', stage: 0, completions: 2, period_start: midnight }, 'completed yesterday and today, once each')
})

t.test('period boundaries across DST changes', async (t) => {
  // Berlin: 2026-03-29 02:00 → 03:00 (spring forward); 2026-10-25 03:00 → 02:00 (fall back).
  t.equal(periodStart('daily', 'Europe/Berlin', new Date('2026-03-29T12:00:00Z'))?.toISOString(), '2026-03-28T23:00:00.000Z')
  t.equal(periodStart('daily', 'Europe/Berlin', new Date('2026-03-30T12:00:00Z'))?.toISOString(), '2026-03-29T22:00:00.000Z')
  t.equal(periodStart('daily', 'Europe/Berlin', new Date('2026-10-25T12:00:00Z'))?.toISOString(), '2026-10-24T22:00:00.000Z')
  t.equal(periodStart('weekly', 'Europe/Berlin', new Date('2026-03-29T21:59:00Z'))?.toISOString(), '2026-03-22T23:00:00.000Z', 'Sunday 23:59 CEST is still the week of Monday 23 March')
  t.equal(periodStart('weekly', 'America/New_York', new Date('2026-11-02T04:59:00Z'))?.toISOString(), '2026-10-26T04:00:00.000Z')
  t.equal(periodStart('weekly', 'America/New_York', new Date('2026-11-02T05:00:00Z'))?.toISOString(), '2026-11-02T05:00:00.000Z')
  t.equal(periodStart('one_time', 'UTC', new Date()), null)
})

t.test('progressive: stages in order, each stage rewarded once, completes at the last stage', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const badge = await create(tenant, '/gamification/badges', { name: 'Stage 2' })
  const m = await create(tenant, '/gamification/missions', {
    name: 'Ladder', type: 'progressive', rules: {
      event_type: 'deposit', measure: 'sum',
      stages: [
        { target: 10, rewards: { points: [{ currency_id: lp.id, amount: 1 }] } },
        { target: 50, rewards: { points: [{ currency_id: lp.id, amount: 10 }], badge_ids: [badge.id] } },
        { target: 100, rewards: { points: [{ currency_id: lp.id, amount: 100 }] } },
      ],
    },
  })
  const dep = (amount: number) => ({ player_id: 'p1', event_type: 'deposit', payload: { amount, currency: 'EUR' } })
  await send(tenant, [dep(5)])
  t.match(await mission(tenant, 'p1', m.id), { progress: 5, stage: 0, target: 10 })
  await send(tenant, [dep(60)]) // passes stages 1 and 2 at once
  t.match(await mission(tenant, 'p1', m.id), { progress: 65, stage: 2, target: 100 })
  let p = await profile(tenant, 'p1')
  t.equal(p.point_balances[0].balance, 11, 'stage 1 and 2 rewards')
  t.same(p.badges_earned.map((b: { badge_id: string }) => b.badge_id), [badge.id])
  await send(tenant, [dep(35), dep(100)])
  p = await profile(tenant, 'p1')
  t.equal(p.point_balances[0].balance, 111, 'stage 3 once; nothing after completion')
  t.notOk(p.active_missions.length, 'completed at the last stage')
  const stages = (await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.stage)
  t.same(stages, [1, 2, 3], 'one webhook per stage, in order')
  t.same((await outbox(tenant, 'gamification.badge_earned')).length, 1)
})

t.test('collaborative: the brand total counts; at the target only contributors are rewarded, once', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const m = await create(tenant, '/gamification/missions', {
    name: 'Community', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 100 }, rewards: { points: [{ currency_id: lp.id, amount: 7 }] },
  })
  const huge = await create(tenant, '/gamification/missions', { name: 'Huge', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 5e12 } })
  await send(tenant, [{ player_id: 'bystander', event_type: 'login' }, bet('a', 30), bet('b', 30)])
  t.match(await mission(tenant, 'a', m.id), { progress: 30, total: 60 })
  // One after the other: in one request, a's bet (another player, so maybe another claim loop of the
  // stream) could be applied after c's completed the mission, and then no longer count.
  await send(tenant, [bet('a', 10)])
  await send(tenant, [bet('c', 45)])
  const [row] = await sql<{ status: string; total: string }[]>`select status, total from gamification_missions where id = ${m.id}`
  t.same(row, { status: 'completed', total: '115' })
  for (const p of ['a', 'b', 'c']) t.equal((await profile(tenant, p)).point_balances[0].balance, 7, `${p} contributed: rewarded`)
  t.equal((await profile(tenant, 'bystander')).point_balances[0].balance, 0, 'no contribution, no reward')
  const [big] = await sql<{ status: string; total: string }[]>`select status, total from gamification_missions where id = ${huge.id}`
  t.same(big, { status: 'active', total: '115' }, 'a target beyond 1e9 is not reached by 115')
  await send(tenant, [bet('d', 500)])
  t.equal((await profile(tenant, 'd')).point_balances[0].balance, 0, 'after completion nothing counts')
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 3)
})

t.test('collaborative: a batch that read a contributor before its completion mark does not undo the mark', { skip: !process.env.DATABASE_URL && 'needs a second connection (PostgreSQL server)' }, async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'Together', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 1e6 } })
  await send(tenant, [bet('x', 10)])
  const x = await playerId(tenant, 'x')
  // What completeCollaborative does from another lane's batch: every contributor marked, in a transaction
  // that commits while this player's next batch has read the row (unmarked) and waits to write it.
  const other = await sql.reserve()
  t.teardown(() => other.release())
  await other`begin`
  await other`update player_missions set completions = completions + 1, period_done = true, last_completed_at = now() where mission_id = ${m.id} and value > 0`
  const res = await h.request('POST', '/events', { key: tenant.key, body: { events: [{ event_id: eid(), ...bet('x', 5) }] } })
  t.equal(res.status, 200, res.text)
  // The stream's batch is waiting for the row lock: it read the row before the mark commits.
  for (let i = 0; ; i++) {
    const [w] = await sql`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%insert into player_missions%'`
    if (w) break
    if (i > 200) throw new Error('the stream batch never waited on the mission row')
    await new Promise((r) => setTimeout(r, 25))
  }
  await other`commit`
  await h.app.ctx.stream!.idle()
  const row = await state(x, m.id)
  t.match(row, { value: '15', completions: 1 }, 'the bet counted and the completion kept')
  const [done] = await sql<{ period_done: boolean }[]>`select period_done from player_missions where player_id = ${x} and mission_id = ${m.id}`
  t.equal(done?.period_done, true, 'still done')
})

t.test('opt-in: only events after joining count; join needs an active mission and a known player', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'Opt in', type: 'one_time', rules: { event_type: 'bet', target: 5, opt_in: true } })
  await send(tenant, [bet('p1', 1), bet('p1', 1)])
  const pid = await playerId(tenant, 'p1')
  t.match(await mission(tenant, 'p1', m.id), { progress: 0, joined: false, opt_in: true })
  const joined = await h.request('POST', `/gamification/missions/${m.id}/join`, { key: tenant.key, body: { player_id: pid } })
  t.equal(joined.status, 200, joined.text)
  t.equal(joined.body.data.player_id, pid)
  await send(tenant, [bet('p1', 1)])
  t.match(await mission(tenant, 'p1', m.id), { progress: 1, joined: true })
  const again = await h.request('POST', `/gamification/missions/${m.id}/join`, { key: tenant.key, body: { player_id: pid } })
  t.equal(again.body.data.joined_at, joined.body.data.joined_at, 'joining twice keeps the first join')
  const unknown = await h.request('POST', `/gamification/missions/${m.id}/join`, { key: tenant.key, body: { player_id: '00000000-0000-4000-8000-000000000000' } })
  t.equal(unknown.status, 400)
  t.equal(unknown.body.details.errors[0].field, 'player_id')
  const other = await h.createTenant()
  t.equal((await h.request('POST', `/gamification/missions/${m.id}/join`, { key: other.key, body: { player_id: pid } })).status, 404, 'another tenant: 404')
})

t.test('windows: only events inside [starts_at, ends_at] count; expired past ends_at', async (t) => {
  const tenant = await h.createTenant()
  const start = Date.now() - 3600_000
  const m = await create(tenant, '/gamification/missions', {
    name: 'Window', type: 'one_time', rules: { event_type: 'bet', target: 100 }, starts_at: at(start), ends_at: at(Date.now() + 8000),
  })
  await send(tenant, [bet('p1', 1, {}, at(start - 1000)), bet('p1', 1, {}, at(start + 1000)), bet('p1', 1, {}, at(Date.now() + 3600_000))])
  t.equal((await state(await playerId(tenant, 'p1'), m.id))?.value, '1', 'before starts_at and after ends_at: not counted')
  // The timer expires it once ends_at has passed (a loaded machine may take a moment longer).
  let got = await h.request('GET', `/gamification/missions/${m.id}`, { key: tenant.key })
  for (let i = 0; i < 100 && got.body.data.status !== 'expired'; i++) {
    await new Promise((r) => setTimeout(r, 200))
    got = await h.request('GET', `/gamification/missions/${m.id}`, { key: tenant.key })
  }
  t.equal(got.body.data.status, 'expired')
  await send(tenant, [bet('p1', 1, {}, at(start + 2000))])
  t.equal((await state(await playerId(tenant, 'p1'), m.id))?.value, '1', 'an expired mission counts nothing more')
})

t.test('rollbacks take back what their bet added (same round), never below 0, not after completion; failed deposits never count', async (t) => {
  const tenant = await h.createTenant()
  const sum = await create(tenant, '/gamification/missions', { name: 'Sum', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  const cnt = await create(tenant, '/gamification/missions', { name: 'Count', type: 'one_time', rules: { event_type: 'bet', target: 2 } })
  const dep = await create(tenant, '/gamification/missions', { name: 'Deposits', type: 'one_time', rules: { event_type: 'deposit', target: 10 } })
  await send(tenant, [bet('p1', 40, { round_id: 'r1' }), bet('p1', 15, { round_id: 'r2' })])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, cnt.id))?.completions, 1, 'count mission completed by the two bets')
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 40, currency: 'EUR', round_id: 'r1' } }])
  t.equal((await state(pid, sum.id))?.value, '15', 'sum −40')
  t.equal((await state(pid, cnt.id))?.value, '2', 'completed: nothing taken back')
  await send(tenant, [
    { player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 40, currency: 'EUR', round_id: 'r1' } },
    { player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 99, currency: 'EUR', round_id: 'nope' } },
  ])
  t.equal((await state(pid, sum.id))?.value, '15', 'a second rollback of r1 and a rollback of an unknown round take nothing')
  await send(tenant, [
    { player_id: 'p1', event_type: 'deposit_failed', payload: { amount: 5, currency: 'EUR' } },
    { player_id: 'p1', event_type: 'deposit', payload: { amount: 5, currency: 'EUR' } },
  ])
  t.equal((await state(pid, dep.id))?.value, '1', 'the failed deposit does not count')
  // A round id of several KB that does not compress (an operator's opaque token): counted and taken back
  // like any other (as a key of the round's credits it exceeded an index entry: the event was set aside).
  const long = `round-${randomBytes(6000).toString('base64')}`
  await send(tenant, [bet('p1', 100, { round_id: long })])
  t.equal((await state(pid, sum.id))?.value, '115', 'a bet with an 8 KB round id counts')
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 100, currency: 'EUR', round_id: long } }])
  t.equal((await state(pid, sum.id))?.value, '15', 'and its rollback takes it back')
})

t.test('max_completions_per_player caps daily completions across periods', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'Twice', type: 'daily', rules: { event_type: 'login', target: 1 }, max_completions_per_player: 2 })
  const day = (d: number) => at(Date.now() - d * 86_400_000)
  await send(tenant, [3, 2, 1, 0].map((d) => ({ player_id: 'p1', event_type: 'login', timestamp: day(d) })))
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.completions, 2)
  t.notOk(await mission(tenant, 'p1', m.id), 'capped: no longer active for the player')
})

t.test('duplicate events change nothing; another tenant\'s events and missions stay apart', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', { name: 'Bets', type: 'one_time', rules: { event_type: 'bet', target: 100 } })
  const om = await create(other, '/gamification/missions', { name: 'Bets', type: 'one_time', rules: { event_type: 'bet', target: 100 } })
  const events = [0, 1, 2].map(() => ({ ...bet('p1', 1), event_id: eid() }))
  await send(tenant, events)
  const res = await send(tenant, events)
  t.equal(res.deduped, 3)
  t.equal((await mission(tenant, 'p1', m.id)).progress, 3, 'duplicates: still 3')
  await send(other, [bet('p1', 1)])
  t.equal((await mission(other, 'p1', om.id)).progress, 1)
  t.notOk(await mission(other, 'p1', m.id), 'the other tenant never sees this mission')
  const pid = await playerId(tenant, 'p1')
  t.equal((await h.request('GET', `/gamification/player/${pid}`, { key: other.key })).status, 404, 'nor this player')
})

t.test('rules are validated on create and patch: 400 naming the field', async (t) => {
  const tenant = await h.createTenant()
  const bad = async (body: Record<string, unknown>, field: string, method = 'POST', path = '/gamification/missions') => {
    const res = await h.request(method, path, { key: tenant.key, body })
    t.equal(res.status, 400, `${field}: ${res.text}`)
    t.ok(res.body.details?.errors?.some((e: { field: string }) => e.field === field), `names ${field}: ${JSON.stringify(res.body.details)}`)
  }
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet' } }, 'rules.target')
  await bad({ name: 'x', type: 'one_time', rules: { target: 1 } }, 'rules.event_type')
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet', target: 1, measure: 'avg' } }, 'rules.measure')
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet', target: 1, filters: [{ field: 'colour', op: 'eq', value: 1 }] } }, 'rules.filters.0.field')
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet', target: 1, filters: [{ field: 'amount', op: 'like', value: 1 }] } }, 'rules.filters.0.op')
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet', target: 1, filters: [{ field: 'amount', op: 'gt', value: 'x' }] } }, 'rules.filters.0.value')
  await bad({ name: 'x', type: 'daily', rules: { event_type: 'bet', target: 1, timezone: 'Mars/Base' } }, 'rules.timezone')
  await bad({ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: [{ target: 5 }, { target: 3 }] } }, 'rules.stages.1.target')
  await bad({ name: 'x', type: 'progressive', rules: { event_type: 'bet' } }, 'rules.stages')
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet', target: 1 }, rewards: { points: [{ currency_id: '00000000-0000-4000-8000-000000000000', amount: 5 }] } }, 'rewards.points.0.currency_id')
  await bad({ name: 'x', type: 'one_time', rules: { event_type: 'bet', target: 1 }, rewards: { bonus_ids: ['00000000-0000-4000-8000-000000000000'] } }, 'rewards.bonus_ids.0')
  const ok = await create(tenant, '/gamification/missions', { name: 'ok', type: 'one_time', rules: { event_type: 'bet', target: 1 } })
  await bad({ type: 'progressive' }, 'rules.stages', 'PATCH', `/gamification/missions/${ok.id}`)
  await bad({ name: 'b', criteria: { event_type: 'bet' } }, 'criteria.target', 'POST', '/gamification/badges')
  await bad({ name: 'b', criteria: { missions_completed: 0 } }, 'criteria.missions_completed', 'POST', '/gamification/badges')
  await bad({ name: 'x', game_config: { metric: 'rtp' } }, 'game_config.metric', 'POST', '/tournaments')
  await bad({ name: 'x', game_config: { metric: 'bet_amount', games: 'starburst' } }, 'game_config.games', 'POST', '/tournaments')
  await bad({ name: 'x', prize_pool: { prizes: [{ from_rank: 3, to_rank: 1 }] } }, 'prize_pool.prizes.0.to_rank', 'POST', '/tournaments')
  await bad({ name: 'x', prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: '00000000-0000-4000-8000-000000000000' }] } }, 'prize_pool.prizes.0.bonus_id', 'POST', '/tournaments')
})

t.test('a filtered mission (its filter tested on the ingest worker): a rollback of a counted round, whatever it carries, still takes back', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, '/gamification/missions', {
    name: 'Starburst', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000, filters: [{ field: 'game', op: 'eq', value: 'starburst' }] },
  })
  await send(tenant, [bet('p1', 40, { game: 'starburst', round_id: 'r1' }), bet('p1', 25, { game: 'roulette', round_id: 'r2' })])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.value, '40', 'only the filtered bet')
  // The rollback names no game: it takes back what round r1 was credited.
  await send(tenant, [{ player_id: 'p1', event_type: 'bet_rollback', payload: { amount: 40, currency: 'EUR', round_id: 'r1' } }])
  t.equal((await state(pid, m.id))?.value, '0', 'the rollback reached the engine (its type is not filtered)')
})

// Adversarial checks of missions and what they grant (contract-engines §1 and §5, docs/gamification.md)
// beyond adversarial.test.ts, points.test.ts and engine-missions.test.ts: exact progress of every
// mission type (float traps such as 0.1 + 0.2 and eight bets of 0.1, six decimals, 1e9 amounts, amounts
// that are no number), periods in the mission's zone across a month end, a Monday and DST change days
// (a 25-hour day, a 23-hour day, a repeated midnight hour), windows and late events, caps across periods,
// stages crossed in one batch, opt-in edge cases, collaborative totals after completion, rewards once per
// completion, levels and badges through missions, the profile's exact shape, rule validation, PATCH and
// DELETE of running missions, brands and duplicates.

import t from 'tap'
import { periodStart } from '../../src/gamification/periods.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { sleep } from '../helpers/wait.ts'
import { at, eid, engineHelpers } from './engine-helpers.ts'

// The app's clock (the profile's "now", the engine's timers and its "ahead of the clock" rule): the real
// one unless a test pins it. Tests run one after the other inside this file.
let pinnedNow: number | null = null
const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' }, clock: () => new Date(pinnedNow ?? Date.now()) })
const { create, send, profile, mission, outbox, playerId, state, sql } = engineHelpers(h)
t.afterEach(() => {
  pinnedNow = null
})

const MISSIONS = '/gamification/missions'
type Ev = Record<string, unknown>
const bet = (player: string, amount: unknown, extra: Ev = {}, time?: string): Ev => ({
  player_id: player, event_type: 'bet', ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR', game: 'starburst', ...extra },
})
const rollback = (player: string, amount: number, round: string): Ev => ({
  player_id: player, event_type: 'bet_rollback', payload: { amount, currency: 'EUR', round_id: round },
})
const login = (player: string, time?: string): Ev => ({ player_id: player, event_type: 'login', ...(time ? { timestamp: time } : {}) })
const deposit = (player: string, amount: number, time?: string): Ev => ({
  player_id: player, event_type: 'deposit', ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR' },
})
/** Events to a brand named by hint (x-brand), waiting until the stream applied them. */
async function sendTo(tenant: TestTenant, brand: string, events: Ev[]) {
  const res = await h.request('POST', '/events', { key: tenant.key, headers: { 'x-brand': brand }, body: { events: events.map((e) => ({ event_id: eid(), ...e })) } })
  if (res.status !== 200) throw new Error(`events: ${res.status} ${res.text}`)
  await h.app.ctx.stream!.idle()
}
const ids = (list: { badge_id?: string; mission_id?: string }[]) => list.map((x) => x.badge_id ?? x.mission_id)
async function missionRow(id: string) {
  const [row] = await sql<{ status: string; total: string }[]>`select status, total::text from gamification_missions where id = ${id}`
  return row
}
async function ledger(pid: string) {
  const rows = await sql<{ currency_id: string; amount: string; balance_after: string; source: string; source_id: string | null }[]>`
    select currency_id, amount::text, balance_after::text, source, source_id from point_ledger where player_id = ${pid} order by id`
  return rows.map((r) => ({ ...r, amount: Number(r.amount), balance_after: Number(r.balance_after) }))
}
async function missionsCompleted(pid: string) {
  const [g] = await sql<{ n: number }[]>`select missions_completed as n from player_gamification where player_id = ${pid}`
  return g?.n ?? 0
}

t.test('progress is exact: 0.1 + 0.2 = 0.3, eight bets of 0.1 reach 0.8 (mission, badge, collaborative), six decimals and 1e9 amounts sum exactly', async (t) => {
  const tenant = await h.createTenant()
  const sum = await create(tenant, MISSIONS, { name: 'Sum 0.8', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 0.8 } })
  const big = await create(tenant, MISSIONS, { name: 'Big', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1e15 } })
  const pool = await create(tenant, MISSIONS, { name: 'Pool 1.1', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 1.1 } })
  const badge = await create(tenant, '/gamification/badges', { name: 'Wager 0.8', criteria: { event_type: 'bet', measure: 'sum', target: 0.8 } })
  await send(tenant, [bet('p1', 0.1), bet('p1', 0.2)])
  const p1 = await playerId(tenant, 'p1')
  t.equal((await state(p1, sum.id))?.value, '0.3', '0.1 + 0.2 stored as 0.3')
  t.equal((await mission(tenant, 'p1', sum.id))?.progress, 0.3, 'and shown as 0.3, not 0.30000000000000004')
  t.match(await mission(tenant, 'p1', pool.id), { progress: 0.3, total: 0.3 })
  // In doubles, 0.1 added eight times is 0.7999999999999999 < 0.8: an engine summing doubles never completes.
  await send(tenant, Array.from({ length: 8 }, () => bet('p2', 0.1)))
  const p2 = await playerId(tenant, 'p2')
  t.match(await state(p2, sum.id), { value: '0.8', completions: 1 }, 'eight bets of 0.1 complete a target of 0.8')
  t.same(ids((await profile(tenant, 'p2')).badges_earned), [badge.id], 'and earn the badge of 0.8')
  t.same(await missionRow(pool.id), { status: 'completed', total: '1.1' }, '0.3 + 0.8 reaches the collaborative target of 1.1')
  // Six decimals, as strings and as numbers, and the largest amount ingestion sums (1e9).
  await send(tenant, [bet('p3', '999999999.999999'), bet('p3', 0.000001), bet('p3', '123.456789'), bet('p3', 1e9)])
  t.equal((await state(await playerId(tenant, 'p3'), big.id))?.value, '2000000123.456789', 'every micro-unit kept')
  t.equal((await mission(tenant, 'p3', big.id))?.progress, 2000000123.456789)
})

t.test('amounts that are no number add nothing to a sum (and a negative one takes nothing), but count as events', async (t) => {
  const tenant = await h.createTenant()
  const sum = await create(tenant, MISSIONS, { name: 'Sum', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  const cnt = await create(tenant, MISSIONS, { name: 'Count', type: 'one_time', rules: { event_type: 'bet', target: 1000 } })
  await send(tenant, [bet('p1', 10)])
  await send(tenant, [bet('p1', 'abc'), bet('p1', null), bet('p1', -5), bet('p1', '1e400'), bet('p1', true), { player_id: 'p1', event_type: 'bet', payload: { currency: 'EUR' } }])
  const pid = await playerId(tenant, 'p1')
  // docs/ingestion.md: "amounts ... (or not numbers) are stored as amount = 0 and left out of profile sums";
  // §1 sum "adds amount": a bet of −5 moves no money into a wager, and progress only goes down by a rollback.
  t.equal((await state(pid, sum.id))?.value, '10', 'the sum keeps the one real amount')
  // §1: count — "each matching event counts 1", whatever its amount.
  t.equal((await state(pid, cnt.id))?.value, '7', 'the count counts all seven bets')
})

t.test('daily and weekly periods in Pacific/Auckland across a month end (Oct 31 → Nov 1) and a Monday 00:00', async (t) => {
  const tenant = await h.createTenant()
  const tz = 'Pacific/Auckland' // NZDT, UTC+13, all of Oct/Nov 2026
  const daily = await create(tenant, MISSIONS, { name: 'Daily', type: 'daily', rules: { event_type: 'bet', target: 2, timezone: tz } })
  const weekly = await create(tenant, MISSIONS, { name: 'Weekly', type: 'weekly', rules: { event_type: 'bet', target: 10, timezone: tz } })
  const local = new Intl.DateTimeFormat('en-GB', { timeZone: tz, weekday: 'short', day: '2-digit', month: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
  // Independent check of the instants used: what they are on the local wall clock.
  t.match(local.format(new Date('2026-10-31T11:00:00Z')), /^Sun,? 01 Nov,? 00:00$/)
  t.match(local.format(new Date('2026-11-01T11:00:00Z')), /^Mon,? 02 Nov,? 00:00$/)
  t.match(local.format(new Date('2026-10-25T11:00:00Z')), /^Mon,? 26 Oct,? 00:00$/)
  await send(tenant, [
    bet('p1', 1, {}, '2026-10-26T20:00:00.000Z'), // Tue 27 Oct 09:00
    bet('p1', 1, {}, '2026-10-31T10:30:00.000Z'), // Sat 31 Oct 23:30
    bet('p1', 1, {}, '2026-10-31T10:59:59.999Z'), // Sat 31 Oct 23:59:59.999: completes Saturday
    bet('p1', 1, {}, '2026-10-31T11:00:00.000Z'), // Sun 1 Nov 00:00: a new day, a new month, the same ISO week
    bet('p1', 1, {}, '2026-11-01T10:59:59.999Z'), // Sun 1 Nov 23:59:59.999: completes Sunday
  ])
  const pid = await playerId(tenant, 'p1')
  t.same(await state(pid, daily.id), { value: '2', stage: 0, completions: 2, period_start: new Date('2026-10-31T11:00:00Z') }, 'Saturday and Sunday completed, once each')
  t.same(await state(pid, weekly.id), { value: '5', stage: 0, completions: 0, period_start: new Date('2026-10-25T11:00:00Z') }, 'the five bets of one ISO week (a month end inside it does not reset it)')
  await send(tenant, [bet('p1', 1, {}, '2026-11-01T11:00:00.000Z')]) // Mon 2 Nov 00:00
  t.match(await state(pid, daily.id), { value: '1', completions: 2, period_start: new Date('2026-11-01T11:00:00Z') })
  t.match(await state(pid, weekly.id), { value: '1', period_start: new Date('2026-11-01T11:00:00Z') }, 'local Monday 00:00 starts the week')
  // The profile at Mon 2 Nov 01:00 local, then at Tue 3 Nov 00:00 local (the daily period ended since: 0).
  pinnedNow = Date.parse('2026-11-01T12:00:00Z')
  t.match(await mission(tenant, 'p1', daily.id), { progress: 1, completions: 2, period_start: '2026-11-01T11:00:00.000Z' })
  pinnedNow = Date.parse('2026-11-02T11:00:00Z')
  t.match(await mission(tenant, 'p1', daily.id), { progress: 0, stage: 0, completions: 2, period_start: '2026-11-02T11:00:00.000Z' }, 'a period that ended since shows 0')
  t.match(await mission(tenant, 'p1', weekly.id), { progress: 1, period_start: '2026-11-01T11:00:00.000Z' })
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 2)
})

t.test('DST change days: a 25-hour and a 23-hour day in Europe/Berlin, and a Saturday whose last hour repeats (America/Santiago)', async (t) => {
  const tenant = await h.createTenant()
  const daily = await create(tenant, MISSIONS, { name: 'Daily', type: 'daily', rules: { event_type: 'bet', target: 3, timezone: 'Europe/Berlin' } })
  const weekly = await create(tenant, MISSIONS, { name: 'Weekly', type: 'weekly', rules: { event_type: 'bet', target: 100, timezone: 'Europe/Berlin' } })
  const chile = await create(tenant, MISSIONS, { name: 'Chile', type: 'daily', rules: { event_type: 'bet', target: 100, timezone: 'America/Santiago' } })
  // Sunday 25 Oct 2026: 03:00 CEST → 02:00 CET; the local day runs 22:00Z (24 Oct) to 23:00Z (25 Oct).
  await send(tenant, [
    bet('fall', 1, {}, '2026-10-24T21:59:59.999Z'), // Sat 23:59:59.999 CEST
    bet('fall', 1, {}, '2026-10-24T22:00:00.000Z'), // Sun 00:00 CEST
    bet('fall', 1, {}, '2026-10-25T12:00:00.000Z'),
    bet('fall', 1, {}, '2026-10-25T22:59:59.999Z'), // Sun 23:59:59.999 CET, the 25th hour of the day
  ])
  const fall = await playerId(tenant, 'fall')
  t.same(await state(fall, daily.id), { value: '3', stage: 0, completions: 1, period_start: new Date('2026-10-24T22:00:00Z') }, 'three bets of the long Sunday complete it')
  t.match(await state(fall, weekly.id), { value: '4', period_start: new Date('2026-10-18T22:00:00Z') }, 'the week of Monday 19 Oct 00:00 CEST')
  await send(tenant, [bet('fall', 1, {}, '2026-10-25T23:00:00.000Z')]) // Mon 26 Oct 00:00 CET
  t.match(await state(fall, daily.id), { value: '1', completions: 1, period_start: new Date('2026-10-25T23:00:00Z') })
  t.match(await state(fall, weekly.id), { value: '1', period_start: new Date('2026-10-25T23:00:00Z') }, 'the new week starts at Monday 00:00 CET')
  // Sunday 29 Mar 2026: 02:00 CET → 03:00 CEST; the local day runs 23:00Z (28 Mar) to 22:00Z (29 Mar).
  await send(tenant, [bet('spring', 1, {}, '2026-03-28T23:00:00.000Z'), bet('spring', 1, {}, '2026-03-29T21:59:59.999Z')])
  const spring = await playerId(tenant, 'spring')
  t.match(await state(spring, daily.id), { value: '2', period_start: new Date('2026-03-28T23:00:00Z') }, 'both in the short Sunday')
  await send(tenant, [bet('spring', 1, {}, '2026-03-29T22:00:00.000Z')])
  t.match(await state(spring, daily.id), { value: '1', period_start: new Date('2026-03-29T22:00:00Z') }, 'Monday 00:00 CEST')
  // Santiago, 5 Apr 2026: Saturday 24:00 (-03) goes back to Saturday 23:00 (-04); Sunday starts at 04:00Z.
  await send(tenant, [bet('cl', 1, {}, '2026-04-05T02:30:00.000Z'), bet('cl', 1, {}, '2026-04-05T03:30:00.000Z'), bet('cl', 1, {}, '2026-04-05T03:59:59.999Z')])
  const cl = await playerId(tenant, 'cl')
  t.match(await state(cl, chile.id), { value: '3', period_start: new Date('2026-04-04T03:00:00Z') }, 'Saturday 23:30 twice: still Saturday')
  await send(tenant, [bet('cl', 1, {}, '2026-04-05T04:00:00.000Z')])
  t.match(await state(cl, chile.id), { value: '1', period_start: new Date('2026-04-05T04:00:00Z') }, 'Sunday 00:00 (-04)')
})

t.test('windows: a late event dated inside counts while the mission is active, never once it expired; the profile hides a window not open now', async (t) => {
  const tenant = await h.createTenant()
  const wall = Date.now()
  const startsAt = wall - 3 * 3600_000
  const endsAt = wall - 1800_000
  // The app's clock before ends_at: the mission is still active, its timer has not expired it.
  pinnedNow = endsAt - 600_000
  const m = await create(tenant, MISSIONS, {
    name: 'Window', type: 'one_time', rules: { event_type: 'bet', target: 100 }, starts_at: at(startsAt), ends_at: at(endsAt),
  })
  const daily = await create(tenant, MISSIONS, {
    name: 'Daily window', type: 'daily', rules: { event_type: 'bet', target: 100 }, starts_at: at(startsAt), ends_at: at(endsAt),
  })
  const future = await create(tenant, MISSIONS, { name: 'Future', type: 'one_time', rules: { event_type: 'bet', target: 100 }, starts_at: at(wall + 3600_000) })
  await send(tenant, [bet('p1', 1, {}, at(startsAt - 1)), bet('p1', 1, {}, at(startsAt)), bet('p1', 1, {}, at(endsAt - 1)), bet('p1', 1, {}, at(endsAt)), bet('p1', 1, {}, at(endsAt + 1))])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.value, '3', '[starts_at, ends_at] inclusive')
  // The daily mission counts the same three, in the period of the last one (the one stamped after the
  // app's clock counts in the clock's period); near UTC midnight they may span two days.
  const dayOf = (x: number) => (periodStart('daily', 'UTC', new Date(Math.min(x, pinnedNow as number))) as Date).getTime()
  const counted = [startsAt, endsAt - 1, endsAt]
  t.equal((await state(pid, daily.id))?.value, String(counted.filter((x) => dayOf(x) === dayOf(endsAt)).length), 'a daily mission\'s window as well')
  t.equal(await state(pid, future.id), undefined, 'events before starts_at never count')
  const p = await profile(tenant, 'p1')
  t.same(ids(p.active_missions), [m.id, daily.id], 'the mission whose window opens later is not active now')
  // Now the real clock: ends_at has passed and the timer expires both.
  pinnedNow = null
  let got = await h.request('GET', `${MISSIONS}/${m.id}`, { key: tenant.key })
  for (let i = 0; i < 100 && got.body.data.status !== 'expired'; i++) {
    await sleep(100)
    got = await h.request('GET', `${MISSIONS}/${m.id}`, { key: tenant.key })
  }
  t.equal(got.body.data.status, 'expired', 'expired once ends_at passed')
  await send(tenant, [bet('p1', 1, {}, at(endsAt - 2)), bet('p1', 1, {}, at(startsAt + 1))])
  t.equal((await state(pid, m.id))?.value, '3', 'an event arriving after expiry, dated inside the window: not counted ("only while active")')
  t.same(ids((await profile(tenant, 'p1')).active_missions), [], 'neither expired mission is active, the future one not yet')
})

t.test('max_completions_per_player across periods, rewards once per completion when one batch completes twice, raising the cap', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gems = await create(tenant, '/gamification/currencies', { name: 'Gems', symbol: 'G', type: 'virtual' })
  const badge = await create(tenant, '/gamification/badges', { name: 'Regular' })
  const bonus = await create(tenant, '/bonuses', { name: 'Spins', type: 'free_spins', value: 10, value_type: 'spins' })
  const m = await create(tenant, MISSIONS, {
    name: 'Twice a day', type: 'daily', max_completions_per_player: 2, rules: { event_type: 'login', target: 2 },
    rewards: { points: [{ currency_id: lp.id, amount: 5 }, { currency_id: gems.id, amount: 2.5 }], badge_ids: [badge.id], bonus_ids: [bonus.id] },
  })
  const today = (periodStart('daily', 'UTC', new Date()) as Date).getTime()
  const day = (n: number, minute = 0) => at(today - n * 86_400_000 + 12 * 3600_000 + minute * 60_000)
  const events = [4, 3, 2].flatMap((d) => [{ ...login('p1', day(d)), event_id: eid() }, { ...login('p1', day(d, 1)), event_id: eid() }])
  await send(tenant, events)
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, m.id))?.completions, 2, 'three days completed in one request, capped at 2')
  const rows = await ledger(pid)
  t.same(rows.filter((r) => r.currency_id === lp.id).map((r) => [r.amount, r.balance_after, r.source, r.source_id]), [[5, 5, 'mission', m.id], [5, 10, 'mission', m.id]], 'LP: one credit per completion')
  t.same(rows.filter((r) => r.currency_id === gems.id).map((r) => [r.amount, r.balance_after]), [[2.5, 2.5], [2.5, 5]], 'Gems: one credit per completion')
  const p = await profile(tenant, 'p1')
  t.same(p.point_balances.map((b: { balance: number; lifetime: number }) => [b.balance, b.lifetime]), [[10, 10], [5, 5]])
  t.same(ids(p.badges_earned), [badge.id], 'the reward badge, once')
  t.equal((await outbox(tenant, 'gamification.badge_earned')).length, 1)
  const grants = (await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key })).body.data
  t.same(grants.map((g: { bonus_id: string; source: string; status: string }) => [g.bonus_id, g.source, g.status]), [[bonus.id, 'mission', 'granted'], [bonus.id, 'mission', 'granted']], 'the bonus once per completion')
  t.equal((await outbox(tenant, 'bonus.granted')).length, 2)
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 2)
  t.equal(await missionsCompleted(pid), 2)
  t.notOk(await mission(tenant, 'p1', m.id), 'capped: not active for the player')
  // The same events again: duplicates, nothing changes.
  await send(tenant, events)
  t.equal((await ledger(pid)).length, 4, 'no credit from duplicates')
  // Raising the cap lets the player complete again (the engine reads the patched definition at once).
  const raised = await h.request('PATCH', `${MISSIONS}/${m.id}`, { key: tenant.key, body: { max_completions_per_player: 3 } })
  t.equal(raised.status, 200, raised.text)
  await send(tenant, [login('p1', day(1)), login('p1', day(1, 1)), login('p1', day(1, 2))])
  t.equal((await state(pid, m.id))?.completions, 3, 'a third completion, once')
  t.equal((await ledger(pid)).filter((r) => r.currency_id === lp.id).length, 3)
})

t.test('progressive: stages crossed in order in one batch (and two by one event), each rewarded once; the mission counts one completion; levels jump once with the right previous level', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const bronze = await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
  await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 2 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 5 })
  const top = await create(tenant, '/gamification/badges', { name: 'Top of the ladder' })
  const one = await create(tenant, '/gamification/badges', { name: 'One mission', criteria: { missions_completed: 1 } })
  const two = await create(tenant, '/gamification/badges', { name: 'Two missions', criteria: { missions_completed: 2 } })
  const m = await create(tenant, MISSIONS, {
    name: 'Ladder', type: 'progressive', rules: {
      event_type: 'bet', measure: 'sum',
      stages: [
        { target: 0.3, rewards: { points: [{ currency_id: lp.id, amount: 1 }] } },
        { target: 0.8, rewards: { points: [{ currency_id: lp.id, amount: 2 }] } },
        { target: 5, rewards: { points: [{ currency_id: lp.id, amount: 4 }], badge_ids: [top.id] } },
      ],
    },
  })
  await send(tenant, [login('p1')])
  const pid = await playerId(tenant, 'p1')
  t.equal((await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: 0.5 } })).status, 201)
  t.same((await outbox(tenant, 'gamification.level_changed')).map((e) => [e.data.previous_level_id, e.data.level_id]), [[null, bronze.id]])
  await send(tenant, [bet('p1', 0.1), bet('p1', 0.2), ...Array.from({ length: 5 }, () => bet('p1', 0.1)), bet('p1', 10), bet('p1', 10)])
  t.same((await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.stage), [1, 2, 3], 'one webhook per stage, in order')
  t.same((await ledger(pid)).map((r) => [r.amount, r.balance_after, r.source]), [[0.5, 0.5, 'manual'], [1, 1.5, 'mission'], [2, 3.5, 'mission'], [4, 7.5, 'mission']], 'stage rewards in stage order, once each')
  t.match(await state(pid, m.id), { stage: 3, completions: 1 })
  t.equal(await missionsCompleted(pid), 1, 'three stages are one completed mission')
  t.same(new Set(ids((await profile(tenant, 'p1')).badges_earned)), new Set([top.id, one.id]), `not the badge for two missions (${two.id})`)
  const changes = (await outbox(tenant, 'gamification.level_changed')).map((e) => e.data)
  t.equal(changes.length, 2, 'one change for the batch')
  t.match(changes[1], { player_id: pid, level_id: gold.id, tier: 3, previous_level_id: bronze.id, brand_id: tenant.brand.id }, 'bronze → gold, silver skipped')
  t.notOk(await mission(tenant, 'p1', m.id), 'completed at the last stage')
  // One deposit of 1 crosses 0.3 and 0.8 at once.
  await send(tenant, [bet('p2', 1)])
  t.match(await mission(tenant, 'p2', m.id), { progress: 1, stage: 2, target: 5, completions: 0 })
  const p2 = await playerId(tenant, 'p2')
  t.same((await ledger(p2)).map((r) => [r.amount, r.balance_after]), [[1, 1], [2, 3]])
  t.equal(await missionsCompleted(p2), 0, 'no completed mission before the last stage')
})

t.test('collaborative: contributors only, rewarded once; a rollback after completion takes nothing back; other brands and opt-in', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const badge = await create(tenant, '/gamification/badges', { name: 'Team player' })
  const m = await create(tenant, MISSIONS, {
    name: 'Eight bets', type: 'collaborative', rules: { event_type: 'bet', target: 8 }, rewards: { points: [{ currency_id: lp.id, amount: 3 }], badge_ids: [badge.id] },
  })
  const optIn = await create(tenant, MISSIONS, { name: 'Members', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 1e6, opt_in: true } })
  await send(tenant, [login('bystander'), bet('a', 1, { round_id: 'a1' }), bet('a', 1, { round_id: 'a2' }), bet('a', 1, { round_id: 'a3' })])
  await send(tenant, [bet('b', 1, { round_id: 'b1' })])
  await send(tenant, [rollback('b', 1, 'b1')])
  await sendTo(tenant, second.slug, [bet('a', 1), bet('a', 1), bet('a', 1), bet('a', 1), bet('a', 1)])
  t.same(await missionRow(m.id), { status: 'active', total: '3' }, 'a\'s three bets; b\'s rolled back; the second brand\'s bets count for nobody here')
  t.match(await mission(tenant, 'a', m.id), { progress: 3, total: 3 })
  const a = await playerId(tenant, 'a')
  await h.request('POST', `${MISSIONS}/${optIn.id}/join`, { key: tenant.key, body: { player_id: a } })
  await send(tenant, [bet('c', 1), bet('c', 1), bet('c', 1), bet('c', 1), bet('c', 1)])
  t.same(await missionRow(m.id), { status: 'completed', total: '8' })
  t.same(await missionRow(optIn.id), { status: 'active', total: '0' }, 'opt-in: c never joined')
  const players = { a, b: await playerId(tenant, 'b'), c: await playerId(tenant, 'c'), bystander: await playerId(tenant, 'bystander') }
  for (const [name, pid] of Object.entries(players)) {
    const contributed = name === 'a' || name === 'c'
    t.same((await ledger(pid)).map((r) => [r.amount, r.source_id]), contributed ? [[3, m.id]] : [], `${name}: ${contributed ? 'one reward' : 'no reward'}`)
    t.same(ids((await profile(tenant, name)).badges_earned), contributed ? [badge.id] : [], `${name}: badge`)
    t.equal(await missionsCompleted(pid), contributed ? 1 : 0, `${name}: completed missions`)
  }
  t.same((await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.player_id).sort(), [a, players.c].sort())
  // After completion: a rollback of a counted round and new bets change nothing (§1: "takes back what its
  // bet added to a progress ... that is not yet completed"; §5 docs: "nothing counts after that").
  await send(tenant, [rollback('a', 1, 'a1'), bet('b', 1), bet('a', 1)])
  t.same(await missionRow(m.id), { status: 'completed', total: '8' }, 'the total stays')
  t.match(await state(a, m.id), { value: '3', completions: 1 }, 'a\'s contribution stays')
  t.equal((await ledger(a)).length, 1, 'the reward stays, and is not granted again')
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 2)
  // The other brand's player with the same external id got nothing from this mission.
  t.equal(await state(await playerId(tenant, 'a', second.id), m.id), undefined)
})

t.test('opt-in: events before joining never count, nor their rollbacks; joining an expired, cancelled or completed mission is 400; brands and keys', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const m = await create(tenant, MISSIONS, { name: 'Opt in', type: 'daily', rules: { event_type: 'bet', measure: 'sum', target: 1000, opt_in: true } })
  await send(tenant, [bet('p1', 50, { round_id: 'before' }), bet('p1', 7)])
  const pid = await playerId(tenant, 'p1')
  t.equal(await state(pid, m.id), undefined, 'not joined: no progress recorded')
  const join = (id: string, body: unknown, key = tenant.key) => h.request('POST', `${MISSIONS}/${id}/join`, { key, body })
  const joined = await join(m.id, { player_id: pid })
  t.equal(joined.status, 200, joined.text)
  t.same(Object.keys(joined.body.data).sort(), ['joined_at', 'mission_id', 'player_id'])
  t.match(await mission(tenant, 'p1', m.id), { progress: 0, joined: true, opt_in: true }, 'joining brings no earlier events')
  await send(tenant, [bet('p1', 10), rollback('p1', 50, 'before')])
  // §1: "a rollback of a bet that added nothing takes nothing".
  t.equal((await mission(tenant, 'p1', m.id)).progress, 10, 'the rollback of a bet made before joining takes nothing')
  // The join lasts across periods: yesterday's and today's bets both count in their own periods.
  const yesterday = at((periodStart('daily', 'UTC', new Date()) as Date).getTime() - 3600_000)
  const m2 = await create(tenant, MISSIONS, { name: 'Opt in 2', type: 'daily', rules: { event_type: 'bet', target: 1, opt_in: true } })
  t.equal((await join(m2.id, { player_id: pid })).status, 200)
  await send(tenant, [bet('p1', 1, {}, yesterday)])
  await send(tenant, [bet('p1', 1)])
  t.equal((await state(pid, m2.id))?.completions, 2, 'joined once, counted on both days')

  // Missions that are not active: 400 with details.reason mission_not_active.
  for (const status of ['expired', 'cancelled', 'completed']) {
    const x = await create(tenant, MISSIONS, { name: status, type: 'one_time', status, rules: { event_type: 'bet', target: 1, opt_in: true } })
    const res = await join(x.id, { player_id: pid })
    t.equal(res.status, 400, `${status}: ${res.text}`)
    t.equal(res.body.details?.reason, 'mission_not_active', status)
  }
  // Expired by its timer (ends_at passed), not by a patch.
  const over = await create(tenant, MISSIONS, { name: 'Over', type: 'one_time', rules: { event_type: 'bet', target: 1, opt_in: true }, starts_at: at(Date.now() - 7200_000), ends_at: at(Date.now() - 3600_000) })
  for (let i = 0; i < 100 && (await h.request('GET', `${MISSIONS}/${over.id}`, { key: tenant.key })).body.data.status !== 'expired'; i++) await sleep(100)
  const late = await join(over.id, { player_id: pid })
  t.equal(late.status, 400, late.text)
  t.equal(late.body.details?.reason, 'mission_not_active')
  t.equal(await state(pid, over.id), undefined, 'a refused join records nothing')

  // Bodies, brands, keys.
  for (const body of [{}, { player_id: 'p1' }, { player_id: 42 }]) {
    const res = await join(m.id, body)
    t.equal(res.status, 400, JSON.stringify(body))
    t.ok((res.body.details?.errors ?? []).some((e: { field: string }) => e.field === 'player_id'), `names player_id: ${res.text}`)
  }
  await sendTo(tenant, second.slug, [login('p1')])
  const theirs = await playerId(tenant, 'p1', second.id)
  const cross = await join(m.id, { player_id: theirs })
  t.equal(cross.status, 400, 'a player of another brand')
  t.equal(cross.body.details?.errors?.[0]?.field, 'player_id')
  const pinned = await tenant.createKey({ brand: second.slug })
  t.equal((await join(m.id, { player_id: theirs }, pinned.key)).status, 404, 'a key pinned to another brand does not see the mission')
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await join(m.id, { player_id: pid }, reader.key)).status, 403, 'joining is a write')
  t.equal((await join('00000000-0000-4000-8000-000000000000', { player_id: pid })).status, 404)
  t.equal((await h.request('DELETE', `${MISSIONS}/${m.id}`, { key: tenant.key })).status, 200)
  t.equal((await join(m.id, { player_id: pid })).status, 404, 'a deleted mission')
})

t.test('levels from every virtual currency together, reached through mission rewards; never down; level_tier badge once; other brands\' levels ignored', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gems = await create(tenant, '/gamification/currencies', { name: 'Gems', symbol: 'G', type: 'virtual' })
  const promo = await create(tenant, '/gamification/currencies', { name: 'Promo', symbol: 'P', type: 'bonus' })
  await create(tenant, '/gamification/levels', { name: 'Theirs', tier: 9, min_points: 0, brand: second.slug })
  const silver = await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 100 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 150 })
  const club = await create(tenant, '/gamification/badges', { name: 'Silver club', criteria: { level_tier: 2 } })
  await create(tenant, MISSIONS, { name: 'LP', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 60 }, { currency_id: promo.id, amount: 500 }] } })
  await create(tenant, MISSIONS, { name: 'Gems', type: 'one_time', rules: { event_type: 'login', target: 1 }, rewards: { points: [{ currency_id: gems.id, amount: 40 }] } })
  await send(tenant, [deposit('p1', 10)])
  const pid = await playerId(tenant, 'p1')
  t.equal((await profile(tenant, 'p1')).current_level, null, '60 virtual points (the bonus currency\'s 500 do not count), no level of this brand')
  await send(tenant, [login('p1')])
  t.same((await outbox(tenant, 'gamification.level_changed')).map((e) => e.data), [{ player_id: pid, level_id: silver.id, tier: 2, previous_level_id: null, brand_id: tenant.brand.id }], '60 LP + 40 Gems = 100: silver, from no level')
  t.equal((await profile(tenant, 'p1')).current_level.id, silver.id)
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: -60 } })
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: gems.id, amount: 50 } })
  t.equal((await profile(tenant, 'p1')).current_level.id, gold.id, 'lifetime 150 after spending 60: gold')
  t.same((await outbox(tenant, 'gamification.level_changed')).map((e) => [e.data.previous_level_id, e.data.level_id]), [[null, silver.id], [silver.id, gold.id]])
  t.same(ids((await profile(tenant, 'p1')).badges_earned), [club.id], 'the level_tier badge once')
  t.equal((await outbox(tenant, 'gamification.badge_earned')).length, 1)
})

t.test('badges: event criteria with a payload filter over all time (across daily periods), missions_completed reached by two completions in one batch; each once', async (t) => {
  const tenant = await h.createTenant()
  const vip = await create(tenant, '/gamification/badges', { name: 'VIP tables', criteria: { event_type: 'bet', measure: 'sum', target: 30, filters: [{ field: 'payload.table.vip', op: 'eq', value: true }] } })
  const two = await create(tenant, '/gamification/badges', { name: 'Two', criteria: { missions_completed: 2 } })
  const three = await create(tenant, '/gamification/badges', { name: 'Three', criteria: { missions_completed: 3 } })
  await create(tenant, MISSIONS, { name: 'Daily bet', type: 'daily', rules: { event_type: 'bet', target: 1 } })
  const today = (periodStart('daily', 'UTC', new Date()) as Date).getTime()
  await send(tenant, [bet('p1', 10, { table: { vip: true } }, at(today - 2 * 86_400_000 + 3600_000)), bet('p1', 15, { table: { vip: true } }, at(today - 86_400_000 + 3600_000)), bet('p1', 100, { table: { vip: false } }, at(today - 86_400_000 + 7200_000))])
  const pid = await playerId(tenant, 'p1')
  t.equal(await missionsCompleted(pid), 2)
  t.same(ids((await profile(tenant, 'p1')).badges_earned), [two.id], 'two daily completions in one batch: the badge for two; 25 VIP: not yet')
  await send(tenant, [bet('p1', 5, { table: { vip: true } }, at(today - 86_400_000 + 9000_000))])
  t.same(new Set(ids((await profile(tenant, 'p1')).badges_earned)), new Set([two.id, vip.id]), '10 + 15 + 5 = 30 over two days')
  await send(tenant, [bet('p1', 50, { table: { vip: true } })])
  t.same(new Set(ids((await profile(tenant, 'p1')).badges_earned)), new Set([two.id, vip.id, three.id]))
  t.equal((await outbox(tenant, 'gamification.badge_earned')).length, 3, 'each announced once')
})

t.test('the profile has exactly the documented shape for every mission type', async (t) => {
  const tenant = await h.createTenant()
  const bronze = await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0, max_points: 99, benefits: { cashback: 0.01 } })
  const lp = await create(tenant, '/gamification/currencies', { name: 'Loyalty', symbol: 'LP', type: 'virtual' })
  const badge = await create(tenant, '/gamification/badges', { name: 'First bet', rarity: 'epic', icon_url: 'https://cdn.example/b.png', description: 'd', criteria: { event_type: 'bet', target: 1 } })
  const rewards = { points: [{ currency_id: lp.id, amount: 1.5 }] }
  const ends = '2099-01-01T00:00:00.000Z'
  const daily = await create(tenant, MISSIONS, { name: 'Daily', type: 'daily', rules: { event_type: 'bet', target: 5, opt_in: true } })
  const weekly = await create(tenant, MISSIONS, { name: 'Weekly', type: 'weekly', description: 'w', rules: { event_type: 'bet', measure: 'sum', target: 100, timezone: 'America/New_York' }, rewards, ends_at: ends })
  const once = await create(tenant, MISSIONS, { name: 'Once', type: 'one_time', max_completions_per_player: 1, rules: { event_type: 'bet', target: 3 } })
  const ladder = await create(tenant, MISSIONS, { name: 'Ladder', type: 'progressive', rules: { event_type: 'bet', stages: [{ target: 1, rewards }, { target: 4 }, { target: 9 }] } })
  const pool = await create(tenant, MISSIONS, { name: 'Pool', type: 'collaborative', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  await send(tenant, [bet('p1', 2.5), bet('p1', 2.5)])
  await send(tenant, [bet('p2', 4)])
  const pid = await playerId(tenant, 'p1')
  pinnedNow = Date.now()
  const now = new Date(pinnedNow)
  const res = await h.request('GET', `/gamification/player/${pid}`, { key: tenant.key })
  t.equal(res.status, 200)
  t.same(Object.keys(res.body), ['data'])
  const p = res.body.data
  t.same(Object.keys(p).sort(), ['active_missions', 'badges_earned', 'current_level', 'player_id', 'point_balances'])
  t.equal(p.player_id, pid)
  t.same(p.current_level, bronze, 'the level resource as it is')
  t.same(p.point_balances, [{ currency_id: lp.id, name: 'Loyalty', symbol: 'LP', type: 'virtual', balance: 1.5, lifetime: 1.5, lifetime_earned: 1.5 }], 'stage 1 reward')
  t.equal(p.badges_earned.length, 1)
  t.same(Object.keys(p.badges_earned[0]).sort(), ['badge_id', 'description', 'earned_at', 'icon_url', 'name', 'rarity'])
  t.match(p.badges_earned[0], { badge_id: badge.id, name: 'First bet', description: 'd', icon_url: 'https://cdn.example/b.png', rarity: 'epic' })
  const base = { description: null, rewards: {}, max_completions_per_player: null, starts_at: null, ends_at: null, opt_in: false, joined: true }
  const dayStart = (periodStart('daily', 'UTC', now) as Date).toISOString()
  const weekStart = (periodStart('weekly', 'America/New_York', now) as Date).toISOString()
  t.same(p.active_missions, [
    { ...base, mission_id: daily.id, name: 'Daily', type: 'daily', progress: 0, target: 5, stage: 0, completions: 0, period_start: dayStart, opt_in: true, joined: false },
    { ...base, mission_id: weekly.id, name: 'Weekly', description: 'w', type: 'weekly', rewards, ends_at: ends, progress: 5, target: 100, stage: 0, completions: 0, period_start: weekStart },
    { ...base, mission_id: once.id, name: 'Once', type: 'one_time', max_completions_per_player: 1, progress: 2, target: 3, stage: 0, completions: 0, period_start: null },
    { ...base, mission_id: ladder.id, name: 'Ladder', type: 'progressive', progress: 2, target: 4, stage: 1, completions: 0, period_start: null },
    { ...base, mission_id: pool.id, name: 'Pool', type: 'collaborative', progress: 5, target: 1000, stage: 0, completions: 0, period_start: null, total: 9 },
  ], 'every type: progress, target (the next stage\'s), stage, completions, period_start, opt_in, joined, total')
})

t.test('rules are validated at create and PATCH: 400 naming each bad field, nothing stored', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const theirCurrency = await create(tenant, '/gamification/currencies', { name: 'T', symbol: 'T', type: 'virtual', brand: second.slug })
  const theirBadge = await create(tenant, '/gamification/badges', { name: 'T', brand: second.slug })
  const unknown = '00000000-0000-4000-8000-000000000000'
  const ok = { event_type: 'bet', target: 1 }
  const stage = (s: Record<string, unknown>) => ({ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: [s] } })
  const cases: [Record<string, unknown>, string][] = [
    [{ name: 'x', type: 'one_time', rules: [] }, 'rules'],
    [{ name: 'x', type: 'one_time', rules: null }, 'rules'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, event_type: '' } }, 'rules.event_type'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, event_type: 42 } }, 'rules.event_type'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, target: 0 } }, 'rules.target'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, target: -1 } }, 'rules.target'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, target: '5' } }, 'rules.target'],
    [{ name: 'x', type: 'daily', rules: { ...ok, target: null } }, 'rules.target'],
    [{ name: 'x', type: 'collaborative', rules: { event_type: 'bet' } }, 'rules.target'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, measure: 'SUM' } }, 'rules.measure'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, measure: 1 } }, 'rules.measure'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: 'game=starburst' } }, 'rules.filters'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: { field: 'game', op: 'eq', value: 'x' } } }, 'rules.filters'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [null] } }, 'rules.filters.0'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'payload', op: 'eq', value: 1 }] } }, 'rules.filters.0.field'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'payload.', op: 'eq', value: 1 }] } }, 'rules.filters.0.field'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'game', value: 'x' }] } }, 'rules.filters.0.op'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'game', op: 'in', value: [] }] } }, 'rules.filters.0.value'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'game', op: 'not_in', value: 'x' }] } }, 'rules.filters.0.value'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'game', op: 'exists', value: 'yes' }] } }, 'rules.filters.0.value'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'game', op: 'eq', value: { a: 1 } }] } }, 'rules.filters.0.value'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'amount', op: 'gte', value: '10' }] } }, 'rules.filters.0.value'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: [{ field: 'game', op: 'eq', value: 'a' }, { field: 'game', op: 'eq', value: 'b' }, { field: 'colour', op: 'eq', value: 'c' }] } }, 'rules.filters.2.field'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, filters: Array.from({ length: 51 }, () => ({ field: 'game', op: 'eq', value: 'x' })) } }, 'rules.filters'],
    [{ name: 'x', type: 'daily', rules: { ...ok, timezone: '' } }, 'rules.timezone'],
    [{ name: 'x', type: 'daily', rules: { ...ok, timezone: 5 } }, 'rules.timezone'],
    [{ name: 'x', type: 'daily', rules: { ...ok, timezone: 'UTC+2' } }, 'rules.timezone'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, opt_in: 'true' } }, 'rules.opt_in'],
    [{ name: 'x', type: 'one_time', rules: { ...ok, opt_in: 1 } }, 'rules.opt_in'],
    [{ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: 'x' } }, 'rules.stages'],
    [{ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: [] } }, 'rules.stages'],
    [{ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: { target: 1 } } }, 'rules.stages'],
    [{ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: [{ target: 5 }, { target: 5 }] } }, 'rules.stages.1.target'],
    [stage({ target: 0 }), 'rules.stages.0.target'],
    [stage({ target: '5' }), 'rules.stages.0.target'],
    [{ name: 'x', type: 'progressive', rules: { event_type: 'bet', stages: [null] } }, 'rules.stages.0'],
    [stage({ target: 5, rewards: [] }), 'rules.stages.0.rewards'],
    [stage({ target: 5, rewards: { points: [{ currency_id: lp.id, amount: 0 }] } }), 'rules.stages.0.rewards.points.0.amount'],
    [stage({ target: 5, rewards: { points: [{ currency_id: unknown, amount: 1 }] } }), 'rules.stages.0.rewards.points.0.currency_id'],
    [stage({ target: 5, rewards: { badge_ids: ['nope'] } }), 'rules.stages.0.rewards.badge_ids.0'],
    [stage({ target: 5, rewards: { badge_ids: [theirBadge.id] } }), 'rules.stages.0.rewards.badge_ids.0'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: [] }, 'rewards'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: null }, 'rewards'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { points: { currency_id: lp.id, amount: 1 } } }, 'rewards.points'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { points: [{ currency_id: lp.id, amount: -1 }] } }, 'rewards.points.0.amount'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { points: [{ currency_id: lp.id, amount: '5' }] } }, 'rewards.points.0.amount'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { points: [{ currency_id: lp.id }] } }, 'rewards.points.0.amount'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { points: [{ currency_id: 'LP', amount: 1 }] } }, 'rewards.points.0.currency_id'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { points: [{ currency_id: lp.id, amount: 1 }, { currency_id: theirCurrency.id, amount: 1 }] } }, 'rewards.points.1.currency_id'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { badge_ids: theirBadge.id } }, 'rewards.badge_ids'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { badge_ids: [theirBadge.id] } }, 'rewards.badge_ids.0'],
    [{ name: 'x', type: 'one_time', rules: ok, rewards: { bonus_ids: [123] } }, 'rewards.bonus_ids.0'],
  ]
  const refused = async (method: string, path: string, body: unknown, field: string) => {
    const res = await h.request(method, path, { key: tenant.key, body })
    const fields = ((res.body?.details?.errors ?? []) as { field: string }[]).map((e) => e.field)
    // The field, or a part of it (a null stage named by its target is named).
    const named = fields.some((f) => f === field || f.startsWith(`${field}.`))
    t.ok(res.status === 400 && res.body.code === 'BAD_REQUEST' && named, `${method} ${JSON.stringify(body).slice(0, 140)} → 400 naming ${field} (got ${res.status} ${fields.join(', ')})`)
  }
  for (const [body, field] of cases) await refused('POST', MISSIONS, body, field)
  t.equal((await h.request('GET', MISSIONS, { key: tenant.key })).body.pagination.total, 0, 'nothing was stored')

  // Every bad field of one body is named ("400 naming each bad field").
  const many = await h.request('POST', MISSIONS, { key: tenant.key, body: { name: 'x', type: 'daily', rules: { event_type: 'bet', target: 0, timezone: 'Nowhere/Else', opt_in: 'yes' } } })
  t.same(((many.body.details?.errors ?? []) as { field: string }[]).map((e) => e.field).sort(), ['rules.opt_in', 'rules.target', 'rules.timezone'])

  // PATCH: the record it produces is checked; a refused patch changes nothing.
  const m = await create(tenant, MISSIONS, { name: 'ok', type: 'progressive', rules: { event_type: 'bet', stages: [{ target: 1 }, { target: 2 }] }, rewards: { points: [{ currency_id: lp.id, amount: 1 }] } })
  const item = `${MISSIONS}/${m.id}`
  await refused('PATCH', item, { type: 'one_time' }, 'rules.target')
  await refused('PATCH', item, { rules: { event_type: 'bet', stages: [{ target: 2 }, { target: 1 }] } }, 'rules.stages.1.target')
  await refused('PATCH', item, { rules: { event_type: 'bet', stages: [{ target: 1 }], filters: [{ field: 'amount', op: 'between', value: 1 }] } }, 'rules.filters.0.op')
  await refused('PATCH', item, { rules: { stages: [{ target: 1 }] } }, 'rules.event_type')
  await refused('PATCH', item, { rules: null }, 'rules')
  await refused('PATCH', item, { rewards: { points: [{ currency_id: theirCurrency.id, amount: 1 }] } }, 'rewards.points.0.currency_id')
  // With the second brand as hint, the mission still lives in the main brand: its currency is refused.
  const hinted = await h.request('PATCH', item, { key: tenant.key, headers: { 'x-brand': second.slug }, body: { rewards: { points: [{ currency_id: theirCurrency.id, amount: 1 }] } } })
  t.equal(hinted.status, 400, 'a brand hint does not move the reference check')
  t.same((await h.request('GET', item, { key: tenant.key })).body.data, m, 'the mission is unchanged')
  const fine = await h.request('PATCH', item, { key: tenant.key, body: { type: 'one_time', rules: { event_type: 'bet', target: 2 } } })
  t.equal(fine.status, 200, fine.text)

  // Badge criteria shapes.
  for (const [criteria, field] of [
    [{ level_tier: 0 }, 'criteria.level_tier'], [{ level_tier: '2' }, 'criteria.level_tier'], [{ missions_completed: 1.5 }, 'criteria.missions_completed'],
    [{ missions_completed: null }, 'criteria.missions_completed'], [{ event_type: 'bet', target: '5' }, 'criteria.target'], [{ event_type: 'bet', target: 5, filters: 'x' }, 'criteria.filters'],
    [{ event_type: '', target: 5 }, 'criteria.event_type'], [null, 'criteria'],
  ] as [unknown, string][]) await refused('POST', '/gamification/badges', { name: 'b', criteria }, field)
})

t.test('PATCH of a running mission: window, filters and cap apply to the next event; progress is kept', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, MISSIONS, { name: 'Bets', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  await send(tenant, [bet('p1', 10)])
  const pid = await playerId(tenant, 'p1')
  const patch = async (body: Record<string, unknown>) => {
    const res = await h.request('PATCH', `${MISSIONS}/${m.id}`, { key: tenant.key, body })
    t.equal(res.status, 200, res.text)
  }
  await patch({ starts_at: at(Date.now() + 3600_000) })
  await send(tenant, [bet('p1', 5)])
  t.equal((await state(pid, m.id))?.value, '10', 'a window opening later: today\'s bet does not count, the progress stays')
  await patch({ starts_at: null })
  await patch({ rules: { event_type: 'bet', measure: 'sum', target: 1000, filters: [{ field: 'game', op: 'eq', value: 'roulette' }] } })
  await send(tenant, [bet('p1', 5), bet('p1', 7, { game: 'roulette' })])
  t.equal((await state(pid, m.id))?.value, '17', 'the new filter applies at once')
  await patch({ rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  await send(tenant, [bet('p1', 0.5)])
  t.equal((await state(pid, m.id))?.value, '17.5', 'the filter removed: a starburst bet counts again at once')
  await patch({ status: 'expired' })
  await send(tenant, [bet('p1', 7, { game: 'roulette' })])
  t.equal((await state(pid, m.id))?.value, '17.5', 'expired by hand: nothing counts')
  await patch({ status: 'active' })
  await send(tenant, [bet('p1', 3, { game: 'roulette' })])
  t.equal((await state(pid, m.id))?.value, '20.5', 'active again: counts on from the kept progress')

  // A daily mission whose cap is lowered under the player's completions stops at once.
  const d = await create(tenant, MISSIONS, { name: 'Daily', type: 'daily', rules: { event_type: 'login', target: 1 } })
  const today = (periodStart('daily', 'UTC', new Date()) as Date).getTime()
  await send(tenant, [login('p1', at(today - 2 * 86_400_000 + 60_000)), login('p1', at(today - 86_400_000 + 60_000))])
  t.equal((await state(pid, d.id))?.completions, 2)
  const capped = await h.request('PATCH', `${MISSIONS}/${d.id}`, { key: tenant.key, body: { max_completions_per_player: 2 } })
  t.equal(capped.status, 200)
  await send(tenant, [login('p1')])
  t.equal((await state(pid, d.id))?.completions, 2, 'no third completion')
  t.notOk(await mission(tenant, 'p1', d.id), 'and no longer active for the player')
})

t.test('DELETE of missions with progress, and of the currency, badge and bonus a mission rewards: completions still happen, the rest is granted', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gems = await create(tenant, '/gamification/currencies', { name: 'Gems', symbol: 'G', type: 'virtual' })
  const badge = await create(tenant, '/gamification/badges', { name: 'B' })
  const bonus = await create(tenant, '/bonuses', { name: 'Bonus', type: 'custom', value: 1, value_type: 'fixed' })
  const keep = await create(tenant, '/gamification/badges', { name: 'Kept' })
  const m = await create(tenant, MISSIONS, {
    name: 'Deposit 2', type: 'one_time', rules: { event_type: 'deposit', target: 2 },
    rewards: { points: [{ currency_id: lp.id, amount: 5 }, { currency_id: gems.id, amount: 7 }], badge_ids: [badge.id, keep.id], bonus_ids: [bonus.id] },
  })
  const pool = await create(tenant, MISSIONS, { name: 'Pool', type: 'collaborative', rules: { event_type: 'deposit', measure: 'sum', target: 1000 } })
  await send(tenant, [deposit('p1', 10)])
  const pid = await playerId(tenant, 'p1')
  t.match(await state(pid, m.id), { value: '1' })
  for (const path of [`/gamification/currencies/${lp.id}`, `/gamification/badges/${badge.id}`, `/bonuses/${bonus.id}`, `${MISSIONS}/${pool.id}`]) {
    t.equal((await h.request('DELETE', path, { key: tenant.key })).status, 200, path)
  }
  await send(tenant, [deposit('p1', 10)])
  t.match(await state(pid, m.id), { value: '2', completions: 1 }, 'completed')
  t.same((await outbox(tenant, 'gamification.mission_completed')).map((e) => e.data.mission_id), [m.id])
  t.same((await ledger(pid)).map((r) => [r.currency_id, r.amount]), [[gems.id, 7]], 'the remaining currency credited')
  t.same(ids((await profile(tenant, 'p1')).badges_earned), [keep.id], 'the remaining badge awarded')
  t.same(await sql`select 1 from player_missions where mission_id = ${pool.id}`, [], 'the deleted mission\'s progress is gone')
  t.same(ids((await profile(tenant, 'p1')).active_missions), [], 'nothing left active')
})

t.test('duplicates change nothing: a completing event and a rollback sent again, in one request and in later ones', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const sum = await create(tenant, MISSIONS, { name: 'Sum', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  const once = await create(tenant, MISSIONS, { name: 'Once', type: 'one_time', rules: { event_type: 'bet', target: 1, filters: [{ field: 'amount', op: 'eq', value: 1 }] }, rewards: { points: [{ currency_id: lp.id, amount: 1 }] } })
  const first = [{ ...bet('p1', 30, { round_id: 'r1' }), event_id: eid() }, { ...bet('p1', 20, { round_id: 'r1' }), event_id: eid() }]
  await send(tenant, first)
  const rb = { ...rollback('p1', 20, 'r1'), event_id: eid() }
  await send(tenant, [rb])
  await send(tenant, [rb, ...first])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, sum.id))?.value, '30', '50 − 20 once: the repeated rollback and bets were duplicates')
  const third = { ...bet('p1', 1), event_id: eid() }
  await send(tenant, [third, third])
  await send(tenant, [third])
  t.match(await state(pid, once.id), { value: '1', completions: 1 })
  t.equal((await ledger(pid)).length, 1, 'rewarded once')
  t.equal((await state(pid, sum.id))?.value, '31')
})

t.test('a non-finite target (1e400 in the JSON text) is refused like any invalid target, for stages and badge criteria too', async (t) => {
  const tenant = await h.createTenant()
  const raw = async (path: string, text: string) => h.request('POST', path, { key: tenant.key, rawBody: text, headers: { 'content-type': 'application/json' } })
  const named = (res: { body: any }, field: string) => ((res.body?.details?.errors ?? []) as { field: string }[]).some((e) => e.field === field)
  const target = await raw(MISSIONS, '{"name":"x","type":"one_time","rules":{"event_type":"bet","target":1e400}}')
  t.ok(target.status === 400 && named(target, 'rules.target'), `rules.target 1e400: ${target.status}`)
  // JSON.parse reads 1e400 as Infinity, which jsonb stores as null: a stage (or a badge) then needs nothing.
  t.test('stage target 1e400', async (t) => {
    const stage = await raw(MISSIONS, '{"name":"x","type":"progressive","rules":{"event_type":"bet","stages":[{"target":1},{"target":1e400}]}}')
    t.equal(stage.status, 400, stage.text)
    t.ok(named(stage, 'rules.stages.1.target'), stage.text)
  })
  t.test('badge criteria target 1e400', async (t) => {
    const badge = await raw('/gamification/badges', '{"name":"x","criteria":{"event_type":"bet","target":1e400}}')
    t.equal(badge.status, 400, badge.text)
    t.ok(named(badge, 'criteria.target'), badge.text)
  })
})

t.test('PATCH type daily → weekly mid-week, or the zone westward: the events of the current period count (§1: in the period of their own event_time)', async (t) => {
  const tenant = await h.createTenant()
  const m = await create(tenant, MISSIONS, { name: 'Bets', type: 'daily', rules: { event_type: 'bet', target: 100 } })
  // Friday 20 Nov 2026 (UTC): the daily period is Friday 00:00, the ISO week's Monday 16 Nov 00:00.
  await send(tenant, [bet('p1', 1, {}, '2026-11-20T12:00:00.000Z')])
  const pid = await playerId(tenant, 'p1')
  t.match(await state(pid, m.id), { value: '1', period_start: new Date('2026-11-20T00:00:00Z') })
  const res = await h.request('PATCH', `${MISSIONS}/${m.id}`, { key: tenant.key, body: { type: 'weekly' } })
  t.equal(res.status, 200, res.text)
  t.test('a bet later that Friday counts in its week', async (t) => {
    await send(tenant, [bet('p1', 1, {}, '2026-11-20T13:00:00.000Z'), bet('p1', 1, {}, '2026-11-20T14:00:00.000Z')])
    const row = await state(pid, m.id)
    t.equal(row?.period_start?.toISOString(), '2026-11-16T00:00:00.000Z', 'the week of Monday 16 Nov')
    // Whether the Friday's daily progress carries into the week is open; the two new bets count either way.
    t.ok(Number(row?.value) >= 2, `both bets counted (value ${row?.value})`)
  })
  // The same with a zone: a daily mission in Pacific/Kiritimati (UTC+14) moved to UTC. Its Friday 20 Nov
  // (UTC) began at 00:00Z; the stored Kiritimati day began at 10:00Z.
  const z = await create(tenant, MISSIONS, { name: 'Zone', type: 'daily', rules: { event_type: 'login', target: 100, timezone: 'Pacific/Kiritimati' } })
  await send(tenant, [login('p2', '2026-11-20T12:00:00.000Z')])
  const p2 = await playerId(tenant, 'p2')
  t.match(await state(p2, z.id), { value: '1', period_start: new Date('2026-11-20T10:00:00Z') })
  t.equal((await h.request('PATCH', `${MISSIONS}/${z.id}`, { key: tenant.key, body: { rules: { event_type: 'login', target: 100 } } })).status, 200)
  t.test('logins later that UTC day count in it', async (t) => {
    await send(tenant, [login('p2', '2026-11-20T13:00:00.000Z'), login('p2', '2026-11-20T14:00:00.000Z')])
    const row = await state(p2, z.id)
    t.equal(row?.period_start?.toISOString(), '2026-11-20T00:00:00.000Z', 'the UTC day')
    t.ok(Number(row?.value) >= 2, `both logins counted (value ${row?.value})`)
  })
})

t.test('one batch completing an individual and a collaborative mission: one level_changed from the level before the batch to the one after', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const bronze = await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
  await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 50 })
  const gold = await create(tenant, '/gamification/levels', { name: 'Gold', tier: 3, min_points: 150 })
  await create(tenant, MISSIONS, { name: 'Solo', type: 'one_time', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 60 }] } })
  await create(tenant, MISSIONS, { name: 'Team', type: 'collaborative', rules: { event_type: 'deposit', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 100 }] } })
  await send(tenant, [login('p1')])
  const pid = await playerId(tenant, 'p1')
  await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: 1 } })
  await send(tenant, [deposit('p1', 10)])
  t.same((await ledger(pid)).map((r) => r.amount).sort((a, b) => a - b), [1, 60, 100], 'both rewards, once')
  t.equal((await profile(tenant, 'p1')).current_level.id, gold.id)
  const changes = (await outbox(tenant, 'gamification.level_changed')).map((e) => [e.data.previous_level_id, e.data.level_id])
  t.same(changes[0], [null, bronze.id], 'bronze with the manual credit')
  // docs/gamification.md: one level_changed per batch, "except that a collaborative mission the batch
  // completes rewards its contributors after the rest ...: a contributor the batch had already moved gets
  // a second change, chained from the first".
  const later = changes.slice(1)
  t.ok(later.length >= 1 && later.length <= 2, `one or two changes for the batch: ${JSON.stringify(later)}`)
  t.equal(later[0]?.[0], bronze.id, 'from the level before the batch')
  t.equal(later.at(-1)?.[1], gold.id, 'to the level after it')
  if (later.length === 2) t.equal(later[1]?.[0], later[0]?.[1], 'chained')
})

t.test('rollbacks find their round when round_id is a JSON number, as for a string', async (t) => {
  const tenant = await h.createTenant()
  const bets = await create(tenant, MISSIONS, { name: 'Wager', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1000 } })
  const wins = await create(tenant, MISSIONS, { name: 'Wins', type: 'one_time', rules: { event_type: 'win', target: 1000 } })
  await send(tenant, [bet('p1', 10, { round_id: 12345 }), bet('p1', 4, { round_id: 'r-2' }), { player_id: 'p1', event_type: 'win', payload: { amount: 7, currency: 'EUR', round_id: 777 } }])
  const pid = await playerId(tenant, 'p1')
  t.equal((await state(pid, bets.id))?.value, '14')
  t.equal((await state(pid, wins.id))?.value, '1')
  await send(tenant, [rollback('p1', 4, 'r-2')])
  t.equal((await state(pid, bets.id))?.value, '10', 'a string round id: taken back')
  // contract.md: round_id is a canonical field of bet, win and their rollbacks; §1: a rollback takes back
  // what its bet/win "(same round_id)" added. An operator's numeric round ids are the same ids.
  t.test('numeric round ids', async (t) => {
    await send(tenant, [rollback('p1', 10, 12345 as unknown as string), { player_id: 'p1', event_type: 'win_rollback', payload: { amount: 7, currency: 'EUR', round_id: 777 } }])
    t.equal((await state(pid, bets.id))?.value, '0', 'bet round 12345 rolled back: sum −10')
    t.equal((await state(pid, wins.id))?.value, '0', 'win round 777 rolled back: count −1')
  })
})

t.test('progressive: stages shortened by PATCH under a player who already passed the new last stage: the next event completes it', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const m = await create(tenant, MISSIONS, { name: 'Ladder', type: 'progressive', rules: { event_type: 'deposit', stages: [{ target: 1 }, { target: 2, rewards: { points: [{ currency_id: lp.id, amount: 5 }] } }, { target: 5 }] } })
  await send(tenant, [deposit('p1', 1), deposit('p1', 1)])
  const pid = await playerId(tenant, 'p1')
  t.match(await state(pid, m.id), { value: '2', stage: 2, completions: 0 })
  const res = await h.request('PATCH', `${MISSIONS}/${m.id}`, { key: tenant.key, body: { rules: { event_type: 'deposit', stages: [{ target: 1 }, { target: 2 }] } } })
  t.equal(res.status, 200, res.text)
  // As a lowered target completes on the next event (adversarial.test.ts), so does a last stage the
  // player has already reached: §5 "the mission completes at the last stage".
  t.test('completes on the next event', async (t) => {
    await send(tenant, [deposit('p1', 1)])
    t.match(await state(pid, m.id), { stage: 2, completions: 1 }, 'completed once')
    t.notOk(await mission(tenant, 'p1', m.id), 'no longer active')
    t.equal(await missionsCompleted(pid), 1)
    t.equal((await ledger(pid)).length, 1, 'stage 2 was rewarded once, before the patch; nothing more')
  })
})

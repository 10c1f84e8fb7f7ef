// Analytics and reports (contract-engines.md §6): every figure from ClickHouse rollups (queries.ts,
// docs/analytics.md), players, statuses and lifecycle stages from PostgreSQL. Money is exact and per
// currency (money.ts); days, weeks and hours in the request's zone.
import type { AppContext } from '../context.ts'
import type { Params } from '../db/clickhouse.ts'
import { retentionDropped } from '../events/retention.ts'
import { lifecycleStageSql } from '../segments/fields.ts'
import { LIFECYCLE_STAGES } from '../players/scoring.ts'
import { ERASURE_TOKEN_PREFIX } from '../players/data-rights.ts'
import { ggrOf, MoneyMap, moneyOf, roiOf, type Money } from './money.ts'
import { at, bucketRows, chQuery, distinctPlayers, GAME_TYPES_SQL, GGR_PART, NO_TIME, PLAYER_TIMES, playerBucketRows, playerDimension, playerMoneyRows, playersPerKey, SCOPE, type Scope } from './queries.ts'
import { datesBetween, localDate } from './time.ts'

type Deps = Pick<AppContext, 'sql' | 'ch' | 'clock'>
const DAY_MS = 86_400_000

/** Players of the brand that ClickHouse has never seen (no event): their registration time is created_at. */
function eventlessPlayers(deps: Deps, scope: Scope) {
  return deps.sql`
    select p.created_at from players p join player_profiles pp on pp.player_id = p.id
    where p.tenant_id = ${scope.tenantId} and p.brand_id = ${scope.brandId} and pp.event_count = 0`
}

// ---------------------------------------------------------------------------------------------- summary

export async function summary(deps: Deps, scope: Scope) {
  const now = deps.clock().getTime()
  const since = now - 30 * DAY_MS
  const activeParams: Params = {}
  const [totals, [active], [players], pg, eventless] = await Promise.all([
    chQuery<{ event_type: string; currency: string; n: string; amount: string }>(deps.ch, `
      SELECT event_type, currency, toString(sum(events)) AS n, sum(amount) AS amount FROM rollup_buckets
      WHERE ${SCOPE} AND event_type IN ('deposit', 'withdrawal', 'bet', 'win', 'bet_rollback', 'win_rollback', 'bonus_completed')
      GROUP BY event_type, currency`, scope),
    chQuery<{ n: string }>(deps.ch, `SELECT ${distinctPlayers()} AS n FROM (${playerBucketRows(since, activeParams)})`, scope, activeParams),
    chQuery<{ new_30d: string; depositors: string; ftd_30d: string }>(deps.ch, `
      SELECT toString(countIf(registered_at >= ${at('since')})) AS new_30d, toString(countIf(deposit_count > 0)) AS depositors,
        toString(countIf(first_deposit_at >= ${at('since')} AND first_deposit_at < ${NO_TIME})) AS ftd_30d
      FROM (${PLAYER_TIMES})`, scope, { since }),
    deps.sql<{ stage: string; n: string }[]>`
      select ${lifecycleStageSql({ sql: deps.sql, now: new Date(now) })} as stage, count(*)::text as n
      from players p left join player_profiles pp on pp.player_id = p.id
      where p.tenant_id = ${scope.tenantId} and p.brand_id = ${scope.brandId} group by 1`,
    eventlessPlayers(deps, scope),
  ])
  const byType = (type: string) => {
    const amount = new MoneyMap()
    let count = 0
    for (const r of totals) if (r.event_type === type) {
      count += Number(r.n)
      amount.add(r.currency, r.amount)
    }
    return { count, amount }
  }
  const [deposits, withdrawals, bets, wins, betRb, winRb, bonus] = ['deposit', 'withdrawal', 'bet', 'win', 'bet_rollback', 'win_rollback', 'bonus_completed'].map(byType) as { count: number; amount: MoneyMap }[]
  const ggr = ggrOf({ bets: bets!.amount, wins: wins!.amount, bet_rollbacks: betRb!.amount, win_rollbacks: winRb!.amount })
  const ngr = ggr.plus(bonus!.amount, -1n)
  const stages: Record<string, number> = Object.fromEntries(LIFECYCLE_STAGES.map((s) => [s, 0]))
  let total = 0
  for (const r of pg) {
    stages[r.stage] = Number(r.n)
    total += Number(r.n)
  }
  const activeN = Number(active?.n ?? 0)
  const depositors = Number(players?.depositors ?? 0)
  const pair = (x: { count: number; amount: MoneyMap }) => ({ count: x.count, amount: x.amount.toJSON() })
  return {
    players: total,
    active: activeN,
    new_players_30d: Number(players?.new_30d ?? 0) + eventless.filter((r) => (r.created_at as Date).getTime() >= since).length,
    depositors,
    ftd_count: Number(players?.ftd_30d ?? 0),
    deposits: pair(deposits!),
    withdrawals: pair(withdrawals!),
    bets: pair(bets!),
    wins: pair(wins!),
    ggr: ggr.toJSON(),
    ngr: ngr.toJSON(),
    bonus_cost: bonus!.amount.toJSON(),
    arpu: ngr.per(activeN),
    average_ltv: ngr.per(depositors),
    lifecycle_stages: stages,
  }
}

// ------------------------------------------------------------------------------------------- timeseries

export async function timeseries(deps: Deps, scope: Scope, input: { from?: number; tz: string }) {
  const now = deps.clock().getTime()
  const from = input.from ?? now - 30 * DAY_MS
  const first = localDate(from, input.tz)
  const dates = datesBetween(first, localDate(now, input.tz))
  // Whole days in tz: the first day starts at its local midnight, a bucket boundary in every zone.
  const start = `toStartOfDay(${at('from')}, {tz:String})`
  const params = { from, tz: input.tz }
  const [money, active, registered, eventless] = await Promise.all([
    chQuery<{ date: string; currency: string; events: string; deposits: string; ggr: string }>(deps.ch, `
      SELECT toString(toDate(bucket, {tz:String})) AS date, currency, toString(sum(events)) AS events,
        sumIf(amount, event_type = 'deposit') AS deposits, sum(${GGR_PART}) AS ggr
      FROM rollup_buckets WHERE ${SCOPE} AND bucket >= ${start} GROUP BY date, currency`, scope, params),
    chQuery<{ date: string; n: string }>(deps.ch, `
      SELECT toString(toDate(bucket, {tz:String})) AS date, ${distinctPlayers()} AS n
      FROM rollup_player_buckets WHERE ${SCOPE} AND bucket >= ${start} GROUP BY date`, scope, params),
    chQuery<{ date: string; n: string }>(deps.ch, `
      SELECT toString(toDate(registered_at, {tz:String})) AS date, toString(count()) AS n FROM (${PLAYER_TIMES})
      WHERE registered_at >= ${start} GROUP BY date`, scope, params),
    eventlessPlayers(deps, scope),
  ])
  const rows = new Map(dates.map((date) => [date, { date, new_players: 0, active_players: 0, events: 0, deposits: new MoneyMap(), ggr: new MoneyMap() }]))
  for (const r of money) {
    const row = rows.get(r.date)
    if (!row) continue
    row.events += Number(r.events)
    row.deposits.add(r.currency, r.deposits)
    row.ggr.add(r.currency, r.ggr)
  }
  for (const r of active) { const row = rows.get(r.date); if (row) row.active_players = Number(r.n) }
  for (const r of registered) { const row = rows.get(r.date); if (row) row.new_players += Number(r.n) }
  for (const r of eventless) { const row = rows.get(localDate((r.created_at as Date).getTime(), input.tz)); if (row) row.new_players++ }
  return [...rows.values()].map((r) => ({ ...r, deposits: r.deposits.toJSON(), ggr: r.ggr.toJSON() }))
}

// ---------------------------------------------------------------------------------------------- revenue

export const REVENUE_DIMENSIONS = ['country', 'device', 'os', 'browser', 'platform', 'game', 'provider', 'category', 'heatmap', 'bonus_roi'] as const
export type RevenueDimension = (typeof REVENUE_DIMENSIONS)[number]
const PLAYER_DIMENSIONS: ReadonlySet<string> = new Set(['country', 'device', 'os', 'browser', 'platform'])
const isPlayerDimension = (d: RevenueDimension): d is 'country' | 'device' | 'os' | 'browser' | 'platform' => PLAYER_DIMENSIONS.has(d)

const byKeyOrder = <T extends { key: string | null }>(a: T, b: T) => (a.key === b.key ? 0 : a.key === null ? 1 : b.key === null ? -1 : a.key < b.key ? -1 : 1)

export async function revenue(deps: Deps, scope: Scope, input: { dimension: RevenueDimension; from?: number; tz: string }) {
  const { dimension, from, tz } = input
  if (dimension === 'heatmap') return heatmap(deps, scope, from, tz)
  if (dimension === 'bonus_roi') return bonusRoi(deps, scope, from)
  const params: Params = {}
  if (isPlayerDimension(dimension)) {
    // The player's dimension (latest value seen in their events) keys all of their money. Grouped by
    // (key, currency) for the money and by key alone (grouping(currency) = 1) for the distinct players.
    const rows = await chQuery<{ key: string; currency: string; g: number; players: string } & Record<'deposits' | 'bets' | 'wins' | 'bet_rollbacks' | 'win_rollbacks' | 'bonus_cost', string>>(deps.ch, `
      SELECT d.${dimension} AS key, b.currency AS currency, grouping(currency) AS g, ${distinctPlayers('b.player_id')} AS players,
        sum(b.deposits) AS deposits, sum(b.bets) AS bets, sum(b.wins) AS wins, sum(b.bet_rollbacks) AS bet_rollbacks,
        sum(b.win_rollbacks) AS win_rollbacks, sum(b.bonus_cost) AS bonus_cost
      FROM (${playerMoneyRows(from, params, from === undefined && (await retentionDropped(deps)))}) AS b
      INNER JOIN (${playerDimension(dimension)}) AS d ON d.player_id = b.player_id
      GROUP BY GROUPING SETS ((key, currency), (key))`, scope, params)
    const byKey = new Map<string, { players: number; m: Record<'deposits' | 'bets' | 'wins' | 'bet_rollbacks' | 'win_rollbacks' | 'bonus_cost', MoneyMap> }>()
    for (const r of rows) {
      let e = byKey.get(r.key)
      if (!e) {
        e = { players: 0, m: { deposits: new MoneyMap(), bets: new MoneyMap(), wins: new MoneyMap(), bet_rollbacks: new MoneyMap(), win_rollbacks: new MoneyMap(), bonus_cost: new MoneyMap() } }
        byKey.set(r.key, e)
      }
      if (Number(r.g) === 1) e.players = Number(r.players)
      else for (const k of ['deposits', 'bets', 'wins', 'bet_rollbacks', 'win_rollbacks', 'bonus_cost'] as const) e.m[k].add(r.currency, r[k])
    }
    return [...byKey].map(([key, { players, m }]) => {
      const ggr = ggrOf(m)
      return { key: key || null, players, bets: m.bets.toJSON(), wins: m.wins.toJSON(), ggr: ggr.toJSON(), ngr: ggr.plus(m.bonus_cost, -1n).toJSON() as Money | null, deposits: m.deposits.toJSON() }
    }).sort(byKeyOrder)
  }
  // game, provider, category: carried by the game events themselves; bonus costs and deposits carry none.
  // Two reads side by side: the money by (key, currency), and the distinct players by key alone. One
  // query with GROUPING SETS would also count distinct players per (key, currency), which nobody reads
  // and which cost more than the rest together (448 → ~200 ms at 3M events). All-time money comes from
  // the monthly game rollup (clickhouse/0013), all-time players from rollup_player_keys (0015); `from` an
  // instant, both from the events after it.
  if (from !== undefined) params.from = from
  const where = `WHERE ${SCOPE} AND event_type IN (${GAME_TYPES_SQL}) ${from !== undefined ? `AND event_time >= ${at('from')}` : ''}`
  const moneyFrom = from === undefined ? `rollup_game_months WHERE ${SCOPE}` : `events ${where}`
  const [money, players] = await Promise.all([
    chQuery<{ key: string; currency: string } & Record<'bets' | 'wins' | 'bet_rollbacks' | 'win_rollbacks', string>>(deps.ch, `
      SELECT ${dimension} AS key, currency,
        sumIf(amount, event_type = 'bet') AS bets, sumIf(amount, event_type = 'win') AS wins,
        sumIf(amount, event_type = 'bet_rollback') AS bet_rollbacks, sumIf(amount, event_type = 'win_rollback') AS win_rollbacks
      FROM ${moneyFrom} GROUP BY key, currency`, scope, params),
    chQuery<{ key: string; players: string }>(deps.ch, from === undefined
      ? playersPerKey([dimension])
      : `SELECT ${dimension} AS key, ${distinctPlayers()} AS players FROM events ${where} GROUP BY key`, scope, params),
  ])
  const byGame = new Map<string, { players: number; bets: MoneyMap; wins: MoneyMap; bet_rollbacks: MoneyMap; win_rollbacks: MoneyMap }>()
  const entry = (key: string) => {
    let e = byGame.get(key)
    if (!e) byGame.set(key, (e = { players: 0, bets: new MoneyMap(), wins: new MoneyMap(), bet_rollbacks: new MoneyMap(), win_rollbacks: new MoneyMap() }))
    return e
  }
  for (const r of money) for (const k of ['bets', 'wins', 'bet_rollbacks', 'win_rollbacks'] as const) entry(r.key)[k].add(r.currency, r[k])
  for (const r of players) entry(r.key).players = Number(r.players)
  return [...byGame].map(([key, m]) => (
    { key: key || null, players: m.players, bets: m.bets.toJSON(), wins: m.wins.toJSON(), ggr: ggrOf(m).toJSON(), ngr: null as Money | null, deposits: {} as Money }
  )).sort(byKeyOrder)
}

async function heatmap(deps: Deps, scope: Scope, from: number | undefined, tz: string) {
  const params: Params = { tz }
  const rows = await chQuery<{ weekday: number; hour: number; currency: string; events: string; ggr: string }>(deps.ch, `
    SELECT toDayOfWeek(bucket, 0, {tz:String}) AS weekday, toHour(bucket, {tz:String}) AS hour, currency,
      toString(sum(events)) AS events, sum(${GGR_PART}) AS ggr
    FROM (${bucketRows(from, params)}) GROUP BY weekday, hour, currency`, scope, params)
  const cells = new Map<string, { weekday: number; hour: number; events: number; ggr: MoneyMap }>()
  for (let weekday = 1; weekday <= 7; weekday++) for (let hour = 0; hour < 24; hour++) cells.set(`${weekday}:${hour}`, { weekday, hour, events: 0, ggr: new MoneyMap() })
  for (const r of rows) {
    const c = cells.get(`${r.weekday}:${r.hour}`)
    if (!c) continue
    c.events += Number(r.events)
    c.ggr.add(r.currency, r.ggr)
  }
  return [...cells.values()].map((c) => ({ weekday: c.weekday, hour: c.hour, events: c.events, ggr: c.ggr.toJSON() }))
}

async function bonusRoi(deps: Deps, scope: Scope, from: number | undefined) {
  const params: Params = {}
  if (from !== undefined) params.from = from
  const since = from !== undefined ? `AND event_time >= ${at('from')}` : ''
  // A player's GGR after their first grant of the bonus (in the period) counts toward that bonus. Each
  // game event meets its player's grants as one row (arrays of bonus and first grant time, so the join
  // never fans out) and counts toward the bonuses granted before it; summed per (bonus, currency), not
  // into maps (a map per event row cost more than the join). Events before `from` precede every grant.
  const [bonuses, after] = await Promise.all([
    chQuery<{ bonus_id: string; currency: string; granted: string; cost: string }>(deps.ch, `
      SELECT bonus_id, currency, toString(countIf(event_type = 'bonus_granted')) AS granted,
        sumIf(amount, event_type = 'bonus_completed') AS cost
      FROM events WHERE ${SCOPE} AND event_type IN ('bonus_granted', 'bonus_completed') ${since}
      GROUP BY bonus_id, currency`, scope, params),
    chQuery<{ bonus_id: string; currency: string; ggr: string }>(deps.ch, `
      SELECT bonus_id, currency, sum(part) AS ggr FROM (
        SELECT e.currency AS currency, e.part AS part,
          arrayJoin(arrayFilter((b, t) -> t < e.event_time, g.bonuses, g.granted_at)) AS bonus_id
        FROM (
          SELECT player_id, event_time, currency, ${GGR_PART} AS part FROM events
          WHERE ${SCOPE} AND event_type IN ('bet', 'win', 'bet_rollback', 'win_rollback') ${since}
        ) AS e
        INNER JOIN (
          SELECT player_id, groupArray(bonus_id) AS bonuses, groupArray(first_grant) AS granted_at FROM (
            SELECT bonus_id, player_id, min(event_time) AS first_grant FROM events
            WHERE ${SCOPE} AND event_type = 'bonus_granted' ${since} GROUP BY bonus_id, player_id)
          GROUP BY player_id
        ) AS g ON g.player_id = e.player_id
      ) GROUP BY bonus_id, currency`, scope, params),
  ])
  const ggrAfter = new Map<string, MoneyMap>()
  for (const r of after) {
    let m = ggrAfter.get(r.bonus_id)
    if (!m) ggrAfter.set(r.bonus_id, (m = new MoneyMap()))
    m.add(r.currency, r.ggr)
  }
  const byBonus = new Map<string, { bonus_id: string; granted: number; cost: MoneyMap }>()
  for (const r of bonuses) {
    let b = byBonus.get(r.bonus_id)
    if (!b) byBonus.set(r.bonus_id, (b = { bonus_id: r.bonus_id, granted: 0, cost: new MoneyMap() }))
    b.granted += Number(r.granted)
    b.cost.add(r.currency, r.cost)
  }
  return [...byBonus.values()]
    .map((b) => {
      const cost = b.cost
      const ggr = ggrAfter.get(b.bonus_id) ?? new MoneyMap()
      const roi: Record<string, number | null> = {}
      for (const c of [...new Set([...cost.by.keys(), ...ggr.by.keys()])].sort()) {
        const k = cost.by.get(c) ?? 0n
        const g = ggr.by.get(c) ?? 0n
        if (k === 0n && g === 0n) continue
        roi[c] = roiOf(g, k)
      }
      return { bonus_id: b.bonus_id || null, granted: b.granted, cost: cost.toJSON(), ggr_after: ggr.toJSON(), roi }
    })
    .sort((a, b) => byKeyOrder({ key: a.bonus_id }, { key: b.bonus_id }))
}

// ---------------------------------------------------------------------------------------------- cohorts

export async function cohorts(deps: Deps, scope: Scope, input: { months: number }) {
  const now = deps.clock()
  const months: string[] = []
  for (let k = input.months - 1; k >= 0; k--) {
    const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - k, 1))
    months.push(d.toISOString().slice(0, 7))
  }
  const start = Date.parse(`${months[0]}-01T00:00:00Z`)
  const params = { start }
  const cohortOf = `SELECT player_id, toStartOfMonth(registered_at) AS cohort, deposit_count FROM (${PLAYER_TIMES}) WHERE registered_at >= ${at('start')}`
  const net = await retentionDropped(deps)
  const [sizes, activity, money, eventless] = await Promise.all([
    chQuery<{ cohort: string; size: string; depositors: string }>(deps.ch, `
      SELECT toString(cohort) AS cohort, toString(count()) AS size, toString(countIf(deposit_count > 0)) AS depositors
      FROM (${cohortOf}) GROUP BY cohort`, scope, params),
    // Retention: one group per player (its registration month and its active months), then the players
    // per (cohort, k). Grouping by (player, month) instead held every pair in one hash set: 2-3x slower.
    // The active months are bits of a UInt64 (bit i = the i-th month from the first cohort's; at most 36
    // are asked for, months after the 64th are left out), OR-ed per player: half the time of a set of
    // months per player (groupUniqArrayIf: 362 → 176 ms at 36 months, 10M events, same rows).
    chQuery<{ cohort: string; k: number; n: string }>(deps.ch, `
      SELECT toString(c) AS cohort, toInt32(bit - c_bit) AS k, toString(count()) AS n
      FROM (
        SELECT toStartOfMonth(if(min(registered_at) < ${NO_TIME}, min(registered_at), min(first_received_at))) AS c,
          dateDiff('month', toDate(${at('start')}), c) AS c_bit,
          groupBitOrIf(bitShiftLeft(toUInt64(1), toUInt8(dateDiff('month', toDate(${at('start')}), month))), is_activity) AS months
        FROM (
          SELECT player_id, registered_at, first_received_at, toDate(0) AS month, false AS is_activity FROM rollup_players WHERE ${SCOPE}
          UNION ALL
          SELECT player_id, ${NO_TIME}, ${NO_TIME}, month, true FROM rollup_player_months
          WHERE ${SCOPE} AND month >= toDate(${at('start')}) AND month < addMonths(toDate(${at('start')}), 64)
        )
        GROUP BY player_id HAVING c >= toDate(${at('start')})
      ) ARRAY JOIN bitPositionsToArray(months) AS bit
      WHERE bit >= c_bit GROUP BY c, k`, scope, params),
    // Money: each player's totals joined to their cohort (the smaller side), summed per (cohort, currency).
    chQuery<{ cohort: string; currency: string } & Record<'deposits' | 'bets' | 'wins' | 'bet_rollbacks' | 'win_rollbacks', string>>(deps.ch, `
      SELECT toString(c.cohort) AS cohort, b.currency AS currency, sum(b.deposits) AS deposits, sum(b.bets) AS bets,
        sum(b.wins) AS wins, sum(b.bet_rollbacks) AS bet_rollbacks, sum(b.win_rollbacks) AS win_rollbacks
      FROM (${playerMoneyRows(undefined, params, net)}) AS b INNER JOIN (${cohortOf}) AS c ON c.player_id = b.player_id
      GROUP BY cohort, currency`, scope, params),
    eventlessPlayers(deps, scope),
  ])
  const rows = new Map(months.map((month, i) => [month, { month, size: 0, active: new Array<number>(months.length - i).fill(0), depositors: 0, deposits: new MoneyMap(), ggr: new MoneyMap() }]))
  const monthOf = (d: string) => d.slice(0, 7)
  for (const r of sizes) { const row = rows.get(monthOf(r.cohort)); if (row) { row.size += Number(r.size); row.depositors += Number(r.depositors) } }
  for (const r of eventless) { const row = rows.get((r.created_at as Date).toISOString().slice(0, 7)); if (row) row.size++ }
  for (const r of activity) { const row = rows.get(monthOf(r.cohort)); if (row && r.k < row.active.length) row.active[r.k] = Number(r.n) }
  const cohortMoney = new Map<string, Record<'deposits' | 'bets' | 'wins' | 'bet_rollbacks' | 'win_rollbacks', MoneyMap>>()
  for (const r of money) {
    const month = monthOf(r.cohort)
    let m = cohortMoney.get(month)
    if (!m) cohortMoney.set(month, (m = { deposits: new MoneyMap(), bets: new MoneyMap(), wins: new MoneyMap(), bet_rollbacks: new MoneyMap(), win_rollbacks: new MoneyMap() }))
    for (const k of ['deposits', 'bets', 'wins', 'bet_rollbacks', 'win_rollbacks'] as const) m[k].add(r.currency, r[k])
  }
  for (const [month, m] of cohortMoney) {
    const row = rows.get(month)
    if (!row) continue
    row.deposits = m.deposits
    row.ggr = ggrOf(m)
  }
  return {
    cohorts: [...rows.values()].map((r) => ({
      month: r.month,
      size: r.size,
      retention: r.active.map((n) => (r.size ? Math.round((n / r.size) * 10_000) / 10_000 : 0)),
      depositors: r.depositors,
      deposits: r.deposits.toJSON(),
      ggr: r.ggr.toJSON(),
    })),
  }
}

// ---------------------------------------------------------------------------------------------- reports

export const REPORT_METRICS = ['players', 'events', 'deposits', 'wagered'] as const
export const REPORT_DIMENSIONS = ['day', 'week', 'status', 'country', 'game', 'event_type'] as const
export type ReportMetric = (typeof REPORT_METRICS)[number]
export type ReportDimension = (typeof REPORT_DIMENSIONS)[number]

/** Rows `{ key, value }` ordered by key; value a count, or money per currency for deposits and wagered. */
export async function runReport(deps: Deps, scope: Scope, input: { metric: ReportMetric; dimension: ReportDimension; from?: number }) {
  const { metric, dimension, from } = input
  const params: Params = {}
  if (metric === 'players' && dimension === 'status') {
    // Every player of the brand by current status (created since `from`), from PostgreSQL.
    const rows = await deps.sql<{ key: string; n: string }[]>`
      select status as key, count(*)::text as n from players
      where tenant_id = ${scope.tenantId} and brand_id = ${scope.brandId}
        ${from !== undefined ? deps.sql`and created_at >= ${new Date(from)}` : deps.sql``}
      group by status`
    return rows.map((r) => ({ key: r.key, value: Number(r.n) })).sort(byKeyOrder)
  }
  let keyExpr: string
  let source: string
  let statuses: { external_id: string; status: string }[] = []
  const money = metric === 'deposits' || metric === 'wagered'
  if ((dimension === 'event_type' || dimension === 'game') && metric === 'players' && from === undefined) {
    // All time: a row per (type or game, player) in rollup_player_keys (clickhouse/0015) instead of every
    // event; by game, of game events and of the others (almost all under '').
    const rows = await chQuery<{ key: string; players: string }>(deps.ch, playersPerKey(dimension === 'game' ? ['game', 'other_game'] : ['event_type']), scope)
    return shape(rows.map((r) => ({ key: r.key, value: r.players })), false)
  }
  if (dimension === 'game' || (dimension === 'event_type' && metric === 'players')) {
    // Straight from events: the game is on the game events, and players per type or game since `from`
    // need the player ids.
    if (from !== undefined) params.from = from
    const value =
      metric === 'players' ? distinctPlayers()
      : metric === 'events' ? 'toString(count())'
      : metric === 'deposits' ? `sumMap(map(currency, if(event_type = 'deposit', amount, toDecimal128(0, 8))))`
      : `sumMap(map(currency, multiIf(event_type = 'bet', amount, event_type = 'bet_rollback', -amount, toDecimal128(0, 8))))`
    const types = metric === 'deposits' ? "AND event_type = 'deposit'" : metric === 'wagered' ? "AND event_type IN ('bet', 'bet_rollback')" : ''
    const rows = await chQuery<{ key: string; value: string | Record<string, string> }>(deps.ch, `
      SELECT ${dimension} AS key, ${value} AS value FROM events
      WHERE ${SCOPE} ${types} ${from !== undefined ? `AND event_time >= ${at('from')}` : ''} GROUP BY key`, scope, params)
    return shape(rows, money)
  }
  if (dimension === 'event_type' || ((dimension === 'day' || dimension === 'week') && metric !== 'players')) {
    keyExpr = dimension === 'event_type' ? 'event_type' : dimension === 'day' ? 'toString(toDate(bucket))' : 'toString(toMonday(bucket))'
    const value =
      metric === 'events' ? 'toString(sum(events))'
      : metric === 'deposits' ? `sumMap(map(currency, if(event_type = 'deposit', amount, toDecimal128(0, 8))))`
      : `sumMap(map(currency, multiIf(event_type = 'bet', amount, event_type = 'bet_rollback', -amount, toDecimal128(0, 8))))`
    source = bucketRows(from, params)
    const rows = await chQuery<{ key: string; value: string | Record<string, string> }>(deps.ch, `
      SELECT ${keyExpr} AS key, ${value} AS value FROM (${source}) GROUP BY key`, scope, params)
    return shape(rows, money)
  }
  // day/week × players, country, status: per player buckets (status: the player's current status).
  const value =
    metric === 'players' ? distinctPlayers('b.player_id')
    : metric === 'events' ? 'toString(sum(b.events))'
    : metric === 'deposits' ? 'sumMap(map(b.currency, b.deposits))'
    : 'sumMap(map(b.currency, b.bets - b.bet_rollbacks))'
  source = dimension === 'day' || dimension === 'week' ? playerBucketRows(from, params) : playerMoneyRows(from, params, from === undefined && (await retentionDropped(deps)))
  let join = ''
  if (dimension === 'day') keyExpr = 'toString(toDate(b.bucket))'
  else if (dimension === 'week') keyExpr = 'toString(toMonday(b.bucket))'
  else if (dimension === 'country') {
    keyExpr = 'd.country'
    join = `INNER JOIN (${playerDimension('country')}) AS d ON d.player_id = b.player_id`
  } else {
    statuses = await deps.sql<{ external_id: string; status: string }[]>`
      select external_id, status from players
      where tenant_id = ${scope.tenantId} and brand_id = ${scope.brandId} and status <> 'active'
      union all
      select external_id, 'erased' from player_erasures
      where tenant_id = ${scope.tenantId} and brand_id = ${scope.brandId} and state <> 'done' and external_id is not null`
    params.ids = statuses.map((s) => s.external_id)
    params.sts = statuses.map((s) => s.status)
    // An erased player's events count under `erased`: its status went with it (docs/analytics.md). Before
    // the job is done they still carry the external id; after, the erasure's token (data-rights.ts).
    keyExpr = `if(match(b.player_id, '^${ERASURE_TOKEN_PREFIX}[0-9a-f]{32}$'), 'erased', transform(b.player_id, {ids:Array(String)}, {sts:Array(String)}, 'active'))`
  }
  const rows = await chQuery<{ key: string; value: string | Record<string, string> }>(deps.ch, `
    SELECT ${keyExpr} AS key, ${value} AS value FROM (${source}) AS b ${join} GROUP BY key`, scope, params)
  return shape(rows, money)
}

function shape(rows: { key: string; value: string | Record<string, string> }[], money: boolean) {
  return rows
    .map((r) => ({ key: r.key === '' ? null : r.key, value: money ? moneyOf(r.value as Record<string, string>).toJSON() : Number(r.value) }))
    .filter((r) => !money || Object.keys(r.value).length > 0)
    .sort(byKeyOrder)
}

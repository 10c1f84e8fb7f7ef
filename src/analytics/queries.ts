// ClickHouse reads of the analytics routes (docs/analytics.md says which rollup serves which figure).
// Every query is bound to one (tenant, brand) by {tenant:UUID} {brand:UUID}; user values are parameters.
import { REPORT_SETTINGS, type ClickHouse, type Params } from '../db/clickhouse.ts'

export const SCOPE = 'tenant_id = {tenant:UUID} AND brand_id = {brand:UUID}'
/** Decimals as JSON strings (inside maps too), so money reaches money.ts exactly; and the reports' time limit. */
const SETTINGS = ` SETTINGS output_format_json_quote_decimals = 1, ${REPORT_SETTINGS}`

export const MONEY_TYPES = ['deposit', 'withdrawal', 'bet', 'win', 'bet_rollback', 'win_rollback', 'bonus_granted', 'bonus_completed', 'bonus_forfeited'] as const
// clickhouse/0015 (rollup_player_keys' view) spells this list out too: a change here needs a migration there.
export const GAME_TYPES = ['bet', 'win', 'bet_rollback', 'win_rollback', 'game_start'] as const
const list = (xs: readonly string[]) => xs.map((x) => `'${x}'`).join(', ')
export const MONEY_TYPES_SQL = list(MONEY_TYPES)
export const GAME_TYPES_SQL = list(GAME_TYPES)

const BUCKET_MS = 15 * 60_000
/** The instant as a ClickHouse DateTime64 expression of a parameter. */
export const at = (name: string) => `fromUnixTimestamp64Milli({${name}:Int64}, 'UTC')`
/** One row's GGR contribution (contract.md: GGR = (bets − bet rollbacks) − (wins − win rollbacks)). */
export const GGR_PART = `multiIf(event_type = 'bet', amount, event_type = 'win', -amount, event_type = 'bet_rollback', -amount, event_type = 'win_rollback', amount, toDecimal128(0, 8))`

/**
 * The number of distinct players in a group, as a decimal string. The same count as uniqExact(player_id):
 * ClickHouse keeps a String's 128-bit SipHash in uniqExact's set, and here the hashes are computed by the
 * (vectorized) sipHash128 function and counted as UInt128 keys. 1.8× faster over 7M game events on chDB
 * (bench/RESULTS.md, session 15).
 */
export const distinctPlayers = (column = 'player_id') => `toString(uniqExact(reinterpretAsUInt128(sipHash128(${column}))))`

/**
 * Distinct players per key over all time from rollup_player_keys (clickhouse/0015), a row per (key,
 * player) instead of one per event: `event_type` of every event; `game`, `provider`, `category` of game
 * events; `other_game`, the game of the other events. Rows `{ key, players }`.
 */
export const playersPerKey = (dimensions: readonly ('event_type' | 'game' | 'other_game' | 'provider' | 'category')[]) =>
  `SELECT key, ${distinctPlayers()} AS players FROM rollup_player_keys WHERE ${SCOPE} AND dimension IN (${list(dimensions)}) GROUP BY key`

export interface Scope {
  tenantId: string
  brandId: string
}

export async function chQuery<T>(ch: ClickHouse, sql: string, scope: Scope, params: Params = {}): Promise<T[]> {
  return ch.reports.query<T>(sql + SETTINGS, { tenant: scope.tenantId, brand: scope.brandId, ...params })
}

/**
 * Rows of rollup_buckets (bucket, event_type, currency, events, amount) since `from`: whole 15-minute
 * buckets from the rollup, and the part of `from`'s bucket after `from` from `events` itself, so a
 * `from` at any millisecond is exact. Adds its parameters to `params`.
 */
export function bucketRows(from: number | undefined, params: Params): string {
  const rollup = `SELECT bucket, event_type, currency, events, amount FROM rollup_buckets WHERE ${SCOPE}`
  if (from === undefined) return rollup
  params.from = from
  params.from_ceil = Math.ceil(from / BUCKET_MS) * BUCKET_MS
  return `${rollup} AND bucket >= ${at('from_ceil')}
    UNION ALL
    SELECT toDateTime(toStartOfFifteenMinutes(event_time), 'UTC') AS bucket, event_type, currency, count() AS events, sum(amount) AS amount
    FROM events WHERE ${SCOPE} AND event_time >= ${at('from')} AND event_time < ${at('from_ceil')}
    GROUP BY bucket, event_type, currency`
}

/** rollup_player_buckets' rows since `from`, exact in the same way as bucketRows. */
export function playerBucketRows(from: number | undefined, params: Params): string {
  const cols = 'bucket, player_id, currency, events, deposit_count, deposits, bets, wins, bet_rollbacks, win_rollbacks, bonus_cost'
  const rollup = `SELECT ${cols} FROM rollup_player_buckets WHERE ${SCOPE}`
  if (from === undefined) return rollup
  params.from = from
  params.from_ceil = Math.ceil(from / BUCKET_MS) * BUCKET_MS
  return `${rollup} AND bucket >= ${at('from_ceil')}
    UNION ALL
    SELECT toDateTime(toStartOfFifteenMinutes(event_time), 'UTC') AS bucket, player_id, currency, count() AS events,
      countIf(event_type = 'deposit') AS deposit_count, sumIf(amount, event_type = 'deposit') AS deposits,
      sumIf(amount, event_type = 'bet') AS bets, sumIf(amount, event_type = 'win') AS wins,
      sumIf(amount, event_type = 'bet_rollback') AS bet_rollbacks, sumIf(amount, event_type = 'win_rollback') AS win_rollbacks,
      sumIf(amount, event_type = 'bonus_completed') AS bonus_cost
    FROM events WHERE ${SCOPE} AND event_time >= ${at('from')} AND event_time < ${at('from_ceil')}
    GROUP BY bucket, player_id, currency`
}

const PLAYER_MONEY = 'player_id, currency, events, deposit_count, deposits, bets, wins, bet_rollbacks, win_rollbacks, bonus_cost'

/**
 * All-time money per (player, currency) once EVENT_RETENTION_DAYS has dropped a month: rollup_player_totals
 * less what the dropped months had added (clickhouse/0012), netted per player and currency so a player
 * whose events were all dropped is not there at all.
 */
const PLAYER_TOTALS_NET = `SELECT player_id, currency, sum(events) AS events, sum(deposit_count) AS deposit_count, sum(deposits) AS deposits,
    sum(bets) AS bets, sum(wins) AS wins, sum(bet_rollbacks) AS bet_rollbacks, sum(win_rollbacks) AS win_rollbacks, sum(bonus_cost) AS bonus_cost
  FROM (
    SELECT player_id, currency, toInt64(events) AS events, toInt64(deposit_count) AS deposit_count, deposits, bets, wins, bet_rollbacks, win_rollbacks, bonus_cost
    FROM rollup_player_totals WHERE ${SCOPE}
    UNION ALL
    SELECT player_id, currency, -events, -deposit_count, -deposits, -bets, -wins, -bet_rollbacks, -win_rollbacks, -bonus_cost
    FROM rollup_player_totals_expired FINAL WHERE ${SCOPE})
  GROUP BY player_id, currency HAVING events != 0`

/**
 * Per (player, currency) money since `from`: all-time totals from rollup_player_totals (`net`: less the
 * months retention dropped, see retentionDropped), else the buckets.
 * Columns player_id, currency, events, deposit_count, deposits, bets, wins, bet_rollbacks, win_rollbacks, bonus_cost.
 */
export function playerMoneyRows(from: number | undefined, params: Params, net = false): string {
  if (from === undefined) return net ? PLAYER_TOTALS_NET : `SELECT ${PLAYER_MONEY} FROM rollup_player_totals WHERE ${SCOPE}`
  return `SELECT ${PLAYER_MONEY} FROM (${playerBucketRows(from, params)})`
}

/**
 * Registration time and first deposit per player seen in ClickHouse: the first `registration` event, else
 * the first event's arrival, which is when ingestion created the player.
 */
export const PLAYER_TIMES = `SELECT player_id,
    if(min(registered_at) < toDateTime64('2299-01-01 00:00:00', 3, 'UTC'), min(registered_at), min(first_received_at)) AS registered_at,
    min(first_deposit_at) AS first_deposit_at,
    sum(deposit_count) AS deposit_count
  FROM rollup_players WHERE ${SCOPE} GROUP BY player_id`

/** One player dimension (its latest non-empty value) per player. */
export const playerDimension = (dimension: string) =>
  `SELECT player_id, argMaxMerge(${dimension}) AS ${dimension} FROM rollup_players WHERE ${SCOPE} GROUP BY player_id`

export const NO_TIME = "toDateTime64('2299-01-01 00:00:00', 3, 'UTC')"

// EVENT_RETENTION_DAYS: events older than that are dropped from ClickHouse. The events table is partitioned
// by month (clickhouse/0001_events.sql, toYYYYMM(event_time)), and dropping a whole partition is a cheap
// metadata operation where deleting rows would rewrite data; so a month goes once its last day is older
// than the retention, and events live between `days` and `days` + one month. Unset: events are kept.
// The rollups lose the month with them (expireMonth), so every figure stays what `events` gives.
// Every process runs it (hourly); dropping a partition already gone is a no-op.
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { bumpExportEpoch } from './spool.ts'

const EVERY_MS = 60 * 60 * 1000
const DAY_MS = 24 * 60 * 60 * 1000

/** The event partitions (YYYYMM) wholly older than `days` before `now`. */
export function expiredPartitions(partitions: string[], days: number, now: Date): string[] {
  const limit = now.getTime() - days * DAY_MS
  return partitions.filter((p) => {
    if (!/^\d{6}$/.test(p)) return false
    const year = Number(p.slice(0, 4))
    const month = Number(p.slice(4, 6))
    // The partition ends where the next month begins (UTC, like event_time).
    return Date.UTC(year, month, 1) <= limit
  })
}

/**
 * Drops the expired months from events and every rollup; returns the months dropped. A month whose drop
 * a crash left open (the ledger) is finished too, even if `events` no longer has it.
 */
export async function dropExpiredPartitions(ctx: AppContext, days: number, now = ctx.clock()): Promise<string[]> {
  const rows = await ctx.ch.query<{ partition: string }>(
    "SELECT DISTINCT partition FROM system.parts WHERE database = currentDatabase() AND table = 'events' AND active",
  )
  const open = await ctx.sql<{ month: string }[]>`select month from event_retention_drops where sink = ${ctx.ch.sinkId} and done_at is null`
  const expired = [...new Set([...expiredPartitions(rows.map((r) => String(r.partition)), days, now), ...open.map((r) => r.month)])].sort()
  for (const month of expired) await expireMonth(ctx, month)
  // Export pages read ahead before the drop are not served any more (src/exports/service.ts).
  if (expired.length) await bumpExportEpoch(ctx.sql, ctx.ch.sinkId)
  if (expired.length) ctx.log.info({ partitions: expired, retentionDays: days }, 'event retention: dropped partitions')
  return expired
}

/**
 * One month (YYYYMM) out of events and every rollup, exactly once in effect: each step can run again
 * after a crash. The all-time player totals keep what the month added, in rollup_player_totals_expired
 * (clickhouse/0012), before the per-player buckets it is read from are dropped; `events` goes last, so
 * a month still listed there is always dropped again whole.
 */
export async function expireMonth(ctx: AppContext, month: string): Promise<void> {
  if (!/^\d{6}$/.test(month)) throw new Error(`not a month partition: ${month}`)
  const generation = await openDrop(ctx, month)
  await recordExpiredTotals(ctx, month, generation)
  // The partition id is six digits (checked above): safe to write into the statements.
  for (const table of ['rollup_player_buckets', 'rollup_buckets', 'rollup_game_months', 'events']) await ctx.ch.command(`ALTER TABLE ${table} DROP PARTITION ID '${month}'`)
  await ctx.ch.command(`ALTER TABLE rollup_player_months DELETE WHERE toYYYYMM(month) = ${month} SETTINGS mutations_sync = 2`)
  // All time in one row per (key, player) with its latest event (clickhouse/0015): the rows whose latest
  // event is in this month or before (months dropped in order, oldest first) had all their events dropped.
  await ctx.ch.command(`ALTER TABLE rollup_player_keys DELETE WHERE toYYYYMM(last_event) <= ${month} SETTINGS mutations_sync = 2`)
  await ctx.sql`update event_retention_drops set done_at = now() where sink = ${ctx.ch.sinkId} and month = ${month} and generation = ${generation}`
}

/**
 * The month's open drop generation: one a crash left open, else a new one. Two processes expiring the
 * month at once get the same generation (the insert's conflict), so their identical rows replace each other.
 */
export async function openDrop(ctx: AppContext, month: string): Promise<number> {
  const open = () => ctx.sql<{ generation: number }[]>`
    select generation from event_retention_drops where sink = ${ctx.ch.sinkId} and month = ${month} and done_at is null order by generation limit 1`
  let [row] = await open()
  if (!row) {
    await ctx.sql`
      insert into event_retention_drops (sink, month, generation)
      select ${ctx.ch.sinkId}, ${month}, coalesce(max(generation), 0) + 1 from event_retention_drops where sink = ${ctx.ch.sinkId} and month = ${month}
      on conflict do nothing`
    ;[row] = await open()
  }
  if (!row) throw new Error(`event retention: no open drop of ${month}`)
  return row.generation
}

/**
 * What the month added to each player's all-time totals, from its per-player buckets, under the drop's
 * generation. Repeated after a crash it replaces its own rows (ReplacingMergeTree on the generation); once
 * the buckets' partition is gone it adds nothing.
 */
export async function recordExpiredTotals(ctx: AppContext, month: string, generation: number): Promise<void> {
  await ctx.ch.command(`
    INSERT INTO rollup_player_totals_expired
    SELECT tenant_id, brand_id, player_id, currency, '${month}', ${Number(generation)},
      toInt64(sum(events)), toInt64(sum(deposit_count)), sum(deposits), sum(bets), sum(wins), sum(bet_rollbacks), sum(win_rollbacks), sum(bonus_cost)
    FROM rollup_player_buckets WHERE _partition_id = '${month}'
    GROUP BY tenant_id, brand_id, player_id, currency
    SETTINGS insert_deduplicate = 0`)
}

/** Whether any month was ever dropped from this store: all-time player totals are then read net of them. */
export async function retentionDropped(ctx: Pick<AppContext, 'sql' | 'ch'>): Promise<boolean> {
  const [row] = await ctx.sql<{ any: boolean }[]>`select exists (select 1 from event_retention_drops where sink = ${ctx.ch.sinkId}) as any`
  return row?.any === true
}

export function startEventRetention(ctx: AppContext): BackgroundService {
  const days = ctx.config.eventRetentionDays
  if (!days) return { stop: async () => {} }
  let running: Promise<unknown> | undefined
  const run = () => {
    running ??= dropExpiredPartitions(ctx, days)
      .catch((err: unknown) => ctx.log.error({ err }, 'event retention: drop failed; retrying next hour'))
      .finally(() => (running = undefined))
  }
  const first = setTimeout(run, 10_000)
  const timer = setInterval(run, EVERY_MS)
  first.unref()
  timer.unref()
  return {
    async stop() {
      clearTimeout(first)
      clearInterval(timer)
      await running
    },
  }
}

// EVENT_RETENTION_DAYS: events older than that are dropped from ClickHouse. The events table is partitioned
// by month (clickhouse/0001_events.sql, toYYYYMM(event_time)), and dropping a whole partition is a cheap
// metadata operation where deleting rows would rewrite data; so a month goes once its last day is older
// than the retention, and events live between `days` and `days` + one month. Unset: events are kept.
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

/** Drops the expired partitions; returns what was dropped. */
export async function dropExpiredPartitions(ctx: AppContext, days: number, now = ctx.clock()): Promise<string[]> {
  const rows = await ctx.ch.query<{ partition: string }>(
    "SELECT DISTINCT partition FROM system.parts WHERE database = currentDatabase() AND table = 'events' AND active",
  )
  const expired = expiredPartitions(rows.map((r) => String(r.partition)), days, now)
  // The partition id is six digits (checked above): safe to write into the statement.
  for (const p of expired) await ctx.ch.command(`ALTER TABLE events DROP PARTITION ID '${p}'`)
  // Export pages read ahead before the drop are not served any more (src/exports/service.ts).
  if (expired.length) await bumpExportEpoch(ctx.sql, ctx.ch.sinkId)
  if (expired.length) ctx.log.info({ partitions: expired, retentionDays: days }, 'event retention: dropped partitions')
  return expired
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

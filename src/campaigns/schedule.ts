// Time in campaign execution: when a campaign next needs the engine (start_at, end_at, the next cron
// tick), and cron ticks in an IANA time zone. cron-parser walks wall-clock time in the zone, so a tick
// that falls in a spring-forward gap (02:30 on the day clocks jump 02:00 → 03:00) runs once, at the
// first instant after the gap, and a tick in the repeated hour of the autumn change runs once too.
import { CronExpressionParser } from 'cron-parser'
import type { CampaignType } from './schemas.ts'
import type { CampaignStatus } from './status.ts'

export interface Schedule {
  start_at?: string
  end_at?: string
  cron?: string
  timezone?: string
}

const instant = (v: unknown): Date | null => {
  if (typeof v !== 'string') return null
  const d = new Date(v)
  return Number.isNaN(d.getTime()) ? null : d
}

export const startAtOf = (s: Record<string, unknown>) => instant(s.start_at)
export const endAtOf = (s: Record<string, unknown>) => instant(s.end_at)

/** The first tick strictly after `after`. */
export function nextTick(s: Record<string, unknown>, after: Date): Date {
  const it = CronExpressionParser.parse(String(s.cron), { currentDate: after, tz: typeof s.timezone === 'string' ? s.timezone : 'UTC' })
  return it.next().toDate()
}

/**
 * The latest tick at or before `now`, walking forward from `due` (a tick, at or before `now`), so the
 * answer is always one of the ticks next() produces. (prev() is not used: from inside a spring-forward gap
 * it skips the shifted tick of that night.) A walk longer than `maxSteps` answers the last tick reached.
 */
export function latestDueTick(s: Record<string, unknown>, due: Date, now: Date, maxSteps = 10_000): Date {
  const it = CronExpressionParser.parse(String(s.cron), { currentDate: due, tz: typeof s.timezone === 'string' ? s.timezone : 'UTC' })
  let latest = due
  for (let i = 0; i < maxSteps; i++) {
    const next = it.next().toDate()
    if (next.getTime() > now.getTime()) break
    latest = next
  }
  return latest
}

const earliest = (...ds: (Date | null | undefined)[]) =>
  ds.reduce<Date | null>((m, d) => (d && (!m || d.getTime() < m.getTime()) ? d : m), null)

/**
 * The engine's bookkeeping for a campaign in `status` at `now`: when it next needs a visit and, for a
 * running recurring campaign, its next tick. `nextTickAt` is kept when still ahead (a visit does not skip
 * a tick it has not run).
 */
export function engineTimes(
  c: { status: CampaignStatus; type: CampaignType; schedule: Record<string, unknown>; nextTickAt: Date | null },
  now: Date,
): { engineDueAt: Date | null; nextTickAt: Date | null } {
  if (c.status === 'scheduled') return { engineDueAt: startAtOf(c.schedule), nextTickAt: null }
  if (c.status !== 'running' && c.status !== 'paused') return { engineDueAt: null, nextTickAt: null }
  const endAt = endAtOf(c.schedule)
  let nextTickAt: Date | null = null
  if (c.type === 'recurring' && typeof c.schedule.cron === 'string') {
    const from = startAtOf(c.schedule)
    const base = from && from.getTime() > now.getTime() ? new Date(from.getTime() - 1) : now
    nextTickAt = c.nextTickAt && c.nextTickAt.getTime() > now.getTime() ? c.nextTickAt : nextTick(c.schedule, base)
  }
  // A paused campaign still completes at end_at; its ticks are skipped while paused.
  return { engineDueAt: earliest(endAt, nextTickAt), nextTickAt }
}

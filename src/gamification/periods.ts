// Period boundaries of daily and weekly missions in the mission's IANA time zone: the instant local
// midnight starts the event's day (daily) or its ISO week's Monday (weekly), DST-correct (src/lib/zoned-time.ts).
import { startOfDay, startOfIsoWeek } from '../lib/zoned-time.ts'

const HOUR = 3_600_000
/**
 * Periods computed lately, per type and zone, as [start, next start): the engine asks for every hit of a
 * daily or weekly mission, and Intl's formatToParts behind startOfDay was a visible share of the
 * consumer's CPU (bench/RESULTS.md). An instant inside a known period needs no Intl call; the answer is
 * the same by construction (a period runs from its start to the next one's), whatever the zone's offsets.
 */
const recent = new Map<string, { start: number; end: number }[]>()
const PERIODS_KEPT = 8

/** Start of the period an event at `at` counts in: null for missions without periods. */
export function periodStart(type: string, tz: string, at: Date): Date | null {
  if (type !== 'daily' && type !== 'weekly') return null
  const key = `${type}|${tz}`
  const t = at.getTime()
  let list = recent.get(key)
  if (list) for (const p of list) if (t >= p.start && t < p.end) return new Date(p.start)
  const startOf = type === 'daily' ? startOfDay : startOfIsoWeek
  const start = startOf(at, tz)
  // Inside the next period whatever DST does: a day lasts 23 to 25 hours, a week 7 days ± 1 hour.
  const end = startOf(new Date(start.getTime() + (type === 'daily' ? 36 * HOUR : 7 * 24 * HOUR + 12 * HOUR)), tz).getTime()
  if (!list) {
    if (recent.size >= 1000) recent.clear()
    recent.set(key, (list = []))
  }
  list.unshift({ start: start.getTime(), end })
  if (list.length > PERIODS_KEPT) list.pop()
  return start
}

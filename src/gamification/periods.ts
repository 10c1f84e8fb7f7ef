// Period boundaries of daily and weekly missions in the mission's IANA time zone: the instant local
// midnight starts the event's day (daily) or its ISO week's Monday (weekly), DST-correct (src/lib/zoned-time.ts).
import { startOfDay, startOfIsoWeek } from '../lib/zoned-time.ts'

/** Start of the period an event at `at` counts in: null for missions without periods. */
export function periodStart(type: string, tz: string, at: Date): Date | null {
  if (type === 'daily') return startOfDay(at, tz)
  if (type === 'weekly') return startOfIsoWeek(at, tz)
  return null
}

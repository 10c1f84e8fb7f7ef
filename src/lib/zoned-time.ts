// Wall-clock arithmetic in an IANA time zone with Intl only (no tz database of our own). Pure. The one place
// for it: delivery (caps, quiet hours), mission periods, analytics days and campaign schedules use it.

const formatters = new Map<string, Intl.DateTimeFormat>()

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone)
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    })
    formatters.set(timeZone, f)
  }
  return f
}

/** True for a time zone name Intl knows (`Europe/Rome`, `UTC`, ...). */
export function isTimeZone(name: unknown): name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 64) return false
  try {
    formatter(name)
    return true
  } catch {
    return false
  }
}

export interface WallClock {
  year: number
  month: number
  day: number
  hour: number
  minute: number
  second: number
}

/** The wall clock in `timeZone` at instant `at`. */
export function wallClock(at: Date, timeZone: string): WallClock {
  const parts: Record<string, number> = {}
  for (const p of formatter(timeZone).formatToParts(at)) if (p.type !== 'literal') parts[p.type] = Number(p.value)
  return { year: parts.year!, month: parts.month!, day: parts.day!, hour: parts.hour! % 24, minute: parts.minute!, second: parts.second! }
}

/** Offset of `timeZone` from UTC at instant `at`, in ms. */
function offsetMs(at: Date, timeZone: string): number {
  const w = wallClock(at, timeZone)
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second)
  return asUtc - (at.getTime() - at.getMilliseconds())
}

/**
 * The instant at which the wall clock in `timeZone` shows this local time. A local time skipped by a DST
 * jump resolves to the instant just after the jump; a repeated one to its first occurrence.
 */
export function instantOf(local: { year: number; month: number; day: number; hour: number; minute: number }, timeZone: string): Date {
  const naive = Date.UTC(local.year, local.month - 1, local.day, local.hour, local.minute)
  // Two passes settle the offset across a DST change.
  let guess = naive - offsetMs(new Date(naive), timeZone)
  guess = naive - offsetMs(new Date(guess), timeZone)
  return new Date(guess)
}

/**
 * The first instant of a calendar date in `timeZone`: its midnight, or, where a DST jump skips midnight
 * (America/Santiago, Asia/Beirut), the first instant that reads as that date.
 */
export function startOfLocalDay(date: { year: number; month: number; day: number }, timeZone: string): Date {
  const start = instantOf({ ...date, hour: 0, minute: 0 }, timeZone)
  if (wallClock(start, timeZone).day !== date.day) return new Date(start.getTime() + 3_600_000)
  return start
}

/** Start of the calendar day containing `at`, in `timeZone`. */
export function startOfDay(at: Date, timeZone: string): Date {
  const w = wallClock(at, timeZone)
  return startOfLocalDay(w, timeZone)
}

/** Start (Monday 00:00) of the ISO week containing `at`, in `timeZone`. */
export function startOfIsoWeek(at: Date, timeZone: string): Date {
  const w = wallClock(at, timeZone)
  const weekday = (new Date(Date.UTC(w.year, w.month - 1, w.day)).getUTCDay() + 6) % 7 // Monday = 0
  const monday = new Date(Date.UTC(w.year, w.month - 1, w.day - weekday))
  return startOfLocalDay({ year: monday.getUTCFullYear(), month: monday.getUTCMonth() + 1, day: monday.getUTCDate() }, timeZone)
}

/** The calendar date (YYYY-MM-DD) of an instant in `timeZone`. */
export function localDate(at: Date, timeZone: string): string {
  const w = wallClock(at, timeZone)
  return `${String(w.year).padStart(4, '0')}-${String(w.month).padStart(2, '0')}-${String(w.day).padStart(2, '0')}`
}

/** "HH:MM" → minutes since midnight. */
export const minutesOf = (hhmm: string): number => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5))

/**
 * When `at` falls inside the daily window [start, end) of `timeZone` (a window may wrap midnight:
 * 22:00-08:00), the instant the window ends; else null.
 */
export function windowEnd(at: Date, window: { start: string; end: string }, timeZone: string): Date | null {
  const start = minutesOf(window.start)
  const end = minutesOf(window.end)
  if (start === end) return null
  const w = wallClock(at, timeZone)
  const now = w.hour * 60 + w.minute
  const inside = start < end ? now >= start && now < end : now >= start || now < end
  if (!inside) return null
  // The end is today when it is still ahead on the clock, else tomorrow (a window wrapping midnight).
  const dayOffset = now < end ? 0 : 1
  const d = new Date(Date.UTC(w.year, w.month - 1, w.day + dayOffset))
  return instantOf({ year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate(), hour: Math.floor(end / 60), minute: end % 60 }, timeZone)
}

/** `YYYY-MM-DD` naming a day of the calendar (no 2026-02-30, which Date would roll over to March). */
export function isCalendarDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s)
  if (!m) return false
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])]
  const t = new Date(0)
  t.setUTCFullYear(y, mo - 1, d) // not Date.UTC, which reads years 0-99 as 1900-1999
  return t.getUTCFullYear() === y && t.getUTCMonth() === mo - 1 && t.getUTCDate() === d
}

// Time zones and dates of the analytics routes: `tz` is any IANA zone (validated), `from` a date-time or
// a date (midnight in `tz`). Day and hour boundaries are computed by ClickHouse in that zone, so DST days
// have 23 or 25 hours; here only the parsing and the list of calendar days.
import type { ClickHouse } from '../db/clickhouse.ts'
import { badRequest } from '../errors.ts'
import { isCalendarDate, isTimeZone, localDate as localDateOf, startOfLocalDay } from '../lib/zoned-time.ts'

const field = (name: string, message: string) => badRequest(`invalid ${name}`, { errors: [{ in: 'query', field: name, message }] })

/**
 * An IANA zone name (`Europe/Rome`, `UTC`); offsets and unknown names are a 400. Returned in its canonical
 * spelling: Intl takes `utc` or `europe/rome` (case-insensitive) and some aliases, ClickHouse only the
 * names it has, exactly (see zoneKnownTo).
 */
export function parseTz(tz: string | undefined): string {
  if (tz === undefined) return 'UTC'
  if (!/^[A-Za-z][A-Za-z0-9_+\-]*(\/[A-Za-z0-9_+\-]+)*$/.test(tz) || tz.length > 64) throw field('tz', 'must be an IANA time zone name, e.g. Europe/Rome')
  if (!isTimeZone(tz)) throw field('tz', `unknown time zone: ${tz}`)
  return new Intl.DateTimeFormat('en', { timeZone: tz }).resolvedOptions().timeZone
}

const clickHouseZones = new WeakMap<ClickHouse, Promise<Set<string>>>()

/** A 400 unless ClickHouse knows the zone too (its time zone database may be older or newer than Node's). */
export async function zoneKnownTo(ch: ClickHouse, tz: string): Promise<string> {
  let zones = clickHouseZones.get(ch)
  if (!zones) {
    zones = ch.reports.query<{ name: string }>('SELECT time_zone AS name FROM system.time_zones').then((rows) => new Set(rows.map((r) => r.name)))
    zones.catch(() => clickHouseZones.delete(ch))
    clickHouseZones.set(ch, zones)
  }
  if (!(await zones).has(tz)) throw field('tz', `time zone not supported by the analytics store: ${tz}`)
  return tz
}

/** The calendar date (YYYY-MM-DD) of an instant (epoch ms) in a zone. */
export const localDate = (ms: number, tz: string): string => localDateOf(new Date(ms), tz)

/** The first instant (epoch ms) of a calendar date in a zone (midnight, or the first valid time after it). */
export function startOfLocalDate(date: string, tz: string): number {
  const [year, month, day] = date.split('-').map(Number) as [number, number, number]
  return startOfLocalDay({ year, month, day }, tz).getTime()
}

const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})$/


/**
 * `from`: an ISO 8601 date-time with a zone (`2026-05-01T00:00:00Z`, `...+02:00`) or a date
 * (`2026-05-01`, midnight in `tz`). Returns epoch ms; anything else is a 400.
 */
export function parseFrom(from: string | undefined, tz: string): number | undefined {
  if (from === undefined) return undefined
  const message = 'must be an ISO 8601 date-time with a zone (2026-05-01T00:00:00Z) or a date (2026-05-01)'
  if (isCalendarDate(from)) {
    const ms = startOfLocalDate(from, tz)
    if (ms < Date.UTC(1970, 0, 1)) throw field('from', 'must not be before 1970')
    return ms
  }
  if (!DATE_TIME_RE.test(from) || !isCalendarDate(from.slice(0, 10))) throw field('from', message)
  // Event times are whole milliseconds: a `from` between two of them starts at the later one (Date.parse
  // would cut `.2501` to `.250` and count an event at .250, before `from`).
  const subMs = /\.\d{3}(\d+)/.exec(from)?.[1]
  const ms = Date.parse(from.replace(' ', 'T')) + (subMs && /[1-9]/.test(subMs) ? 1 : 0)
  const [hh, mm, ss] = [Number(from.slice(11, 13)), Number(from.slice(14, 16)), Number(from.slice(17, 19) || 0)]
  if (!Number.isFinite(ms) || hh > 23 || mm > 59 || ss > 59) throw field('from', message)
  if (ms < Date.UTC(1970, 0, 1)) throw field('from', 'must not be before 1970')
  return ms
}

/** Every calendar date from `first` to `last`, both included (`from` is 1970 or later: ~21k dates at most today). */
export function datesBetween(first: string, last: string): string[] {
  const out: string[] = []
  const [y, m, d] = first.split('-').map(Number) as [number, number, number]
  for (let t = Date.UTC(y, m - 1, d); ; t += 86_400_000) {
    const s = new Date(t).toISOString().slice(0, 10)
    if (s > last) break
    out.push(s)
  }
  return out
}

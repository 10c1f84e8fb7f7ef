// Column values → API values, for the row-to-JSON mappers of every feature.

/**
 * SQL: a timestamptz expression as the API writes times (ISO 8601 in UTC, milliseconds, `Z`), for values
 * PostgreSQL puts into JSON itself (jsonb/json builders, outbox data, export pages): jsonb's own text would
 * be the session zone's (`…:41.646+00:00`) with microseconds.
 */
export const apiTimeSql = (expr: string) => `to_char((${expr}) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/**
 * SQL: a timestamptz expression as exact text (microseconds), for keyset positions. It goes back as
 * `${pos}::text::timestamptz`: as a timestamptz parameter the driver would send a JS Date, cut to
 * milliseconds, and the rows created later in the same millisecond would be skipped.
 */
export const exactTimeSql = (expr: string) => `to_char((${expr}) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

/** A timestamp column as an ISO 8601 date-time string; null stays null. */
export const iso = (d: unknown): string | null =>
  d instanceof Date ? d.toISOString() : d == null ? null : new Date(String(d)).toISOString()

/** numeric and bigint columns arrive as strings (the driver keeps them exact); the API returns JSON numbers. */
export const num = (v: unknown): number | null => (v == null ? null : Number(v))

// Column values → API values, for the row-to-JSON mappers of every feature.

/** A timestamp column as an ISO 8601 date-time string; null stays null. */
export const iso = (d: unknown): string | null =>
  d instanceof Date ? d.toISOString() : d == null ? null : new Date(String(d)).toISOString()

/** numeric and bigint columns arrive as strings (the driver keeps them exact); the API returns JSON numbers. */
export const num = (v: unknown): number | null => (v == null ? null : Number(v))

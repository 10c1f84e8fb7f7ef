// CSV encoding of segment export rows (RFC 4180): comma-separated, CRLF line ends, a header row on every
// page, and a field quoted (with inner quotes doubled) when it holds a comma, quote, CR or LF, or starts or
// ends with a space. null is the empty field. Consent is encoded as `channel:1` (granted) or `channel:0`
// (refused) per channel, sorted by channel, joined by `;` (e.g. `email:1;push:0`); empty when unknown.
import type { ExportRow } from './schemas.ts'

export const CSV_COLUMNS = ['external_id', 'email', 'phone', 'name', 'consent', 'country'] as const

export function csvField(value: string | null | undefined): string {
  if (value === null || value === undefined) return ''
  return /[",\r\n]|^\s|\s$/.test(value) ? `"${value.replace(/"/g, '""')}"` : value
}

export function encodeConsent(consent: ExportRow['consent']): string {
  return Object.keys(consent)
    .sort()
    .map((channel) => `${channel}:${consent[channel]!.granted ? 1 : 0}`)
    .join(';')
}

export function toCsv(rows: ExportRow[]): string {
  const lines = [CSV_COLUMNS.join(',')]
  for (const r of rows) {
    lines.push([r.external_id, r.email, r.phone, r.name, encodeConsent(r.consent), r.country].map(csvField).join(','))
  }
  return `${lines.join('\r\n')}\r\n`
}

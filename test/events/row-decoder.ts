// Reads RowBinary event rows back into objects (tests only): the inverse of src/events/event-rows.ts,
// written independently from ClickHouse's format description so that it can catch encoder mistakes.
import { EVENT_COLUMNS } from '../../src/events/event-rows.ts'

export function decodeEventRows(bytes: Uint8Array): Record<string, unknown>[] {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const rows: Record<string, unknown>[] = []
  let at = 0
  const varint = () => {
    let v = 0
    let shift = 0
    for (;;) {
      const b = buf[at++] as number
      v += (b & 0x7f) * 2 ** shift
      if (b < 0x80) return v
      shift += 7
    }
  }
  while (at < buf.length) {
    const row: Record<string, unknown> = {}
    for (const [name, type] of EVENT_COLUMNS) {
      if (type === 'UUID') {
        const hi = Buffer.from(buf.subarray(at, at + 8)).reverse().toString('hex')
        const lo = Buffer.from(buf.subarray(at + 8, at + 16)).reverse().toString('hex')
        const h = hi + lo
        row[name] = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
        at += 16
      } else if (type.startsWith('DateTime64')) {
        row[name] = new Date(Number(buf.readBigInt64LE(at))).toISOString()
        at += 8
      } else if (type === 'UInt64') {
        row[name] = Number(buf.readBigUInt64LE(at))
        at += 8
      } else if (type.startsWith('Decimal')) {
        const lo = buf.readBigUInt64LE(at)
        const hi = buf.readBigInt64LE(at + 8)
        const units = (hi << 64n) + lo
        const neg = units < 0n
        const abs = neg ? -units : units
        const frac = (abs % 100_000_000n).toString().padStart(8, '0').replace(/0+$/, '')
        row[name] = `${neg ? '-' : ''}${abs / 100_000_000n}${frac ? `.${frac}` : ''}`
        at += 16
      } else if (type === 'Nullable(UInt8)') {
        row[name] = buf[at++] === 1 ? null : buf[at++]
      } else {
        const n = varint()
        row[name] = buf.toString('utf8', at, at + n)
        at += n
      }
    }
    rows.push(row)
  }
  return rows
}

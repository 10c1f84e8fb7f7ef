// Rows of the ClickHouse `events` table, encoded as RowBinary by the ingest workers.
//
// Why binary: ClickHouse spent ~12 µs per event parsing our JSONEachRow rows (~860 bytes each, the raw
// event escaped inside a JSON string), more than writing the part. RowBinary has no escaping and no
// number parsing: the same rows cost ~2 µs each to read (bench/RESULTS.md, 2026-11-21 session 2).
//
// EVENT_COLUMNS is the one list of what the encoder writes, in order; inserts name these columns, so the
// table's column order does not matter. test/events/event-rows.test.ts checks it against the live table.

export const EVENT_COLUMNS = [
  ['tenant_id', 'UUID'],
  ['brand_id', 'UUID'],
  ['event_id', 'String'],
  ['player_id', 'String'],
  ['event_type', 'LowCardinality(String)'],
  ['source_type', 'LowCardinality(String)'],
  ['event_time', "DateTime64(3, 'UTC')"],
  ['received_at', "DateTime64(3, 'UTC')"],
  ['seq', 'UInt64'],
  ['session_id', 'String'],
  ['amount', 'Decimal(38, 8)'],
  ['currency', 'LowCardinality(String)'],
  ['method', 'LowCardinality(String)'],
  ['game', 'LowCardinality(String)'],
  ['provider', 'LowCardinality(String)'],
  ['category', 'LowCardinality(String)'],
  ['round_id', 'String'],
  ['country', 'LowCardinality(String)'],
  ['language', 'LowCardinality(String)'],
  ['device', 'LowCardinality(String)'],
  ['os', 'LowCardinality(String)'],
  ['browser', 'LowCardinality(String)'],
  ['platform', 'LowCardinality(String)'],
  ['status', 'LowCardinality(String)'],
  ['bonus_id', 'String'],
  ['channel', 'LowCardinality(String)'],
  ['granted', 'Nullable(UInt8)'],
  ['raw', 'String'],
  ['extra_fields', 'String'],
] as const

/**
 * The spool keeps each row's layout (event_spool.layout, sql/0290): which column list its bytes follow.
 * Layout 1 is the list before `extra_fields` (clickhouse/0016): rows spooled by an earlier version are
 * inserted naming those columns (ClickHouse fills in the default). New rows are always EVENT_LAYOUT.
 */
export const EVENT_LAYOUT = 2
export type EventColumns = readonly (readonly [string, string])[]
export function eventColumns(layout: number): EventColumns {
  return layout === 1 ? EVENT_COLUMNS.slice(0, -1) : EVENT_COLUMNS
}

const TWO_32 = 4294967296

/**
 * Appends RowBinary values to a growing buffer. One writer per group; `finish()` returns the bytes.
 * The caller writes every column of EVENT_COLUMNS, in order, for each row.
 */
export class RowBinaryWriter {
  private buf: Buffer
  private at = 0
  private readonly uuids = new Map<string, Buffer>()

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes)
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n))
    this.buf.copy(next, 0, 0, this.at)
    this.buf = next
  }

  /** UUID: two little-endian UInt64 halves, high half first. Tenant and brand ids repeat, so cache them. */
  uuid(value: string): void {
    let bytes = this.uuids.get(value)
    if (!bytes) {
      const hex = Buffer.from(value.replace(/-/g, ''), 'hex')
      if (hex.length !== 16) throw new Error(`not a UUID: ${value}`)
      bytes = Buffer.concat([hex.subarray(0, 8).reverse(), hex.subarray(8, 16).reverse()])
      this.uuids.set(value, bytes)
    }
    this.room(16)
    bytes.copy(this.buf, this.at)
    this.at += 16
  }

  /** String and LowCardinality(String): LEB128 byte length, then the UTF-8 bytes. */
  string(value: string): void {
    // A string of n UTF-16 units has at most 3n UTF-8 bytes: below 128 its length fits one byte.
    if (value.length < 43) {
      this.room(1 + value.length * 3)
      const n = this.buf.write(value, this.at + 1)
      this.buf[this.at] = n
      this.at += 1 + n
      return
    }
    const n = Buffer.byteLength(value)
    this.room(5 + n)
    let v = n
    while (v >= 0x80) {
      this.buf[this.at++] = (v & 0x7f) | 0x80
      v >>>= 7
    }
    this.buf[this.at++] = v
    this.at += this.buf.write(value, this.at)
  }

  /** UInt64 (and the Int64 of DateTime64) from a safe non-negative integer. */
  uint64(value: number): void {
    this.room(8)
    this.buf.writeUInt32LE(value % TWO_32, this.at)
    this.buf.writeUInt32LE(Math.floor(value / TWO_32), this.at + 4)
    this.at += 8
  }

  /** DateTime64(3): milliseconds since the epoch as Int64. */
  dateTime64ms(ms: number): void {
    if (ms >= 0) return this.uint64(ms)
    this.room(8)
    this.buf.writeBigInt64LE(BigInt(ms), this.at)
    this.at += 8
  }

  /** Decimal(38, 8) from its units of 1e-8 (|units| < 2^63: amounts are at most 1e9): Int128, little-endian. */
  decimal38x8(units: bigint): void {
    this.room(16)
    if (units === 0n) {
      this.buf.fill(0, this.at, this.at + 16)
    } else {
      this.buf.writeBigInt64LE(units, this.at)
      this.buf.fill(units < 0n ? 0xff : 0, this.at + 8, this.at + 16)
    }
    this.at += 16
  }

  nullableUInt8(value: number | null): void {
    this.room(2)
    if (value === null) this.buf[this.at++] = 1
    else {
      this.buf[this.at++] = 0
      this.buf[this.at++] = value
    }
  }

  /**
   * The rows. They go back to the main thread by structured clone, which copies a view's whole backing
   * buffer: a buffer mostly empty (small groups, the 64 KiB start) is trimmed to its rows first.
   */
  finish(): Uint8Array {
    const rows = this.buf.subarray(0, this.at)
    return this.at * 2 < this.buf.length ? Uint8Array.prototype.slice.call(rows) : rows
  }
}

/** Rows that do not parse as their columns: refused for their bytes, like ClickHouse's data errors. */
export class MalformedRows extends Error {
  readonly dataRefusal = true
}

/** Byte offset of `seq` in a row, after the fixed and variable columns before it; see setSeqs(). */
const SEQ_INDEX = EVENT_COLUMNS.findIndex(([name]) => name === 'seq')

/**
 * Numbers RowBinary rows (`columns`, the layout's) in place: row i gets seq = first + i. The spool assigns the
 * export order when it moves rows to ClickHouse (docs/analytics.md, "Insertion order"), after the worker
 * encoded them, so this walks each row (LEB128 string lengths, fixed widths) to reach its seq. Returns
 * the number of rows.
 */
export function setSeqs(rows: Uint8Array, first: number, columns: EventColumns = EVENT_COLUMNS): number {
  const buf = Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength)
  let at = 0
  let n = 0
  while (at < buf.length) {
    for (let c = 0; c < columns.length; c++) {
      const type = (columns[c] as readonly [string, string])[1]
      if (at > buf.length) throw new MalformedRows('setSeqs: a row runs past the end of the rows')
      if (c === SEQ_INDEX) {
        if (at + 8 > buf.length) throw new MalformedRows('setSeqs: a row runs past the end of the rows')
        const v = first + n
        buf.writeUInt32LE(v % TWO_32, at)
        buf.writeUInt32LE(Math.floor(v / TWO_32), at + 4)
        at += 8
        continue
      }
      switch (type) {
        case 'UUID':
        case 'Decimal(38, 8)':
          at += 16
          break
        case "DateTime64(3, 'UTC')":
        case 'UInt64':
          at += 8
          break
        case 'Nullable(UInt8)':
          at += buf[at] === 1 ? 1 : 2
          break
        default: {
          // String, LowCardinality(String): LEB128 length, then the bytes.
          let len = 0
          let shift = 0
          for (;;) {
            if (at >= buf.length || shift > 28) throw new MalformedRows('setSeqs: a string length runs past the rows')
            const b = buf[at++] as number
            len += (b & 0x7f) * 2 ** shift
            if (b < 0x80) break
            shift += 7
          }
          at += len
        }
      }
    }
    n++
  }
  if (at !== buf.length) throw new MalformedRows('setSeqs: the rows do not end on a row boundary')
  return n
}

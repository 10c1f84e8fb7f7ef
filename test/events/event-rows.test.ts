// RowBinary rows (src/events/event-rows.ts) against the real engine: the column list matches the live
// events table, and tricky values come back from chDB exactly as sent.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openClickHouse } from '../../src/db/clickhouse.ts'
import { migrateClickHouse } from '../../src/db/migrate.ts'
import { EVENT_COLUMNS } from '../../src/events/event-rows.ts'
import { transformGroup } from '../../src/events/transform.ts'
import { createLogger } from '../../src/lib/log.ts'
import { decodeEventRows } from './row-decoder.ts'

const TENANT = '0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3'
const BRAND = 'fedcba98-7654-4321-8fed-cba987654321'

function transform(events: Record<string, unknown>[], receivedAt: number) {
  const body = Buffer.from(JSON.stringify({ events }))
  return transformGroup({
    tenantIds: [TENANT], bodies: body, bounds: Int32Array.of(0, body.length), brandIds: [BRAND], mappingKeys: ['0'],
    receivedAt: [receivedAt], keep: new Uint8Array(events.length).fill(1), mappings: { '0': { rules: [] } }, seqBase: 2 ** 50 + 7,
  })
}

t.test('events rows round-trip through chDB', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'respin-rows-'))
  const ch = await openClickHouse({ clickhouseUrl: undefined, dataDir: dir }, createLogger('silent'))
  t.teardown(async () => {
    await ch.close()
    rmSync(dir, { recursive: true, force: true })
  })
  await migrateClickHouse(ch)

  const live = await ch.query<{ name: string; type: string }>("SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 'events' ORDER BY position")
  t.same(
    [...EVENT_COLUMNS].map(([name, type]) => `${name} ${type}`).sort(),
    // erasure_copy is set only by an erasure's copy (clickhouse/0011); ingestion leaves its default, 0.
    live.filter((c) => c.name !== 'erasure_copy').map((c) => `${c.name} ${c.type}`).sort(),
    'EVENT_COLUMNS names every column of the events table with its type',
  )

  const long = 'é'.repeat(200) // 400 UTF-8 bytes: a two-byte length prefix
  const events = [
    { player_id: 'p-ascii', event_type: 'deposit', event_id: 'e1', timestamp: '2026-03-04T05:06:07.089Z', session_id: 's1', payload: { amount: 12.5, currency: 'eur', method: 'card' } },
    { player_id: 'p-ünï-😀', event_type: 'withdrawal', event_id: 'e2', timestamp: '1969-12-31 23:59:59.999', payload: { amount: -1234567.891234, currency: 'USD' } },
    { player_id: 'p3', event_type: 'consent_update', event_id: 'e3', payload: { channel: 'sms', granted: false, note: 'tab\there\nnewline "quote" \\ back' } },
    { player_id: 'p4', event_type: 'consent_update', event_id: 'e4', payload: { channel: 'email', granted: true } },
    { player_id: 'p5', event_type: 'game_start', payload: { game: long, provider: 'x'.repeat(42), category: 'y'.repeat(43) } },
    { player_id: 'p6', event_type: 'deposit', event_id: 'e6', payload: { amount: 999_999_999.999999, currency: 'EUR' } },
  ]
  const receivedAt = Date.UTC(2026, 10, 21, 12, 0, 0, 1)
  const result = transform(events, receivedAt)
  t.equal(result.rowCount, events.length)
  await ch.insertRowBinary('events', EVENT_COLUMNS, result.rows)

  const rows = await ch.query<Record<string, string | number | null>>(
    `SELECT toString(tenant_id) AS tenant_id, toString(brand_id) AS brand_id, event_id, player_id, event_type,
            toString(event_time) AS event_time, toString(received_at) AS received_at,
            toString(seq) AS seq, session_id, toString(amount) AS amount, currency, method, game, provider, category, granted, raw
     FROM events ORDER BY seq`,
  )
  t.equal(rows.length, events.length)
  const at = (i: number) => rows[i] as Record<string, string | number | null>
  t.equal(at(0).tenant_id, TENANT)
  t.equal(at(0).brand_id, BRAND)
  t.equal(at(0).event_time, '2026-03-04 05:06:07.089')
  t.equal(at(0).received_at, '2026-11-21 12:00:00.001')
  t.equal(at(0).seq, String(2 ** 50 + 7), 'UInt64 beyond 32 bits')
  t.equal(at(5).seq, String(2 ** 50 + 12))
  t.equal(at(0).amount, '12.5')
  t.equal(at(0).currency, 'EUR')
  t.equal(at(0).method, 'card')
  t.equal(at(1).player_id, 'p-ünï-😀', 'UTF-8 strings')
  t.equal(at(1).event_time, '1969-12-31 23:59:59.999', 'a time before 1970 (negative Int64)')
  t.equal(at(1).amount, '-1234567.891234', 'negative Decimal(38, 8)')
  t.equal(at(5).amount, '999999999.999999', 'the largest amount kept, exact')
  t.equal(at(2).granted, 0)
  t.equal(at(3).granted, 1)
  t.equal(at(0).granted, null, 'Nullable(UInt8) null')
  t.equal(at(4).event_id, '', 'no event_id')
  t.equal(at(4).game, long, 'a 400-byte string (two-byte length)')
  t.equal(at(4).provider, 'x'.repeat(42))
  t.equal(at(4).category, 'y'.repeat(43))
  t.same(JSON.parse(at(2).raw as string), events[2], 'the raw event, escapes and all')

  // The test decoder (used by the pipeline tests) reads the same bytes the same way.
  const decoded = decodeEventRows(result.rows)
  t.same(decoded.map((r) => r.amount), rows.map((r) => r.amount))
  t.same(decoded.map((r) => r.player_id), rows.map((r) => r.player_id))
})

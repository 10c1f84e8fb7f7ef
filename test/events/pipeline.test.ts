// The actor pipeline with stand-in stores: group commit, per-tenant order, bounded mailboxes, release on
// failure. No servers, no threads: the transform runs inline.
import t from 'tap'
import type { ClickHouse } from '../../src/db/clickhouse.ts'
import type { Sql } from '../../src/db/postgres.ts'
import { AppError } from '../../src/errors.ts'
import type { Claim, Dedupe } from '../../src/events/dedupe.ts'
import { createPipeline, type IngestItem } from '../../src/events/pipeline.ts'
import { transformGroup } from '../../src/events/transform.ts'
import { createLogger } from '../../src/lib/log.ts'
import type { IngestPool } from '../../src/workers/pool.ts'
import { decodeEventRows } from './row-decoder.ts'

const TENANT_A = '00000000-0000-4000-8000-00000000000a'
const TENANT_B = '00000000-0000-4000-8000-00000000000b'
const BRAND = '00000000-0000-4000-8000-0000000000b1'
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function fakes(opts: { insertMs?: number; failInserts?: number } = {}) {
  const inserts: { rows: Record<string, unknown>[]; at: number }[] = []
  let failures = opts.failInserts ?? 0
  const ch = {
    kind: 'chdb',
    async insertRowBinary(_table: string, _columns: unknown, bytes: Uint8Array) {
      await sleep(opts.insertMs ?? 0)
      if (failures-- > 0) throw new Error('insert failed')
      const rows = decodeEventRows(bytes)
      if (rows.some((r) => String(r.event_id).startsWith('poison'))) throw new Error('bad row')
      inserts.push({ rows, at: Date.now() })
    },
  } as unknown as ClickHouse
  // Every statement succeeds; a COMMIT is answered as one (pipelinedTransaction checks).
  const tx = (() => {
    const q = Promise.resolve(Object.assign([{}], { command: 'COMMIT' }))
    return Object.assign(q, { execute: () => q })
  }) as unknown as Sql
  const sql = { begin: async (fn: (tx: Sql) => Promise<unknown>) => fn(tx), reserve: async () => Object.assign(tx, { release: () => {} }) } as unknown as Sql
  const released: number[] = []
  const committed: number[] = []
  const dedupe: Dedupe = {
    async claim(_tenant, entries): Promise<Claim> {
      return {
        duplicate: entries.map(() => false),
        commit: async () => void committed.push(entries.length),
        release: async () => void released.push(entries.length),
      }
    },
    stop: async () => {},
  }
  const pool: IngestPool = { run: async (task) => transformGroup(task), close: async () => {} }
  const profiles = { write: async () => {}, forget: () => {} }
  return { ch, sql, dedupe, pool, profiles, inserts, released, committed }
}

let n = 0
function item(events: number, tag: string): IngestItem {
  const evs = Array.from({ length: events }, (_, i) => ({ player_id: `p${i % 5}`, event_type: 'login', event_id: `${tag}-${n++}` }))
  return {
    brandId: BRAND, mapping: { rules: [] }, raw: Buffer.from(JSON.stringify({ events: evs })), eventIds: evs.map((e) => e.event_id),
    keep: new Uint8Array(events).fill(1), receivedAt: Date.now(), deduped: 0, stored: 0,
  }
}

const log = createLogger('silent')

t.test('requests waiting in a mailbox are written as one group, in order', async (t) => {
  const f = fakes({ insertMs: 30 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, overlapWrites: false } })
  const items = Array.from({ length: 10 }, (_, i) => item(10, `g${i}`))
  await Promise.all(items.map((it) => p.submit(TENANT_A, it)))
  t.ok(f.inserts.length <= 3, `${f.inserts.length} inserts for 10 requests`)
  const rows = f.inserts.flatMap((i) => i.rows)
  t.equal(rows.length, 100)
  t.same(rows.map((r) => r.event_id), items.flatMap((it) => it.eventIds), 'arrival order kept')
  const seqs = rows.map((r) => r.seq as number)
  t.ok(seqs.every((s, i) => i === 0 || s > (seqs[i - 1] as number)), 'seq increases')
  t.ok(items.every((it) => it.stored === 10))
})

t.test('a full mailbox answers 503 with Retry-After instead of growing', async (t) => {
  const f = fakes({ insertMs: 100 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 250, maxGroupEvents: 5_000, overlapWrites: false } })
  const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => p.submit(TENANT_A, item(100, `b${i}`))))
  const refused = results.filter((r) => r.status === 'rejected')
  t.ok(refused.length >= 2, `${refused.length} refused`)
  for (const r of refused) {
    const err = (r as PromiseRejectedResult).reason as AppError
    t.equal(err.code, 'SERVICE_UNAVAILABLE')
    t.equal(err.headers?.['retry-after'], '1')
  }
  // Another tenant has its own mailbox.
  await p.submit(TENANT_B, item(100, 'other'))
  await p.drain()
})

t.test('a failed ClickHouse insert releases the claimed ids and answers 503; the retry stores', async (t) => {
  const f = fakes({ failInserts: 1 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, overlapWrites: true } })
  const it = item(20, 'fail')
  const err = await p.submit(TENANT_A, it).then(() => null, (e: unknown) => e)
  t.ok(err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE')
  t.same(f.released, [20])
  t.same(f.committed, [])
  const again = { ...it, keep: new Uint8Array(20).fill(1), stored: 0 }
  await p.submit(TENANT_A, again)
  t.equal(again.stored, 20)
  t.same(f.committed, [20])
})

t.test('different tenants run in parallel and share ClickHouse inserts', async (t) => {
  const f = fakes({ insertMs: 60 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, overlapWrites: false } })
  const TENANT_C = '00000000-0000-4000-8000-00000000000c'
  await Promise.all([p.submit(TENANT_A, item(10, 'ta')), p.submit(TENANT_B, item(10, 'tb')), p.submit(TENANT_C, item(10, 'tc'))])
  // chDB's writer runs one insert at a time: the groups of B and C, ready while A's insert ran, share one.
  t.equal(f.inserts.length, 2)
  t.same(f.inserts.map((i) => i.rows.length), [10, 20])
})

t.test('a group whose rows ClickHouse refuses does not fail the groups it was coalesced with', async (t) => {
  const f = fakes({ insertMs: 40 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, overlapWrites: false } })
  const TENANT_C = '00000000-0000-4000-8000-00000000000c'
  const results = await Promise.allSettled([p.submit(TENANT_A, item(5, 'first')), p.submit(TENANT_B, item(5, 'poison')), p.submit(TENANT_C, item(5, 'fine'))])
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled'])
  t.equal(f.inserts.flatMap((i) => i.rows).length, 10)
})

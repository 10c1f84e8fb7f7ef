// The actor pipeline with stand-in stores: group commit, per-tenant order, bounded mailboxes, release on
// failure. No servers, no threads: the transform runs inline.
import t from 'tap'
import type { ClickHouse } from '../../src/db/clickhouse.ts'
import type { Sql } from '../../src/db/postgres.ts'
import { AppError } from '../../src/errors.ts'
import type { Claim, Dedupe } from '../../src/events/dedupe.ts'
import { createPipeline, type IngestItem } from '../../src/events/pipeline.ts'
import { transformGroup, type PlayerColumns } from '../../src/events/transform.ts'
import type { Spool } from '../../src/events/spool.ts'
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
  // Statements outside a transaction find nothing: a retried group's commit marker (it never committed here).
  const sql = Object.assign(async () => [], {
    begin: async (fn: (tx: Sql) => Promise<unknown>) => fn(tx),
    reserve: async () => Object.assign(tx, { release: () => {} }),
  }) as unknown as Sql
  const released: number[] = []
  const committed: number[] = []
  const dedupe: Dedupe = {
    async claim(entries): Promise<Claim> {
      return {
        duplicate: entries.map(() => false),
        commit: async () => void committed.push(entries.length),
        release: async () => void released.push(entries.length),
        unsettled: () => {},
      }
    },
    stop: async () => {},
  }
  const pool: IngestPool = { run: async (task) => transformGroup(task), close: async () => {} }
  const profiles = { write: async () => false, forget: () => {} }
  // The spool: claimed rows get a batch of their own; insertNow goes to the ClickHouse above.
  const spooled: number[] = []
  let batches = 0
  const spool = {
    full: () => false,
    append: async (_tx: unknown, _rows: Uint8Array, n: number, _encoding: string, claim: boolean) => {
      spooled.push(n)
      return claim ? String(++batches) : undefined
    },
    insertNow: (_batch: string, rows: Uint8Array) => ch.insertRowBinary('events', [], rows),
  } as unknown as Spool
  return { ch, sql, dedupe, pool, profiles, spool, spooled, inserts, released, committed }
}

let n = 0
/** Each tenant's own brand (brand ids are unique across tenants). */
const brandOf = (tenant: string) => `${tenant.slice(0, -3)}b0${tenant.slice(-1)}`

function item(events: number, tag: string, brandId = BRAND): IngestItem {
  const evs = Array.from({ length: events }, (_, i) => ({ player_id: `p${i % 5}`, event_type: 'login', event_id: `${tag}-${n++}` }))
  return {
    brandId, mapping: { rules: [] }, raw: Buffer.from(JSON.stringify({ events: evs })), eventIds: evs.map((e) => e.event_id),
    keep: new Uint8Array(events).fill(1), receivedAt: Date.now(), deduped: 0, stored: 0,
  }
}

const log = createLogger('silent')

t.test('requests waiting in a mailbox are written as one group, in order', async (t) => {
  const f = fakes({ insertMs: 30 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'clickhouse' } })
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
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 250, maxGroupEvents: 5_000, ackAfter: 'clickhouse' } })
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

t.test('a transaction that fails releases the claimed ids and answers 503; the retry stores', async (t) => {
  const f = fakes()
  // The transaction is tried 3 times (withRetries): all three fail, then it works again.
  let failures = 3
  const profiles = { ...f.profiles, write: async () => { if (failures-- > 0) throw new Error('connection lost'); return false } }
  const p = createPipeline({ ...f, profiles, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'clickhouse' } })
  const it = item(20, 'fail')
  const err = await p.submit(TENANT_A, it).then(() => null, (e: unknown) => e)
  t.ok(err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE')
  t.same(f.released, [20])
  t.same(f.committed, [])
  t.same(f.inserts, [], 'nothing reached ClickHouse')
  const again = { ...it, keep: new Uint8Array(20).fill(1), stored: 0 }
  await p.submit(TENANT_A, again)
  t.equal(again.stored, 20)
  t.same(f.committed, [20])
})

t.test('ClickHouse mode: an insert failing after the commit answers 503 "accepted", and the ids count as stored', async (t) => {
  // The events and profiles are committed (the spool's flusher inserts the events later): a retry must
  // be counted as duplicates, not written again.
  const f = fakes({ failInserts: 1 })
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'clickhouse' } })
  const err = await p.submit(TENANT_A, item(20, 'late')).then(() => null, (e: unknown) => e)
  t.match(err, { code: 'SERVICE_UNAVAILABLE', message: /accepted/ })
  t.same(f.spooled, [20])
  t.same(f.committed, [20], 'the ids are marked stored')
  t.same(f.released, [])
})

t.test('spool mode: the answer does not wait for ClickHouse', async (t) => {
  const f = fakes()
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'postgres' } })
  const it = item(10, 'sp')
  await p.submit(TENANT_A, it)
  t.equal(it.stored, 10)
  t.same(f.spooled, [10])
  t.same(f.inserts, [], 'the flusher moves them later')
})

const TENANT_C = '00000000-0000-4000-8000-00000000000c'
const TENANT_D = '00000000-0000-4000-8000-00000000000d'

/** Wraps the fake pool: records which tenants each transform task held, and the most tasks at once. */
function traced(f: ReturnType<typeof fakes>, ms = 20) {
  const tasks: string[][] = []
  let running = 0
  let maxRunning = 0
  const inner = f.pool
  f.pool = {
    async run(task) {
      tasks.push([...new Set(task.tenantIds)])
      maxRunning = Math.max(maxRunning, ++running)
      await sleep(ms)
      running--
      return inner.run(task)
    },
    close: inner.close,
  }
  return { tasks, maxRunning: () => maxRunning }
}

t.test('different tenants are written in parallel, at most maxGroupsInFlight groups at once', async (t) => {
  const f = fakes()
  const trace = traced(f)
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'clickhouse', maxGroupsInFlight: 2 } })
  const items = [item(10, 'ta'), item(10, 'tb'), item(10, 'tc')]
  await Promise.all([p.submit(TENANT_A, items[0] as IngestItem), p.submit(TENANT_B, items[1] as IngestItem), p.submit(TENANT_C, items[2] as IngestItem)])
  t.equal(trace.maxRunning(), 2)
  t.same(trace.tasks, [[TENANT_A], [TENANT_B], [TENANT_C]], 'A and B at once, C after one of them')
  t.same(items.map((it) => it.stored), [10, 10, 10])
})

t.test('tenants that wait while the groups in flight run are written together: one claim, one task, one insert', async (t) => {
  const f = fakes()
  const trace = traced(f, 40)
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'clickhouse', maxGroupsInFlight: 1 } })
  const first = p.submit(TENANT_A, item(10, 'a1'))
  await sleep(5)
  const later = [p.submit(TENANT_A, item(10, 'a2')), p.submit(TENANT_B, item(10, 'b')), p.submit(TENANT_C, item(10, 'c')), p.submit(TENANT_D, item(10, 'd'))]
  await Promise.all([first, ...later])
  // A was served last, so it comes last in the second group.
  t.same(trace.tasks, [[TENANT_A], [TENANT_B, TENANT_C, TENANT_D, TENANT_A]])
  t.same(f.committed, [10, 40], 'one dedupe claim per group')
  t.same(f.inserts.map((i) => i.rows.length), [10, 40])
  const tenants = f.inserts[1]?.rows.map((r) => r.tenant_id)
  t.same([...new Set(tenants)], [TENANT_B, TENANT_C, TENANT_D, TENANT_A], 'each row keeps its tenant')
})

t.test('a tenant is in one group at a time and its requests keep their order', async (t) => {
  const f = fakes()
  const trace = traced(f, 10)
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter: 'clickhouse', maxGroupsInFlight: 3 } })
  const inFlight = new Map<string, number>()
  const inner = f.pool.run
  f.pool.run = async (task) => {
    for (const id of new Set(task.tenantIds)) {
      t.notOk(inFlight.get(id), `tenant ${id.slice(-1)} not already in flight`)
      inFlight.set(id, 1)
    }
    try {
      return await inner(task)
    } finally {
      for (const id of new Set(task.tenantIds)) inFlight.set(id, 0)
    }
  }
  const submitted: Promise<void>[] = []
  const itemsA: IngestItem[] = []
  for (let i = 0; i < 12; i++) {
    const it = item(5, `ord${i}`)
    itemsA.push(it)
    submitted.push(p.submit(TENANT_A, it), p.submit(i % 2 ? TENANT_B : TENANT_C, item(5, `x${i}`)))
    await sleep(3)
  }
  await Promise.all(submitted)
  t.ok(trace.tasks.length >= 3)
  const rowsA = f.inserts.flatMap((i) => i.rows).filter((r) => r.tenant_id === TENANT_A)
  t.same(rowsA.map((r) => r.event_id), itemsA.flatMap((it) => it.eventIds), 'tenant A in arrival order')
})

t.test('a tenant with a long backlog does not hold the others back', async (t) => {
  const f = fakes()
  const trace = traced(f, 10)
  const p = createPipeline({ ...f, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 100, groupTargetEvents: 100, ackAfter: 'clickhouse', maxGroupsInFlight: 1 } })
  const backlog = Array.from({ length: 5 }, (_, i) => p.submit(TENANT_A, item(100, `big${i}`)))
  const other = p.submit(TENANT_B, item(10, 'small'))
  await Promise.all([...backlog, other])
  t.same(trace.tasks.slice(0, 3), [[TENANT_A], [TENANT_B], [TENANT_A]], 'B goes right after A\'s first group')
})

/** Profiles that fail for tenant B's players, counting the attempts. */
function poisonedProfiles() {
  const attempts: string[][] = []
  return {
    attempts,
    async write(_tx: unknown, players: PlayerColumns) {
      attempts.push([...new Set(players.tenant_id)])
      if (players.tenant_id.includes(TENANT_B)) throw new Error('value out of range')
      return false
    },
    forget: () => {},
  }
}

for (const ackAfter of ['postgres', 'clickhouse'] as const)
t.test(`${ackAfter} mode: a group of several tenants whose transaction fails is written again tenant by tenant`, async (t) => {
  const f = fakes()
  traced(f, 30)
  const profiles = poisonedProfiles()
  const p = createPipeline({ ...f, profiles, log, options: { maxQueuedEvents: 10_000, maxGroupEvents: 5_000, ackAfter, maxGroupsInFlight: 1 } })
  const first = p.submit(TENANT_A, item(5, 'sa', brandOf(TENANT_A)))
  await sleep(5)
  const items = [item(5, 'sb', brandOf(TENANT_B)), item(5, 'sc', brandOf(TENANT_C))]
  const results = await Promise.allSettled([first, p.submit(TENANT_B, items[0] as IngestItem), p.submit(TENANT_C, items[1] as IngestItem)])
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled'])
  t.same(profiles.attempts.filter((a) => a.length > 1).length, 3, 'the group of B and C: three tries')
  t.same(items.map((it) => it.stored), [0, 5])
  t.same(f.released, [10, 5], 'the group\'s ids, then B\'s, released')
  const inserted = f.inserts.flatMap((i) => i.rows).map((r) => r.tenant_id)
  t.same(new Set(inserted), new Set(ackAfter === 'clickhouse' ? [TENANT_A, TENANT_C] : []), 'only committed events reach ClickHouse')
})

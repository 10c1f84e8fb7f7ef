// Per-tenant actors. Each tenant has a bounded mailbox; its actor takes everything waiting (up to a cap) as
// one group, so one tenant's requests are written in order with at most one group in flight, tenants run
// in parallel, and the stores see few large writes instead of many small ones (group commit):
//
//   dedupe claim (Redis, one EVALSHA)  →  transform on a Piscina worker (raw bytes in)
//   →  ClickHouse insert (coalesced across tenants)  →  PostgreSQL transaction (players, profiles, outbox)
//   →  ids marked stored  →  every request of the group is answered.
//
// A request is answered only after its events are in ClickHouse and its players/profiles are committed
// in PostgreSQL. Any failure before the ClickHouse insert releases the claimed ids, so the retry stores.
// With a spool (INGEST_ACK_AFTER=postgres, spool.ts) the ClickHouse insert is replaced by the group's rows
// joining the PostgreSQL transaction; the spool's flusher inserts them into ClickHouse later.
import type { ReservedSql, TransactionSql } from 'postgres'
import type { ClickHouse } from '../db/clickhouse.ts'
import { pipelinedTransaction, type Sql } from '../db/postgres.ts'
import { AppError } from '../errors.ts'
import type { Logger } from '../lib/log.ts'
import type { IngestPool } from '../workers/pool.ts'
import type { Dedupe, DedupeEntry } from './dedupe.ts'
import type { MappingConfig } from './mapping.ts'
import { EVENT_COLUMNS } from './event-rows.ts'
import { createProfileWriter } from './profiles.ts'
import type { Spool } from './spool.ts'

/** One accepted request waiting in a tenant's mailbox. */
export interface IngestItem {
  brandId: string
  mapping: MappingConfig
  /** The request body exactly as received. */
  raw: Buffer
  eventIds: (string | undefined)[]
  /** Per event: 1 = to store (set to 0 by the actor for duplicates). */
  keep: Uint8Array
  receivedAt: number
  deduped: number
  stored: number
}

export interface PipelineOptions {
  /** Most events one tenant may have waiting before requests get 503. */
  maxQueuedEvents: number
  /** Most events written as one group. */
  maxGroupEvents: number
  /** Run the PostgreSQL statements while the ClickHouse insert runs (PostgreSQL server only). */
  overlapWrites: boolean
  /** An idle ClickHouse writer given a small payload waits this long for more (0: insert at once). */
  chLingerMs?: number
}

export interface Pipeline {
  /** Resolves when the item's events are durably stored (counts filled in), rejects with an AppError. */
  submit(tenantId: string, item: IngestItem): Promise<void>
  /** Resolves when every mailbox is empty. */
  drain(): Promise<void>
}

interface Waiting {
  item: IngestItem
  resolve(): void
  reject(err: unknown): void
}

interface Mailbox {
  queue: Waiting[]
  queuedEvents: number
  running: boolean
}

const unavailable = (message: string) => new AppError('SERVICE_UNAVAILABLE', message, undefined, { 'retry-after': '1' })

export function createPipeline(deps: {
  sql: Sql
  ch: ClickHouse
  dedupe: Dedupe
  pool: IngestPool
  log: Logger
  options: PipelineOptions
  /** Stand-in for tests; by default the PostgreSQL writer of profiles.ts. */
  profiles?: ReturnType<typeof createProfileWriter>
  /** INGEST_ACK_AFTER=postgres: events go to this spool in the profiles' transaction, not to ClickHouse. */
  spool?: Spool
}): Pipeline {
  const { sql, dedupe, pool, log, options } = deps
  const chWriter = createChWriter(deps.ch, deps.ch.kind === 'chdb' ? 1 : 2, options.chLingerMs ?? 0)
  const profiles = deps.profiles ?? createProfileWriter()
  const mailboxes = new Map<string, Mailbox>()
  let idleWaiters: (() => void)[] = []
  let seqNext = 0

  const nextSeq = (n: number) => {
    seqNext = Math.max(seqNext, Date.now() * 1024)
    const base = seqNext
    seqNext += n
    return base
  }

  function submit(tenantId: string, item: IngestItem): Promise<void> {
    let box = mailboxes.get(tenantId)
    if (!box) {
      box = { queue: [], queuedEvents: 0, running: false }
      mailboxes.set(tenantId, box)
    }
    const n = item.keep.length
    if (box.queuedEvents + n > options.maxQueuedEvents && box.queue.length > 0) {
      return Promise.reject(unavailable('ingestion backlog of this tenant is full; retry shortly'))
    }
    if (deps.spool?.full()) {
      return Promise.reject(unavailable('events are not reaching ClickHouse; retry later'))
    }
    const mailbox = box
    return new Promise<void>((resolve, reject) => {
      mailbox.queue.push({ item, resolve, reject })
      mailbox.queuedEvents += n
      if (!mailbox.running) void run(tenantId, mailbox)
    })
  }

  async function run(tenantId: string, box: Mailbox): Promise<void> {
    box.running = true
    while (box.queue.length) {
      const group: Waiting[] = []
      let events = 0
      while (box.queue.length && (group.length === 0 || events + (box.queue[0] as Waiting).item.keep.length <= options.maxGroupEvents)) {
        const w = box.queue.shift() as Waiting
        group.push(w)
        events += w.item.keep.length
      }
      box.queuedEvents -= events
      try {
        await writeGroup(tenantId, group.map((w) => w.item))
        for (const w of group) w.resolve()
      } catch (err) {
        for (const w of group) w.reject(err)
      }
    }
    box.running = false
    mailboxes.delete(tenantId)
    if (mailboxes.size === 0) {
      const waiters = idleWaiters
      idleWaiters = []
      for (const w of waiters) w()
    }
  }

  async function writeGroup(tenantId: string, items: IngestItem[]): Promise<void> {
    // 1. Dedupe: duplicates inside the group first (first occurrence wins), then the claim.
    const entries: DedupeEntry[] = []
    const where: [item: number, event: number][] = []
    const seen = new Set<string>()
    items.forEach((item, i) => {
      item.eventIds.forEach((id, e) => {
        if (id === undefined || item.keep[e] !== 1) return
        const k = `${item.brandId}\u0000${id}`
        if (seen.has(k)) {
          item.keep[e] = 0
          item.deduped++
          return
        }
        seen.add(k)
        entries.push({ brandId: item.brandId, eventId: id })
        where.push([i, e])
      })
    })
    const t0 = performance.now()
    const claim = await dedupe.claim(tenantId, entries).catch((err: unknown) => {
      if (err instanceof AppError) throw err
      log.error({ err, tenantId }, 'ingest: dedupe failed')
      throw unavailable('event store unavailable; retry shortly')
    })
    claim.duplicate.forEach((dup, n) => {
      if (!dup) return
      const [i, e] = where[n] as [number, number]
      const item = items[i] as IngestItem
      item.keep[e] = 0
      item.deduped++
    })
    let toStore = 0
    for (const item of items) {
      item.stored = item.keep.reduce((a, b) => a + b, 0)
      toStore += item.stored
    }
    if (toStore === 0) return

    // 2..4. Transform, ClickHouse, PostgreSQL. A failure before the ClickHouse insert frees the ids.
    /** The events are durably stored (ClickHouse insert done, or spool committed): the ids count as stored. */
    let durable = false
    try {
      const total = items.reduce((a, it) => a + it.raw.length, 0)
      const bodies = new Uint8Array(total)
      const bounds = new Int32Array(items.length * 2)
      let off = 0
      const mappingKeyOf = new Map<MappingConfig, string>()
      const mappings: Record<string, MappingConfig> = {}
      const mappingKeys: string[] = []
      const keep = new Uint8Array(items.reduce((a, it) => a + it.keep.length, 0))
      let k = 0
      items.forEach((item, i) => {
        bodies.set(item.raw, off)
        bounds[2 * i] = off
        off += item.raw.length
        bounds[2 * i + 1] = off
        keep.set(item.keep, k)
        k += item.keep.length
        let key = mappingKeyOf.get(item.mapping)
        if (!key) {
          key = String(mappingKeyOf.size)
          mappingKeyOf.set(item.mapping, key)
          mappings[key] = item.mapping
        }
        mappingKeys.push(key)
      })
      const t1 = performance.now()
      const result = await pool.run({
        kind: 'transform',
        tenantId,
        bodies,
        bounds,
        brandIds: items.map((it) => it.brandId),
        mappingKeys,
        receivedAt: items.map((it) => it.receivedAt),
        keep,
        mappings,
        seqBase: nextSeq(toStore),
        deflateRows: deps.spool !== undefined,
      })
      const t2 = performance.now()
      const writePostgres = (tx: TransactionSql | ReservedSql) => profiles.write(tx, tenantId, result.players, result.statuses)
      /** A transaction that did not commit may have missed players the writer believed in, or created some. */
      const forgetOnFailure = <T>(p: Promise<T>) =>
        p.catch((err: unknown) => {
          profiles.forget(result.players)
          throw err
        })
      if (deps.spool) {
        const spool = deps.spool
        // One transaction: the events are acknowledged exactly when the profiles are. Sent in one go with
        // its BEGIN and COMMIT (pipelinedTransaction).
        await withRetries(log, () =>
          forgetOnFailure(pipelinedTransaction(sql, (tx) => Promise.all([writePostgres(tx), spool.append(tx, result.rows, result.rowCount, result.rowsDeflated ? 'rowbinary-deflate' : 'rowbinary')]))),
        )
        durable = true
        if (log.isLevelEnabled('debug')) {
          log.debug({ tenantId, requests: items.length, events: toStore, dedupeMs: ms(t0, t1), transformMs: ms(t1, t2), postgresMs: ms(t2, performance.now()) }, 'ingest group spooled')
        }
        await claim.commit()
        return
      }
      let t3 = 0
      const chWrite = chWriter.write(result.rows).then(() => {
        durable = true
        t3 = performance.now()
      })
      if (options.overlapWrites) {
        // PostgreSQL server: run the statements while ClickHouse inserts, commit only once the events are
        // in ClickHouse (a failed insert rolls the profiles back). Not with PGlite, where an open
        // transaction blocks every other connection.
        chWrite.catch(() => {})
        try {
          await forgetOnFailure(
            sql.begin(async (tx) => {
              await writePostgres(tx)
              await chWrite
            }),
          )
        } catch (err) {
          // The insert may still be running: its outcome decides whether the ids are stored.
          await chWrite.catch(() => {})
          if (!durable) throw err
          log.warn({ err, tenantId }, 'ingest: postgres write failed after the clickhouse insert, retrying')
          await withRetries(log, () => forgetOnFailure(pipelinedTransaction(sql, writePostgres)))
        }
      } else {
        await chWrite
        await withRetries(log, () => forgetOnFailure(pipelinedTransaction(sql, writePostgres)))
      }
      if (log.isLevelEnabled('debug')) {
        log.debug({ tenantId, requests: items.length, events: toStore, players: result.players.brand_id.length, dedupeMs: ms(t0, t1), transformMs: ms(t1, t2), clickhouseMs: ms(t2, t3), storesMs: ms(t2, performance.now()) }, 'ingest group written')
      }
    } catch (err) {
      if (!durable) {
        await claim.release()
        if (err instanceof AppError) throw err
        log.error({ err, tenantId }, 'ingest: write failed, nothing stored')
        throw unavailable('event store unavailable; retry shortly')
      }
      // The events are in ClickHouse: their ids count as stored (a retry is a duplicate), but the
      // profiles missed this group. Loud, because only a replay from ClickHouse repairs it.
      await claim.commit()
      log.error({ err, tenantId, events: toStore }, 'ingest: events stored but profile update failed')
      throw unavailable('events stored, player profiles not updated; retry is safe')
    }
    await claim.commit()
  }

  return {
    submit,
    drain() {
      if (mailboxes.size === 0) return Promise.resolve()
      return new Promise<void>((resolve) => idleWaiters.push(resolve))
    },
  }
}

const ms = (a: number, b: number) => Math.round((b - a) * 10) / 10

/** PostgreSQL serialization failures and dropped connections are worth a second try. */
async function withRetries<T>(log: Logger, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      if (attempt >= 3) throw err
      log.warn({ err, attempt }, 'ingest: postgres write failed, retrying')
      await new Promise((r) => setTimeout(r, 50 * attempt))
    }
  }
}

/**
 * Coalesces the rows of every tenant's group into few ClickHouse inserts. chDB's cost is per part, not
 * per row (~6 ms of CPU to write a part and about as much to merge it later, against ~2-4 µs per
 * RowBinary row), so while one insert runs the next one collects everything that arrives, and an idle
 * writer given a small payload waits lingerMs for company.
 */
function createChWriter(ch: ClickHouse, maxInFlight: number, lingerMs: number) {
  const MAX_BYTES = 32 * 1024 * 1024
  /** Below this (~300 rows), an idle writer lingers. */
  const LINGER_BELOW_BYTES = 128 * 1024
  let queue: { buf: Uint8Array; resolve(): void; reject(err: unknown): void }[] = []
  let queuedBytes = 0
  let inFlight = 0
  let timer: NodeJS.Timeout | undefined
  const insert = (rows: Uint8Array) => ch.insertRowBinary('events', EVENT_COLUMNS, rows)
  const pump = () => {
    if (timer) {
      clearTimeout(timer)
      timer = undefined
    }
    while (inFlight < maxInFlight && queue.length) {
      let bytes = 0
      let n = 0
      while (n < queue.length && (n === 0 || bytes + (queue[n] as { buf: Uint8Array }).buf.length <= MAX_BYTES)) {
        bytes += (queue[n] as { buf: Uint8Array }).buf.length
        n++
      }
      const batch = queue.slice(0, n)
      queue = queue.slice(n)
      queuedBytes -= bytes
      inFlight++
      const payload = batch.length === 1 ? (batch[0] as { buf: Uint8Array }).buf : Buffer.concat(batch.map((b) => b.buf), bytes)
      insert(payload).then(
        () => {
          for (const b of batch) b.resolve()
        },
        async (err: unknown) => {
          if (batch.length === 1) return (batch[0] as { reject(err: unknown): void }).reject(err)
          // One group's rows must not fail everybody's: retry each contribution on its own.
          for (const b of batch) await insert(b.buf).then(b.resolve, b.reject)
        },
      ).finally(() => {
        inFlight--
        pump()
      })
    }
  }
  return {
    write(rows: Uint8Array): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        queue.push({ buf: rows, resolve, reject })
        queuedBytes += rows.length
        if (inFlight > 0 || lingerMs <= 0 || queuedBytes >= LINGER_BELOW_BYTES) pump()
        else timer ??= setTimeout(pump, lingerMs)
      })
    },
  }
}

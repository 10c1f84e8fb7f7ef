// Per-tenant actors. Each tenant has a bounded mailbox; one tenant's requests are written in order, with
// at most one of its groups in flight, and tenants run in parallel. Requests that wait are written
// together (group commit), and so are different tenants' waiting requests: a group takes every tenant
// that is ready, so that the stores see few large writes instead of one small write per tenant:
//
//   dedupe claim (Redis, one EVALSHA)  →  transform on a Piscina worker (raw bytes in)
//   →  ClickHouse insert (coalesced across groups)  →  PostgreSQL transaction (players, profiles, outbox)
//   →  ids marked stored  →  every request of the group is answered.
//
// At most maxGroupsInFlight groups run at once: the fewer, the larger each (every group costs a Redis
// round trip, a worker task and a PostgreSQL transaction whatever its size). A group stops taking
// tenants once it holds groupTargetEvents, so a heavy load still forms several groups that overlap.
//
// A request is answered only after its events are in ClickHouse and its players/profiles are committed
// in PostgreSQL. Any failure before the ClickHouse insert releases the claimed ids, so the retry stores;
// a failed group of several tenants is written again tenant by tenant, so that one tenant's bad data
// fails only that tenant's requests. With a spool (INGEST_ACK_AFTER=postgres, spool.ts) the ClickHouse
// insert is replaced by the group's rows joining the PostgreSQL transaction; the spool's flusher inserts
// them into ClickHouse later.
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
  /** Groups written at once (default 2). */
  maxGroupsInFlight?: number
  /** A group stops taking further tenants' requests once it holds this many events (default 500). */
  groupTargetEvents?: number
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
  tenantId: string
  item: IngestItem
  resolve(): void
  reject(err: unknown): void
}

interface Mailbox {
  queue: Waiting[]
  queuedEvents: number
  /** One of this tenant's groups is being written. */
  busy: boolean
  /** When its requests last went into a group (a counter): the longest unserved tenant goes first. */
  servedAt: number
}

const unavailable = (message: string) => new AppError('SERVICE_UNAVAILABLE', message, undefined, { 'retry-after': '1' })
const profilesNotUpdated = () => unavailable('events stored, player profiles not updated; retry is safe')

/**
 * A group's events were stored but the profiles of some of its tenants (all when `tenants` is undefined)
 * could not be written: writing those requests again would only count them as duplicates.
 */
class StoredButFailed extends Error {
  constructor(
    readonly answer: AppError,
    readonly tenants?: Set<string>,
  ) {
    super(answer.message)
  }
}

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
  const maxGroupsInFlight = options.maxGroupsInFlight ?? 2
  const groupTargetEvents = options.groupTargetEvents ?? 500
  const chWriter = createChWriter(deps.ch, deps.ch.kind === 'chdb' ? 1 : 2, options.chLingerMs ?? 0)
  const profiles = deps.profiles ?? createProfileWriter()
  const mailboxes = new Map<string, Mailbox>()
  let served = 0
  let groupsInFlight = 0
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
      box = { queue: [], queuedEvents: 0, busy: false, servedAt: 0 }
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
      mailbox.queue.push({ tenantId, item, resolve, reject })
      mailbox.queuedEvents += n
      schedule()
    })
  }

  /** Starts groups while there is room: each takes the waiting requests of tenants not already in flight. */
  function schedule(): void {
    while (groupsInFlight < maxGroupsInFlight) {
      const group = takeGroup()
      if (!group.length) return
      groupsInFlight++
      void runGroup(group)
    }
  }

  function takeGroup(): Waiting[] {
    const group: Waiting[] = []
    let events = 0
    const ready = [...mailboxes.values()].filter((b) => !b.busy && b.queue.length).sort((a, b) => a.servedAt - b.servedAt)
    for (const box of ready) {
      if (events >= groupTargetEvents) break
      const first = box.queue[0] as Waiting
      if (group.length && events + first.item.keep.length > options.maxGroupEvents) break
      while (box.queue.length && (group.length === 0 || events + (box.queue[0] as Waiting).item.keep.length <= options.maxGroupEvents)) {
        const w = box.queue.shift() as Waiting
        group.push(w)
        events += w.item.keep.length
        box.queuedEvents -= w.item.keep.length
      }
      box.busy = true
      box.servedAt = ++served
    }
    return group
  }

  async function runGroup(group: Waiting[]): Promise<void> {
    await writeOrSplit(group)
    groupsInFlight--
    for (const tenantId of new Set(group.map((w) => w.tenantId))) {
      const box = mailboxes.get(tenantId) as Mailbox
      box.busy = false
      if (!box.queue.length) mailboxes.delete(tenantId)
    }
    schedule()
    if (mailboxes.size === 0 && groupsInFlight === 0) {
      const waiters = idleWaiters
      idleWaiters = []
      for (const w of waiters) w()
    }
  }

  /** Writes the group and answers its requests; a failed group of several tenants is retried per tenant. */
  async function writeOrSplit(group: Waiting[]): Promise<void> {
    try {
      await writeGroup(group)
      for (const w of group) w.resolve()
    } catch (err) {
      if (err instanceof StoredButFailed) {
        for (const w of group) {
          if (!err.tenants || err.tenants.has(w.tenantId)) w.reject(err.answer)
          else w.resolve()
        }
        return
      }
      const tenants = [...new Set(group.map((w) => w.tenantId))]
      if (tenants.length > 1) {
        log.warn({ err, tenants: tenants.length }, 'ingest: group of several tenants failed, writing each tenant on its own')
        await Promise.all(tenants.map((t) => writeOrSplit(group.filter((w) => w.tenantId === t))))
        return
      }
      for (const w of group) w.reject(err)
    }
  }

  /**
   * Writes the group durably. On failure nothing of it is stored (its ids are free again) and its items
   * are reset to what was submitted, unless it throws StoredButFailed.
   */
  async function writeGroup(group: Waiting[]): Promise<void> {
    const items = group.map((w) => w.item)
    const keepBefore = items.map((it) => it.keep.slice())
    try {
      await writeItems(items, group.map((w) => w.tenantId))
    } catch (err) {
      if (!(err instanceof StoredButFailed)) {
        items.forEach((it, i) => {
          it.keep.set(keepBefore[i] as Uint8Array)
          it.deduped = 0
          it.stored = 0
        })
      }
      throw err
    }
  }

  async function writeItems(items: IngestItem[], tenantIds: string[]): Promise<void> {
    const tenants = new Set(tenantIds).size
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
        entries.push({ tenantId: tenantIds[i] as string, brandId: item.brandId, eventId: id })
        where.push([i, e])
      })
    })
    const t0 = performance.now()
    const claim = await dedupe.claim(entries).catch((err: unknown) => {
      if (err instanceof AppError) throw err
      log.error({ err, tenants }, 'ingest: dedupe failed')
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
        bodies,
        bounds,
        tenantIds,
        brandIds: items.map((it) => it.brandId),
        mappingKeys,
        receivedAt: items.map((it) => it.receivedAt),
        keep,
        mappings,
        seqBase: nextSeq(toStore),
        deflateRows: deps.spool !== undefined,
      })
      const t2 = performance.now()
      const writePostgres = (tx: TransactionSql | ReservedSql) => profiles.write(tx, result.players, result.statuses)
      /** A transaction that did not commit may have missed players the writer believed in, or created some. */
      const forgetOnFailure = <T>(p: Promise<T>) =>
        p.catch((err: unknown) => {
          profiles.forget(result.players)
          throw err
        })
      /**
       * The events are in ClickHouse: the profiles must follow. If they cannot, in a group of several
       * tenants, each tenant's are tried on their own, so only the tenant whose data fails misses them.
       */
      const writeProfilesOfStored = async () => {
        try {
          await withRetries(log, () => forgetOnFailure(pipelinedTransaction(sql, writePostgres)))
        } catch (err) {
          if (tenants === 1) throw err
          const failed = new Set<string>()
          for (const tenantId of new Set(tenantIds)) {
            const players = rowsOfTenant(result.players, tenantId)
            const statuses = rowsOfTenant(result.statuses, tenantId)
            await forgetOnFailure(pipelinedTransaction(sql, (tx) => profiles.write(tx, players, statuses))).catch((e: unknown) => {
              log.error({ err: e, tenantId }, 'ingest: profile update of this tenant failed')
              failed.add(tenantId)
            })
          }
          if (failed.size) throw new StoredButFailed(profilesNotUpdated(), failed)
        }
      }
      if (deps.spool) {
        const spool = deps.spool
        // One transaction: the events are acknowledged exactly when the profiles are. Sent in one go with
        // its BEGIN and COMMIT (pipelinedTransaction).
        await withRetries(log, () =>
          forgetOnFailure(pipelinedTransaction(sql, (tx) => Promise.all([writePostgres(tx), spool.append(tx, result.rows, result.rowCount, result.rowsDeflated ? 'rowbinary-deflate' : 'rowbinary')]))),
        )
        durable = true
        if (log.isLevelEnabled('debug')) {
          log.debug({ tenants, requests: items.length, events: toStore, dedupeMs: ms(t0, t1), transformMs: ms(t1, t2), postgresMs: ms(t2, performance.now()) }, 'ingest group spooled')
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
          log.warn({ err, tenants }, 'ingest: postgres write failed after the clickhouse insert, retrying')
          await writeProfilesOfStored()
        }
      } else {
        await chWrite
        await writeProfilesOfStored()
      }
      if (log.isLevelEnabled('debug')) {
        log.debug({ tenants, requests: items.length, events: toStore, players: result.players.brand_id.length, dedupeMs: ms(t0, t1), transformMs: ms(t1, t2), clickhouseMs: ms(t2, t3), storesMs: ms(t2, performance.now()) }, 'ingest group written')
      }
    } catch (err) {
      if (!durable) {
        await claim.release()
        if (err instanceof AppError) throw err
        log.error({ err, tenants }, 'ingest: write failed, nothing stored')
        throw unavailable('event store unavailable; retry shortly')
      }
      // The events are in ClickHouse: their ids count as stored (a retry is a duplicate), but the
      // profiles missed this group. Loud, because only a replay from ClickHouse repairs it.
      await claim.commit()
      log.error({ err, tenants, events: toStore }, 'ingest: events stored but profile update failed')
      throw err instanceof StoredButFailed ? err : new StoredButFailed(profilesNotUpdated())
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

/** The rows of one tenant from a group's columns (PlayerColumns, StatusColumns). */
function rowsOfTenant<T extends { tenant_id: string[] }>(cols: T, tenantId: string): T {
  const idx: number[] = []
  cols.tenant_id.forEach((t, i) => t === tenantId && idx.push(i))
  return Object.fromEntries(Object.entries(cols).map(([k, v]) => [k, idx.map((i) => (v as unknown[])[i])])) as T
}

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

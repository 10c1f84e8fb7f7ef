// Per-tenant actors. Each tenant has a bounded mailbox; one tenant's requests are written in order, with
// at most one of its groups in flight, and tenants run in parallel. Requests that wait are written
// together (group commit), and so are different tenants' waiting requests: a group takes every tenant
// that is ready, so that the stores see few large writes instead of one small write per tenant:
//
//   dedupe claim (Redis, one EVALSHA)  →  transform on a Piscina worker (raw bytes in)
//   →  PostgreSQL transaction (players, profiles, outbox, and the events in the spool)
//   →  INGEST_ACK_AFTER=clickhouse: the events inserted into ClickHouse (the spool's flusher does it later
//      otherwise)  →  ids marked stored  →  every request of the group is answered.
//
// At most maxGroupsInFlight groups run at once: the fewer, the larger each (every group costs a Redis
// round trip, a worker task and a PostgreSQL transaction whatever its size). A group stops taking
// tenants once it holds groupTargetEvents, so a heavy load still forms several groups that overlap.
//
// Events and profile deltas commit together, in one transaction, in both modes: a crash at any point
// leaves either both or neither (spool.ts moves committed events to ClickHouse exactly once). Any failure
// before the commit releases the claimed ids, so the retry stores; a failed group of several tenants is
// written again tenant by tenant, so that one tenant's bad data fails only that tenant's requests.
import { randomUUID } from 'node:crypto'
import { pipelinedTransaction, type Sql } from '../db/postgres.ts'
import { AppError } from '../errors.ts'
import type { EventStream } from '../engine/event-stream.ts'
import type { Logger } from '../lib/log.ts'
import type { IngestPool } from '../workers/pool.ts'
import type { Dedupe, DedupeEntry } from './dedupe.ts'
import type { MappingConfig } from './mapping.ts'
import { createProfileWriter } from './profiles.ts'
import type { Spool } from './spool.ts'
import { outboxWritten } from '../lib/outbox.ts'

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
  /** INGEST_ACK_AFTER: answer once the events are in ClickHouse, or once they are committed to the spool. */
  ackAfter: 'clickhouse' | 'postgres'
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
/**
 * The group's events and profiles were committed, but the answer cannot be a 200 (INGEST_ACK_AFTER=
 * clickhouse and the insert failed): writing those requests again would only count them as duplicates.
 */
class StoredButFailed extends Error {
  constructor(readonly answer: AppError) {
    super(answer.message)
  }
}

export function createPipeline(deps: {
  sql: Sql
  dedupe: Dedupe
  pool: IngestPool
  log: Logger
  options: PipelineOptions
  /** Stand-in for tests; by default the PostgreSQL writer of profiles.ts. */
  profiles?: ReturnType<typeof createProfileWriter>
  /** Where the events go in the profiles' transaction, and from there into ClickHouse. */
  spool: Spool
  /** The engines' event stream: rows for interesting events commit in the same transaction. */
  stream?: EventStream
  /** Told the size of every group written (src/lib/metrics.ts). */
  onGroupWritten?: (events: number, requests: number) => void
}): Pipeline {
  const { sql, dedupe, pool, log, options, spool, stream } = deps
  const maxGroupsInFlight = options.maxGroupsInFlight ?? 2
  const groupTargetEvents = options.groupTargetEvents ?? 500
  const ackAfterClickHouse = options.ackAfter === 'clickhouse'
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
    if (spool.full()) {
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
        for (const w of group) w.reject(err.answer)
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

    // 2..4. Transform, PostgreSQL, ClickHouse. A failure before the commit frees the ids.
    /** The events are durably stored (committed with the profiles): the ids count as stored. */
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
      const streamInterest = stream ? await stream.interestFor(items.map((it) => it.brandId)) : undefined
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
        ...(streamInterest ? { streamInterest } : {}),
      })
      const t2 = performance.now()
      // 3. One transaction: players, profiles, outbox and the group's events in the spool, so events and
      // profile deltas are durable together whatever happens next. Sent in one go with its BEGIN and
      // COMMIT (pipelinedTransaction).
      const spoolRows = result.rowsDeflated ?? result.rows
      const encoding = result.rowsDeflated ? 'rowbinary-deflate' : 'rowbinary'
      let batch: string | undefined
      // A connection lost while the COMMIT was on its way leaves the outcome unknown: before writing the
      // group again, its commit marker (sql/0110) says whether the first try committed after all.
      const groupKey = randomUUID()
      const committed = async () => (await sql<{ batch: string | null }[]>`select batch::text from ingest_commits where group_key = ${groupKey}`)[0]
      // A try failed and nothing has told since whether its COMMIT went through.
      let uncertain = false
      // Whether the group may have written outbox rows (a commit known only from its marker: assume so).
      let wroteOutbox = true
      await withRetries(log, async (attempt) => {
        if (attempt > 1) {
          const done = await committed()
          uncertain = false
          if (done) {
            batch = done.batch ?? undefined
            return
          }
        }
        await pipelinedTransaction(sql, async (tx) => {
          // Statements go out in call order: the stream rows find the players the profile writer upserted,
          // and the marker the spool batch claimed just before it.
          const [wrote, b] = await Promise.all([
            profiles.write(tx, result.players, result.statuses),
            spool.append(tx, spoolRows, result.rowCount, encoding, ackAfterClickHouse),
            stream && result.stream.consumers.length ? stream.append(tx, result.stream) : undefined,
            tx`insert into ingest_commits (group_key, batch)
               values (${groupKey}, ${ackAfterClickHouse ? tx`currval('event_spool_batch_seq')` : null})`.execute(),
          ])
          batch = b
          wroteOutbox = wrote
        }).catch((err: unknown) => {
          // A transaction that did not commit may have missed players the writer believed in, or created some.
          profiles.forget(result.players)
          uncertain = true
          throw err
        })
      }).catch(async (err: unknown) => {
        if (!uncertain) throw err
        // The last try's COMMIT may have gone through: ask again (its connection is gone, others may follow)
        // before the ids are released for a retry to write the group a second time.
        const done = await settle(committed)
        if (done === null) throw err
        if (done === undefined) throw new OutcomeUnknown(err)
        batch = done.batch ?? undefined
      })
      durable = true
      // player.created / status_changed / converted (events/queries.ts): the embedded fan-out looks for them.
      if (wroteOutbox) outboxWritten()
      if (stream && result.stream.consumers.length) stream.wake(result.stream.consumers)
      deps.onGroupWritten?.(toStore, items.length)
      const t3 = performance.now()
      // 4. INGEST_ACK_AFTER=clickhouse: the events go to ClickHouse before the answer. If that fails they
      // are accepted all the same (the spool's flusher inserts them later): the answer says so.
      if (ackAfterClickHouse) {
        await spool.insertNow(batch as string, result.rows, result.rowCount).catch((err: unknown) => {
          log.error({ err, tenants, events: toStore }, 'ingest: clickhouse insert failed; the events stay spooled and reach it later')
          throw unavailable('events accepted, not yet in ClickHouse (they are kept and moved there later); a retry counts them as duplicates')
        })
      }
      if (log.isLevelEnabled('debug')) {
        log.debug({ tenants, requests: items.length, events: toStore, dedupeMs: ms(t0, t1), transformMs: ms(t1, t2), postgresMs: ms(t2, t3), clickhouseMs: ms(t3, performance.now()) }, 'ingest group written')
      }
    } catch (err) {
      if (err instanceof OutcomeUnknown) {
        // Neither stored nor free: the ids stay claimed, and a retry verifies them against ClickHouse.
        claim.unsettled()
        log.error({ err: err.failure, tenants }, 'ingest: write outcome unknown (the connection died around its COMMIT); a retry is verified against the store')
        throw unavailable('event store unavailable; retry shortly')
      }
      if (!durable) {
        await claim.release()
        if (err instanceof AppError) throw err
        log.error({ err, tenants }, 'ingest: write failed, nothing stored')
        throw unavailable('event store unavailable; retry shortly')
      }
      await claim.commit()
      throw new StoredButFailed(err instanceof AppError ? err : unavailable('events accepted; retry is safe'))
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

/** A group write whose COMMIT may or may not have happened, and asking failed too. */
class OutcomeUnknown extends Error {
  readonly failure: unknown
  constructor(failure: unknown) {
    super('ingest group: outcome of the commit unknown')
    this.failure = failure
  }
}

/** The commit marker, asked a few times over ~3 s: the row, null when not committed, undefined if it cannot tell. */
async function settle<T>(ask: () => Promise<T | undefined>): Promise<T | null | undefined> {
  for (const wait of [0, 100, 200, 400, 800, 1600]) {
    if (wait) await new Promise((r) => setTimeout(r, wait))
    try {
      return (await ask()) ?? null
    } catch {
      // the connection failed again: wait and ask again
    }
  }
  return undefined
}

/** PostgreSQL serialization failures and dropped connections are worth a second try. */
async function withRetries<T>(log: Logger, fn: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt)
    } catch (err) {
      if (attempt >= 3) throw err
      log.warn({ err, attempt }, 'ingest: postgres write failed, retrying')
      await new Promise((r) => setTimeout(r, 50 * attempt))
    }
  }
}

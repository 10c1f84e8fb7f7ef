// The event stream: the one mechanism through which engines react to ingested events (gamification,
// campaign triggers, journeys' wait_for_event, conversions). docs/engines.md, "Event stream".
//
// - Cheap pre-test: each consumer says, per brand, which stored event types some active rule of its
//   could match (`interest`). The union is cached per brand (dropped on the bus topic
//   'event_stream_interest', which a consumer publishes through interestChanged() when its rules change)
//   and handed to the ingest worker with the group; only events of an interesting type produce a row.
//   Every other event costs one map lookup on the worker.
// - Never lost: the rows are inserted in the SAME transaction that commits the group's events to the
//   spool and its profiles (pipeline.ts). An acknowledged event therefore has its rows, and a group that
//   did not commit has none (its retry is not a duplicate and writes them then).
// - Exactly once in effect: a consumer claims its oldest rows with `DELETE ... FOR UPDATE SKIP LOCKED
//   RETURNING` inside a transaction, applies them on that transaction, and commits: the effect and the
//   consumption are one commit. A process killed mid-batch rolls back, its rows unlock at once and are
//   claimed again (by any process: SKIP LOCKED lets several processes share a consumer's rows).
// - Fast: the process that committed a group wakes its consumers at once (the usual case: well under
//   the 1 s target); every process also polls every pollMs for rows another process committed or a
//   crashed or busy one left (one query for all consumers; only consumers with due rows claim).
// - Parallel: each consumer runs `loops` claim loops per process. Every row carries a hash of its player
//   (`part`, sql/0120), and loop i of n claims only rows with part % n = i: one player's rows always go
//   to the same loop, in stream order, while other players' batches are applied alongside (one
//   transaction, one connection each). Each claim stays a transaction of its own, so exactly once is
//   unchanged. Across processes, a lane is applied by one of them at a time (a transaction-scoped
//   advisory lock per consumer and lane), so a player's events stay in order with several processes
//   too; every process must then run the same number of loops (EVENT_STREAM_LOOPS).
// - A handler that throws: the batch is rolled back and retried one event at a time; an event that fails
//   alone is retried with backoff and set aside (failed_at, logged) after MAX_ATTEMPTS, so one bad event
//   never blocks the stream.
//
// The claim loop here is a small transactional poller of its own: the row lock of the claiming
// transaction is the lease (a crashed process's transaction ends with its connection), so no lease
// column or expiry is needed. It is not the shared work loop (src/engine/work-loop.ts), whose claims are
// leases: here claim and effect commit together, which is what makes a consumer exactly once.
import type { ReservedSql, TransactionSql } from 'postgres'
import type { AppContext } from '../context.ts'
import type { Bus } from '../db/bus.ts'
import type { Sql } from '../db/postgres.ts'
import type { EventCondition } from '../lib/event-filter.ts'
import type { Logger } from '../lib/log.ts'
import type { Metrics } from '../lib/metrics.ts'

type Tx = TransactionSql | ReservedSql

/** One stored event as a consumer sees it. */
export interface StreamEvent {
  /** The stream row's id (increasing in commit order within a process, roughly across processes). */
  id: string
  tenantId: string
  brandId: string
  playerId: string | null
  externalId: string
  eventId: string | null
  /** The stored (mapped) type. */
  type: string
  sourceType: string
  eventTime: Date
  receivedAt: Date
  /** Canonical fields derived by the brand's mapping; `amount` is an exact decimal string. */
  fields: Record<string, unknown>
  payload: Record<string, unknown> | null
}

export interface StreamConsumer {
  /** Unique, stable (rows are addressed to it by name): `gamification`, `campaign_triggers`, ... */
  name: string
  /**
   * The stored event types of these brands that some active rule of this consumer could match, `'*'`
   * for every type; `{ type, filters }` when only events matching the filters can matter (a rule's own
   * filter, tested again by the consumer: the pre-test only spares the rows of events no rule wants).
   * Called when a brand's entry is not cached (first use, after interestChanged, after INTEREST_TTL_MS).
   * Include types whose effect is implied (e.g. `bet_rollback` when `bet` counts).
   */
  interest(sql: Sql, brandIds: string[]): Promise<Map<string, Iterable<InterestEntry>>>
  /**
   * Applies the events on `tx`: every effect must be written there (outbox rows with insertOutbox on tx,
   * notifications enqueued on tx), so it commits exactly when the events are consumed. Events of one
   * player come in stream order within a batch. Throwing rolls the batch back (retried per event).
   * It may return a function to run after the commit (best effort: caches such as leaderboards, which
   * must be repairable from what was committed).
   */
  handle(tx: Tx, events: StreamEvent[]): Promise<void | (() => Promise<unknown>)>
  /** Most events per transaction (default 200). */
  batchSize?: number
}

/**
 * A consumer's interest in one event type: every event of it (the bare type), or only events some of
 * whose `filters` all hold (the rule language's conditions, tested on the ingest worker exactly as the
 * consumer tests them: lib/event-filter.ts).
 */
export type InterestEntry = string | { type: string; filters: EventCondition[] }

/** The consumers interested in some events of a type: those in every one, and those behind filters. */
export interface FilteredInterest {
  always: string[]
  when: { consumer: string; any: EventCondition[][] }[]
}

/**
 * Per brand: event type → the interested consumers (what the ingest worker gets): comma-separated names
 * when none of them filters (one lookup per event), else a FilteredInterest.
 */
export type StreamInterest = Record<string, Record<string, string | FilteredInterest>>

/** Rows the ingest worker produced for a group: parallel arrays, one entry per interesting event. */
export interface StreamColumns {
  consumers: string[]
  tenant_id: string[]
  brand_id: string[]
  external_id: string[]
  event_id: (string | null)[]
  event_type: string[]
  source_type: string[]
  event_time: number[]
  received_at: number[]
  fields: string[]
  payload: (string | null)[]
}

export const emptyStreamColumns = (): StreamColumns => ({
  consumers: [], tenant_id: [], brand_id: [], external_id: [], event_id: [], event_type: [], source_type: [],
  event_time: [], received_at: [], fields: [], payload: [],
})

export interface EventStream {
  register(consumer: StreamConsumer): void
  /** Forget a consumer (its rows stay for the next process that registers it); resolves after its running batch. */
  unregister(name: string): Promise<void>
  /** The interest of these brands for the ingest worker; undefined when no consumer wants anything. */
  interestFor(brandIds: string[]): Promise<StreamInterest | undefined>
  /** A consumer's rules for this brand changed: every process reloads the brand's interest. */
  interestChanged(brandId: string): Promise<void>
  /** Inside the ingest group's transaction. */
  append(tx: Tx, rows: StreamColumns): Promise<unknown>
  /**
   * Rows were committed: run the consumers now rather than at the next poll. `consumers` (the committed
   * rows' StreamColumns.consumers): wake only those, not every loop of every consumer for nothing.
   */
  wake(consumers?: string[]): void
  /** Resolves when every consumer registered here has nothing claimable left (tests, bench). */
  idle(): Promise<void>
  stop(): Promise<void>
}

const INTEREST_TTL_MS = 60_000
const DEFAULT_POLL_MS = 500
/** runBatch's answer when another process holds the lane. */
const LANE_BUSY = -1
/** How soon a lane found busy in another process is looked at again. */
const BUSY_RETRY_MS = 50
const MAX_ATTEMPTS = 10
/**
 * Claim loops per consumer on a PostgreSQL server unless EVENT_STREAM_LOOPS says otherwise. Each holds a
 * pool connection (of 10) while it applies a batch; on the 2-core bench machine 4 kept the gamification
 * consumer up with ingestion where 1 and 2 fell behind (bench/RESULTS.md, gamification).
 */
const DEFAULT_SERVER_LOOPS = 4

export function createEventStream(deps: { sql: Sql; interestSql?: Sql; bus: Bus; log: Logger; pollMs?: number; metrics?: Metrics; loops?: number }): EventStream {
  const { sql, bus, log, metrics } = deps
  // Interest is loaded for ingestion's requests: on their pool, not the engines' (app.ts).
  const interestSql = deps.interestSql ?? sql
  const pollMs = deps.pollMs ?? DEFAULT_POLL_MS
  // Claim loops per consumer in this process (1..32768: part is 0..32767).
  const loopCount = Math.min(Math.max(1, Math.floor(deps.loops ?? 1)), 32768)
  const consumers = new Map<string, ConsumerLoop>()
  const interestCache = new Map<string, { at: number; value: Promise<Record<string, string | FilteredInterest>>; version: number }>()
  let version = 0
  let stopped = false

  bus.subscribe('event_stream_interest', (brandId) => {
    version++
    if (brandId === '*') interestCache.clear()
    else interestCache.delete(brandId)
  })

  async function loadInterest(brandIds: string[]): Promise<Map<string, Record<string, string | FilteredInterest>>> {
    // brand → type → consumer → 'all' or the alternative filters under which it is interested
    const out = new Map<string, Map<string, Map<string, 'all' | EventCondition[][]>>>()
    for (const id of brandIds) out.set(id, new Map())
    for (const c of consumers.values()) {
      const got = await c.consumer.interest(interestSql, brandIds)
      for (const [brandId, entries] of got) {
        const byType = out.get(brandId)
        if (!byType) continue
        for (const entry of entries) {
          const type = typeof entry === 'string' ? entry : entry.type
          const filters = typeof entry === 'string' || !entry.filters?.length ? 'all' : entry.filters
          let names = byType.get(type)
          if (!names) byType.set(type, (names = new Map()))
          const had = names.get(c.consumer.name)
          if (had === 'all' || filters === 'all') names.set(c.consumer.name, 'all')
          else names.set(c.consumer.name, [...(had ?? []), filters])
        }
      }
    }
    const result = new Map<string, Record<string, string | FilteredInterest>>()
    for (const [brandId, byType] of out) {
      const rec: Record<string, string | FilteredInterest> = {}
      // A '*' consumer is interested in every type: add it to each listed type too, so the worker needs
      // one lookup (type, else '*').
      const star = byType.get('*')
      for (const [t, names] of byType) {
        if (star && t !== '*') {
          for (const [n, f] of star) {
            const had = names.get(n)
            names.set(n, had === 'all' || f === 'all' ? 'all' : [...(had ?? []), ...f])
          }
        }
        const sorted = [...names].sort((a, b) => (a[0] < b[0] ? -1 : 1))
        const always = sorted.filter(([, f]) => f === 'all').map(([n]) => n)
        const when = sorted.filter(([, f]) => f !== 'all').map(([consumer, f]) => ({ consumer, any: f as EventCondition[][] }))
        rec[t] = when.length ? { always, when } : always.join(',')
      }
      result.set(brandId, rec)
    }
    return result
  }

  async function interestFor(brandIds: string[]): Promise<StreamInterest | undefined> {
    if (consumers.size === 0) return undefined
    const now = Date.now()
    const missing = [...new Set(brandIds)].filter((id) => {
      const hit = interestCache.get(id)
      return !hit || now - hit.at > INTEREST_TTL_MS
    })
    if (missing.length) {
      const v = version
      const loading = loadInterest(missing)
      for (const id of missing) {
        const entry = { at: now, version: v, value: loading.then((m) => m.get(id) ?? {}) }
        interestCache.set(id, entry)
        // A failed load or one that raced with an invalidation is not kept.
        entry.value.then(
          () => {
            if (version !== v && interestCache.get(id) === entry) interestCache.delete(id)
          },
          () => {
            if (interestCache.get(id) === entry) interestCache.delete(id)
          },
        )
      }
    }
    const out: StreamInterest = {}
    let any = false
    for (const id of new Set(brandIds)) {
      const rec = await (interestCache.get(id) as { value: Promise<Record<string, string | FilteredInterest>> }).value
      for (const _ in rec) {
        out[id] = rec
        any = true
        break
      }
    }
    return any ? out : undefined
  }

  function append(tx: Tx, r: StreamColumns): Promise<unknown> {
    // One statement per group; each row's player is found by key (the group's upsert ran earlier in this
    // transaction). One row per interested consumer.
    return tx`
      insert into event_stream (consumer, tenant_id, brand_id, player_id, external_id, event_id, event_type, source_type,
                                event_time, received_at, fields, payload, part)
      select c.name, t.tenant_id, t.brand_id,
             (select p.id from players p where p.brand_id = t.brand_id and p.external_id = t.external_id),
             t.external_id, t.event_id, t.event_type, t.source_type, to_timestamp(t.event_time / 1000),
             to_timestamp(t.received_at / 1000), t.fields::json, t.payload::json, event_stream_part(t.brand_id, t.external_id)
      from unnest(${r.consumers}::text[], ${r.tenant_id}::uuid[], ${r.brand_id}::uuid[], ${r.external_id}::text[],
                  ${r.event_id}::text[], ${r.event_type}::text[], ${r.source_type}::text[], ${r.event_time}::float8[],
                  ${r.received_at}::float8[], ${r.fields}::text[], ${r.payload}::text[])
        with ordinality as t(consumers, tenant_id, brand_id, external_id, event_id, event_type, source_type, event_time,
                             received_at, fields, payload, n)
      cross join lateral unnest(string_to_array(t.consumers, ',')) as c(name)
      order by t.n`.execute()
  }

  /** One claim loop: the rows of one lane (part % loopCount = lane) of one consumer. */
  interface Lane {
    lane: number
    running: Promise<void> | undefined
    again: boolean
    idleWaiters: (() => void)[]
  }

  interface ConsumerLoop {
    consumer: StreamConsumer
    lanes: Lane[]
  }

  function kick(loop: ConsumerLoop): void {
    for (const lane of loop.lanes) kickLane(loop, lane)
  }

  function kickLane(loop: ConsumerLoop, lane: Lane): void {
    if (stopped) return
    if (lane.running) {
      lane.again = true
      return
    }
    // A store that is down fails the whole round (even the one-by-one fallback): log it and poll again,
    // never let it become an unhandled rejection that ends the process.
    lane.running = drainLane(loop, lane).catch((err: unknown) => {
      log.error({ err, consumer: loop.consumer.name, lane: lane.lane }, 'event stream: round failed, retried at the next poll')
    }).finally(() => {
      lane.running = undefined
      if (lane.again) {
        lane.again = false
        kickLane(loop, lane)
        return
      }
      const waiters = lane.idleWaiters
      lane.idleWaiters = []
      for (const w of waiters) w()
    })
  }

  /** Claims and applies one lane's batches until fewer than a full batch is left. */
  async function drainLane(loop: ConsumerLoop, lane: Lane): Promise<void> {
    const { consumer } = loop
    const limit = consumer.batchSize ?? 200
    for (;;) {
      if (stopped || consumers.get(consumer.name) !== loop) return
      let claimed = 0
      try {
        claimed = await runBatch(consumer, lane.lane, limit)
      } catch (err) {
        log.error({ err, consumer: consumer.name, lane: lane.lane }, 'event stream: batch failed, applying its events one by one')
        claimed = await runOneByOne(consumer, lane.lane, limit)
      }
      if (claimed === LANE_BUSY) {
        // Another process is on this lane: look again soon, in case the rows that woke us came after its claim.
        const retry = setTimeout(() => kickLane(loop, lane), BUSY_RETRY_MS)
        retry.unref()
        return
      }
      if (claimed < limit) return
    }
  }

  /** Rows of this lane only; with one loop, every row (no filter: the claim index alone). */
  const laneFilter = (tx: Tx | Sql, lane: number) => (loopCount > 1 ? tx`and part % ${loopCount}::int = ${lane}::int` : tx``)

  /**
   * Claims and applies one batch of a lane; LANE_BUSY when another process is applying this lane now.
   * One batch of a lane at a time across processes: with SKIP LOCKED alone, two processes' loops of the
   * same lane took consecutive batches at once, so one player's events could be applied out of order (a
   * bet_rollback before its bet found nothing to take back). The lock is the transaction's: it ends with
   * the commit, when the next batch may see everything this one did.
   */
  async function runBatch(consumer: StreamConsumer, lane: number, limit: number, onlyId?: string): Promise<number> {
    let n = 0
    let after: (() => Promise<unknown>) | undefined
    let busy = false
    await sql.begin(async (tx) => {
      const [lock] = await tx<{ ok: boolean }[]>`
        select pg_try_advisory_xact_lock(hashtext(${`event_stream:${consumer.name}`}), ${loopCount * 32768 + lane}::int) as ok`
      if (!lock?.ok) {
        busy = true
        return
      }
      const rows = await claim(tx, consumer.name, lane, limit, onlyId)
      n = rows.length
      if (n) metrics?.queueAttempt(METRICS_NAME, n)
      if (n) after = (await consumer.handle(tx, rows)) ?? undefined
    })
    if (busy) return LANE_BUSY
    const afterCommit = after as (() => Promise<unknown>) | undefined
    if (afterCommit) await afterCommit().catch((err: unknown) => log.warn({ err, consumer: consumer.name }, 'event stream: after-commit step failed'))
    return n
  }

  /** After a failed batch: each event in a transaction of its own; one that fails alone is backed off. */
  async function runOneByOne(consumer: StreamConsumer, lane: number, limit: number): Promise<number> {
    const ids = await sql<{ id: string }[]>`
      select id from event_stream where consumer = ${consumer.name} and failed_at is null and available_at <= now() ${laneFilter(sql, lane)}
      order by id limit ${limit}`
    for (const { id } of ids) {
      if (stopped) break
      try {
        await runBatch(consumer, lane, 1, id)
      } catch (err) {
        metrics?.queueFailure(METRICS_NAME)
        const [row] = await sql<{ attempts: number }[]>`
          update event_stream set attempts = attempts + 1,
            available_at = now() + least(interval '1 second' * power(2, attempts), interval '10 minutes'),
            failed_at = case when attempts + 1 >= ${MAX_ATTEMPTS} then now() end,
            error = ${String((err as Error)?.message ?? err).slice(0, 1000)}
          where id = ${id} returning attempts`
        log.error({ err, consumer: consumer.name, streamId: id, attempts: row?.attempts }, row && row.attempts >= MAX_ATTEMPTS ? 'event stream: event set aside after repeated failures' : 'event stream: event failed, retrying later')
      }
    }
    // Rows that failed now wait for their backoff: report a short batch so the loop returns to polling.
    return 0
  }

  async function claim(tx: Tx, name: string, lane: number, limit: number, onlyId?: string): Promise<StreamEvent[]> {
    const rows = await tx<
      {
        id: string; tenant_id: string; brand_id: string; player_id: string | null; external_id: string; event_id: string | null
        event_type: string; source_type: string; event_time: Date; received_at: Date; fields: Record<string, unknown>
        payload: Record<string, unknown> | null
      }[]
    >`
      delete from event_stream where id in (
        select id from event_stream
        where consumer = ${name} and failed_at is null and available_at <= now() ${laneFilter(tx, lane)}
          ${onlyId ? tx`and id = ${onlyId}` : tx``}
        order by id limit ${limit} for update skip locked)
      returning id, tenant_id, brand_id, player_id, external_id, event_id, event_type, source_type, event_time, received_at, fields, payload`
    rows.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
    return rows.map((r) => ({
      id: r.id, tenantId: r.tenant_id, brandId: r.brand_id, playerId: r.player_id, externalId: r.external_id, eventId: r.event_id,
      type: r.event_type, sourceType: r.source_type, eventTime: r.event_time, receivedAt: r.received_at, fields: r.fields, payload: r.payload,
    }))
  }

  /**
   * The safety poll (rows another process committed, or left by a crashed or busy one): one query per
   * process asks which consumers have due rows, and only those are kicked. Kicking every lane of every
   * consumer each time was a transaction per lane (BEGIN, lock, claim, COMMIT): 16 a second on the
   * servers' defaults with nothing to do, most of an idle process's work.
   */
  let pollTimer: NodeJS.Timeout | undefined
  let polling: Promise<void> | undefined
  function schedulePoll(): void {
    pollTimer = setTimeout(() => {
      polling = pollDue().finally(() => {
        polling = undefined
        if (!stopped) schedulePoll()
      })
    }, pollMs)
    pollTimer.unref()
  }

  async function pollDue(): Promise<void> {
    const names = [...consumers.keys()]
    if (!names.length) return
    try {
      const due = await sql<{ name: string }[]>`
        select c.name from unnest(${names}::text[]) as c(name)
        where exists (select 1 from event_stream s where s.consumer = c.name and s.failed_at is null and s.available_at <= now())`
      for (const { name } of due) {
        const loop = consumers.get(name)
        if (loop) kick(loop)
      }
    } catch (err) {
      log.error({ err }, 'event stream: poll failed, retried at the next poll')
    }
  }

  return {
    register(consumer) {
      if (consumers.has(consumer.name)) throw new Error(`event stream consumer ${consumer.name} registered twice`)
      const lanes = Array.from({ length: loopCount }, (_, lane): Lane => ({ lane, running: undefined, again: false, idleWaiters: [] }))
      const loop: ConsumerLoop = { consumer, lanes }
      consumers.set(consumer.name, loop)
      version++
      interestCache.clear()
      if (!pollTimer && !stopped) schedulePoll()
      kick(loop)
    },
    async unregister(name) {
      const loop = consumers.get(name)
      if (!loop) return
      // Its lanes stop at their next batch (drainLane checks the registration).
      consumers.delete(name)
      version++
      interestCache.clear()
      await Promise.all(loop.lanes.map((l) => l.running))
    },
    interestFor,
    interestChanged: (brandId) => bus.publish('event_stream_interest', brandId),
    append,
    wake(names) {
      if (!names) {
        for (const loop of consumers.values()) kick(loop)
        return
      }
      const wanted = new Set<string>()
      for (const list of new Set(names)) for (const n of list.split(',')) wanted.add(n)
      for (const n of wanted) {
        const loop = consumers.get(n)
        if (loop) kick(loop)
      }
    },
    async idle() {
      // Drain until a pass finds nothing (rows may arrive while a batch runs).
      const waits: Promise<void>[] = []
      for (const loop of consumers.values()) {
        for (const lane of loop.lanes) {
          kickLane(loop, lane)
          waits.push(new Promise<void>((resolve) => lane.idleWaiters.push(resolve)))
        }
      }
      await Promise.all(waits)
    },
    async stop() {
      stopped = true
      clearTimeout(pollTimer)
      await polling
      await Promise.all([...consumers.values()].flatMap((l) => l.lanes.map((lane) => lane.running)))
    },
  }
}

/** The stream's name on /metrics (queue depth, oldest row's age, attempts, failures, consumer lag). */
const METRICS_NAME = 'event_stream'

/**
 * For /metrics: rows not yet consumed (set-aside rows excluded: they are logged and no longer waited
 * for), and the age of the oldest such row since its event was received, i.e. how far the consumers are
 * behind ingestion. One query serves both the queue probe and the lag probe of a scrape.
 */
function streamBacklog(sql: Sql): () => Promise<{ depth: number; oldestAgeSeconds: number }> {
  return async () => {
    const [row] = await sql<{ depth: number; age: number }[]>`
      select count(*)::float8 as depth, coalesce(extract(epoch from now() - min(received_at)), 0)::float8 as age
      from event_stream where failed_at is null`
    return { depth: Number(row?.depth ?? 0), oldestAgeSeconds: Math.max(0, Number(row?.age ?? 0)) }
  }
}

/** Background service (app.ts, started before ingestion): sets ctx.stream. */
export function startEventStream(ctx: AppContext) {
  // Embedded PostgreSQL has one connection: more loops would only queue for it.
  const loops = ctx.config.eventStreamLoops ?? (ctx.pg.kind === 'pglite' ? 1 : DEFAULT_SERVER_LOOPS)
  const stream = createEventStream({ sql: ctx.sql, interestSql: ctx.pg.sql, bus: ctx.bus, log: ctx.log, metrics: ctx.metrics, loops })
  ctx.stream = stream
  const backlog = streamBacklog(ctx.sql)
  // The queue and the lag probes of one scrape run in parallel: share one query between them.
  let pending: Promise<{ depth: number; oldestAgeSeconds: number }> | undefined
  const once = () => {
    pending ??= backlog().finally(() => setImmediate(() => (pending = undefined)))
    return pending
  }
  ctx.metrics?.registerQueue(METRICS_NAME, once)
  ctx.metrics?.registerLag(METRICS_NAME, async () => (await once()).oldestAgeSeconds)
  return {
    async stop() {
      await stream.stop()
      ctx.stream = undefined
    },
  }
}

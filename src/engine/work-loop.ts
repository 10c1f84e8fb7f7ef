// The one lease-based poller over a PostgreSQL table, shared by every engine that works off a queue
// (webhook deliveries, message delivery, campaign steps, GDPR jobs). Rows are claimed with
// `FOR UPDATE SKIP LOCKED` and leased by pushing their due time forward: a row being worked on is simply
// not due, and when its process dies mid-work it becomes due again once the lease runs out, for whichever
// process polls next. Claimed rows go to an actor pool (src/engine/actor-pool.ts), one actor per key.
//
// The handler owns the row's fate: on success it marks the row done (or deletes it); on a retryable failure
// it sets the due time of the next try. A handler that does neither leaves the row to be retried after
// the lease. Handlers should finish well within the lease (e.g. an HTTP timeout plus a margin).
import { randomUUID } from 'node:crypto'
import type { Sql } from '../db/postgres.ts'
import type { Logger } from '../lib/log.ts'
import type { Metrics } from '../lib/metrics.ts'
import { createActorPool, type ActorPool } from './actor-pool.ts'

// --- Ticker: run a step now, again at once while it finds work, else after an idle interval or a wake --------

export interface Ticker {
  /** Run the step as soon as possible (e.g. on a NOTIFY or after a local insert). */
  wake(): void
  /** Stop after the step that is running, if any. */
  stop(): Promise<void>
}

export interface TickerOptions {
  name: string
  log: Logger
  /** Does one round of work; returns true when there may be more right away. */
  step(): Promise<boolean>
  /** Poll interval when a step found nothing (default 1000 ms). A wake cuts it short. */
  idleIntervalMs?: number
  /** Pause after a failed step (default 1000 ms), so a dead database is not hammered. */
  errorBackoffMs?: number
  /**
   * Woken again while a step ran (more work is arriving as it goes), wait this long before the next
   * step, so a stream of small wakes becomes fewer, larger steps (default 0: at once). A wake while the
   * loop sleeps idle still runs a step at once, so the first item of a burst waits for nothing.
   */
  coalesceMs?: number
}

export function startTicker(opts: TickerOptions): Ticker {
  const idleMs = opts.idleIntervalMs ?? 1000
  const errorMs = opts.errorBackoffMs ?? 1000
  const coalesceMs = opts.coalesceMs ?? 0
  let stopped = false
  let woken = false
  let sleeping: { timer: NodeJS.Timeout; resolve: () => void } | undefined
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      sleeping = { timer: setTimeout(resolve, ms), resolve }
    }).finally(() => (sleeping = undefined))

  const loop = (async () => {
    while (!stopped) {
      woken = false
      let more = false
      let failed = false
      try {
        more = await opts.step()
      } catch (err) {
        failed = true
        opts.log.error({ err, loop: opts.name }, 'work loop step failed')
      }
      if (stopped) break
      if (failed) await sleep(errorMs)
      else if (!more && !woken) await sleep(idleMs)
      else if (!more && coalesceMs > 0) await new Promise((r) => setTimeout(r, coalesceMs))
    }
  })()

  return {
    wake() {
      woken = true
      if (sleeping) {
        clearTimeout(sleeping.timer)
        sleeping.resolve()
      }
    },
    async stop() {
      stopped = true
      if (sleeping) {
        clearTimeout(sleeping.timer)
        sleeping.resolve()
      }
      await loop
    },
  }
}

// --- Claiming due rows of a queue table -----------------------------------------------------------------

/** Where a queue lives. Columns are identifiers of the table; `where` narrows to the claimable rows. */
export interface QueueTable {
  table: string
  /** Primary key column (default `id`). */
  idColumn?: string
  /** The actor key: rows of one key run in their own mailbox (e.g. `endpoint_id`). */
  keyColumn: string
  /** timestamptz: the row is claimable once this has passed; a claim pushes it to the lease's end. */
  dueColumn: string
  /** text: the claiming process's id, so a handler can tell its lease still holds. */
  ownerColumn: string
  /** Extra condition on claimable rows, e.g. sql`status = 'pending'` (it should match a partial index on dueColumn). */
  where?: (sql: Sql) => ReturnType<Sql>
}

/**
 * Claims up to `limit` due rows, oldest due first, skipping rows locked by another claimer and rows of
 * `excludeKeys`, and leases them to `owner` for leaseMs. One statement: claimed rows are committed as
 * leased before any work starts.
 */
export async function claimDue<Row>(
  sql: Sql,
  q: QueueTable,
  opts: { limit: number; leaseMs: number; owner: string; excludeKeys?: string[] },
): Promise<Row[]> {
  const id = sql(q.idColumn ?? 'id')
  const table = sql(q.table)
  const due = sql(q.dueColumn)
  const key = sql(q.keyColumn)
  const extra = q.where ? sql`and ${q.where(sql)}` : sql``
  const exclude = opts.excludeKeys?.length ? sql`and ${key}::text <> all(${opts.excludeKeys}::text[])` : sql``
  return (await sql`
    update ${table} as q
    set ${due} = now() + ${opts.leaseMs} * interval '1 millisecond', ${sql(q.ownerColumn)} = ${opts.owner}
    where q.${id} in (
      select ${id} from ${table}
      where ${due} <= now() ${extra} ${exclude}
      order by ${due}
      limit ${opts.limit}
      for update skip locked)
    returning q.*`) as unknown as Row[]
}

/**
 * Claims, for each of `keys`, up to its `caps` entry of its due rows, oldest due first, skipping locked
 * rows, leased as claimDue does: for keys left out of claimDue's general claim because their limits fell
 * (WorkLoop.failed), so a few of their rows keep being tried without their backlog filling the claim.
 */
export async function claimDuePerKey<Row>(
  sql: Sql,
  q: QueueTable,
  opts: { keys: string[]; caps: number[]; leaseMs: number; owner: string },
): Promise<Row[]> {
  if (!opts.keys.length) return []
  const id = sql(q.idColumn ?? 'id')
  const table = sql(q.table)
  const due = sql(q.dueColumn)
  const extra = q.where ? sql`and ${q.where(sql)}` : sql``
  return (await sql`
    update ${table} as q
    set ${due} = now() + ${opts.leaseMs} * interval '1 millisecond', ${sql(q.ownerColumn)} = ${opts.owner}
    where q.${id} in (
      select c.${id} from unnest(${opts.keys}::text[], ${opts.caps}::int[]) as k(key, cap)
      cross join lateral (
        select ${id} from ${table}
        where ${sql(q.keyColumn)}::text = k.key and ${due} <= now() ${extra}
        order by ${due}
        limit k.cap
        for update skip locked) as c)
    returning q.*`) as unknown as Row[]
}

// --- The work loop: ticker + claim + actor pool --------------------------------------------------------

export interface WorkLoopOptions<Row> {
  name: string
  sql: Sql
  log: Logger
  queue: QueueTable
  /** The row's actor key (the value of queue.keyColumn, as text). */
  keyOf(row: Row): string
  /** Works one row and records its outcome (see the header comment). */
  handle(row: Row, lease: Lease): Promise<void>
  /**
   * How long a claimed row stays invisible to other claimers. The loop renews the lease of every row
   * whose handler is running (see keepLeases), so a handler may take longer; after a crash the row is
   * claimed again this long after its last renewal.
   */
  leaseMs: number
  perKeyConcurrency?: number | ((key: string) => number)
  globalConcurrency?: number
  /**
   * Rows of one key held in memory (running + waiting) before that key is left out of claims (default 4 ×
   * per-key). A function is asked at each claim (a failing webhook endpoint holds fewer).
   */
  maxPerKey?: number | ((key: string) => number)
  /** Rows held in memory over all keys (default 2 × global concurrency). */
  maxInMemory?: number
  /**
   * Rows a failing key may hold in memory (running + waiting). Set, the handler reports each call's
   * result (`failed` / `succeeded`), and a key whose last call in this process failed gets one call at
   * a time and this many rows until a call succeeds. Remote ends hanging until their timeout would
   * otherwise each take their key's full share of the loop's slots and memory, and a few of them all of
   * it, stalling every other tenant's work for as long as they hang.
   */
  failingHeld?: number
  /**
   * A failing key's waits: before its due rows are looked for again after a claim found none (doubled
   * each time up to idleMaxMs), and how long it is remembered with nothing due and nothing in memory
   * (defaults 2 s, 30 s, 2 h; tests shorten them).
   */
  failingTimes?: { idleMs: number; idleMaxMs: number; forgetMs: number }
  idleIntervalMs?: number
  /**
   * ctx.metrics: the loop then reports its queue under its name (depth and oldest due item's age, read
   * from the table at each scrape; attempts; handler failures). Handlers that record a failed attempt
   * without throwing add `metrics.queueFailure(name)` themselves.
   */
  metrics?: Metrics
}

/** Depth (claimable rows, due or not) and the age of the oldest due row of a queue table, for /metrics. */
export async function queueDepth(sql: Sql, q: QueueTable): Promise<{ depth: number; oldestAgeSeconds: number }> {
  const due = sql(q.dueColumn)
  const extra = q.where ? sql`where ${q.where(sql)}` : sql``
  const [row] = await sql<{ depth: number; age: number }[]>`
    select count(*)::float8 as depth,
           coalesce(extract(epoch from now() - min(${due}) filter (where ${due} <= now())), 0)::float8 as age
    from ${sql(q.table)} ${extra}`
  return { depth: Number(row?.depth ?? 0), oldestAgeSeconds: Math.max(0, Number(row?.age ?? 0)) }
}

export interface Lease {
  /** The claim's token, written in queue.ownerColumn: this process's id and the claim's number, so even
   *  this process re-claiming the row after its lease ran out is told apart from the older claim. */
  owner: string
  /** When the row was claimed (process clock). */
  claimedAt: number
  /** Lease length in ms. */
  leaseMs: number
}

export interface WorkLoop<Row> {
  /** This process's id; claim tokens start with it. */
  owner: string
  pool: ActorPool<Row>
  /**
   * For a producer that inserts rows already leased to this process (owner column = the token, due =
   * now + leaseMs), saving the claim: `take(key)` says whether one more row of that key fits in memory
   * now (the same bounds as a claim). Take the reservation before the inserting transaction starts, so
   * its `at` is no later than the lease's start; after the commit, hand the rows to `adopt`. A
   * reservation that is not adopted (the transaction failed) holds nothing.
   */
  reserve(): Reservation
  /** Runs rows inserted under a reservation's token as if this loop had claimed them. */
  adopt(rows: Row[], reservation: Reservation): void
  /**
   * Calls `fn` once, when the next row this loop holds is done: for a producer that held back for want
   * of room (a reservation's `room`). The same function registered twice is called once.
   */
  whenRoom(fn: () => void): void
  /**
   * The key's call failed (with `failingHeld` set): from now on one call at a time, and the rows it holds
   * in memory beyond `failingHeld` go back to the table for other keys to use. Until a call succeeds, the
   * key is left out of the general claim (whose oldest-first rows would be its backlog again at once) and
   * claimed apart, a few rows at a time (claimDuePerKey).
   */
  failed(key: string): void
  /** The key's call succeeded: its normal limits again. */
  succeeded(key: string): void
  wake(): void
  stop(): Promise<void>
}

export interface Reservation {
  token: string
  at: number
  take(key: string): boolean
  /** Rows it may still take (the loop's free room when reserved, less what was taken). */
  readonly room: number
}

/**
 * A claim that left saturated keys out and found nothing read past every due row of those keys (the due
 * index cannot skip a key): under one key's backlog that is a scan of the backlog per claim, ~1 ms per
 * 10,000 rows, and producers wake the loop on every insert. So for this long after such a claim, wakes
 * from outside are gathered into one; a slot freed in this process still claims at once.
 */
const STARVED_WAKE_MS = 50

/**
 * How long a failing key whose claim found nothing due waits before it is looked for again: doubled at
 * each empty claim up to the cap. The claim walks the due rows looking for its key (the due index has
 * no key), so keys with nothing due (retries later, a deleted endpoint) must not walk them every step.
 */
const FAILING_IDLE_MS = 2000
const FAILING_IDLE_MAX_MS = 30_000
/**
 * A failing key with nothing due and nothing in memory for this long is forgotten (normal limits): a
 * deleted endpoint or brand is not remembered forever. Longer than the longest default retry delay (1 h),
 * so a dead endpoint stays failing across its retries.
 */
const FAILING_FORGET_MS = 2 * 3600_000

export function startWorkLoop<Row>(opts: WorkLoopOptions<Row>): WorkLoop<Row> {
  const owner = `${process.pid}-${randomUUID()}`
  const global = Math.max(1, opts.globalConcurrency ?? 64)
  const perKeyDefault = typeof opts.perKeyConcurrency === 'number' ? opts.perKeyConcurrency : 1
  const perKeyOpt = opts.perKeyConcurrency ?? 1
  const maxPerKeyOpt = opts.maxPerKey ?? 4 * Math.max(1, perKeyDefault)
  const failingHeld = Math.max(1, opts.failingHeld ?? 1)
  const failingTimes = opts.failingTimes ?? { idleMs: FAILING_IDLE_MS, idleMaxMs: FAILING_IDLE_MAX_MS, forgetMs: FAILING_FORGET_MS }
  // Keys whose last call failed (see `failed`), left out of the general claim and claimed apart, a few
  // rows each: when to look for their due rows next, how long that wait was, since when none were found.
  const failing = new Map<string, { idleUntil: number; idleMs: number; quietSince: number }>()
  const perKeyConcurrency = (key: string) => (failing.has(key) ? 1 : typeof perKeyOpt === 'function' ? perKeyOpt(key) : perKeyOpt)
  const maxPerKey = (key: string) => (failing.has(key) ? failingHeld : typeof maxPerKeyOpt === 'function' ? maxPerKeyOpt(key) : maxPerKeyOpt)
  const maxInMemory = opts.maxInMemory ?? 2 * global
  const claims = new WeakMap<object, { token: string; at: number }>()
  let claimNumber = 0
  const keysHeld = new Map<string, number>()
  // Set when a step found the pool full, so the first slot that frees up triggers the next claim.
  let full = false
  // When the last claim left keys out and found nothing (see STARVED_WAKE_MS), and a wake put off since.
  let starvedAt = 0
  let deferredWake: NodeJS.Timeout | undefined
  const roomWaiters = new Set<() => void>()
  let ticker: Ticker | undefined
  const metrics = opts.metrics
  const idColumn = opts.queue.idColumn ?? 'id'
  // The rows whose handlers are running, by id, with their leases: renewed together by keepLeases.
  const running = new Map<string, Lease>()
  const keeper = setInterval(() => {
    keepLeases(opts.sql, opts.queue, running).catch((err: unknown) => opts.log.warn({ err, loop: opts.name }, 'work loop: renewing the running rows\' leases failed; trying again'))
  }, opts.leaseMs / 4)
  keeper.unref()
  metrics?.registerQueue(opts.name, () => queueDepth(opts.sql, opts.queue))

  const pool = createActorPool<Row>({
    perKeyConcurrency,
    globalConcurrency: global,
    async handle(key, row) {
      try {
        const claim = claims.get(row as object) ?? { token: owner, at: Date.now() }
        metrics?.queueAttempt(opts.name)
        const lease = { owner: claim.token, claimedAt: claim.at, leaseMs: opts.leaseMs }
        const id = String((row as Record<string, unknown>)[idColumn])
        running.set(id, lease)
        try {
          await opts.handle(row, lease).catch((err: unknown) => {
            metrics?.queueFailure(opts.name)
            throw err
          })
        } finally {
          running.delete(id)
        }
      } finally {
        const n = (keysHeld.get(key) ?? 1) - 1
        if (n <= 0) keysHeld.delete(key)
        else keysHeld.set(key, n)
        if (roomWaiters.size) {
          const waiters = [...roomWaiters]
          roomWaiters.clear()
          for (const fn of waiters) fn()
        }
        // The key was left out of claims for being full and now has room again: claim at once.
        const max = maxPerKey(key)
        if (full || (n < max && n + 1 >= max)) {
          full = false
          starvedAt = 0
          ticker?.wake()
        }
      }
    },
    // (`actor`, not `key`: the logger redacts fields named key.)
    onError: (err, actor) => opts.log.error({ err, loop: opts.name, actor }, 'work item failed; retried after its lease'),
  })

  ticker = startTicker({
    name: opts.name,
    log: opts.log,
    idleIntervalMs: opts.idleIntervalMs,
    async step() {
      const room = maxInMemory - pool.size
      if (room <= 0) {
        full = true
        return false
      }
      const saturated: string[] = []
      for (const [key, n] of keysHeld) if (n >= maxPerKey(key) && !failing.has(key)) saturated.push(key)
      const limited: string[] = []
      const caps: number[] = []
      let capped = 0
      const before = Date.now()
      for (const [key, f] of failing) {
        const n = keysHeld.get(key) ?? 0
        if (!n && f.quietSince && before - f.quietSince >= failingTimes.forgetMs) {
          failing.delete(key)
          continue
        }
        saturated.push(key)
        const cap = Math.min(failingHeld - n, room - capped)
        if (cap > 0 && f.idleUntil <= before) {
          limited.push(key)
          caps.push(cap)
          capped += cap
        }
      }
      const token = `${owner}:${++claimNumber}`
      // The failing keys' few rows first, out of the room: a general claim that fills it (other keys'
      // backlogs) would otherwise leave them out for as long as the backlogs last, and a failing key
      // leaves that state only by a call that succeeds.
      const rows = await claimDuePerKey<Row>(opts.sql, opts.queue, { keys: limited, caps, leaseMs: opts.leaseMs, owner: token })
      const found = new Set(rows.map((row) => opts.keyOf(row)))
      for (const key of limited) {
        const f = failing.get(key)
        if (!f) continue
        if (found.has(key)) {
          f.idleMs = f.idleUntil = f.quietSince = 0
        } else {
          f.idleMs = Math.min(failingTimes.idleMaxMs, Math.max(failingTimes.idleMs, 2 * f.idleMs))
          f.idleUntil = Date.now() + f.idleMs
          f.quietSince ||= before
        }
      }
      const rest = room - rows.length
      const general = rest > 0 ? await claimDue<Row>(opts.sql, opts.queue, { limit: rest, leaseMs: opts.leaseMs, owner: token, excludeKeys: saturated }) : []
      const claimedAll = general.length === rest
      rows.push(...general)
      const now = Date.now()
      starvedAt = saturated.length && !rows.length ? now : 0
      for (const row of rows) {
        const key = opts.keyOf(row)
        claims.set(row as object, { token, at: now })
        keysHeld.set(key, (keysHeld.get(key) ?? 0) + 1)
        pool.submit(key, row)
      }
      return claimedAll
    },
  })
  const started = ticker

  /** Rows taken out of the mailboxes go back to the table, due at once, for any claim (else after their lease). */
  async function handBack(dropped: Row[]): Promise<void> {
    if (!dropped.length) return
    const q = opts.queue
    const tokens = dropped.map((row) => claims.get(row as object)?.token ?? '')
    const ids = dropped.map((row) => String((row as Record<string, unknown>)[idColumn]))
    // Leased rows are due in the future: the due column's index narrows the scan to them.
    await opts.sql`
      update ${opts.sql(q.table)} as q set ${opts.sql(q.dueColumn)} = now(), ${opts.sql(q.ownerColumn)} = null
      from unnest(${ids}::text[], ${tokens}::text[]) as r(id, token)
      where q.${opts.sql(q.dueColumn)} > now() and q.${opts.sql(idColumn)}::text = r.id and q.${opts.sql(q.ownerColumn)} = r.token`.catch((err: unknown) =>
      opts.log.warn({ err, loop: opts.name }, 'work loop: queued rows not handed back; they are retried after their lease'),
    )
  }

  return {
    owner,
    pool,
    reserve() {
      let room = maxInMemory - pool.size
      const taken = new Map<string, number>()
      return {
        token: `${owner}:${++claimNumber}`,
        at: Date.now(),
        take(key) {
          const n = (keysHeld.get(key) ?? 0) + (taken.get(key) ?? 0)
          if (room <= 0 || n >= maxPerKey(key)) return false
          room--
          taken.set(key, (taken.get(key) ?? 0) + 1)
          return true
        },
        get room() {
          return room
        },
      }
    },
    adopt(rows, reservation) {
      for (const row of rows) {
        const key = opts.keyOf(row)
        claims.set(row as object, { token: reservation.token, at: reservation.at })
        keysHeld.set(key, (keysHeld.get(key) ?? 0) + 1)
        pool.submit(key, row)
      }
    },
    whenRoom(fn) {
      roomWaiters.add(fn)
    },
    failed(key) {
      if (failing.has(key)) return
      failing.set(key, { idleUntil: 0, idleMs: 0, quietSince: 0 })
      // What it holds beyond its new limit goes back to the table, for other keys to use.
      const dropped = pool.shed(key, failingHeld)
      if (!dropped.length) return
      const n = (keysHeld.get(key) ?? dropped.length) - dropped.length
      if (n <= 0) keysHeld.delete(key)
      else keysHeld.set(key, n)
      void handBack(dropped).then(() => started.wake())
    },
    succeeded(key) {
      failing.delete(key)
    },
    wake() {
      const wait = starvedAt + STARVED_WAKE_MS - Date.now()
      if (wait <= 0) return started.wake()
      deferredWake ??= setTimeout(() => {
        deferredWake = undefined
        started.wake()
      }, wait)
    },
    async stop() {
      clearTimeout(deferredWake)
      clearInterval(keeper)
      roomWaiters.clear()
      await started.stop()
      // Rows still waiting in mailboxes are handed back (due at once, for the next process to claim);
      // if that fails they are retried after their lease anyway.
      await handBack(await pool.stop())
    },
  }
}

/**
 * Extends a lease that may be near its end, right before an irreversible side effect (sending). Returns
 * false when the row is no longer ours (the lease ran out and another process claimed it): skip the work.
 * Cheap when the claim is fresh: no query while more than `needMs` (default half the lease) is left.
 */
export async function confirmLease(sql: Sql, q: QueueTable, id: unknown, lease: Lease, needMs = lease.leaseMs / 2): Promise<boolean> {
  if (lease.leaseMs - (Date.now() - lease.claimedAt) >= needMs) return true
  const extendMs = Math.max(lease.leaseMs, needMs)
  const rows = await sql`
    update ${sql(q.table)} set ${sql(q.dueColumn)} = now() + ${extendMs} * interval '1 millisecond'
    where ${sql(q.idColumn ?? 'id')} = ${id as string} and ${sql(q.ownerColumn)} = ${lease.owner}
    returning 1`
  if (rows.length) {
    lease.claimedAt = Date.now()
    lease.leaseMs = extendMs
  }
  return rows.length > 0
}

/**
 * Renews, in one statement, the leases of running rows with less than half their lease left. A handler
 * that outlives its lease (an email behind a slow SMTP pool's few connections, a webhook attempt near
 * its timeout, a campaign run waiting on a lock) would otherwise let another claim work the same row
 * again while it is still going, and send twice. A renewal finds nothing for a row settled meanwhile
 * (its owner cleared): harmless. If this process dies, the renewals stop and the row is claimed again
 * after its lease, as before.
 */
export async function keepLeases(sql: Sql, q: QueueTable, running: Map<string, Lease>): Promise<void> {
  const now = Date.now()
  const due = [...running].filter(([, l]) => l.leaseMs - (now - l.claimedAt) < l.leaseMs / 2)
  if (!due.length) return
  const renewed = await sql<{ id: string }[]>`
    update ${sql(q.table)} as q set ${sql(q.dueColumn)} = now() + r.ms * interval '1 millisecond'
    from unnest(${due.map(([id]) => id)}::text[], ${due.map(([, l]) => l.owner)}::text[], ${due.map(([, l]) => l.leaseMs)}::int[]) as r(id, owner, ms)
    where q.${sql(q.idColumn ?? 'id')}::text = r.id and q.${sql(q.ownerColumn)} = r.owner
    returning q.${sql(q.idColumn ?? 'id')}::text as id`
  for (const { id } of renewed) {
    const lease = running.get(id)
    if (lease) lease.claimedAt = now
  }
}

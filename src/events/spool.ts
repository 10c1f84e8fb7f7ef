// The event spool (docs/ingestion.md, "Durability"). Every ingest group's RowBinary rows are committed
// to PostgreSQL in the same transaction as its players and profiles, so events and profile deltas are
// durable together: a crash leaves both or neither. From there:
//
// - INGEST_ACK_AFTER=clickhouse: the row is claimed in that transaction under a batch of its own, and
//   the pipeline inserts it (insertNow) before answering. The flusher only redoes what a failure or a
//   crash left behind.
// - INGEST_ACK_AFTER=postgres: the answer goes out after the commit, and the flusher moves the rows to
//   ClickHouse every intervalMs in large inserts. chDB pays ~6 ms of CPU per insert plus about as much
//   again merging the part later, whatever the insert's size, so this mode carries small-group traffic
//   far better than an insert per group.
//
// Exactly once: a flush first claims a set of spool rows under a new batch number (committed), inserts
// them with insert_deduplication_token = the batch, then deletes them. A flush interrupted anywhere is
// redone with the same batch and token, and ClickHouse drops the repeated insert.
//
// A batch ClickHouse refuses as malformed data (deterministic: no retry helps, and nothing of it was
// stored) is split into its groups, each inserted under a batch of its own; a group refused on its own is
// set aside (quarantined_at, sql/0018) so that every flush after it still moves the rest.
//
// Export order: right before a row's events go to ClickHouse they get their `seq` from a counter per
// ClickHouse (export_seq, sql/0060), kept in the row (seq_base) until the insert returned and the row is
// deleted. exportWatermark() turns that into the bound below which no event can still appear
// (docs/analytics.md, "Insertion order").
import { randomUUID } from 'node:crypto'
import { promisify } from 'node:util'
import { inflateRaw as inflateRawCb } from 'node:zlib'
import type { ReservedSql, TransactionSql } from 'postgres'
import { type ClickHouse, isDataRefusal } from '../db/clickhouse.ts'
import type { Sql } from '../db/postgres.ts'
import type { Logger } from '../lib/log.ts'
import { EVENT_COLUMNS, EVENT_LAYOUT, eventColumns, setSeqs } from './event-rows.ts'

/** How a spool row's bytes hold its events: RowBinary, or RowBinary raw-deflated (sql/0017). */
export type SpoolEncoding = 'rowbinary' | 'rowbinary-deflate'

export interface Spool {
  /**
   * Inside the group's transaction: its events, committed (or not) with its players and profiles. With
   * `claim` (INGEST_ACK_AFTER=clickhouse) the row is claimed at once under a batch of its own, returned,
   * for insertNow; the flusher leaves it alone for ABANDONED_AFTER_SEC.
   */
  append(tx: TransactionSql | ReservedSql, rows: Uint8Array, rowCount: number, encoding?: SpoolEncoding, claim?: boolean): Promise<string | undefined>
  /**
   * After the commit, INGEST_ACK_AFTER=clickhouse: inserts a claimed row's events (`rows`: RowBinary, as
   * appended before any deflate) under the batch's token, so that a redo by a flusher after a crash or
   * a failure stores nothing twice. The row is deleted afterwards, in the background.
   */
  insertNow(batch: string, rows: Uint8Array, rowCount: number): Promise<void>
  /**
   * Moves spooled events into ClickHouse: all of them, or only those other processes committed (what a
   * dedupe verification cannot otherwise see), including batches another flusher claimed and may never
   * finish. Resolves once they are in; rejects if ClickHouse fails.
   */
  flush(scope?: 'all' | 'others'): Promise<void>
  /**
   * Runs `fn` with event inserts into this ClickHouse held: none in flight, none starting until `fn` ends.
   * `fn` gets the export counter: ClickHouse then holds exactly the events below it, and every event
   * inserted later gets a seq at or above it (an erasure's rollup rebuild, src/players/data-rights.ts).
   * This process's inserts wait in memory; on a ClickHouse server, other processes' wait on the counter's
   * row, locked. Holds run one at a time; one that cannot settle in HOLD_WAIT_MS throws (retried later).
   */
  hold<T>(fn: (below: number) => Promise<T>): Promise<T>
  /** Events spooled and not yet in ClickHouse, as of the last flush cycle plus what was appended since. */
  backlog(): number
  /** Events set aside because ClickHouse refuses them as malformed (as of the last flush cycle). */
  quarantined(): number
  /** The backlog is at its limit: new requests should be refused until the flusher catches up. */
  full(): boolean
  /** Flushes every intervalMs until stop(). */
  start(): void
  /** Stops the timer and flushes what is left (logs if ClickHouse is unreachable: the rows stay spooled). */
  stop(): Promise<void>
}

const inflateRaw = promisify(inflateRawCb)

/** Spool rows (ingest groups) per ClickHouse insert: ~30k–100k events at typical group sizes. */
const GROUPS_PER_FLUSH = 100
/**
 * The periodic flush redoes a claimed batch still in the spool after this long: its flusher died. Sooner
 * it may be a live process's flush in progress (redoing it is harmless, its token drops the repeat, but
 * doubles the work). Flushes that something relies on (startup, dedupe verification, stop) redo every
 * claimed batch at once: a process killed mid-flush and restarted within these seconds would otherwise
 * verify retries of acknowledged events against a ClickHouse that lacks them, and store them twice.
 */
const ABANDONED_AFTER_SEC = 10
/** How long a hold waits for other processes' numbered inserts to return before it gives up. */
const HOLD_WAIT_MS = 30_000
/** How often a flusher that moved rows vacuums the spool (see vacuum() below). */
const SPOOL_VACUUM_EVERY_MS = 5_000

export function createSpool(deps: { sql: Sql; ch: ClickHouse; log: Logger; intervalMs: number; maxBacklog: number; vacuumEveryMs?: number }): Spool {
  const { sql, ch, log } = deps
  const vacuumEveryMs = deps.vacuumEveryMs ?? SPOOL_VACUUM_EVERY_MS
  const sink = ch.sinkId
  const writer = randomUUID()
  let backlogEvents = 0
  let quarantinedEvents = 0
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  /** Spool rows this process deleted since its last vacuum, and when that was (see vacuum()). */
  let movedSinceVacuum = 0
  let lastVacuum = Date.now()

  // The export counter starts above every seq already in this ClickHouse (events stored before it existed).
  let counterReady: Promise<void> | undefined
  function ensureCounter(): Promise<void> {
    counterReady ??= (async () => {
      const [row] = await ch.query<{ next: string }>('SELECT toString(max(seq) + 1) AS next FROM events')
      await sql`insert into export_seq (sink, next) values (${sink}, ${Math.max(1, Number(row?.next ?? 1))}) on conflict (sink) do nothing`
    })()
    counterReady.catch(() => (counterReady = undefined))
    return counterReady
  }

  // This process's inserts in flight (flush batches, insertNow) and the hold they wait for (hold()).
  let inserting = 0
  let holding: Promise<unknown> | undefined
  const idleWaiters: (() => void)[] = []
  /** Before an insert takes its seqs: waits out a hold, then counts the insert in flight until `done`. */
  async function startInsert(): Promise<() => void> {
    while (holding) await holding.catch(() => {})
    inserting++
    return () => {
      if (--inserting === 0) for (const wake of idleWaiters.splice(0)) wake()
    }
  }

  /**
   * Gives the batch's rows that have none their seq numbers: consecutive, in spool order, from the sink's
   * counter, committed before the insert (a redo reuses them, so its token-dropped repeat changes nothing).
   */
  async function assignSeqs(batch: string): Promise<void> {
    await ensureCounter()
    await sql`
      with todo as (
        select id, row_count from event_spool
        where batch = ${batch} and seq_base is null and quarantined_at is null
        order by id for update
      ),
      total as (select coalesce(sum(row_count), 0)::bigint as n from todo),
      counter as (
        update export_seq set next = next + (select n from total)
        where sink = ${sink} and (select n from total) > 0
        returning next - (select n from total) as base
      ),
      offsets as (select id, sum(row_count) over (order by id) - row_count as before from todo)
      update event_spool s set seq_base = counter.base + offsets.before
      from counter, offsets where s.id = offsets.id`
  }

  async function insertBatch(batch: string): Promise<number> {
    const done = await startInsert()
    try {
      return await insertBatchNow(batch)
    } finally {
      done()
    }
  }

  async function insertBatchNow(batch: string): Promise<number> {
    await assignSeqs(batch)
    const parts = await sql<{ rows: Buffer; row_count: number; encoding: SpoolEncoding; seq_base: string; layout: number }[]>`
      select rows, row_count, encoding, seq_base, layout from event_spool where batch = ${batch} order by id`
    if (!parts.length) return 0
    // One column list per insert. Rows of another layout (spooled by an earlier version, see EVENT_LAYOUT)
    // get a batch of their own before anything is inserted, so that a refusal of either never makes the
    // split below redo rows already inserted under this batch's token. Only while an upgrade drains.
    const layout = (parts[0] as { layout: number }).layout
    let rest: string | undefined
    if (parts.some((p) => p.layout !== layout)) {
      const [moved] = await sql<{ batch: string }[]>`
        with b as (select nextval('event_spool_batch_seq') as batch)
        update event_spool s set batch = b.batch, claimed_at = now() from b
        where s.batch = ${batch} and s.layout <> ${layout} returning b.batch`
      rest = moved?.batch
    }
    const mine = parts.filter((p) => p.layout === layout)
    // Inflated on libuv's thread pool, off the main thread.
    const rows = await Promise.all(mine.map((p) => (p.encoding === 'rowbinary-deflate' ? inflateRaw(p.rows) : p.rows)))
    const columns = eventColumns(layout)
    rows.forEach((r, i) => setSeqs(r, Number((mine[i] as { seq_base: string }).seq_base), columns))
    const payload = rows.length === 1 ? (rows[0] as Buffer) : Buffer.concat(rows)
    await ch.insertRowBinary('events', columns, payload, { dedupeToken: `respin-spool-${batch}` })
    await sql`delete from event_spool where batch = ${batch}`
    movedSinceVacuum += mine.length
    const inserted = mine.reduce((a, p) => a + p.row_count, 0)
    return rest ? inserted + (await moveBatch(rest)) : inserted
  }

  // Every flushed group leaves a dead row and about its size in dead TOAST chunks (the whole spool turns
  // over every second). Autovacuum looks at a table once a minute at best, and may be off: with it off,
  // an afternoon of bench runs left 687 MB behind an empty spool. So the flusher vacuums the spool itself
  // every few seconds: skip_locked, so that concurrent flushers do not queue up, and without truncation,
  // which would take an exclusive lock that stalls appends (freed space is reused instead; VACUUM FULL
  // returns it after a large backlog).
  let vacuuming = false
  async function vacuum(): Promise<void> {
    if (vacuuming || movedSinceVacuum === 0 || Date.now() - lastVacuum < vacuumEveryMs) return
    vacuuming = true
    movedSinceVacuum = 0
    lastVacuum = Date.now()
    // The commit markers of ingest groups (sql/0110) are looked at only while a group is being retried.
    await sql`delete from ingest_commits where committed_at < now() - interval '10 minutes'`
      .catch((err: unknown) => log.warn({ err }, 'ingest spool: pruning commit markers failed'))
    await sql`vacuum (skip_locked, truncate false) event_spool`
      .catch((err: unknown) => log.warn({ err }, 'ingest spool: vacuum failed'))
      .finally(() => (vacuuming = false))
  }

  /**
   * insertBatch, and if ClickHouse refuses the data: a batch of several groups is split into one batch per
   * group (safe: a refused insert stored nothing, so no token of it needs honouring), each moved on its
   * own, and a group refused on its own is set aside. Any other failure is thrown: the flush stops there.
   */
  async function moveBatch(batch: string): Promise<number> {
    try {
      return await insertBatch(batch)
    } catch (err) {
      if (!isDataRefusal(err)) throw err
      const groups = await sql<{ batch: string }[]>`
        update event_spool set batch = nextval('event_spool_batch_seq'), claimed_at = now()
        where batch = ${batch} and (select count(*) from event_spool where batch = ${batch}) > 1
        returning batch`
      if (!groups.length) {
        const [row] = await sql<{ n: number }[]>`
          update event_spool set quarantined_at = now(), error = ${(err as Error).message.slice(0, 2000)}, seq_base = null
          where batch = ${batch} returning row_count as n`
        // No row: another process's flush split or set it aside meanwhile.
        if (row) log.error({ err, batch, events: row.n }, 'ingest spool: ClickHouse refuses this group of events as malformed; set aside in event_spool (quarantined_at), later flushes go on without it')
        return 0
      }
      log.warn({ err, batch, groups: groups.length }, 'ingest spool: ClickHouse refused a flush batch as malformed; moving its groups one by one')
      let moved = 0
      for (const g of groups) moved += await moveBatch(g.batch)
      return moved
    }
  }

  /** `periodic`: batches claimed by others are redone only once they look abandoned. */
  async function flushOnce(scope: 'all' | 'others', periodic: boolean): Promise<void> {
    // Claimed batches first: their rows are older than anything unclaimed. None of them is a flush of this
    // process in progress (flushes run one at a time): they are other processes', ours that failed, or an
    // insertNow in progress (INGEST_ACK_AFTER=clickhouse; redoing it is harmless, the token drops one).
    const claimed = await sql<{ batch: string }[]>`
      select distinct batch from event_spool
      where sink = ${sink} and batch is not null and quarantined_at is null
        ${scope === 'others' ? sql`and writer <> ${writer}` : sql``}
        ${periodic ? sql`and claimed_at < now() - make_interval(secs => ${ABANDONED_AFTER_SEC})` : sql``}
      order by batch`
    for (const { batch } of claimed) {
      const n = await moveBatch(batch)
      if (n) log.warn({ batch, events: n }, 'ingest spool: redid a flush batch left by an interrupted flush')
    }
    for (;;) {
      const picked = await sql<{ batch: string }[]>`
        with b as (select nextval('event_spool_batch_seq') as batch),
        picked as (
          select id from event_spool
          where sink = ${sink} and batch is null ${scope === 'others' ? sql`and writer <> ${writer}` : sql``}
          order by id limit ${GROUPS_PER_FLUSH}
          for update skip locked
        )
        update event_spool s set batch = b.batch, claimed_at = now()
        from b, picked where s.id = picked.id
        returning b.batch`
      if (!picked.length) break
      await moveBatch((picked[0] as { batch: string }).batch)
      if (picked.length < GROUPS_PER_FLUSH) break
    }
    const [left] = await sql<{ n: string; q: string }[]>`
      select coalesce(sum(row_count) filter (where quarantined_at is null), 0) as n,
             coalesce(sum(row_count) filter (where quarantined_at is not null), 0) as q
      from event_spool where sink = ${sink}`
    backlogEvents = Number(left?.n ?? 0)
    quarantinedEvents = Number(left?.q ?? 0)
  }

  // chDB's data directory belongs to one process at a time (a pid lock), so once a full flush has
  // succeeded, rows of other writers for this sink (earlier processes) cannot appear again: verifications
  // then need no flush. A ClickHouse server is shared by every process, so there they always flush.
  let othersPossible = true
  /** Flushes run one at a time per process, each after those already asked for. */
  let chain: Promise<void> = Promise.resolve()
  /**
   * The last flush asked for that has not started yet. A request it covers shares it instead of queueing
   * another: starting later, it moves everything committed before the request. So concurrent groups that
   * each need a flush before a dedupe verification (Redis down, or lost its memory) wait for one, not one
   * after another.
   */
  let waiting: { scope: 'all' | 'others'; periodic: boolean; run: Promise<void> } | undefined
  function enqueue(scope: 'all' | 'others', periodic: boolean): Promise<void> {
    if (waiting && !waiting.periodic && (waiting.scope === 'all' || waiting.scope === scope)) return waiting.run
    const run = chain.then(async () => {
      if (waiting?.run === run) waiting = undefined
      await flushOnce(scope, periodic)
      if (scope === 'all' && !periodic && ch.kind === 'chdb') othersPossible = false
    })
    waiting = { scope, periodic, run }
    chain = run.catch(() => {})
    return run
  }
  function flush(scope: 'all' | 'others' = 'all'): Promise<void> {
    if (scope === 'others' && !othersPossible) return Promise.resolve()
    return enqueue(scope, false)
  }

  // Rows insertNow moved to ClickHouse, deleted in the background: one statement in flight, the rest of
  // the batches waiting for the next (a redo before the delete is harmless: the token drops it).
  let toDelete: string[] = []
  let deleting: Promise<void> | undefined
  function deleteInserted(): Promise<void> {
    if (deleting || !toDelete.length) return deleting ?? Promise.resolve()
    const batches = toDelete
    toDelete = []
    deleting = sql`delete from event_spool where batch = any(${batches}::bigint[])`.then(
      (res) => void (movedSinceVacuum += res.count),
      (err: unknown) => log.warn({ err, batches: batches.length }, 'ingest spool: could not delete inserted rows; the flusher redoes them harmlessly'),
    ).finally(() => {
      deleting = undefined
      void deleteInserted()
    })
    return deleting
  }

  return {
    async append(tx, rows, rowCount, encoding = 'rowbinary', claim = false) {
      const bytes = Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength)
      // Sent at once (execute): the caller may pipeline it with the COMMIT.
      const [row] = claim
        ? await tx<{ batch: string }[]>`insert into event_spool (sink, writer, rows, row_count, encoding, layout, batch, claimed_at)
               values (${sink}, ${writer}, ${bytes}, ${rowCount}, ${encoding}, ${EVENT_LAYOUT}, nextval('event_spool_batch_seq'), now())
               returning batch`.execute()
        : await tx`insert into event_spool (sink, writer, rows, row_count, encoding, layout)
               values (${sink}, ${writer}, ${bytes}, ${rowCount}, ${encoding}, ${EVENT_LAYOUT})`.execute()
      backlogEvents += rowCount
      return row?.batch
    },
    async insertNow(batch, rows, rowCount) {
      const done = await startInsert()
      try {
        await assignSeqs(batch)
        const [row] = await sql<{ seq_base: string }[]>`select seq_base from event_spool where batch = ${batch}`
        if (!row) {
          backlogEvents -= rowCount // a flusher redid and deleted it meanwhile
          return
        }
        setSeqs(rows, Number(row.seq_base))
        await ch.insertRowBinary('events', EVENT_COLUMNS, rows, { dedupeToken: `respin-spool-${batch}` })
      } finally {
        done()
      }
      backlogEvents -= rowCount
      toDelete.push(batch)
      void deleteInserted()
    },
    async hold(fn) {
      while (holding) await holding.catch(() => {})
      const run = (async () => {
        while (inserting > 0) await new Promise<void>((resolve) => idleWaiters.push(resolve))
        await ensureCounter()
        // chDB belongs to this process alone: nothing else inserts into it.
        if (ch.kind === 'chdb') {
          const [row] = await sql<{ next: string }[]>`select next::text from export_seq where sink = ${sink}`
          return fn(Number(row?.next ?? 1))
        }
        // A ClickHouse server: other processes' inserts take their seqs (assignSeqs) from the counter row
        // locked here, so none starts; those already numbered (spooled rows with a seq) are waited for:
        // they return in milliseconds, and a dead flusher's batch is redone by others without new seqs.
        return (await sql.begin(async (tx) => {
          const [counter] = await tx<{ next: string }[]>`select next::text from export_seq where sink = ${sink} for update`
          const deadline = Date.now() + HOLD_WAIT_MS
          while ((await tx`select 1 from event_spool where sink = ${sink} and seq_base is not null and quarantined_at is null limit 1`).length) {
            if (Date.now() > deadline) throw new Error('event inserts numbered before the hold have not returned (ClickHouse unavailable?)')
            await new Promise((resolve) => setTimeout(resolve, 20))
          }
          return fn(Number(counter?.next ?? 1))
        })) as Awaited<ReturnType<typeof fn>>
      })()
      holding = run
      try {
        return await run
      } finally {
        if (holding === run) holding = undefined
      }
    },
    flush,
    backlog: () => backlogEvents,
    quarantined: () => quarantinedEvents,
    full: () => backlogEvents >= deps.maxBacklog,
    start() {
      const tick = () => {
        if (stopped) return // a flush that was running when stop() came in
        timer = setTimeout(() => {
          enqueue('all', true).then(
            // The vacuum runs beside the next flushes, not before them: on a large spool it can take
            // seconds, and acknowledged events must reach analytics and exports within 2 s.
            () => {
              void vacuum()
              tick()
            },
            (err: unknown) => {
              log.error({ err, backlog: backlogEvents }, 'ingest spool: flush to ClickHouse failed; events stay spooled, retrying')
              tick()
            },
          )
        }, deps.intervalMs)
        timer.unref()
      }
      tick()
    },
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      timer = undefined
      while (deleting || toDelete.length) await deleteInserted()
      await flush('all').catch((err: unknown) => {
        log.error({ err, backlog: backlogEvents }, 'ingest spool: final flush failed; the events stay spooled until the next start')
      })
    },
  }
}

/**
 * The export watermark of a ClickHouse (sink): every event with a smaller seq is in ClickHouse already or
 * will never be there. Rows get their seq in a committed claim before their insert and leave the spool
 * only after it returned, so the smallest seq_base still spooled (set-aside rows excluded: ClickHouse
 * stored nothing of them, and they get a new seq if put back) bounds what may still appear; without one,
 * the counter does. One statement, one snapshot. Read it BEFORE querying ClickHouse. With it, the sink's
 * epoch (bumpExportEpoch).
 */
export async function exportWatermark(sql: Sql, sink: string): Promise<{ watermark: number; epoch: string }> {
  const [row] = await sql<{ w: string | null; e: string | null }[]>`
    select least(
      (select next from export_seq where sink = ${sink}),
      (select min(seq_base) from event_spool where sink = ${sink} and seq_base is not null and quarantined_at is null)
    )::text as w,
    (select epoch from export_seq where sink = ${sink})::text as e`
  return { watermark: row?.w ? Number(row.w) : 0, epoch: row?.e ?? '0' }
}

/**
 * After a change to events already in ClickHouse (an erasure's rewrite, a retention drop): exports stop
 * serving pages read before it (sql/0130, src/exports/service.ts).
 */
export async function bumpExportEpoch(sql: Sql, sink: string): Promise<void> {
  await sql`update export_seq set epoch = epoch + 1 where sink = ${sink}`
}

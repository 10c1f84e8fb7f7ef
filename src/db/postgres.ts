// PostgreSQL for CRUD state: a real server when DATABASE_URL is set, otherwise PGlite in DATA_DIR served
// over pglite-socket, so the same `postgres` driver and the same SQL run in both deployments.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import postgres from 'postgres'
import type { Logger } from '../lib/log.ts'

export type Sql = postgres.Sql

export interface Postgres {
  /** The API's and ingestion's connections. */
  sql: Sql
  /**
   * The background engines' connections (app.ts gives them to every engine as `ctx.sql`): a pool of their
   * own on a server, so engine transactions (up to ~49 at once: stream loops, journeys, run chunks,
   * delivery batches) never take the connections API requests and ingestion wait for. PGlite has one
   * connection, the same as `sql`.
   */
  engineSql: Sql
  kind: 'postgres' | 'pglite'
  /** Answers within timeoutMs or throws. */
  ping(timeoutMs: number): Promise<void>
  close(): Promise<void>
}

/**
 * Seconds before a dropped connection is opened again. postgres.js' default grows with a retry count the
 * whole pool shares (3^n / 100 s, up to 20 s), so the connections one outage drops together count as that
 * many retries: after a 1 s outage of a 14-connection pool, its next connections waited 10-20 s, the
 * engines stalled and a shutdown took ~18 s (test/system/health-degraded.test.ts). The same growth, capped
 * at 2 s: a pool is back within ~2 s of PostgreSQL, and still tries at most once a second or so per
 * connection against a server that is down.
 */
export const reconnectBackoffSeconds = (retries: number) => (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, 2)

const driverOptions = {
  onnotice: () => {},
  backoff: reconnectBackoffSeconds,
  // Keep numeric/bigint columns exact: money sums stay strings until a feature decides otherwise.
  types: {},
  connection: { application_name: 'respin' },
} as const

/** PostgreSQL ends a session whose transaction has been idle this long (server connections). */
export const IDLE_IN_TRANSACTION_MS = 60_000
/**
 * Connections per process on a server: the API and ingestion (short statements; ingestion's groups hold
 * at most 2), and the engines. With the bus's 2 and the delivery and inbox listeners, 28 a process:
 * three API processes stay within PostgreSQL's default max_connections of 100.
 */
export const API_POOL = 10
export const ENGINE_POOL = 14

/**
 * A LISTEN connection of its own (the cache bus, the delivery and inbox wake-ups), named so it shows in
 * pg_stat_activity. Its session asks the server for TCP keepalives every few seconds: the bus counts the
 * listeners there and waits for each one's acknowledgement, so a listener whose host vanished without
 * closing its connection (a partition, a VM gone) cost every publish its 5 s timeout until the server's
 * default keepalive (2 h on Linux) noticed; now ~15 s.
 */
export function listenerConnection(databaseUrl: string, applicationName: string, max = 1): Sql {
  return postgres(databaseUrl, {
    ...driverOptions,
    max,
    connection: { application_name: applicationName, tcp_keepalives_idle: 5, tcp_keepalives_interval: 3, tcp_keepalives_count: 3 },
  })
}

export async function openPostgres(
  opts: { databaseUrl: string | undefined; dataDir: string; max?: number },
  log: Logger,
): Promise<Postgres> {
  if (opts.databaseUrl) {
    // A transaction left open by a bug (an await that never settles between two statements) would hold its
    // locks and its connection forever: PostgreSQL ends the session after 60 s idle in it. Nothing here
    // waits that long inside a transaction; the slow outside calls (SMTP, webhooks, ClickHouse mutations)
    // run between transactions, under leases.
    const connection = { ...driverOptions.connection, idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS }
    const sql = postgres(opts.databaseUrl, { ...driverOptions, connection, max: opts.max ?? API_POOL, connect_timeout: 5 })
    // The engines' pool opens connections only as they are wanted (postgres.js connects lazily).
    const engineSql = opts.max
      ? sql
      : postgres(opts.databaseUrl, { ...driverOptions, connection: { ...connection, application_name: 'respin-engines' }, max: ENGINE_POOL, connect_timeout: 5 })
    return {
      sql,
      engineSql,
      kind: 'postgres',
      ping: (ms) => pingSql(sql, ms),
      close: async () => {
        await Promise.all([sql.end({ timeout: 5 }), engineSql === sql ? undefined : engineSql.end({ timeout: 5 })])
      },
    }
  }
  return openEmbedded(opts.dataDir, log)
}

async function openEmbedded(dataDir: string, log: Logger): Promise<Postgres> {
  const { PGlite } = await import('@electric-sql/pglite')
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
  const dir = resolve(dataDir, 'postgres')
  mkdirSync(dir, { recursive: true })
  // PGlite does not lock its directory, and two processes writing one data directory corrupt it.
  const lockFile = resolve(dataDir, 'postgres.pid')
  claimDataDir(lockFile)
  const db = await PGlite.create(dir)
  // A unix socket in a short private directory: socket paths are limited to ~100 bytes.
  const socketDir = mkdtempSync(join(tmpdir(), 'respin-pg-'))
  const server = new PGLiteSocketServer({ db, path: join(socketDir, '.s.PGSQL.5432'), maxConnections: 16 })
  await server.start()
  log.info({ dir }, 'embedded PostgreSQL (PGlite) started')
  // One connection. pglite-socket multiplexes every client connection onto PGlite's single backend
  // session, so two connections' extended-protocol messages can interleave under load and clobber the
  // shared unnamed portal ("portal \"\" does not exist", seen in test/segments/segments.test.ts on a
  // busy machine). postgres.js pipelines concurrent queries on the one connection, and PGlite runs one
  // statement at a time anyway, so nothing is lost; a transaction holds the connection, exactly as an
  // open PGlite transaction already held every other connection's statements.
  const sql = postgres({ ...driverOptions, host: socketDir, port: 5432, user: 'postgres', database: 'postgres', max: 1 })
  return {
    sql,
    engineSql: sql,
    kind: 'pglite',
    ping: (ms) => pingSql(sql, ms),
    async close() {
      await sql.end({ timeout: 5 })
      await server.stop()
      await db.close()
      rmSync(socketDir, { recursive: true, force: true })
      rmSync(lockFile, { force: true })
    },
  }
}

function claimDataDir(lockFile: string): void {
  let holder = NaN
  try {
    holder = Number(readFileSync(lockFile, 'utf8'))
  } catch {
    // no lock file: the directory is free
  }
  if (holder && holder !== process.pid && isAlive(holder)) {
    throw new Error(`the embedded database in ${lockFile.replace(/postgres\.pid$/, '')} is in use by process ${holder}`)
  }
  writeFileSync(lockFile, String(process.pid))
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

async function pingSql(sql: Sql, timeoutMs: number): Promise<void> {
  await withTimeout(sql`select 1`.execute(), timeoutMs, 'postgres')
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/**
 * A transaction sent in one go: BEGIN, the statements `send` issues, and COMMIT, with no wait for an answer
 * in between (pipelining: one round trip instead of one per statement). A failing statement aborts the
 * transaction, so the COMMIT behind it rolls back, and its error is thrown; only a COMMIT that PostgreSQL
 * answers as such resolves.
 *
 * `send` must issue every statement synchronously, with `.execute()` (a statement created after an await
 * would go out after the COMMIT, outside the transaction), and none may depend on another's result.
 */
export async function pipelinedTransaction(sql: Sql, send: (tx: postgres.ReservedSql) => Promise<unknown>): Promise<void> {
  const tx = await sql.reserve()
  try {
    const begin = tx`begin`.execute()
    let work: Promise<unknown>
    let sent = true
    try {
      work = send(tx)
    } catch (err) {
      // Some statements may be out already: they must not be committed.
      sent = false
      work = Promise.reject(err)
    }
    const end = sent ? tx`commit`.execute() : tx`rollback`.execute()
    const [b, w, e] = await Promise.allSettled([begin, work, end])
    for (const r of [b, w, e]) if (r.status === 'rejected') throw r.reason
    const command = (e as PromiseFulfilledResult<{ command: string }>).value.command
    if (command !== 'COMMIT') throw new Error(`transaction ended with ${command}`)
  } finally {
    tx.release()
  }
}

/**
 * For the rest of the transaction, the planner walks indexes in their order instead of reading every
 * matching row by bitmap (or scan) and sorting them. For a queue's claim (`… order by id limit n for
 * update skip locked`): a queue table swings from empty to a backlog and back faster than its statistics
 * follow, and has none at all on embedded PostgreSQL (no autovacuum, so no ANALYZE) or on a new server
 * until autovacuum comes. Then the planner guesses a few hundred pending rows, and read and sorted all
 * 20,000 of a burst for every claim of 300 (10–17 ms a claim, ~50 µs a delivery of the webhooks bench),
 * where the walk of the partial index reads the 300 it takes (< 1 ms).
 */
export const preferIndexWalks = (tx: postgres.TransactionSql) =>
  tx`select set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`

/** PostgreSQL SQLSTATEs the features translate into domain errors. */
export const PG_UNIQUE_VIOLATION = '23505'

export function pgErrorCode(err: unknown): string | undefined {
  return err instanceof postgres.PostgresError ? err.code : undefined
}

/**
 * PostgreSQL was lost under the query: its connection closed or failed (postgres.js's CONNECTION_* codes,
 * a socket error), or the server ended the session (SQLSTATE class 08; 57P01-57P03: terminated, crashed,
 * starting up). Nothing about the request: the HTTP layer answers 503 with a retry-after, never 500.
 */
const LOST_CONNECTION_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'])

export function isLostConnection(err: unknown): boolean {
  const sqlstate = pgErrorCode(err)
  if (sqlstate !== undefined) return sqlstate.startsWith('08') || sqlstate === '57P01' || sqlstate === '57P02' || sqlstate === '57P03'
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && LOST_CONNECTION_CODES.has(code)
}

/**
 * SQLSTATEs by which PostgreSQL refuses a value it was given, rather than the query itself: text too long
 * (22001), a number or date out of range (22003, 22008), a malformed value (22007, 22P02), a NUL character
 * in text (22021) or in jsonb (22P05), a failed CHECK constraint (23514), a value too big for an index
 * entry (54000: e.g. a 2,000-character non-ASCII URL in a unique index), JSON nested deeper than the
 * server's stack (54001). Every value reaches a query from a validated request, so these are the caller's
 * mistake: the HTTP layer answers them with 400, never 500.
 */
const REFUSED_VALUE_CODES = new Set(['22001', '22003', '22007', '22008', '22021', '22P02', '22P05', '23514', '54000', '54001'])

export function isRefusedValue(err: unknown): boolean {
  const code = pgErrorCode(err)
  return code !== undefined && REFUSED_VALUE_CODES.has(code)
}

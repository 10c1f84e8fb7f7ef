// ClickHouse for events, analytics and exports: the official client when CLICKHOUSE_URL is set, chDB (the
// ClickHouse engine in-process) in DATA_DIR otherwise. Same DDL and queries in both.
//
// chDB allows one data directory per process and crashes the process at exit when loaded in a worker
// thread, so it is opened once, on the main thread; its queries and inserts run off the event loop.
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { rm, writeFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { Readable } from 'node:stream'
import { AppError } from '../errors.ts'
import type { Logger } from '../lib/log.ts'
import { withTimeout } from './postgres.ts'

export type Params = Record<string, unknown>

/** Column names and ClickHouse types, in the order the rows are encoded. */
export type Columns = readonly (readonly [name: string, type: string])[]

/** The reads of `ClickHouse.reports`. */
export type ReportReader = Pick<ClickHouse, 'query' | 'queryTemplate'>

export interface ClickHouse {
  kind: 'server' | 'chdb'
  /** Names this ClickHouse (server URL and database, or the chDB data directory's instance id). */
  sinkId: string
  /**
   * Reads made for people (analytics, reports, exports), kept apart from the engines' reads and inserts so
   * a burst of them cannot hold up ingestion: their own connections (server) or their own slots (chDB: at
   * most REPORT_SLOTS at once, so libuv threads stay free for inserts, files and DNS), each query stopped by
   * ClickHouse itself after REPORT_TIMEOUT_S. An unreachable ClickHouse, a full queue or an overrun is a 503
   * with Retry-After, not a 500.
   */
  reports: ReportReader
  /** False until migrateClickHouse has brought the schema up to date (see app.ts: retried while unreachable). */
  schemaReady: boolean
  /** Creates the configured database if it is missing (server; nothing to do for chDB). */
  ensureDatabase(): Promise<void>
  /** SELECT returning rows (JSONEachRow). Bind user values with {name:Type} placeholders only. */
  query<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]>
  /**
   * SELECT returning its output in ClickHouse's Template format, with the row format in the query's
   * `format_template_row_format` setting, as bytes: for output passed on as it is (an export page's JSON).
   */
  queryTemplate(sql: string, params: Params | undefined): Promise<Buffer>
  /** DDL or other statements without a result. */
  command(sql: string, params?: Params): Promise<void>
  /**
   * Insert rows already encoded as RowBinary, with exactly these columns in this order. With a
   * dedupeToken, an insert repeating an earlier one's token is dropped (see clickhouse/0002_*.sql).
   */
  insertRowBinary(table: string, columns: Columns, rows: Uint8Array, opts?: { dedupeToken?: string }): Promise<void>
  ping(timeoutMs: number): Promise<void>
  close(): Promise<void>
}

export async function openClickHouse(
  opts: { clickhouseUrl: string | undefined; dataDir: string },
  log: Logger,
): Promise<ClickHouse> {
  return opts.clickhouseUrl ? openServer(opts.clickhouseUrl, log) : openChdb(opts.dataDir, log)
}

let queryCounter = 0
const nextQueryId = () => `respin-${process.pid}-${Date.now().toString(36)}-${(queryCounter++).toString(36)}`

async function openServer(url: string, log: Logger): Promise<ClickHouse> {
  const { createClient, ClickHouseLogLevel } = await import('@clickhouse/client')
  // CLICKHOUSE_URL is http(s)://user:password@host:port/database; the database is created if missing.
  const parsed = new URL(url)
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || 'default'
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(database)) throw new Error(`invalid ClickHouse database name: ${database}`)
  const credentials = {
    username: decodeURIComponent(parsed.username) || 'default',
    password: decodeURIComponent(parsed.password),
  }
  parsed.pathname = '/'
  parsed.username = ''
  parsed.password = ''
  // The client's own logger is off: `run` below logs each failure once, with its query id, in our format.
  const base = { url: parsed.toString(), ...credentials, request_timeout: 30_000, log: { level: ClickHouseLogLevel.OFF } }
  const client = createClient({ ...base, database, clickhouse_settings: { date_time_input_format: 'best_effort' } })
  // Reports on connections of their own: a few long analytics queries cannot take the sockets that
  // ingestion's inserts and dedupe lookups need. ClickHouse stops each one itself at the time limit, and
  // also when its client gives up on it (a read-only query's work is wasted once nobody waits for it).
  const reportClient = createClient({
    ...base,
    database,
    request_timeout: (REPORT_TIMEOUT_S + 5) * 1000,
    max_open_connections: REPORT_SLOTS_SERVER,
    clickhouse_settings: { max_execution_time: REPORT_TIMEOUT_S, cancel_http_readonly_queries_on_client_close: 1 },
  })
  const run = async <T>(what: string, queryId: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn()
    } catch (err) {
      log.error({ err, queryId }, `clickhouse ${what} failed`)
      throw err
    }
  }
  const reader = (c: typeof client): ReportReader => ({
    query<T>(sql: string, params?: Params) {
      const query_id = nextQueryId()
      return run('query', query_id, async () => {
        const rs = await c.query({ query: sql, query_params: params, format: 'JSONEachRow', query_id })
        return rs.json<T>()
      })
    },
    queryTemplate(sql: string, params: Params | undefined) {
      const query_id = nextQueryId()
      return run('query', query_id, async () => {
        // The client's format list lacks Template; text() reads any format's body as it is.
        const rs = await c.query({ query: sql, query_params: params, format: 'Template' as 'TabSeparatedRaw', query_id })
        // text() is the client's way to a whole body that also catches an error ClickHouse sends mid-stream.
        return Buffer.from(await rs.text())
      })
    },
  })
  return {
    kind: 'server',
    sinkId: `server:${parsed.host}/${database}`,
    ...reader(client),
    reports: reportsOf(reader(reportClient), REPORT_SLOTS_SERVER),
    schemaReady: false,
    async ensureDatabase() {
      if (database === 'default') return
      const bootstrap = createClient(base)
      try {
        await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` })
      } finally {
        await bootstrap.close()
      }
    },
    command(sql: string, params?: Params) {
      const query_id = nextQueryId()
      return run('command', query_id, async () => {
        await client.command({ query: sql, query_params: params, query_id })
      })
    },
    insertRowBinary(table, columns, rows, opts) {
      const query_id = nextQueryId()
      const query = `INSERT INTO ${identifier(table)} (${columns.map(([name]) => identifier(name)).join(', ')}) FORMAT RowBinary`
      const clickhouse_settings = { ...INSERT_SETTINGS, ...(opts?.dedupeToken ? { insert_deduplication_token: opts.dedupeToken } : {}) }
      return run('insert', query_id, async () => {
        const values = Readable.from([Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength)])
        const res = await client.exec({ query, values, query_id, clickhouse_settings })
        // The (empty) response must be read to the end, or the socket is never returned to the pool.
        await new Promise<void>((resolve, reject) => {
          res.stream.on('error', reject).on('end', resolve).resume()
        })
      })
    },
    async ping(ms) {
      const result = await withTimeout(client.ping(), ms, 'clickhouse')
      if (!result.success) throw result.error
    },
    close: () => Promise.all([client.close(), reportClient.close()]).then(() => {}),
  }
}

async function openChdb(dataDir: string, log: Logger): Promise<ClickHouse> {
  const { Session } = await import('chdb')
  const dir = resolve(dataDir, 'clickhouse')
  mkdirSync(dir, { recursive: true })
  const session = new Session(dir)
  // Spool files left by a process that died mid-insert were never acknowledged: drop them.
  const spool = resolve(dataDir, 'clickhouse-spool')
  await rm(spool, { recursive: true, force: true })
  mkdirSync(spool, { recursive: true })
  let spoolCounter = 0
  log.info({ dir }, 'embedded ClickHouse (chDB) started')
  const run = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn()
    } catch (err) {
      log.error({ err }, `chdb ${what} failed`)
      throw err
    }
  }
  let closed = false
  const ch: ClickHouse = {
    kind: 'chdb',
    sinkId: `chdb:${instanceId(dir)}`,
    reports: undefined as unknown as ReportReader, // set below: it reads through this object
    schemaReady: false,
    async ensureDatabase() {},
    query<T>(sql: string, params?: Params) {
      return run('query', async () => {
        const result = params
          ? await session.queryBindAsync(sql, params, { format: 'JSONEachRow' })
          : await session.queryAsync(sql, { format: 'JSONEachRow' })
        return parseJsonEachRow<T>(result.text())
      })
    },
    queryTemplate(sql: string, params: Params | undefined) {
      return run('query', async () => {
        const format = 'Template'
        const result = params ? await session.queryBindAsync(sql, params, { format }) : await session.queryAsync(sql, { format })
        // The bytes as they are: decoding them to a string cost ~3 ns a byte on the event loop (node 20's
        // UTF-8 decoder), and the answer would encode them again (an export page: ~5 ms of its ~17).
        const bytes = result.bytes()
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      })
    },
    command(sql: string, params?: Params) {
      return run('command', async () => {
        if (params) await session.queryBindAsync(sql, params, { format: 'TSV' })
        else await session.queryAsync(sql, { format: 'TSV' })
      })
    },
    insertRowBinary(table, columns, rows, opts) {
      // chDB's insert API takes text formats only, so binary rows go through a spool file that one
      // INSERT ... SELECT reads (the file is in the page cache: writing it costs a copy, not a disk write).
      const path = resolve(spool, `insert-${process.pid}-${(spoolCounter++).toString(36)}.bin`)
      const structure = columns.map(([name, type]) => `${name} ${type}`).join(', ')
      const sql =
        `INSERT INTO ${identifier(table)} (${columns.map(([name]) => identifier(name)).join(', ')}) ` +
        `SELECT * FROM file(${quote(path)}, 'RowBinary', ${quote(structure)}) SETTINGS ${CHDB_INSERT_SETTINGS}` +
        (opts?.dedupeToken ? `, insert_deduplication_token = ${quote(opts.dedupeToken)}` : '')
      return run('insert', async () => {
        await writeFile(path, rows)
        try {
          await session.queryAsync(sql, { format: 'TSV' })
        } finally {
          await rm(path, { force: true })
        }
      })
    },
    async ping(ms) {
      await withTimeout(session.queryAsync('SELECT 1', { format: 'TSV' }), ms, 'clickhouse')
    },
    async close() {
      if (closed) return
      closed = true
      const { drainPending } = await import('chdb')
      await drainPending()
      session.close()
    },
  }
  ch.reports = reportsOf(ch, REPORT_SLOTS)
  return ch
}

/** How long ClickHouse lets a report's query run, in seconds (also in REPORT_SETTINGS). */
export const REPORT_TIMEOUT_S = 30
/** Reports running at once per process on chDB: libuv has 4 threads, and inserts and files need some. */
const REPORT_SLOTS = 2
/** Report connections per process to a ClickHouse server (it has cores of its own). */
const REPORT_SLOTS_SERVER = 4
/** Reports waiting for a slot beyond which a new one is refused at once (503). */
const REPORT_QUEUE = 32
/**
 * The settings every report's query ends with: ClickHouse itself stops it after REPORT_TIMEOUT_S (chDB has
 * no per-query option for it; on a server the report connections set it too).
 */
export const REPORT_SETTINGS = `max_execution_time = ${REPORT_TIMEOUT_S}`

const TIMEOUT_EXCEEDED = 159
const unavailable = (message: string, retryAfterS: number) =>
  new AppError('SERVICE_UNAVAILABLE', message, undefined, { 'retry-after': String(retryAfterS) })

/**
 * `read`'s queries at most `slots` at once (the rest wait, up to `queue` of them), and the failures that
 * are no fault of the query turned into 503s.
 */
export function reportsOf(read: ReportReader, slots: number, queue = REPORT_QUEUE): ReportReader {
  let running = 0
  const waiting: (() => void)[] = []
  const limited = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (running >= slots) {
      if (waiting.length >= queue) throw unavailable('too many analytics queries are running; retry shortly', 1)
      await new Promise<void>((resolve) => waiting.push(resolve))
    } else running++
    try {
      return await fn()
    } catch (err) {
      if (clickHouseCode(err) === TIMEOUT_EXCEEDED) throw unavailable(`the query ran over its ${REPORT_TIMEOUT_S} s limit; retry later or ask for a shorter period`, 60)
      if (isUnreachable(err)) throw unavailable('the analytics store (ClickHouse) is not answering; retry shortly', 5)
      throw err
    } finally {
      // The slot passes straight to the next waiter, so `running` counts it still.
      const next = waiting.shift()
      if (next) next()
      else running--
    }
  }
  return {
    query: (sql, params) => limited(() => read.query(sql, params)),
    queryTemplate: (sql, params) => limited(() => read.queryTemplate(sql, params)),
  }
}

/** The ClickHouse error code of a server error (the client's `code` string) or a chDB one (its message). */
function clickHouseCode(err: unknown): number | undefined {
  if (!(err instanceof Error)) return undefined
  const { code, type } = err as Error & { code?: unknown; type?: unknown }
  const n = typeof type === 'string' && typeof code === 'string' ? Number(code) : Number(/^Code: (\d+)\./.exec(err.message)?.[1])
  return Number.isFinite(n) ? n : undefined
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE'])

/**
 * The ClickHouse server could not be reached or did not answer (the request never got a ClickHouse error):
 * a refused or reset connection, a failed DNS lookup, the client's own timeout.
 */
export function isUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = (err as Error & { code?: unknown }).code
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return true
  if (err.message === 'Timeout error.' || /socket hang up/.test(err.message)) return true
  const cause = (err as Error & { cause?: unknown }).cause
  return cause !== undefined && cause !== err && isUnreachable(cause)
}

/** A random id kept in the chDB data directory: names this embedded ClickHouse across restarts. */
function instanceId(dir: string): string {
  const file = resolve(dir, 'respin-instance-id')
  if (existsSync(file)) return readFileSync(file, 'utf8').trim()
  const id = randomUUID()
  writeFileSync(file, id)
  return id
}

/**
 * Per-insert settings for chDB, each measured on 100-row inserts into the events table (2 cores):
 * one thread for a small INSERT ... SELECT (no pipeline fan-out), and no query/processor/profile-event
 * logging, which an embedded engine has nowhere to show anyway. Together ~15% of an insert's CPU.
 * Plus the partition limit and the views' deduplication of INSERT_SETTINGS (below).
 */
const CHDB_INSERT_SETTINGS = 'max_threads = 1, max_insert_threads = 1, log_queries = 0, log_processors_profiles = 0, log_profile_events = 0, max_partitions_per_insert_block = 0, deduplicate_blocks_in_dependent_materialized_views = 1'

/**
 * Every insert of events: no limit on the months (partitions) one insert touches. Accepted timestamps
 * span 2000 to tomorrow, and a spooled group is already acknowledged when it is flushed: ClickHouse's
 * default limit of 100 would make such a flush fail forever.
 */
// deduplicate_blocks_in_dependent_materialized_views: a spool flush retried under the same token after
// `events` took its block but a rollup's view did not (docs/analytics.md) fills in the rollup only.
const INSERT_SETTINGS = { max_partitions_per_insert_block: '0', deduplicate_blocks_in_dependent_materialized_views: 1 as const }

/**
 * ClickHouse error codes that refuse the data itself (parse and type errors): the same bytes are refused at
 * every attempt, and nothing of the insert was stored. Anything else (unreachable, too many parts, memory,
 * timeouts) may pass on a retry, or may even have landed.
 */
const DATA_ERROR_CODES = new Set([
  6, // CANNOT_PARSE_TEXT
  26, // CANNOT_PARSE_QUOTED_STRING
  27, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  32, // ATTEMPT_TO_READ_AFTER_EOF
  33, // CANNOT_READ_ALL_DATA
  38, // CANNOT_PARSE_DATE
  41, // CANNOT_PARSE_DATETIME
  53, // TYPE_MISMATCH
  69, // ARGUMENT_OUT_OF_BOUND
  70, // CANNOT_CONVERT_TYPE
  72, // CANNOT_PARSE_NUMBER
  117, // INCORRECT_DATA
  131, // TOO_LARGE_STRING_SIZE
  349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
])

/**
 * ClickHouse refused an insert's data as malformed. Server: the client's ClickHouseError carries the code
 * and its name as `type` (a PostgreSQL error's `code` is a SQLSTATE, never taken for one); chDB: the
 * message starts with it.
 */
export function isDataRefusal(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  // Rows our own RowBinary reader refused before sending them (event-rows.ts MalformedRows).
  if ((err as Error & { dataRefusal?: unknown }).dataRefusal === true) return true
  const n = clickHouseCode(err)
  return n !== undefined && DATA_ERROR_CODES.has(n)
}

function identifier(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`invalid ClickHouse identifier: ${name}`)
  return name
}

/** A ClickHouse string literal. */
function quote(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

function parseJsonEachRow<T>(text: string): T[] {
  const rows: T[] = []
  for (const line of text.split('\n')) if (line) rows.push(JSON.parse(line) as T)
  return rows
}

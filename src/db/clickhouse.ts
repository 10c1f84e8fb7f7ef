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
import type { Logger } from '../lib/log.ts'
import { withTimeout } from './postgres.ts'

export type Params = Record<string, unknown>

/** Column names and ClickHouse types, in the order the rows are encoded. */
export type Columns = readonly (readonly [name: string, type: string])[]

export interface ClickHouse {
  kind: 'server' | 'chdb'
  /** Names this ClickHouse (server URL and database, or the chDB data directory's instance id). */
  sinkId: string
  /** SELECT returning rows (JSONEachRow). Bind user values with {name:Type} placeholders only. */
  query<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]>
  /**
   * SELECT returning each row as a line of TabSeparatedRaw text (values unescaped, tab-separated): for
   * rows the query formats itself, e.g. the JSON text of exports. No value may hold a tab or newline.
   */
  queryLines(sql: string, params?: Params): Promise<string[]>
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
  const { createClient } = await import('@clickhouse/client')
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
  const base = { url: parsed.toString(), ...credentials, request_timeout: 30_000 }
  if (database !== 'default') {
    const bootstrap = createClient(base)
    try {
      await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` })
    } finally {
      await bootstrap.close()
    }
  }
  const client = createClient({ ...base, database, clickhouse_settings: { date_time_input_format: 'best_effort' } })
  const run = async <T>(what: string, queryId: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn()
    } catch (err) {
      log.error({ err, queryId }, `clickhouse ${what} failed`)
      throw err
    }
  }
  return {
    kind: 'server',
    sinkId: `server:${parsed.host}/${database}`,
    query<T>(sql: string, params?: Params) {
      const query_id = nextQueryId()
      return run('query', query_id, async () => {
        const rs = await client.query({ query: sql, query_params: params, format: 'JSONEachRow', query_id })
        return rs.json<T>()
      })
    },
    queryLines(sql: string, params?: Params) {
      const query_id = nextQueryId()
      return run('query', query_id, async () => {
        const rs = await client.query({ query: sql, query_params: params, format: 'TabSeparatedRaw', query_id })
        return lines(await rs.text())
      })
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
    close: () => client.close(),
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
  return {
    kind: 'chdb',
    sinkId: `chdb:${instanceId(dir)}`,
    query<T>(sql: string, params?: Params) {
      return run('query', async () => {
        const result = params
          ? await session.queryBindAsync(sql, params, { format: 'JSONEachRow' })
          : await session.queryAsync(sql, { format: 'JSONEachRow' })
        return parseJsonEachRow<T>(result.text())
      })
    },
    queryLines(sql: string, params?: Params) {
      return run('query', async () => {
        const result = params
          ? await session.queryBindAsync(sql, params, { format: 'TabSeparatedRaw' })
          : await session.queryAsync(sql, { format: 'TabSeparatedRaw' })
        return lines(result.text())
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
}

const lines = (text: string): string[] => {
  const out = text.split('\n')
  if (out[out.length - 1] === '') out.pop()
  return out
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
  const { code, type } = err as Error & { code?: unknown; type?: unknown }
  const n = typeof type === 'string' && typeof code === 'string' ? Number(code) : Number(/^Code: (\d+)\./.exec(err.message)?.[1])
  return DATA_ERROR_CODES.has(n)
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

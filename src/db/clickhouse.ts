// ClickHouse for events, analytics and exports: the official client when CLICKHOUSE_URL is set, chDB (the
// ClickHouse engine in-process) in DATA_DIR otherwise. Same DDL and queries in both.
//
// chDB allows one data directory per process and crashes the process at exit when loaded in a worker
// thread, so it is opened once, on the main thread; its queries and inserts run off the event loop.
import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { Readable } from 'node:stream'
import type { Logger } from '../lib/log.ts'
import { withTimeout } from './postgres.ts'

export type Params = Record<string, unknown>

export interface ClickHouse {
  kind: 'server' | 'chdb'
  /** SELECT returning rows (JSONEachRow). Bind user values with {name:Type} placeholders only. */
  query<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]>
  /** DDL or other statements without a result. */
  command(sql: string, params?: Params): Promise<void>
  /** Insert rows already encoded as JSONEachRow (one JSON object per line). */
  insertJsonEachRow(table: string, rows: Buffer | string): Promise<void>
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
    query<T>(sql: string, params?: Params) {
      const query_id = nextQueryId()
      return run('query', query_id, async () => {
        const rs = await client.query({ query: sql, query_params: params, format: 'JSONEachRow', query_id })
        return rs.json<T>()
      })
    },
    command(sql: string, params?: Params) {
      const query_id = nextQueryId()
      return run('command', query_id, async () => {
        await client.command({ query: sql, query_params: params, query_id })
      })
    },
    insertJsonEachRow(table: string, rows: Buffer | string) {
      const query_id = nextQueryId()
      return run('insert', query_id, async () => {
        await client.insert({ table, values: Readable.from([rows]), format: 'JSONEachRow', query_id })
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
    query<T>(sql: string, params?: Params) {
      return run('query', async () => {
        const result = params
          ? await session.queryBindAsync(sql, params, { format: 'JSONEachRow' })
          : await session.queryAsync(sql, { format: 'JSONEachRow' })
        return parseJsonEachRow<T>(result.text())
      })
    },
    command(sql: string, params?: Params) {
      return run('command', async () => {
        if (params) await session.queryBindAsync(sql, params, { format: 'TSV' })
        else await session.queryAsync(sql, { format: 'TSV' })
      })
    },
    insertJsonEachRow(table: string, rows: Buffer | string) {
      return run('insert', async () => {
        await session.insert({ table, values: rows, format: 'JSONEachRow' })
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

function parseJsonEachRow<T>(text: string): T[] {
  const rows: T[] = []
  for (const line of text.split('\n')) if (line) rows.push(JSON.parse(line) as T)
  return rows
}

// Applies sql/*.sql to PostgreSQL and clickhouse/*.sql to ClickHouse in file-name order, once each,
// recording what ran. Safe to call from several processes at once.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { isUnreachable, type ClickHouse } from './clickhouse.ts'
import type { Logger } from '../lib/log.ts'
import type { Sql } from './postgres.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))

function migrationFiles(folder: 'sql' | 'clickhouse'): { name: string; text: string }[] {
  if (!existsSync(root + folder)) return []
  return readdirSync(root + folder)
    .filter((name) => /^\d{4}_[\w-]+\.sql$/.test(name))
    .sort()
    .map((name) => ({ name, text: readFileSync(`${root}${folder}/${name}`, 'utf8') }))
}

export async function migratePostgres(sql: Sql): Promise<string[]> {
  const applied: string[] = []
  await sql.begin(async (tx) => {
    // One transaction under an advisory lock: concurrent starters wait, then find nothing left to do.
    await tx`select pg_advisory_xact_lock(7465762)`
    await tx`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`
    const done = new Set((await tx<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name))
    for (const file of migrationFiles('sql')) {
      if (done.has(file.name)) continue
      await tx.unsafe(file.text)
      await tx`insert into schema_migrations (name) values (${file.name})`
      applied.push(file.name)
    }
  })
  return applied
}

/**
 * `before`: apply only the files whose names sort before it, i.e. the schema of an older release (the
 * starting point of an upgrade, as the rollup backfill test builds one).
 */
export async function migrateClickHouse(ch: ClickHouse, opts: { before?: string } = {}): Promise<string[]> {
  await ch.ensureDatabase()
  await ch.command(
    `CREATE TABLE IF NOT EXISTS schema_migrations (name String, applied_at DateTime DEFAULT now())
     ENGINE = ReplacingMergeTree ORDER BY name`,
  )
  const done = new Set((await ch.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name))
  const applied: string[] = []
  for (const file of migrationFiles('clickhouse')) {
    if (opts.before !== undefined && file.name >= opts.before) break
    if (done.has(file.name)) continue
    // ClickHouse runs one statement per request; every DDL file is written to be re-runnable.
    for (const statement of splitStatements(file.text)) await ch.command(statement)
    await ch.command('INSERT INTO schema_migrations (name) VALUES ({name:String})', { name: file.name })
    applied.push(file.name)
  }
  if (opts.before === undefined) ch.schemaReady = true
  return applied
}

/**
 * migrateClickHouse at startup. A ClickHouse server that cannot be reached does not stop the service:
 * everything but analytics and exports goes on without it (ingestion into the PostgreSQL spool, with
 * INGEST_ACK_AFTER=postgres), so the migrations are retried every `retryMs` until they pass, and the
 * health check reports ClickHouse failing meanwhile (`schemaReady`). Any other failure (a migration
 * ClickHouse refuses) stops the start, as PostgreSQL's do.
 */
export async function migrateClickHouseAtStart(
  ch: ClickHouse,
  log: Logger,
  retryMs = 5_000,
): Promise<{ applied: string[]; stop(): Promise<void> }> {
  try {
    return { applied: await migrateClickHouse(ch), stop: async () => {} }
  } catch (err) {
    if (ch.kind !== 'server' || !isUnreachable(err)) throw err
    log.error({ err }, `clickhouse: unreachable at start; its migrations are retried every ${retryMs} ms, analytics and exports answer 503 until then`)
  }
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> = Promise.resolve()
  const attempt = () => {
    running = migrateClickHouse(ch).then(
      (applied) => log.info({ clickhouse: applied }, 'clickhouse: reachable again, migrations applied'),
      (err) => {
        if (!isUnreachable(err)) log.error({ err }, 'clickhouse: a migration failed; retrying')
        if (!stopped) timer = setTimeout(attempt, retryMs).unref()
      },
    )
  }
  timer = setTimeout(attempt, retryMs).unref()
  return {
    applied: [],
    async stop() {
      stopped = true
      clearTimeout(timer)
      await running
    },
  }
}

function splitStatements(text: string): string[] {
  return text
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean)
}

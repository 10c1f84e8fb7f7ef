// Starts the real service (real stores, real HTTP on a free port) once per test file. Each test creates
// its own tenant, so tests never truncate and files can run in parallel.
import { createHash, randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { spawnSync } from 'node:child_process'
import v8 from 'node:v8'
import tap from 'tap'
import { startApp, type App } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { migratePostgres } from '../../src/db/migrate.ts'
import { openPostgres } from '../../src/db/postgres.ts'
import type { RouteDef } from '../../src/http/route.ts'
import { createLogger } from '../../src/lib/log.ts'
import type { DestinationStream } from 'pino'

export interface TestResponse<T = any> {
  status: number
  body: T
  text: string
  headers: Headers
}

export interface RequestOptions {
  key?: string
  body?: unknown
  /** Sent as-is, e.g. malformed JSON. */
  rawBody?: string
  headers?: Record<string, string>
  query?: Record<string, string | number | boolean>
}

export interface TestTenant {
  id: string
  slug: string
  /** The default brand. */
  brand: { id: string; slug: string }
  /** A full-access, tenant-wide key. */
  key: string
  createBrand(slug: string): Promise<{ id: string; slug: string }>
  createKey(opts?: { scopes?: string[]; brand?: string; expires_at?: string; name?: string }): Promise<{ id: string; key: string }>
}

export interface Harness {
  app: App
  /** http://127.0.0.1:port */
  origin: string
  adminKey: string
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<TestResponse<T>>
  admin<T = any>(method: string, path: string, body?: unknown): Promise<TestResponse<T>>
  createTenant(opts?: { name?: string; brand?: string | null }): Promise<TestTenant>
}

interface Teardown {
  teardown(fn: () => unknown): void
}

let tenantCounter = 0

// Embedded PostgreSQL is WebAssembly: V8's optimising tier recompiles its hot functions in the background,
// ~1.5 s of CPU per test process that a short-lived process never earns back (on 2 cores, the suite
// ran ~10 % faster on the baseline compiler alone). Tests only: the service keeps V8's defaults.
v8.setFlagsFromString('--liftoff-only')

/**
 * Migrations, as a hash: a template holds the schema of exactly these sql/ files (a changed or added file
 * makes a new template).
 */
function schemaKey(folder: 'sql' | 'clickhouse'): string {
  const dir = new URL(`../../${folder}/`, import.meta.url)
  const hash = createHash('sha256')
  for (const name of readdirSync(dir).sort()) hash.update(`${name}\0`).update(readFileSync(new URL(name, dir)))
  return hash.digest('hex').slice(0, 12)
}

/**
 * A store's directory migrated once per package version and schema (in the OS temp dir), copied into each
 * test's data directory. `build` fills `building/<store>`; the rename makes it the template atomically (a
 * concurrent test file either wins or finds it done).
 */
async function seedFromTemplate(
  store: 'postgres' | 'clickhouse',
  o: { packageJson: string; schema: 'sql' | 'clickhouse'; dataDir: string; build(building: string): unknown; skip?: (path: string) => boolean },
): Promise<void> {
  const { version } = JSON.parse(readFileSync(new URL(`../../node_modules/${o.packageJson}`, import.meta.url), 'utf8')) as { version: string }
  const template = join(tmpdir(), `respin-${store === 'postgres' ? 'pglite' : 'chdb'}-template-${version}-${schemaKey(o.schema)}`)
  if (!existsSync(template)) {
    const building = mkdtempSync(`${template}.${process.pid}.`)
    await o.build(building)
    try {
      renameSync(join(building, store), template)
    } catch {
      // another file's template won
    }
    rmSync(building, { recursive: true, force: true })
  }
  cpSync(template, join(o.dataDir, store), { recursive: true, filter: o.skip && ((path) => !o.skip!(path)) })
}

/**
 * A fresh PGlite directory costs seconds of initdb and ~1.4 s of migrations; every test file would pay
 * them. Copy an initialised, migrated one instead (the app's migrate then finds every file applied).
 */
export function seedEmbeddedPostgres(dataDir: string): Promise<void> {
  return seedFromTemplate('postgres', {
    packageJson: '@electric-sql/pglite/package.json',
    schema: 'sql',
    dataDir,
    async build(building) {
      const pg = await openPostgres({ databaseUrl: undefined, dataDir: building }, createLogger('silent'))
      await migratePostgres(pg.sql)
      await pg.close()
    },
  })
}

/**
 * Embedded ClickHouse the same way: its migrations cost ~0.25-0.45 s of each start. The template is
 * built by a child process (chDB opens one data directory per process); a copy leaves out the instance
 * id, which must be each directory's own (src/db/clickhouse.ts, instanceId).
 */
export function seedEmbeddedClickHouse(dataDir: string): Promise<void> {
  return seedFromTemplate('clickhouse', {
    packageJson: 'chdb/package.json',
    schema: 'clickhouse',
    dataDir,
    build(building) {
      const built = spawnSync(process.execPath, ['--import=./src/ts-loader.mjs', 'test/helpers/build-chdb-template.ts', building], {
        cwd: new URL('../../', import.meta.url),
        stdio: 'inherit',
      })
      if (built.status !== 0) throw new Error(`building the ClickHouse template failed (${built.status ?? built.signal})`)
    },
    skip: (path) => path.endsWith('respin-instance-id'),
  })
}

/**
 * On a server, the same: a database migrated once per schema, copied for each test file by CREATE
 * DATABASE ... TEMPLATE (~0.1 s against ~0.7 s of migrations). Made under an advisory lock, and never
 * connected to after, as a template must be.
 */
async function templateDatabase(admin: postgres.Sql, shared: string): Promise<string> {
  const name = `respin_tpl_${schemaKey('sql')}`
  const ready = async () => (await admin`select 1 from pg_database where datname = ${name} and datistemplate`).length > 0
  if (await ready()) return name
  await admin`select pg_advisory_lock(7465763)` // admin has one connection: the lock and its unlock share it
  try {
    if (await ready()) return name
    const building = `${name}_building`
    // A crashed builder's leftovers: its half-made copy, or the renamed one not yet marked a template.
    await admin.unsafe(`drop database if exists "${building}" with (force)`)
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.unsafe(`create database "${building}"`)
    const url = new URL(shared)
    url.pathname = `/${building}`
    const pg = await openPostgres({ databaseUrl: url.toString(), dataDir: tmpdir(), max: 1 }, createLogger('silent'))
    await migratePostgres(pg.sql)
    await pg.close()
    // Older schemas' templates go (a suite still copying one fails to drop it, and it stays).
    for (const old of await admin<{ datname: string }[]>`select datname from pg_database where datname like 'respin\_tpl\_%' and datistemplate`) {
      await admin.unsafe(`alter database "${old.datname}" is_template false`)
      await admin.unsafe(`drop database "${old.datname}"`).catch(() => admin.unsafe(`alter database "${old.datname}" is_template true`))
    }
    await admin.unsafe(`alter database "${building}" rename to "${name}"`)
    await admin.unsafe(`alter database "${name}" is_template true`)
    return name
  } finally {
    await admin`select pg_advisory_unlock(7465763)`
  }
}

let fileDatabase: Promise<void> | undefined

/**
 * On a PostgreSQL server, each test file gets a database of its own (made on its first harness, dropped when
 * the file ends). Every harness runs the engines (webhook, delivery, campaign, gamification dispatchers),
 * and with one shared database one file's dispatcher would claim another file's rows, under its own
 * settings (retry delays, clock, URL policy). Processes the file spawns inherit the variable, so they
 * share the file's database as they shared the one before.
 */
export function isolateDatabase(): Promise<void> {
  fileDatabase ??= (async () => {
    const shared = process.env.DATABASE_URL
    if (!shared) return
    const url = new URL(shared)
    const name = `${url.pathname.slice(1)}_f${process.pid}_${randomBytes(3).toString('hex')}`.slice(0, 63)
    const admin = postgres(shared, { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database "${name}" template "${await templateDatabase(admin, shared)}"`)
    url.pathname = `/${name}`
    process.env.DATABASE_URL = url.toString()
    tap.teardown(async () => {
      await admin.unsafe(`drop database if exists "${name}" with (force)`).catch(() => {})
      await admin.end({ timeout: 2 })
    })
  })()
  return fileDatabase
}

export async function startHarness(
  t: Teardown,
  opts: { env?: Record<string, string>; extraRoutes?: RouteDef[]; clock?: () => Date; logDestination?: DestinationStream } = {},
): Promise<Harness> {
  await isolateDatabase()
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-test-'))
  if (!process.env.DATABASE_URL && !opts.env?.DATABASE_URL) await seedEmbeddedPostgres(dataDir)
  if (!process.env.CLICKHOUSE_URL && !opts.env?.CLICKHOUSE_URL) await seedEmbeddedClickHouse(dataDir)
  const adminKey = `admin-${randomBytes(16).toString('hex')}`
  const config = loadConfig({
    ...process.env,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ADMIN_KEY: adminKey,
    // One secret-box key for every test process: with a shared PostgreSQL server, one test file's
    // background engines may handle rows another file's process sealed.
    SECRET_KEY: process.env.SECRET_KEY ?? 'respin-tests-shared-secret-box-key-0123456789',
    // Every 2xx JSON body every test receives is checked against the schema its route documents (the
    // OpenAPI document's): a mismatch is a 500 RESPONSE_SCHEMA_MISMATCH, so a test fails on it.
    RESPONSE_SCHEMA_CHECK: process.env.RESPONSE_SCHEMA_CHECK ?? 'error',
    ...opts.env,
  })
  // A log destination: the app's logger exactly as configured (level, LOG_REDACT), written where the test reads.
  const log = opts.logDestination && createLogger(config.logLevel, { redact: config.logRedact, destination: opts.logDestination })
  const app = await startApp(config, { extraRoutes: opts.extraRoutes, clock: opts.clock, log })
  t.teardown(async () => {
    await app.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  const origin = `http://127.0.0.1:${app.port}`

  async function request<T>(method: string, path: string, o: RequestOptions = {}): Promise<TestResponse<T>> {
    const url = new URL(path.startsWith('/api/') ? path : `/api/v1${path}`, origin)
    for (const [k, v] of Object.entries(o.query ?? {})) url.searchParams.set(k, String(v))
    const headers: Record<string, string> = { ...o.headers }
    if (o.key) headers['x-api-key'] = o.key
    let body: string | undefined = o.rawBody
    if (o.body !== undefined) {
      body = JSON.stringify(o.body)
      headers['content-type'] = 'application/json'
    }
    const res = await fetch(url, { method, headers, body })
    const text = await res.text()
    let parsed: unknown = text
    if ((res.headers.get('content-type') ?? '').includes('json')) {
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = text
      }
    }
    return { status: res.status, body: parsed as T, text, headers: res.headers }
  }

  const admin = <T = any>(method: string, path: string, body?: unknown) =>
    request<T>(method, `/admin${path}`, { key: adminKey, body })

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function must(p: Promise<TestResponse<any>>, status: number): Promise<any> {
    const res = await p
    if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`)
    return res.body
  }

  async function createTenant(o: { name?: string; brand?: string | null } = {}): Promise<TestTenant> {
    const n = `${process.pid}-${++tenantCounter}-${randomBytes(3).toString('hex')}`
    const tenant = (await must(admin('POST', '/tenants', { name: o.name ?? `Tenant ${n}`, slug: `t-${n}` }), 201)).data
    const createBrand = async (slug: string) => {
      const b = (await must(admin('POST', `/tenants/${tenant.id}/brands`, { name: slug, slug }), 201)).data
      return { id: b.id as string, slug: b.slug as string }
    }
    const brand = o.brand === null ? { id: '', slug: '' } : await createBrand(o.brand ?? 'main')
    const createKey: TestTenant['createKey'] = async (k = {}) => {
      const created = (await must(admin('POST', `/tenants/${tenant.id}/keys`, { name: k.name ?? 'test', ...k }), 201)).data
      return { id: created.id, key: created.key }
    }
    const { key } = await createKey({ name: 'full' })
    return { id: tenant.id, slug: tenant.slug, brand, key, createBrand, createKey }
  }

  return { app, origin, adminKey, request, admin, createTenant }
}

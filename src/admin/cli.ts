// `npm run admin -- <command> [options]`: the admin API's operations straight against the database, for
// bootstrapping an installation before any admin key is in use. Prints JSON; a new key is printed once.
import { parseArgs } from 'node:util'
import type { TSchema } from 'typebox'
import { Compile } from 'typebox/compile'
import { ADMIN_ACTOR, recordAudit } from '../audit/service.ts'
import { ConfigError, loadConfig } from '../config.ts'
import { openBus, type Bus, type BusTopic } from '../db/bus.ts'
import { migratePostgres } from '../db/migrate.ts'
import { openPostgres, type Sql } from '../db/postgres.ts'
import { AppError, badRequest, notFound } from '../errors.ts'
import { describeErrors } from '../http/router.ts'
import { createLogger } from '../lib/log.ts'
import { isUuid } from '../lib/schemas.ts'
import * as q from './queries.ts'
import { CreateBrandBody, CreateKeyBody, CreateTenantBody } from './schemas.ts'
import * as admin from './service.ts'

const USAGE = `usage: npm run admin -- <command> [options]

  bootstrap     --name NAME [--brand SLUG]        tenant + default brand + full-access key
  tenant:create --name NAME [--slug SLUG]
  tenant:list
  brand:create  --tenant ID --name NAME --slug SLUG
  key:create    --tenant ID [--name NAME] [--scopes events:write,read] [--brand ID|SLUG] [--expires-at ISO]
  key:list      --tenant ID
  key:revoke    --id KEY_ID

Uses DATABASE_URL, or the embedded database in DATA_DIR (stop the server first: one process at a time).`

/** A usage error (an unknown option, a missing value): the message and the usage, exit 2. */
function usageError(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`)
  process.exit(2)
}

const OPTIONS = {
  name: { type: 'string' },
  slug: { type: 'string' },
  tenant: { type: 'string' },
  brand: { type: 'string' },
  scopes: { type: 'string' },
  'expires-at': { type: 'string' },
  id: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

function parseOptions() {
  try {
    return parseArgs({ allowPositionals: true, options: OPTIONS })
  } catch (err) {
    return usageError((err as Error).message)
  }
}
const { positionals, values } = parseOptions()

type Option = keyof typeof values

function need(name: Option): string {
  const value = values[name]
  if (typeof value !== 'string' || !value) usageError(`missing --${name}`)
  return value
}

const command = positionals[0]
if (values.help) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
if (!command) usageError('missing command')

/** What a command does against the database, once its options are checked. */
type Action = (deps: admin.AdminDeps) => Promise<unknown>

/**
 * Each command: its required options (a missing one is a usage error, exit 2) and `prepare`, which checks
 * the values as the API would (exit 1 with the API's error) and returns the action. Both run before the
 * database is opened, so a mistyped command costs nothing and touches nothing.
 */
const COMMANDS: Record<string, { required: Option[]; prepare(): Action }> = {
  bootstrap: {
    required: ['name'],
    prepare() {
      const tenantBody = checked(CreateTenantBody, { name: need('name') })
      const brandSlug = values.brand ?? 'main'
      const brandBody = checked(CreateBrandBody, { name: brandSlug, slug: brandSlug })
      return (deps) =>
        audited(deps, async (d, audit) => {
          const tenant = await admin.createTenant(d, tenantBody)
          await audit('adminCreateTenant', tenant.id, { type: 'tenant', id: tenant.id }, tenant)
          const brand = await admin.createBrand(d, { tenantId: tenant.id, ...brandBody })
          await audit('adminCreateBrand', tenant.id, { type: 'brand', id: brand.id }, brand)
          const key = await admin.createApiKey(d, { tenantId: tenant.id, name: 'bootstrap' })
          await audit('adminCreateKey', tenant.id, { type: 'api_key', id: key.id }, key)
          return { tenant, brand, key }
        })
    },
  },
  'tenant:create': {
    required: ['name'],
    prepare() {
      const body = checked(CreateTenantBody, { name: need('name'), ...(values.slug !== undefined && { slug: values.slug }) })
      return (deps) =>
        audited(deps, async (d, audit) => {
          const tenant = await admin.createTenant(d, body)
          await audit('adminCreateTenant', tenant.id, { type: 'tenant', id: tenant.id }, tenant)
          return tenant
        })
    },
  },
  'tenant:list': {
    required: [],
    prepare: () => (deps) => admin.listTenants(deps),
  },
  'brand:create': {
    required: ['tenant', 'name', 'slug'],
    prepare() {
      const tenantId = needId('tenant', 'tenant')
      const body = checked(CreateBrandBody, { name: need('name'), slug: need('slug') })
      return (deps) =>
        audited(deps, async (d, audit) => {
          const brand = await admin.createBrand(d, { tenantId, ...body })
          await audit('adminCreateBrand', tenantId, { type: 'brand', id: brand.id }, brand)
          return brand
        })
    },
  },
  'key:create': {
    required: ['tenant'],
    prepare() {
      const tenantId = needId('tenant', 'tenant')
      const body = checked(CreateKeyBody, {
        name: values.name ?? 'cli',
        ...(values.scopes !== undefined && { scopes: values.scopes.split(',').filter(Boolean) }),
        ...(values.brand !== undefined && { brand: values.brand }),
        ...(values['expires-at'] !== undefined && { expires_at: values['expires-at'] }),
      })
      return (deps) =>
        audited(deps, async (d, audit) => {
          const key = await admin.createApiKey(d, { tenantId, ...body })
          await audit('adminCreateKey', tenantId, { type: 'api_key', id: key.id }, key)
          return key
        })
    },
  },
  'key:list': {
    required: ['tenant'],
    prepare() {
      const tenantId = needId('tenant', 'tenant')
      return (deps) => admin.listApiKeys(deps, tenantId)
    },
  },
  'key:revoke': {
    required: ['id'],
    prepare() {
      const keyId = needId('id', 'API key')
      return (deps) =>
        audited(deps, async (d, audit) => {
          const before = await q.selectKey(d.sql, keyId)
          const revoked = await admin.revokeApiKey(d, keyId)
          await audit('adminRevokeKey', before?.tenant_id, { type: 'api_key', id: keyId }, revoked, before)
          return revoked
        })
    },
  },
}

/** The API's error code and message, as the CLI prints an error the API would answer with. */
const errorLine = (err: AppError) => `${err.code}: ${err.message}${err.details ? ` ${JSON.stringify(err.details)}` : ''}\n`

const spec = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined
if (!spec) usageError(`unknown command: ${command}`)
for (const name of spec.required) need(name)
let action: Action
try {
  action = spec.prepare()
} catch (err) {
  // An option's value the API would refuse (a body field, an id that is no UUID): exit 1, as after opening.
  if (!(err instanceof AppError)) throw err
  process.stderr.write(errorLine(err))
  process.exit(1)
}

// The CLI logs at warn unless LOG_LEVEL says otherwise (the service: info): its output is its answer.
// A bad setting is a message and exit 78 (EX_CONFIG), as for the service.
function configOrExit() {
  try {
    return loadConfig({ LOG_LEVEL: 'warn', ...process.env })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    process.stderr.write(`${err.message}\n`)
    process.exit(78)
  }
}
const config = configOrExit()
const log = createLogger(config.logLevel)
/**
 * A database the CLI cannot use (the embedded one held by a running server, a server that does not
 * answer) is a one-line message and exit 1, not a stack trace: the operator's next step is in it.
 */
function cannotOpen(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err)
  const hint = /in use by process/.test(message)
    ? 'stop the server first, or use the admin API (/api/v1/admin/*, with ADMIN_KEY) while it runs'
    : config.databaseUrl
      ? 'check DATABASE_URL and that the server answers'
      : `check DATA_DIR (${config.dataDir})`
  process.stderr.write(`cannot open the database: ${message}\n${hint}\n`)
  if (config.logLevel === 'debug' || config.logLevel === 'trace') process.stderr.write(`${(err as Error)?.stack ?? ''}\n`)
  process.exit(1)
}
const pg = await openPostgres({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, max: 2 }, log).catch(cannotOpen)
let exitCode = 0
try {
  await migratePostgres(pg.sql).catch(async (err: unknown) => {
    await pg.close().catch(() => {})
    cannotOpen(err)
  })
  const bus = await openBus(pg, log, config.databaseUrl, { publishOnly: true })
  const deps = { sql: pg.sql, bus }
  const result = await action(deps)
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
  await bus.close()
} catch (err) {
  exitCode = 1
  if (!(err instanceof AppError)) throw err
  process.stderr.write(errorLine(err))
} finally {
  await pg.close()
}
process.exit(exitCode)

/** The API's own body schemas check the CLI's input: what the API refuses, the CLI refuses. */
function checked<T>(schema: TSchema, value: T): T {
  const v = Compile(schema)
  const candidate = v.Default(value) as T
  if (!v.Check(candidate)) throw badRequest('invalid options', { errors: describeErrors(v, candidate, 'body') })
  return candidate
}

/** An id option: a value that is no UUID names nothing (as a path id in the API: 404). */
function needId(name: 'tenant' | 'id', what: string): string {
  const value = need(name)
  if (!isUuid(value)) throw notFound(what)
  return value
}

type Audit = (action: string, tenantId: string | undefined, target: { type: string; id: string }, after: unknown, before?: unknown) => Promise<void>

/**
 * A CLI change and its audit rows in one transaction, as the admin API writes them (src/admin/routes.ts,
 * `audited`), under the same action names, with request id `cli:<command>`. Cache invalidations go out
 * after the commit, so no server process reloads the old state in between.
 */
async function audited<T>(deps: admin.AdminDeps, fn: (d: admin.AdminDeps, audit: Audit) => Promise<T>): Promise<T> {
  const published: [BusTopic, string][] = []
  const result = await deps.sql.begin(async (tx) => {
    const sql = tx as unknown as Sql
    const bus: Bus = { ...deps.bus, publish: async (topic, payload) => void published.push([topic, payload]) }
    const audit: Audit = (action, tenantId, target, after, before) =>
      recordAudit(sql, { ...ADMIN_ACTOR, tenantId, action, target, after, before, requestId: `cli:${command}` })
    return fn({ sql, bus }, audit)
  })
  for (const [topic, payload] of published) await deps.bus.publish(topic, payload)
  return result as T
}

// `npm run admin -- <command> [options]`: the admin API's operations straight against the database, for
// bootstrapping an installation before any admin key is in use. Prints JSON; a new key is printed once.
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.ts'
import { openBus } from '../db/bus.ts'
import { migratePostgres } from '../db/migrate.ts'
import { openPostgres } from '../db/postgres.ts'
import { AppError } from '../errors.ts'
import { createLogger } from '../lib/log.ts'
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

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: 'string' },
    slug: { type: 'string' },
    tenant: { type: 'string' },
    brand: { type: 'string' },
    scopes: { type: 'string' },
    'expires-at': { type: 'string' },
    id: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
})

function need(name: keyof typeof values): string {
  const value = values[name]
  if (typeof value !== 'string' || !value) {
    process.stderr.write(`missing --${name}\n\n${USAGE}\n`)
    process.exit(2)
  }
  return value
}

const command = positionals[0]
if (!command || values.help) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(command ? 0 : 2)
}

// The CLI logs at warn unless LOG_LEVEL says otherwise (the service: info): its output is its answer.
const config = loadConfig({ LOG_LEVEL: 'warn', ...process.env })
const log = createLogger(config.logLevel)
const pg = await openPostgres({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, max: 2 }, log)
let exitCode = 0
try {
  await migratePostgres(pg.sql)
  const bus = await openBus(pg, log, config.databaseUrl)
  const deps = { sql: pg.sql, bus }
  const result = await run(deps)
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
  await bus.close()
} catch (err) {
  exitCode = 1
  if (err instanceof AppError) process.stderr.write(`${err.code}: ${err.message}${err.details ? ` ${JSON.stringify(err.details)}` : ''}\n`)
  else throw err
} finally {
  await pg.close()
}
process.exit(exitCode)

async function run(deps: admin.AdminDeps): Promise<unknown> {
  switch (command) {
    case 'bootstrap': {
      const tenant = await admin.createTenant(deps, { name: need('name') })
      const brandSlug = values.brand ?? 'main'
      const brand = await admin.createBrand(deps, { tenantId: tenant.id, name: brandSlug, slug: brandSlug })
      const key = await admin.createApiKey(deps, { tenantId: tenant.id, name: 'bootstrap' })
      return { tenant, brand, key }
    }
    case 'tenant:create':
      return admin.createTenant(deps, { name: need('name'), slug: values.slug })
    case 'tenant:list':
      return admin.listTenants(deps)
    case 'brand:create':
      return admin.createBrand(deps, { tenantId: need('tenant'), name: need('name'), slug: need('slug') })
    case 'key:create':
      return admin.createApiKey(deps, {
        tenantId: need('tenant'),
        name: values.name ?? 'cli',
        scopes: values.scopes ? values.scopes.split(',').filter(Boolean) : undefined,
        brand: values.brand,
        expires_at: values['expires-at'],
      })
    case 'key:list':
      return admin.listApiKeys(deps, need('tenant'))
    case 'key:revoke':
      return admin.revokeApiKey(deps, need('id'))
    default:
      process.stderr.write(`unknown command: ${command}\n\n${USAGE}\n`)
      process.exit(2)
  }
}

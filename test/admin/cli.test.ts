// `npm run admin -- ...` bootstraps an installation straight against the database.
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { isolateDatabase, seedEmbeddedPostgres, startHarness } from '../helpers/harness.ts'
import { probeRoutes } from '../helpers/probe-routes.ts'

await isolateDatabase() // the CLI and the server below share this file's own database
const dataDir = mkdtempSync(join(tmpdir(), 'respin-cli-'))
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
// Embedded: the migrated PGlite template, as a harness's directory gets (a first initdb is seconds).
if (!process.env.DATABASE_URL) await seedEmbeddedPostgres(dataDir)
const cli = (...args: string[]) =>
  JSON.parse(
    execFileSync(process.execPath, ['--import', './src/ts-loader.mjs', 'src/admin/cli.ts', ...args], {
      env: { ...process.env, DATA_DIR: dataDir, CLICKHOUSE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    }),
  )

t.test('bootstrap creates a tenant, its default brand and a working full-access key, printed once', async (t) => {
  const out = cli('bootstrap', '--name', 'Acme Casino', '--brand', 'acme')
  t.match(out.tenant, { name: 'Acme Casino', slug: 'acme-casino' })
  t.match(out.brand, { slug: 'acme', is_default: true, tenant_id: out.tenant.id })
  t.match(out.key.key, /^rsp_/)
  t.same(out.key.scopes, [])
  const more = cli('key:create', '--tenant', out.tenant.id, '--scopes', 'events:write', '--brand', 'acme', '--name', 'ingest')
  t.same(more.scopes, ['events:write'])
  t.equal(more.brand_id, out.brand.id)
  const listed = cli('key:list', '--tenant', out.tenant.id)
  t.equal(listed.length, 2)
  t.notOk(JSON.stringify(listed).includes(out.key.key), 'listing never shows a key')
  const revoked = cli('key:revoke', '--id', more.id)
  t.equal(revoked.id, more.id)

  // The server started on the same data directory accepts the bootstrap key.
  const h = await startHarness(t, { env: { DATA_DIR: dataDir }, extraRoutes: probeRoutes })
  const res = await h.request('GET', '/_probe/whoami', { key: out.key.key })
  t.equal(res.status, 200)
  t.equal(res.body.brand.id, out.brand.id)
  t.equal((await h.request('POST', '/_probe/ingest', { key: more.key })).status, 401, 'the revoked key fails')
})

t.test('a usage error exits 2 with the usage text before the database is opened', async (t) => {
  // DATA_DIR under a file: a CLI that opened the database first would fail there instead (exit 1).
  const file = join(dataDir, 'not-a-directory')
  writeFileSync(file, '')
  for (const [args, message] of [[['key:create'], /missing --tenant/], [['brand:create', '--tenant', 'x', '--name', 'n'], /missing --slug/], [['tenant:drop'], /unknown command: tenant:drop/], [[], /missing command/]] as const) {
    const r = spawnSync(process.execPath, ['--import', './src/ts-loader.mjs', 'src/admin/cli.ts', ...args], {
      env: { ...process.env, DATA_DIR: join(file, 'data'), DATABASE_URL: '', CLICKHOUSE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    })
    t.equal(r.status, 2, args.join(' ') || '(no command)')
    t.match(r.stderr, message)
    t.match(r.stderr, /usage: npm run admin/)
  }
  // A value the API would refuse: its error and exit 1, still without opening the database.
  for (const [args, message] of [[['key:list', '--tenant', 'nope'], /^NOT_FOUND: tenant not found/], [['brand:create', '--tenant', '00000000-0000-4000-8000-000000000000', '--name', 'n', '--slug', 'Not A Slug'], /^BAD_REQUEST: invalid options .*slug/]] as const) {
    const r = spawnSync(process.execPath, ['--import', './src/ts-loader.mjs', 'src/admin/cli.ts', ...args], {
      env: { ...process.env, DATA_DIR: join(file, 'data'), DATABASE_URL: '', CLICKHOUSE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    })
    t.equal(r.status, 1, args.join(' '))
    t.match(r.stderr, message)
    t.notMatch(r.stderr, /cannot open the database/)
  }
})

t.test('a database the CLI cannot open is a message naming the next step and exit 1, not a stack trace', async (t) => {
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, ['--import', './src/ts-loader.mjs', 'src/admin/cli.ts', 'tenant:list'], {
      env: { ...process.env, CLICKHOUSE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent', ...env },
      encoding: 'utf8',
      timeout: 60_000,
    })
  // The embedded database held by a running server (here: this test process, alive, holds the lock).
  const held = mkdtempSync(join(tmpdir(), 'respin-cli-held-'))
  t.teardown(() => rmSync(held, { recursive: true, force: true }))
  writeFileSync(join(held, 'postgres.pid'), String(process.pid))
  const busy = run({ DATA_DIR: held, DATABASE_URL: '' })
  t.equal(busy.status, 1)
  t.match(busy.stderr, /in use by process \d+/)
  t.match(busy.stderr, /stop the server first, or use the admin API/)
  t.notMatch(busy.stderr, /\n\s+at /, 'no stack trace')
  t.equal(busy.stdout, '')

  // A PostgreSQL server that does not answer.
  const refused = run({ DATA_DIR: held, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/respin' })
  t.equal(refused.status, 1)
  t.match(refused.stderr, /cannot open the database: .*ECONNREFUSED/)
  t.match(refused.stderr, /check DATABASE_URL/)
  t.notMatch(refused.stderr, /\n\s+at /, 'no stack trace')
})

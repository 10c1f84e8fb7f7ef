// Dedupe across a restart (same DATA_DIR / DATABASE_URL) and across two server processes sharing Redis
// and PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { call, makeTenant, spawnServer, uid } from './helpers.ts'

const dataDir = mkdtempSync(join(tmpdir(), 'respin-restart-'))
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
const adminKey = `admin-${uid('k')}`
const config = () =>
  loadConfig({ ...process.env, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_KEY: adminKey, RESPONSE_SCHEMA_CHECK: process.env.RESPONSE_SCHEMA_CHECK ?? 'error' })

const batch = (ids: string[]) => ({ events: ids.map((id, i) => ({ player_id: `p${i % 7}`, event_type: 'login', event_id: id })) })

t.test('dedupe survives a restart of the service on the same stores', async (t) => {
  let app = await startApp(config())
  let origin = `http://127.0.0.1:${app.port}`
  const tenant = await makeTenant(origin, adminKey)
  const ids = Array.from({ length: 60 }, () => uid('r'))
  const first = await call(origin, 'POST', '/events', tenant.key, batch(ids.slice(0, 40)))
  t.match(first.body, { stored: 40, deduped: 0 })
  await app.close()

  app = await startApp(config())
  t.teardown(() => app.close())
  origin = `http://127.0.0.1:${app.port}`
  const second = await call(origin, 'POST', '/events', tenant.key, batch(ids))
  t.equal(second.status, 200)
  t.match(second.body, { received: 60, stored: 20, deduped: 40 })
  const third = await call(origin, 'POST', '/events', tenant.key, batch(ids))
  t.match(third.body, { stored: 0, deduped: 60 })
  await app.ctx.ingest?.spool.flush() // the default spool mode: acknowledged events may not be in ClickHouse yet
  const [row] = await app.ctx.ch.query<{ n: string }>('SELECT count() AS n FROM events WHERE tenant_id = {t:UUID}', { t: tenant.id })
  t.equal(Number(row?.n), 60)
})

t.test('two server processes sharing Redis and PostgreSQL dedupe each other', { skip: !process.env.REDIS_URL || !process.env.DATABASE_URL ? 'needs REDIS_URL and DATABASE_URL' : false }, async (t) => {
  const key = `admin-${uid('k2')}`
  const dirs = [mkdtempSync(join(tmpdir(), 'respin-p1-')), mkdtempSync(join(tmpdir(), 'respin-p2-'))]
  t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))
  const servers = await Promise.all(dirs.map((d) => spawnServer({ DATA_DIR: d, ADMIN_KEY: key, RATE_LIMIT_INGEST_PER_MIN: '0' })))
  t.teardown(async () => {
    for (const s of servers) s.proc.kill('SIGTERM')
    await Promise.all(servers.map((s) => s.exited))
  })
  const [a, b] = servers as [(typeof servers)[0], (typeof servers)[0]]
  const tenant = await makeTenant(a.origin, key)
  const ids = Array.from({ length: 500 }, () => uid('x'))
  // Same batches to both processes at once, plus re-sends: each id is stored by exactly one of them.
  const chunks = Array.from({ length: 10 }, (_, i) => ids.slice(i * 50, i * 50 + 50))
  const results = await Promise.all(
    chunks.flatMap((c) => [call(a.origin, 'POST', '/events', tenant.key, batch(c)), call(b.origin, 'POST', '/events', tenant.key, batch(c))]),
  )
  t.ok(results.every((r) => r.status === 200), 'all accepted')
  const stored = results.reduce((s, r) => s + r.body.stored, 0)
  const deduped = results.reduce((s, r) => s + r.body.deduped, 0)
  t.equal(stored, 500, 'each id stored once across both processes')
  t.equal(deduped, 500)
  const again = await call(b.origin, 'POST', '/events', tenant.key, batch(ids.slice(0, 100)))
  t.match(again.body, { stored: 0, deduped: 100 })
})

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { ev, post, storedCount } from './helpers.ts'

/** Avoid straddling a minute boundary (the window is a fixed minute). */
async function freshWindow() {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 8_000) await new Promise((r) => setTimeout(r, left + 50))
}

t.test('over RATE_LIMIT_INGEST_PER_MIN a tenant gets 429 RATE_LIMITED with Retry-After; other tenants do not', async (t) => {
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '5' } })
  const a = await h.createTenant()
  const b = await h.createTenant()
  await freshWindow()
  for (let i = 0; i < 5; i++) t.equal((await post(h, a.key, ev())).status, 200)
  const over = await post(h, a.key, ev())
  t.equal(over.status, 429)
  t.equal(over.body.code, 'RATE_LIMITED')
  t.type(over.body.error, 'string')
  const retry = Number(over.headers.get('retry-after'))
  t.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`)
  t.equal((await post(h, b.key, ev())).status, 200, 'another tenant has its own budget')
  t.equal(await storedCount(h, a.id), 5, 'the refused request stored nothing')
})

t.test('RATE_LIMIT_INGEST_PER_MIN=0 disables the limiter', async (t) => {
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
  const a = await h.createTenant()
  const results = await Promise.all(Array.from({ length: 30 }, () => post(h, a.key, ev())))
  t.ok(results.every((r) => r.status === 200))
})

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

/** A private redis-server; by default it keeps nothing, `persistIn` keeps every write in an append-only file there. */
function startRedis(port: number, persistIn?: string): Promise<ChildProcess> {
  const persistence = persistIn ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', persistIn] : ['--appendonly', 'no']
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence], { stdio: ['ignore', 'pipe', 'ignore'] })
  return new Promise((resolve, reject) => {
    proc.stdout?.on('data', (d: Buffer) => d.toString().includes('Ready to accept') && resolve(proc))
    proc.on('error', reject)
  })
}

// Uses a private redis-server, so stopping it does not disturb anything else using the shared one.
t.test('Redis stopped mid-run: requests go through (fail open), fast; the limit applies again once it is back', { skip: process.env.REDIS_URL ? false : 'only in the real-server run (REDIS_URL set)' }, async (t) => {
  const port = await freePort()
  let redis = await startRedis(port)
  t.teardown(() => redis.kill('SIGTERM'))
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '3', REDIS_URL: `redis://127.0.0.1:${port}` } })
  const a = await h.createTenant()
  await freshWindow()
  const before = ev()
  t.equal((await post(h, a.key, before)).status, 200)
  for (let i = 0; i < 2; i++) t.equal((await post(h, a.key, ev())).status, 200)
  t.equal((await post(h, a.key, ev())).status, 429)

  redis.kill('SIGKILL')
  await new Promise((r) => redis.on('exit', r))
  const e = ev()
  for (let i = 0; i < 5; i++) {
    const started = Date.now()
    const res = await post(h, a.key, i === 0 ? e : ev())
    t.equal(res.status, 200, `request ${i} during the outage: ${res.status}`)
    t.ok(Date.now() - started < 2500, `answered in ${Date.now() - started} ms`)
  }
  // Dedupe keeps working on its fallback (in-process window checked against ClickHouse).
  t.match((await post(h, a.key, e)).body, { stored: 0, deduped: 1 })

  redis = await startRedis(port)
  let limitedAgain = false
  const deadline = Date.now() + 15_000
  while (!limitedAgain && Date.now() < deadline) {
    const res = await post(h, a.key, ev())
    limitedAgain = res.status === 429
    if (!limitedAgain) await new Promise((r) => setTimeout(r, 200))
  }
  t.ok(limitedAgain, 'the limiter counts in Redis again after it comes back')
})

/**
 * The service on a private Redis that dies (SIGKILL) once `before` is stored, and is started again once
 * `during` is stored through the fallback: empty, or with its memory when `persistIn` is given.
 */
async function throughRedisOutage(t: Test, persistIn?: string) {
  const port = await freePort()
  let redis = await startRedis(port, persistIn)
  t.teardown(() => redis.kill('SIGTERM'))
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', REDIS_URL: `redis://127.0.0.1:${port}` } })
  const a = await h.createTenant()
  const before = ev()
  t.match((await post(h, a.key, before)).body, { stored: 1 })
  redis.kill('SIGKILL')
  await new Promise((r) => redis.on('exit', r))
  const during = ev()
  t.match((await post(h, a.key, during)).body, { stored: 1 }, 'stored through the fallback')
  redis = await startRedis(port, persistIn)
  // Wait until the client is connected to the new Redis, so the next claim really goes through it.
  const deadline = Date.now() + 15_000
  while (h.app.ctx.redis?.status !== 'ready' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
  t.equal(h.app.ctx.redis?.status, 'ready')
  return { h, a, before, during }
}

t.test('dedupe survives Redis restarting empty: ids stored before and during the outage are found in ClickHouse', { skip: process.env.REDIS_URL ? false : 'only in the real-server run (REDIS_URL set)' }, async (t) => {
  const { h, a, before, during } = await throughRedisOutage(t)
  const res = await post(h, a.key, { events: [before, during] })
  t.equal(res.status, 200, res.text)
  t.match(res.body, { stored: 0, deduped: 2 })
  t.equal(await storedCount(h, a.id), 2)
})

t.test('Redis down in spool mode: a retry of an event stored before the outage, still in our own spool, is a duplicate', { skip: process.env.REDIS_URL ? false : 'only in the real-server run (REDIS_URL set)' }, async (t) => {
  const port = await freePort()
  const redis = await startRedis(port)
  t.teardown(() => redis.kill('SIGTERM'))
  // The flusher never runs on its own here: the event stays in the spool until something flushes it.
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', REDIS_URL: `redis://127.0.0.1:${port}`, INGEST_ACK_AFTER: 'postgres', INGEST_FLUSH_INTERVAL_MS: '3600000' } })
  const a = await h.createTenant()
  const before = ev()
  t.match((await post(h, a.key, before)).body, { stored: 1 })
  t.equal(await storedCount(h, a.id), 0, 'acknowledged, still in the spool')
  redis.kill('SIGKILL')
  await new Promise((r) => redis.on('exit', r))
  // Only Redis remembered the id: the fallback must flush our own spool before it asks ClickHouse.
  const retry = await post(h, a.key, before)
  t.equal(retry.status, 200, retry.text)
  t.match(retry.body, { stored: 0, deduped: 1 })
  t.equal(await storedCount(h, a.id), 1, 'stored once')
})

t.test('Redis back with its memory after an outage: an event stored during the outage is a duplicate on retry', { skip: process.env.REDIS_URL ? false : 'only in the real-server run (REDIS_URL set)' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'respin-redis-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // Persistent, so that the restart brings back everything (the dedupe epoch too): to the service it
  // looks like a Redis that was only unreachable.
  const { h, a, before, during } = await throughRedisOutage(t, dir)
  t.equal(await h.app.ctx.redis?.get('rsp:dd:epoch').then((v) => v?.slice(0, 2)), 'i:', 'Redis kept its memory: no re-verification epoch')
  const res = await post(h, a.key, { events: [during, before] })
  t.equal(res.status, 200, res.text)
  t.match(res.body, { stored: 0, deduped: 2 })
  t.equal(await storedCount(h, a.id), 2, 'each stored once')
})

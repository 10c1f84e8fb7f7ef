// Dedupe through Redis outages (docs/ingestion.md, "Dedupe"): Redis restarting empty, Redis down while our
// own acknowledged events are still in the spool, and Redis back with its memory after being unreachable.
// Each test runs its own redis-server, so stopping it disturbs nothing else.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { ev, freePort, post, startRedis, storedCount } from './helpers.ts'

/**
 * The service on a private Redis that dies (SIGKILL) once `before` is stored, and is started again once
 * `during` is stored through the fallback: empty, or with its memory when `persistIn` is given.
 */
async function throughRedisOutage(t: Test, persistIn?: string) {
  const port = await freePort()
  let redis = await startRedis(port, persistIn)
  t.teardown(() => redis.kill('SIGTERM'))
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', REDIS_URL: `redis://127.0.0.1:${port}`, INGEST_ACK_AFTER: 'clickhouse' } })
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

import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { ev, freePort, post, startRedis, storedCount } from './helpers.ts'

/** Avoid straddling a minute boundary (the window is a fixed minute). */
async function freshWindow() {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 8_000) await new Promise((r) => setTimeout(r, left + 50))
}

t.test('over RATE_LIMIT_INGEST_PER_MIN a tenant gets 429 RATE_LIMITED with Retry-After; other tenants do not', async (t) => {
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '5', INGEST_ACK_AFTER: 'clickhouse' } })
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
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'clickhouse' } })
  const a = await h.createTenant()
  const results = await Promise.all(Array.from({ length: 30 }, () => post(h, a.key, ev())))
  t.ok(results.every((r) => r.status === 200))
})

// Uses a private redis-server, so stopping it does not disturb anything else using the shared one.
t.test('Redis stopped mid-run: requests go through (fail open), fast; the limit applies again once it is back', { skip: process.env.REDIS_URL ? false : 'only in the real-server run (REDIS_URL set)' }, async (t) => {
  const port = await freePort()
  let redis = await startRedis(port)
  t.teardown(() => redis.kill('SIGTERM'))
  const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '3', REDIS_URL: `redis://127.0.0.1:${port}`, INGEST_ACK_AFTER: 'clickhouse' } })
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

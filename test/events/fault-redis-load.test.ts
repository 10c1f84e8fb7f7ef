// Faults: Redis killed (SIGKILL) and restarted empty while clients send events. The rate limiter fails open
// (no 429, no 503 for lack of Redis), dedupe stays exact through the fallback, and the service goes back to
// Redis by itself when it returns. Every acknowledged event is in the events export exactly once.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { freePort, startRedis } from './helpers.ts'
import { countExported, sendUnderLoad } from './load.ts'

t.test('Redis killed and restarted under load', { skip: process.env.REDIS_URL ? false : 'only in the real-server run (REDIS_URL set: needs redis-server)' }, async (t) => {
  const port = await freePort()
  let redis = await startRedis(port)
  t.teardown(() => redis.kill('SIGTERM'))
  // A limiter that is on (and generous): while Redis is gone it must let traffic through, not refuse it.
  const h = await startHarness(t, { env: { REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_INGEST_PER_MIN: '1000000' } })
  const tenant = await h.createTenant()
  const BATCHES = 120
  const SIZE = 10
  let phase: 'before' | 'down' | 'back' = 'before'
  const ackedIn = { before: 0, down: 0, back: 0 }
  let switching: Promise<void> | undefined
  const load = await sendUnderLoad(h, tenant.key, {
    batches: BATCHES,
    size: SIZE,
    concurrency: 6,
    onAcked: async (n) => {
      ackedIn[phase]++
      if (n === 30 && phase === 'before') {
        switching = (async () => {
          redis.kill('SIGKILL')
          await new Promise((r) => redis.on('exit', r))
          phase = 'down'
        })()
        await switching
      } else if (n === 75 && phase === 'down') {
        redis = await startRedis(port)
        phase = 'back'
      }
    },
  })
  t.equal(phase, 'back')
  t.ok(ackedIn.down > 0, `${ackedIn.down} batches acknowledged while Redis was down`)
  t.notOk(load.statuses.has(429), 'the limiter failed open')
  t.same(load.malformed, [], 'every refusal in the error shape')
  t.notOk(load.statuses.has(500), 'no 500')
  t.equal(load.stored + load.deduped, BATCHES * SIZE)
  // Back on Redis without a restart.
  const deadline = Date.now() + 15_000
  while (h.app.ctx.redis?.status !== 'ready' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
  t.equal(h.app.ctx.redis?.status, 'ready', 'reconnected by itself')
  t.ok((await h.app.ctx.redis?.dbsize()) ?? 0 > 0, 'the new Redis is in use again')
  // Re-sending every batch now is a pure duplicate.
  const again = await sendUnderLoad(h, tenant.key, { batches: 0, size: SIZE, concurrency: 1 })
  t.equal(again.stored, 0)
  let dup = 0
  for (const batch of load.batches.slice(0, 20)) {
    const res = await h.request('POST', '/events', { key: tenant.key, body: { events: batch } })
    t.equal(res.status, 200)
    dup += res.body.deduped
  }
  t.equal(dup, 20 * SIZE, 'acknowledged events re-sent: all duplicates')
  t.same(await countExported(h, tenant.key), { rows: BATCHES * SIZE, unique: BATCHES * SIZE }, 'every acknowledged event exactly once')
})

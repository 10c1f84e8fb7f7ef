import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

// Redis configured but nothing listens there: health must say so quickly instead of hanging.
const h = await startHarness(t, { env: { REDIS_URL: 'redis://127.0.0.1:1' } })

t.test('a configured dependency that does not answer makes health 503 degraded, without hanging', async (t) => {
  const started = Date.now()
  const res = await h.request('GET', '/health')
  t.ok(Date.now() - started < 3000, 'answers within the check timeout')
  t.equal(res.status, 503)
  t.equal(res.body.status, 'degraded')
  t.equal(res.body.service, 'respin')
  t.equal(res.body.checks.redis.status, 'fail')
  t.type(res.body.checks.redis.error, 'string')
  t.equal(res.body.checks.postgres.status, 'ok')
})

import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)

t.test('health is public and reports every dependency', async (t) => {
  const res = await h.request('GET', '/health')
  t.equal(res.status, 200)
  t.equal(res.body.status, 'ok')
  t.equal(res.body.service, 'respin')
  t.type(res.body.version, 'string')
  t.ok(!Number.isNaN(Date.parse(res.body.timestamp)))
  t.equal(res.body.checks.postgres.status, 'ok')
  t.equal(res.body.checks.clickhouse.status, 'ok')
  t.ok(['ok', 'embedded'].includes(res.body.checks.redis.status))
})

t.test('an unknown route is a JSON 404 in the error shape', async (t) => {
  const res = await h.request('GET', '/no-such-thing')
  t.equal(res.status, 404)
  t.equal(res.body.code, 'NOT_FOUND')
  t.type(res.body.error, 'string')
  t.match(res.headers.get('content-type'), /application\/json/)
})

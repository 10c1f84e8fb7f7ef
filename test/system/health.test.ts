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

t.test('ClickHouse not answering: reported in checks; 200 while ingestion is acknowledged after PostgreSQL and Redis keeps dedupe, else 503', async (t) => {
  const ch = h.app.ctx.ch
  const ping = ch.ping
  t.teardown(() => {
    ch.ping = ping
  })
  // The embedded engine cannot be stopped from here: its ping fails as a server's would.
  ch.ping = async () => {
    throw new Error('connect ECONNREFUSED 127.0.0.1:8123')
  }
  const config = h.app.ctx.config as { ingestAckAfter: 'clickhouse' | 'postgres' }
  const mode = config.ingestAckAfter
  t.teardown(() => {
    config.ingestAckAfter = mode
  })
  await new Promise((r) => setTimeout(r, 1100)) // past the 1 s result cache
  config.ingestAckAfter = 'postgres'
  const soft = await h.request('GET', '/health')
  if (process.env.REDIS_URL) {
    t.equal(soft.status, 200)
    t.match(soft.body.checks.clickhouse, { status: 'fail', required: false, impact: /spool/ })
  } else {
    // Without Redis, dedupe checks each new event id against ClickHouse: ingestion stops with it.
    t.equal(soft.status, 503)
    t.notOk('required' in soft.body.checks.clickhouse)
  }
  await new Promise((r) => setTimeout(r, 1100))
  config.ingestAckAfter = 'clickhouse'
  const hard = await h.request('GET', '/health')
  t.equal(hard.status, 503)
  t.equal(hard.body.status, 'degraded')
  t.notOk(hard.body.checks.clickhouse.required === false, 'required when ingestion waits for it')
})

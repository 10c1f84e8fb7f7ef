// A ClickHouse server that is down when the service starts: everything but analytics and exports works,
// those answer 503 with Retry-After (not 500), and the migrations wait in the background.
// The report reader's limits (slots, queue, ClickHouse's own time limit) run on the embedded chDB.
import net from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openClickHouse, reportsOf } from '../../src/db/clickhouse.ts'
import { AppError } from '../../src/errors.ts'
import { createLogger } from '../../src/lib/log.ts'
import { startHarness } from '../helpers/harness.ts'

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('a ClickHouse server down at start: the service starts, analytics and exports answer 503', async (t) => {
  const h = await startHarness(t, { env: { CLICKHOUSE_URL: `http://127.0.0.1:${await closedPort()}/respin`, INGEST_ACK_AFTER: 'postgres' } })
  t.equal(h.app.ctx.ch.schemaReady, false, 'its migrations are still to run')
  const tenant = await h.createTenant()
  const withRedis = Boolean(process.env.REDIS_URL)

  const health = await h.request<any>('GET', '/health')
  t.equal(health.body.checks.postgres.status, 'ok')
  t.equal((await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'p1' } })).status, 201, 'CRUD goes on')
  // A running deployment's Redis holds its dedupe memory, marked whole (dedupe.ts, EPOCH_KEY); a fresh one
  // would first ask ClickHouse whether it holds recent events. Every test file sets this same value.
  if (withRedis) await h.app.ctx.redis!.set('rsp:dd:epoch', `i:${Date.now()}`, 'NX')
  const ingest = await h.request<any>('POST', '/events', { key: tenant.key, body: { player_id: 'p1', event_type: 'login', event_id: 'e1' } })
  if (withRedis) {
    // Redis is the dedupe memory: ingestion needs no ClickHouse to accept an event once.
    t.equal(health.status, 200, 'ClickHouse is optional while ingestion is acknowledged after PostgreSQL')
    t.match(health.body.checks.clickhouse, { status: 'fail', required: false, impact: /spool/ })
    t.equal(ingest.status, 200, 'events are acknowledged into the PostgreSQL spool')
    const spooled = await h.app.ctx.sql<{ n: number }[]>`select count(*)::int as n from event_spool`
    t.equal(spooled[0]!.n, 1, 'and wait there for ClickHouse')
  } else {
    // Without Redis a new event id is checked against ClickHouse before it is taken (dedupe.ts): no
    // acknowledgement it could not keep, and health says the service cannot ingest.
    t.equal(health.status, 503)
    t.match(health.body.checks.clickhouse, { status: 'fail' })
    t.notOk('required' in health.body.checks.clickhouse)
    t.equal(ingest.status, 503)
    t.equal(ingest.body.code, 'SERVICE_UNAVAILABLE')
  }

  for (const path of ['/analytics/summary', '/analytics/revenue?dimension=country', '/analytics/timeseries?tz=Europe/Berlin', '/export/events']) {
    const res = await h.request<any>('GET', path, { key: tenant.key })
    t.equal(res.status, 503, path)
    t.equal(res.body.code, 'SERVICE_UNAVAILABLE', path)
    t.match(res.body.error, /ClickHouse/, path)
    t.equal(res.headers.get('retry-after'), '5', path)
  }
})

t.test('reports: a slot each at most, a bounded queue, and ClickHouse stops a query at its time limit', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'respin-reports-'))
  const ch = await openClickHouse({ clickhouseUrl: undefined, dataDir: dir }, createLogger('silent'))
  t.teardown(async () => {
    await ch.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const order: string[] = []
  const reports = reportsOf(ch, 1, 1)
  const slow = reports.query<{ n: number }>('SELECT 1 AS n, sleep(0.4)').then(() => order.push('first'))
  const waiting = reports.query<{ n: number }>('SELECT 2 AS n').then((rows) => order.push(`second:${rows[0]!.n}`))
  const refused = await reports.query('SELECT 3').then(
    () => undefined,
    (err: unknown) => err,
  )
  t.ok(refused instanceof AppError && refused.code === 'SERVICE_UNAVAILABLE', 'a third while one runs and one waits is refused at once')
  t.match((refused as AppError).headers, { 'retry-after': '1' })
  await Promise.all([slow, waiting])
  t.same(order, ['first', 'second:2'], 'the waiting one runs when the slot is free')
  t.same(await reports.query('SELECT 4 AS n'), [{ n: 4 }], 'the slot is free again')

  const overrun = await ch.reports
    .query('SELECT count() FROM system.numbers WHERE NOT ignore(sipHash64(number)) SETTINGS max_execution_time = 0.3')
    .then(
      () => undefined,
      (err: unknown) => err,
    )
  t.ok(overrun instanceof AppError && overrun.code === 'SERVICE_UNAVAILABLE', 'a query over its time limit is stopped by ClickHouse: a 503')
  t.match((overrun as AppError).message, /limit/)
  const broken = await ch.reports.query('SELECT nosuchcolumn FROM system.one').then(
    () => undefined,
    (err: unknown) => err,
  )
  t.ok(broken instanceof Error && !(broken instanceof AppError), 'a query ClickHouse refuses stays an error of its own (a 500)')
})

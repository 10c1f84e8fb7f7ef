// Faults: PostgreSQL connections terminated (pg_terminate_backend) again and again while clients send
// events. Requests either succeed or fail cleanly (503 in the error shape) and a retry succeeds; every
// acknowledged event ends up in ClickHouse exactly once and in the profiles exactly once.
// (Counted with a direct ClickHouse query: GET /export/events is being built on another branch.)
//
// NOT PASSING YET, so it runs only with RESPIN_FAULT_PG=1: postgres.js 3.4.9 (our driver) throws an
// uncatchable TypeError from a setImmediate when a connection dies with a small write buffered
// (connection.js nextWrite, `socket.write` on null: porsager/postgres#1208, #1154, fix proposed in #1209),
// which ends the process, or under tap leaves the pool stuck so requests hang; and the array-type query
// postgres.js runs first on every new connection drops its promise, so a connection terminated at that
// moment is an unhandled rejection, which also ends the process (#1192, #1223). Enable it in CI once the
// driver is fixed or patched.
const ENABLED = process.env.DATABASE_URL && process.env.RESPIN_FAULT_PG === '1'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { countStored, sendUnderLoad } from './load.ts'

for (const ackAfter of ['clickhouse', 'postgres'] as const) {
  t.test(`PostgreSQL connections terminated under load (INGEST_ACK_AFTER=${ackAfter})`, { skip: ENABLED ? false : 'needs DATABASE_URL and RESPIN_FAULT_PG=1 (postgres.js nextWrite crash, porsager/postgres#1208)' }, async (t) => {
    // Our service's connections carry a name of their own, so the killer touches no other test's.
    const appName = `respin-fault-${randomBytes(4).toString('hex')}`
    const url = new URL(process.env.DATABASE_URL as string)
    url.searchParams.set('application_name', appName)
    const h = await startHarness(t, { env: { DATABASE_URL: url.toString(), INGEST_ACK_AFTER: ackAfter, RATE_LIMIT_INGEST_PER_MIN: '0' } })
    const killer = postgres(process.env.DATABASE_URL as string, { max: 1, onnotice: () => {} })
    t.teardown(() => killer.end())
    const tenant = await h.createTenant()
    let terminated = 0
    let stop = false
    const killing = (async () => {
      await new Promise((r) => setTimeout(r, 300))
      while (!stop) {
        const rows = await killer`select pg_terminate_backend(pid) as ok from pg_stat_activity where application_name = ${appName}`
        terminated += rows.filter((r) => r.ok).length
        await new Promise((r) => setTimeout(r, 250))
      }
    })()
    const BATCHES = 150
    const SIZE = 10
    const load = await sendUnderLoad(h, tenant.key, { batches: BATCHES, size: SIZE, concurrency: 4 })
    stop = true
    await killing
    t.ok(terminated > 0, `${terminated} connections terminated`)
    t.same(load.malformed, [], 'every failure in the error shape')
    t.notOk(load.statuses.has(500), `no 500 (answers: ${JSON.stringify([...load.statuses])})`)
    t.notOk(load.statuses.has(-1), 'every request answered')
    t.same(await countStored(h, tenant.id), { rows: BATCHES * SIZE, unique: BATCHES * SIZE }, 'every acknowledged event exactly once')
    const [profiles] = await h.app.ctx.sql<{ events: string }[]>`
      select coalesce(sum(pp.event_count), 0)::text as events from player_profiles pp join players p on p.id = pp.player_id where p.tenant_id = ${tenant.id}`
    t.equal(Number(profiles?.events), BATCHES * SIZE, 'profiles count every event once')
  })
}

// PostgreSQL upkeep under the queues (planner statistics, vacuum) and a transaction pipelined behind a busy
// query, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { analyzeChanged, vacuumDeadRows } from '../../src/db/embedded-vacuum.ts'
import { preferIndexWalks, pipelinedTransaction } from '../../src/db/postgres.ts'
import { lockOutboxBatch } from '../../src/webhooks/queries.ts'
import { startHarness } from '../helpers/harness.ts'
import postgres from 'postgres'

const h = await startHarness(t)

// What keeps the queue tables' claims cheap as the tables churn, on both engines:
// - Embedded PostgreSQL runs no autovacuum (src/db/embedded-vacuum.ts): the process vacuums tables whose
//   dead rows pile up, as autovacuum would on a server. The same function on a server database vacuums too.
// - A claim is planned as a walk of its index even when the table has no statistics, or those of an
//   emptier table (preferIndexWalks in src/db/postgres.ts), and embedded PostgreSQL gets statistics at all
//   (analyzeChanged, run with the vacuum).
t.test('queue-upkeep', async (t) => {
  const sql = h.app.ctx.sql

  t.test('a table whose updates left dead rows is vacuumed, and a quiet one is not', async (t) => {
    // On a server, autovacuum could get there first (this file has a database of its own: harness.ts).
    if (h.app.ctx.pg.kind === 'postgres') await sql`alter table outbox set (autovacuum_enabled = false)`
    const tenant = await h.createTenant()
    await sql`
    insert into outbox (tenant_id, brand_id, event, data)
    select ${tenant.id}, null, 'test.churn', jsonb_build_object('i', i) from generate_series(1, 3000) i`
    // What the fan-out does to each row it dispatched, three times over: 9,000 dead row versions.
    for (let i = 0; i < 3; i++) await sql`update outbox set data = data || '{"n": 1}' where tenant_id = ${tenant.id}`
    const dead = async () => Number((await sql<{ n: string }[]>`select n_dead_tup::text as n from pg_stat_user_tables where relname = 'outbox'`)[0]?.n)
    // The statistics reach pg_stat_user_tables when the backend reports them (at most a second on a server).
    for (let i = 0; i < 50 && (await dead()) < 9000; i++) await new Promise((r) => setTimeout(r, 100))
    t.ok((await dead()) >= 9000, 'the updates left their dead rows')
    // A table that vacuums itself (the spool) is skipped by name.
    t.notOk((await vacuumDeadRows(sql, { skip: ['outbox'] })).includes('public.outbox'), 'a skipped table is left alone')
    t.ok((await dead()) >= 9000, 'its dead rows are still there')
    const vacuumed = await vacuumDeadRows(sql)
    t.ok(vacuumed.includes('public.outbox'), `outbox vacuumed (${vacuumed.join(', ')})`)
    t.notOk(vacuumed.includes('public.tenants'), 'a table without dead rows is left alone')
    for (let i = 0; i < 50 && (await dead()) > 0; i++) await new Promise((r) => setTimeout(r, 100))
    t.equal(await dead(), 0, 'no dead rows left in outbox')
    t.same(await vacuumDeadRows(sql, { minDead: 1000 }), [], 'nothing is due right after')
    await sql`delete from outbox where tenant_id = ${tenant.id}`
  })

  t.test('the fan-out claims by walking the pending index, even when the outbox has no statistics', async (t) => {
    const tenant = await h.createTenant()
    const burst = () => sql`
    insert into outbox (tenant_id, brand_id, event, data)
    select ${tenant.id}, null, 'test.claim', jsonb_build_object('i', i) from generate_series(1, 5000) i`
    // No column statistics (embedded PostgreSQL never analyzes: it runs no autovacuum; a new server's
    // outbox neither, until autovacuum comes), a burst dispatched and another pending.
    await burst()
    await sql`update outbox set dispatched_at = now() where dispatched_at is null`
    await burst()
    const plan = (prefer: boolean) =>
      sql.begin(async (tx) => {
        if (prefer) await preferIndexWalks(tx)
        return JSON.stringify(await tx`explain (format json) ${lockOutboxBatch(tx, 300)}`)
      })
    // The case this guards: left to itself, the planner reads every pending row and sorts them per claim.
    t.match(await plan(false), /"Sort"/, 'without it: all 5,000 pending rows read and sorted for a claim of 300')
    const walk = await plan(true)
    t.notMatch(walk, /"Sort"|Bitmap|Seq Scan/, 'with it: no sort, no bitmap, no scan of the table')
    t.match(walk, /"Index Name":"outbox_pending"/, 'the pending index, walked in id order')
    await sql`delete from outbox where tenant_id = ${tenant.id}`
  })

  t.test('a table changed since its last analysis is analyzed, and then not again', async (t) => {
    // A table of its own: on a server each backend reports its counts when idle, up to seconds later, so the
    // earlier tests' outbox changes reported after this analysis would count as new changes.
    await sql`create table analyze_probe (id int primary key, v text)`
    t.teardown(() => sql`drop table if exists analyze_probe`)
    await sql`insert into analyze_probe select i, 'v' || i from generate_series(1, 500) i`
    let analyzed: string[] = []
    for (let i = 0; i < 50 && !analyzed.includes('public.analyze_probe'); i++) {
      analyzed = await analyzeChanged(sql)
      if (!analyzed.includes('public.analyze_probe')) await new Promise((r) => setTimeout(r, 100))
    }
    t.ok(analyzed.includes('public.analyze_probe'), `the changed table analyzed (${analyzed.join(', ')})`)
    const [stats] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stats where schemaname = 'public' and tablename = 'analyze_probe'`
    t.ok(stats!.n > 0, 'the planner has column statistics for it')
    t.notOk((await analyzeChanged(sql)).includes('public.analyze_probe'), 'unchanged since: left alone')
  })
})

// pipelinedTransaction (src/db/postgres.ts): BEGIN, statements and COMMIT sent in one go. What it must
// guarantee: all or nothing, the failing statement's error, and a connection left clean for the next user.
t.test('pipelined-transaction', async (t) => {
  const sql = h.app.ctx.sql
  const table = `ptx_${Date.now()}`
  await sql.unsafe(`create table ${table} (id int primary key)`)
  const ids = async () => (await sql.unsafe<{ id: number }[]>(`select id from ${table} order by id`)).map((r) => r.id)

  t.test('the statements commit together', async (t) => {
    await pipelinedTransaction(sql, (tx) => Promise.all([tx.unsafe(`insert into ${table} values (1)`).execute(), tx.unsafe(`insert into ${table} values (2)`).execute()]))
    t.same(await ids(), [1, 2])
  })

  t.test('a failing statement rolls back the statements before and after it, and its error is thrown', async (t) => {
    await t.rejects(
      pipelinedTransaction(sql, (tx) =>
        Promise.all([
          tx.unsafe(`insert into ${table} values (3)`).execute(),
          tx.unsafe(`insert into ${table} values (1)`).execute(), // duplicate key
          tx.unsafe(`insert into ${table} values (4)`).execute(),
        ]),
      ),
      { code: '23505' },
    )
    t.same(await ids(), [1, 2], 'nothing of it committed')
  })

  t.test('send throwing after issuing a statement: rolled back, not committed', async (t) => {
    await t.rejects(
      pipelinedTransaction(sql, (tx) => {
        void tx.unsafe(`insert into ${table} values (5)`).execute().catch(() => {})
        throw new Error('bug in send')
      }),
      { message: 'bug in send' },
    )
    t.same(await ids(), [1, 2])
    // The connection went back to the pool outside any transaction: the next statement autocommits.
    await sql.unsafe(`insert into ${table} values (6)`)
    t.same(await ids(), [1, 2, 6])
  })

  // The driver's own transactions (scripts/patch-postgres.mjs, mend 9): a BEGIN pipelined onto a busy
  // connection as the query that fills its pipeline. Unmended, BEGIN went out without the connection being
  // reserved: the transaction's first statement threw a TypeError no caller can catch (the process ended),
  // and other callers' queries ran inside the open transaction. A client of its own with a pipeline of one
  // makes the boundary certain; embedded PostgreSQL serves one connection to the app, so this needs a server.
  t.test('a BEGIN that fills a busy connection\'s pipeline owns the connection', { skip: !process.env.DATABASE_URL && 'needs a PostgreSQL server for a client of its own' }, async (t) => {
    // max_pipeline is a driver option its types leave out.
    const db = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {}, ...({ max_pipeline: 1 } as object) })
    t.teardown(() => db.end({ timeout: 1 }))
    await db`select 1`
    const busy = db`select pg_sleep(0.2)`.execute()
    const tx = db.begin(async (tx) => {
      const [a] = await tx<{ xid: string }[]>`select pg_current_xact_id()::text as xid`
      await new Promise((r) => setTimeout(r, 100))
      const [b] = await tx<{ xid: string | null }[]>`select pg_current_xact_id_if_assigned()::text as xid`
      return [a!.xid, b!.xid]
    })
    // Issued once BEGIN is on its way: it must wait for the transaction, not run inside it.
    await new Promise((r) => setImmediate(r))
    const outside = db<{ xid: string | null }[]>`select pg_current_xact_id_if_assigned()::text as xid`.execute()
    await busy
    const [first, second] = await tx
    t.equal(second, first, "the transaction's statements ran in one transaction")
    t.equal((await outside)[0]!.xid, null, 'the outside query ran outside it')
  })
})

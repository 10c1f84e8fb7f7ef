// What keeps the queue tables' claims cheap as the tables churn, on both engines:
// - Embedded PostgreSQL runs no autovacuum (src/db/embedded-vacuum.ts): the process vacuums tables whose
//   dead rows pile up, as autovacuum would on a server. The same function on a server database vacuums too.
// - A claim is planned as a walk of its index even when the table has no statistics, or those of an
//   emptier table (preferIndexWalks in src/db/postgres.ts), and embedded PostgreSQL gets statistics at all
//   (analyzeChanged, run with the vacuum).
import t from 'tap'
import { analyzeChanged, vacuumDeadRows } from '../../src/db/embedded-vacuum.ts'
import { preferIndexWalks } from '../../src/db/postgres.ts'
import { lockOutboxBatch } from '../../src/webhooks/queries.ts'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)
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

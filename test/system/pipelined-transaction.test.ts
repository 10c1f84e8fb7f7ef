// pipelinedTransaction (src/db/postgres.ts): BEGIN, statements and COMMIT sent in one go. What it must
// guarantee: all or nothing, the failing statement's error, and a connection left clean for the next user.
import postgres from 'postgres'
import t from 'tap'
import { pipelinedTransaction } from '../../src/db/postgres.ts'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)
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

// pipelinedTransaction (src/db/postgres.ts): BEGIN, statements and COMMIT sent in one go. What it must
// guarantee: all or nothing, the failing statement's error, and a connection left clean for the next user.
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

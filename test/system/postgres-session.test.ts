// The service's PostgreSQL sessions on a server: a transaction a bug leaves open is ended by PostgreSQL.
import t from 'tap'
import { IDLE_IN_TRANSACTION_MS } from '../../src/db/postgres.ts'
import { startHarness } from '../helpers/harness.ts'

t.test('a transaction idle for a minute is ended by PostgreSQL, not left holding its locks', { skip: !process.env.DATABASE_URL && 'a PostgreSQL server setting' }, async (t) => {
  const h = await startHarness(t)
  const [row] = await h.app.ctx.sql<{ ms: string }[]>`select setting as ms from pg_settings where name = 'idle_in_transaction_session_timeout'`
  t.equal(Number(row!.ms), IDLE_IN_TRANSACTION_MS)
  t.equal(IDLE_IN_TRANSACTION_MS, 60_000)
})

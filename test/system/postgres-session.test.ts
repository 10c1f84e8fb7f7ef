// The service's PostgreSQL sessions on a server: a transaction a bug leaves open is ended by PostgreSQL.
import t from 'tap'
import { ENGINE_POOL, IDLE_IN_TRANSACTION_MS } from '../../src/db/postgres.ts'
import { startHarness } from '../helpers/harness.ts'

t.test('a transaction idle for a minute is ended by PostgreSQL, not left holding its locks', { skip: !process.env.DATABASE_URL && 'a PostgreSQL server setting' }, async (t) => {
  const h = await startHarness(t)
  const [row] = await h.app.ctx.sql<{ ms: string }[]>`select setting as ms from pg_settings where name = 'idle_in_transaction_session_timeout'`
  t.equal(Number(row!.ms), IDLE_IN_TRANSACTION_MS)
  t.equal(IDLE_IN_TRANSACTION_MS, 60_000)
})

t.test('the engines run on a pool of their own: requests are answered while every engine connection is busy', { skip: !process.env.DATABASE_URL && 'two pools on a PostgreSQL server only' }, async (t) => {
  const h = await startHarness(t)
  const { sql, engineSql } = h.app.ctx.pg
  t.not(engineSql, sql)
  // Every engine connection held in a transaction (as engine work piling up would hold them).
  const release: (() => void)[] = []
  const held = Array.from({ length: ENGINE_POOL }, () =>
    engineSql.begin(async (tx) => {
      await tx`select 1`
      await new Promise<void>((r) => release.push(r))
    }),
  )
  t.teardown(async () => {
    for (const r of release) r()
    await Promise.all(held)
  })
  while (release.length < ENGINE_POOL) await new Promise((r) => setTimeout(r, 10))
  const [busy] = await sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'respin-engines' and state = 'idle in transaction'`
  t.equal(busy!.n, ENGINE_POOL, 'the engines\' connections are all taken')
  const tenant = await h.createTenant()
  const started = Date.now()
  const res = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'p1' } })
  t.equal(res.status, 201)
  t.ok(Date.now() - started < 2000, `a request is answered meanwhile (${Date.now() - started} ms)`)
})

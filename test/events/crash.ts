// kill -9 while a client streams batches, restart on the same stores, re-send everything not acknowledged:
// every event is stored exactly once and counted once in the profiles. Runs against the stores the
// environment names (embedded otherwise). One test file per acknowledgement mode (crash-ack-*.test.ts),
// so that each has the runner's whole time limit on a slow machine.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import postgres from 'postgres'
import t from 'tap'
import { call, exportedEvents, makeTenant, spawnServer, uid } from './helpers.ts'

export const crashTest = (ackAfter: 'clickhouse' | 'postgres') =>
t.test(`kill -9 mid-stream loses nothing and stores nothing twice (INGEST_ACK_AFTER=${ackAfter})`, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-crash-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  // In spool mode the flusher runs almost continuously, so the kill is likely to land inside a flush:
  // claimed, maybe inserted, not yet deleted (a restart within seconds once stored such a batch's retries
  // twice).
  const env = { DATA_DIR: dataDir, RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: ackAfter, INGEST_FLUSH_INTERVAL_MS: ackAfter === 'postgres' ? '10' : '1000' }
  let server = await spawnServer(env)
  const tenant = await makeTenant(server.origin, server.adminKey)
  // 140 batches: the kill lands after 40 are acknowledged (the spool's flushes in full swing); the other
  // 100 are re-sent after the restart. More only made the test longer (it was 400, ~50 s on 2 cores).
  const batches = Array.from({ length: 140 }, (_, b) => ({
    events: Array.from({ length: 50 }, (_, i) => ({
      player_id: `p${(b * 50 + i) % 300}`,
      event_type: i % 5 === 0 ? 'deposit' : 'bet',
      event_id: uid(`c${b}`),
      payload: { amount: 1, currency: 'EUR' },
    })),
  }))
  const acked = new Set<number>()
  let next = 0
  let killed = false
  const worker = async () => {
    while (!killed && next < batches.length) {
      const b = next++
      try {
        const res = await call(server.origin, 'POST', '/events', tenant.key, batches[b])
        if (res.status === 200 && !killed) acked.add(b)
      } catch {
        // connection reset by the kill
      }
    }
  }
  const streaming = Promise.all([worker(), worker(), worker(), worker()])
  // Let it run for a while, then pull the plug.
  while (acked.size < 40) await new Promise((r) => setTimeout(r, 20))
  killed = true
  server.proc.kill('SIGKILL')
  await server.exited
  await streaming
  t.ok(acked.size >= 40 && acked.size < batches.length, `killed after ${acked.size} acknowledged batches`)

  server = await spawnServer({ ...env, ADMIN_KEY: server.adminKey })
  const resend = batches.map((_, b) => b).filter((b) => !acked.has(b))
  let deduped = 0
  let stored = 0
  for (let i = 0; i < resend.length; i += 4) {
    await Promise.all(
      resend.slice(i, i + 4).map(async (b) => {
        for (let attempt = 0; ; attempt++) {
          const res = await call(server.origin, 'POST', '/events', tenant.key, batches[b])
          if (res.status === 200) {
            deduped += res.body.deduped
            stored += res.body.stored
            return
          }
          if (res.status !== 503 || attempt > 30) throw new Error(`resend failed: ${res.status} ${JSON.stringify(res.body)}`)
          await new Promise((r) => setTimeout(r, 500))
        }
      }),
    )
  }
  t.ok(stored > 0, `re-sent ${resend.length} batches: ${stored} stored, ${deduped} deduped`)
  // Re-sending the acknowledged batches is a pure duplicate: every one of them, since those acknowledged
  // last may have been in the flush the kill interrupted.
  const again = { stored: 0, deduped: 0 }
  for (const b of acked) {
    const res = await call(server.origin, 'POST', '/events', tenant.key, batches[b])
    again.stored += res.body.stored
    again.deduped += res.body.deduped
  }
  t.same(again, { stored: 0, deduped: acked.size * 50 }, 'acknowledged batches re-sent: all duplicates')

  // What an operator's sync sees: a full scan of GET /export/events, once every event has had time to
  // reach ClickHouse (INGEST_ACK_AFTER=postgres moves them within 2 s; a batch whose insert the kill cut
  // short is redone 10 s after its claim).
  const expected = batches.length * 50
  let exported = await exportedEvents(server.origin, tenant.key)
  for (const deadline = Date.now() + 30_000; exported.unique < expected && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 500))
    exported = await exportedEvents(server.origin, tenant.key)
  }
  t.equal(exported.unique, expected, 'every event in the export')
  t.equal(exported.rows, expected, 'each exactly once')
  server.proc.kill('SIGTERM')
  t.equal(await server.exited, 0, 'clean shutdown')

  // The profiles counted exactly the events exported: none lost with the process, none twice.
  const profiles = await queryPostgres<{ events: string; deposits: string }>(
    dataDir,
    `select coalesce(sum(pp.event_count), 0) as events, coalesce(sum(pp.deposit_count), 0) as deposits
     from player_profiles pp join players p on p.id = pp.player_id where p.tenant_id = $1`,
    [tenant.id],
  )
  t.same(
    { events: Number(profiles?.events), deposits: Number(profiles?.deposits) },
    { events: batches.length * 50, deposits: batches.length * 10 },
    'profiles count every event once',
  )
})

/** One row from the server's PostgreSQL once it has stopped: the one DATABASE_URL names, or its PGlite directory. */
async function queryPostgres<T>(dataDir: string, text: string, params: unknown[]): Promise<T | undefined> {
  if (process.env.DATABASE_URL) {
    const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      return (await sql.unsafe(text, params as never[]))[0] as T | undefined
    } finally {
      await sql.end()
    }
  }
  const db = await PGlite.create(join(dataDir, 'postgres'))
  try {
    return (await db.query<T>(text, params)).rows[0]
  } finally {
    await db.close()
  }
}

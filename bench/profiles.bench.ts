// `npm run bench -- profiles`: the PostgreSQL half of ingestion alone. Replays groups of ~500 realistic
// events (bench/ingest/workload.ts, folded by transformGroup exactly as the workers do) through
// createProfileWriter().write, each in its own transaction, into a fresh database on the server named by
// DATABASE_URL (created and dropped here; the server must run on this machine, since its CPU is read from
// /proc). Prints groups/s, events/s and CPU µs per event of the PostgreSQL server and of this process.
//
// BENCH_GROUPS (300), BENCH_GROUP_EVENTS (500), BENCH_INFLIGHT (2), BENCH_PLAYERS (10000) tune the run;
// BENCH_EXPLAIN=1 also prints the plans of one group's statements (auto_explain, analyze + buffers; 2 also
// the statements inside SQL functions that are not inlined);
// BENCH_KEEP_DB=1 keeps the database; BENCH_DB_PREFIX names it (respin_bench_profiles).
import { readdirSync, readFileSync } from 'node:fs'
import { availableParallelism, cpus, loadavg } from 'node:os'
import postgres from 'postgres'
import { migratePostgres } from '../src/db/migrate.ts'
import { openPostgres } from '../src/db/postgres.ts'
import { createProfileWriter } from '../src/events/profiles.ts'
import type { PlayerColumns, StatusColumns } from '../src/events/transform.ts'
import { createLogger } from '../src/lib/log.ts'
import { freshDatabase } from './fresh-database.ts'
import { makeBodies, transformBodies } from './ingest/workload.ts'

const GROUPS = Number(process.env.BENCH_GROUPS ?? 300)
const GROUP_EVENTS = Number(process.env.BENCH_GROUP_EVENTS ?? 500)
const INFLIGHT = Number(process.env.BENCH_INFLIGHT ?? 2)
const PLAYERS = Number(process.env.BENCH_PLAYERS ?? 10_000)
const WARMUP = Math.min(30, Math.ceil(GROUPS / 10))
const PER_BODY = 100

const out = (s: string) => process.stdout.write(`${s}\n`)

if (!process.env.DATABASE_URL) {
  out('DATABASE_URL not set: skipping (this bench needs a PostgreSQL server on this machine)')
  process.exit(0)
}

/** utime + stime (seconds) of every process named `postgres`, by pid. */
function postgresCpu(): Map<number, number> {
  const m = new Map<number, number>()
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8')
      if (st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')) !== 'postgres') continue
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
      m.set(Number(d), (Number(f[11]) + Number(f[12])) / 100)
    } catch {}
  }
  return m
}

/** CPU seconds used between two snapshots (processes that exited in between are lost, started ones count in full). */
function cpuDelta(a: Map<number, number>, b: Map<number, number>, only?: Set<number>): number {
  let s = 0
  for (const [pid, v] of b) if (!only || only.has(pid)) s += v - (a.get(pid) ?? 0)
  return s
}

/** One group's players and statuses, from the workers' transform. */
function transform(tenantId: string, brandId: string, list: string[]) {
  const r = transformBodies(list, { tenantId, brandId })
  return { players: r.players, statuses: r.statuses, events: r.events }
}

const db = await freshDatabase(process.env.BENCH_DB_PREFIX ?? 'respin_bench_profiles')
const { admin, name: dbName } = db
const dbUrl = new URL(db.url)
const log = createLogger('warn')
const pg = await openPostgres({ databaseUrl: dbUrl.toString(), dataDir: '', max: INFLIGHT }, log)
const sql = pg.sql
try {
  await migratePostgres(sql)
  const [tenant] = await sql<{ id: string }[]>`insert into tenants (name, slug) values ('bench', 'bench') returning id`
  const tenantId = (tenant as { id: string }).id
  const [brand] = await sql<{ id: string }[]>`insert into brands (tenant_id, name, slug, is_default) values (${tenantId}, 'main', 'main', true) returning id`
  const brandId = (brand as { id: string }).id
  const writer = createProfileWriter()
  const write = (g: { players: PlayerColumns; statuses: StatusColumns }) =>
    sql.begin((tx) => writer.write(tx, g.players, g.statuses))

  // Register every player (as the ingest bench's warm-up does), 1,000 per group.
  for (let b = 0; b < PLAYERS; b += 1000) {
    const bodies = Array.from({ length: Math.min(1000, PLAYERS - b) / PER_BODY }, (_, k) =>
      JSON.stringify({ events: Array.from({ length: PER_BODY }, (_, i) => ({ player_id: `player-${b + k * PER_BODY + i}`, event_type: 'registration', event_id: `reg-${b + k * PER_BODY + i}`, payload: { country: 'SE', currency: 'EUR', language: 'en' } })) }),
    )
    await write(transform(tenantId, brandId, bodies))
  }
  await sql`vacuum analyze players`.simple()
  await sql`vacuum analyze player_profiles`.simple()

  const perGroup = Math.max(1, Math.round(GROUP_EVENTS / PER_BODY))
  const bodies = makeBodies({ count: (GROUPS + WARMUP) * perGroup, batchSize: PER_BODY, players: PLAYERS, repeatShare: 0 })
  const groups = Array.from({ length: GROUPS + WARMUP }, (_, g) => transform(tenantId, brandId, bodies.slice(g * perGroup, (g + 1) * perGroup)))
  const run = async (list: typeof groups) => {
    let next = 0
    await Promise.all(Array.from({ length: INFLIGHT }, async () => {
      while (next < list.length) await write(list[next++] as (typeof groups)[number])
    }))
  }
  await run(groups.slice(0, WARMUP))

  if (process.env.BENCH_EXPLAIN) {
    // auto_explain at NOTICE level sends each statement's plan to this client; rolled back afterwards.
    const plans: string[] = []
    const ex = postgres(dbUrl.toString(), { onnotice: (n) => plans.push(String(n.message)), max: 1, types: {} })
    await ex.begin(async (tx) => {
      await tx.unsafe(`load 'auto_explain'`)
      await tx.unsafe(`set local auto_explain.log_min_duration = 0; set local auto_explain.log_analyze = on; set local auto_explain.log_buffers = on; set local auto_explain.log_nested_statements = ${process.env.BENCH_EXPLAIN === '2' ? 'on' : 'off'}; set local auto_explain.log_level = notice`)
      // Prepared statements switch to a generic plan after 5 runs: show the plans of the 7th run.
      for (let i = 0; i < 7; i++) {
        plans.length = 0
        const g = groups[WARMUP + i] as (typeof groups)[number]
        await writer.write(tx as never, g.players, g.statuses)
      }
      throw new Error('rollback')
    }).catch((e: unknown) => { if ((e as Error).message !== 'rollback') throw e })
    await ex.end()
    for (const p of plans) out(p)
  }

  const measured = groups.slice(WARMUP)
  const events = measured.reduce((a, g) => a + g.events, 0)
  const players = measured.reduce((a, g) => a + g.players.brand_id.length, 0)
  const stats = () => sql<{ relname: string; upd: string; hot: string }[]>`
    select relname, n_tup_upd::text as upd, n_tup_hot_upd::text as hot from pg_stat_user_tables
    where relname in ('players', 'player_profiles') order by relname`
  await sql`select pg_stat_force_next_flush()`
  const s0 = await stats()
  const backends = new Set((await admin<{ pid: number }[]>`select pid from pg_stat_activity where datname = ${dbName}`).map((r) => r.pid))
  const pg0 = postgresCpu()
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  await run(measured)
  const seconds = (performance.now() - t0) / 1000
  const c1 = process.cpuUsage(c0)
  const pg1 = postgresCpu()
  await sql`select pg_stat_force_next_flush()`
  await new Promise((r) => setTimeout(r, 600))
  const s1 = await stats()

  const us = (cpuSeconds: number) => ((cpuSeconds / events) * 1e6).toFixed(1)
  out(`machine: ${cpus()[0]?.model ?? '?'} x${availableParallelism()}, node ${process.version}; ${PLAYERS} players, ${GROUPS} groups of ${perGroup * PER_BODY} events (${(players / GROUPS).toFixed(0)} players per group), ${INFLIGHT} in flight`)
  out(`groups/s ${(GROUPS / seconds).toFixed(1)}, events/s ${Math.round(events / seconds).toLocaleString('en')}`)
  out(`PostgreSQL CPU µs/event: ${us(cpuDelta(pg0, pg1))} (all postgres processes), ${us(cpuDelta(pg0, pg1, backends))} (this run's backends)`)
  out(`client (node) CPU µs/event: ${us((c1.user + c1.system) / 1e6)}`)
  for (const r1 of s1) {
    const r0 = s0.find((r) => r.relname === r1.relname)
    const upd = Number(r1.upd) - Number(r0?.upd ?? 0)
    const hot = Number(r1.hot) - Number(r0?.hot ?? 0)
    out(`${r1.relname}: ${upd} row updates, ${upd ? ((hot / upd) * 100).toFixed(0) : 0}% HOT`)
  }
  out(`load average: ${loadavg().map((l) => l.toFixed(1)).join(' ')} (on ${availableParallelism()} cores)`)
} finally {
  await pg.close()
  await db.close({ keep: process.env.BENCH_KEEP_DB === '1' })
  if (process.env.BENCH_KEEP_DB === '1') out(`kept database ${dbName}`)
}

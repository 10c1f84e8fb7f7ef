// `npm run bench -- ingest`: POST /events end to end against the real server (a child process running
// src/main.ts), on the real PostgreSQL + Redis named by DATABASE_URL / REDIS_URL when both are set (in a
// new database per run, dropped afterwards), and on the embedded defaults (PGlite, chDB, no Redis). Also
// measures the ceiling: a bare ClickHouse (chDB) insert of the same rows. Prints a table;
// bench/RESULTS.md records runs.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { openClickHouse } from '../src/db/clickhouse.ts'
import { migrateClickHouse } from '../src/db/migrate.ts'
import { EVENT_COLUMNS } from '../src/events/event-rows.ts'
import { createLogger } from '../src/lib/log.ts'
import { cpuParts, cpuSeconds, storeCpu, threadCpu, type CpuReading } from './cpu.ts'
import { pct, runLoad, type LoadResult } from './ingest/load.ts'
import { freshDatabase } from './fresh-database.ts'
import { makeBodies, transformBodies } from './ingest/workload.ts'
import { freePort } from './free-port.ts'

const root = fileURLToPath(new URL('../', import.meta.url))
const TENANTS = Number(process.env.BENCH_TENANTS ?? 4)
const PLAYERS = Number(process.env.BENCH_PLAYERS ?? 10_000)
const BATCH_SECONDS = Number(process.env.BENCH_BATCH_SECONDS ?? 12)
const SINGLE_SECONDS = Number(process.env.BENCH_SINGLE_SECONDS ?? 10)
const REPEAT_SHARE = 0.05
/**
 * Requests in flight: batches (closed loop, so throughput = in flight × 100 / latency) and singles. Singles
 * at 256: 10,000 requests/s at ~25 ms means ~250 in flight from the operators (Little's law), and since
 * groups span tenants (session 4) 256 is where the spool mode's p99 reaches the target's 50 ms
 * (bench/RESULTS.md, by requests in flight).
 */
const BATCH_CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY ?? 16)
const SINGLE_CONCURRENCY = Number(process.env.BENCH_SINGLE_CONCURRENCY ?? 256)

const out = (s: string) => process.stdout.write(`${s}\n`)

async function startServer(env: Record<string, string | undefined>): Promise<{ proc: ChildProcess; port: number; adminKey: string; dir: string }> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'respin-bench-'))
  const adminKey = `admin-${randomBytes(12).toString('hex')}`
  const childEnv: Record<string, string | undefined> = { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_KEY: adminKey, LOG_LEVEL: process.env.BENCH_SERVER_LOG ? 'debug' : 'warn', RATE_LIMIT_INGEST_PER_MIN: '0', ...env }
  for (const k of Object.keys(childEnv)) if (childEnv[k] === undefined) delete childEnv[k]
  const proc = spawn(process.execPath, [...(process.env.BENCH_SERVER_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_SERVER_PROF}`] : []), '--import', './src/ts-loader.mjs', 'src/main.ts'], { cwd: root, env: childEnv as NodeJS.ProcessEnv, stdio: ['ignore', process.env.BENCH_SERVER_LOG ? openSync(process.env.BENCH_SERVER_LOG, 'a') : 'ignore', 'inherit'] })
  const deadline = Date.now() + 90_000
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/health`)
      if (res.status === 200) break
    } catch {}
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error('server did not start')
    await new Promise((r) => setTimeout(r, 200))
  }
  return { proc, port, adminKey, dir }
}

async function admin(port: number, adminKey: string, path: string, body: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/admin${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': adminKey }, body: JSON.stringify(body) })
  return ((await res.json()) as { data: Record<string, string> }).data
}

/**
 * BENCH_PERF=dir: a system-wide `perf record -g` of each load phase (after its first second) into
 * dir/<scenario>.data, to see every process's share (server, PostgreSQL, Redis, load generator) at once.
 * Run the bench with NODE_OPTIONS=--perf-basic-prof for JavaScript names.
 */
function recordPerf(name: string, seconds: number): void {
  const dir = process.env.BENCH_PERF
  if (!dir || seconds < 3) return
  setTimeout(() => {
    spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '997', '-a', '-g', '-o', join(dir, `${name}.data`), '--', 'sleep', String(seconds - 2)], { stdio: 'ignore' }).on('error', () => {})
  }, 1000)
}

/** "; stores: PostgreSQL 41.0, Redis 3.1" (µs/event since `before`), or nothing if neither runs here. */
function storeLine(before: CpuReading | undefined, events: number): string {
  const after = storeCpu()
  const used = before && cpuParts(before, after, events)
  return used ? `; stores: ${used}` : ''
}

function line(name: string, r: LoadResult, eventsPerRequest: number, cpu: number) {
  const evs = (r.requests * eventsPerRequest) / r.seconds
  const cpuPerEvent = (cpu / Math.max(1, r.requests * eventsPerRequest)) * 1e6
  return `| ${name} | ${Math.round(evs).toLocaleString('en')} | ${Math.round(r.requests / r.seconds).toLocaleString('en')} | ${pct(r.latenciesMs, 50).toFixed(1)} | ${pct(r.latenciesMs, 95).toFixed(1)} | ${pct(r.latenciesMs, 99).toFixed(1)} | ${r.errors} | ${r.stored.toLocaleString('en')} / ${r.deduped.toLocaleString('en')} | ${Math.round(cpuPerEvent)} | ${Math.round(r.clientCpuUs / Math.max(1, r.requests * eventsPerRequest))} |`
}

type AckAfter = 'clickhouse' | 'postgres'

async function scenario(mode: 'servers' | 'embedded', ackAfter: AckAfter): Promise<{ lines: string[]; batchEps: number }> {
  const db = mode === 'servers' ? await freshDatabase('respin_bench_ingest') : undefined
  const env = {
    INGEST_ACK_AFTER: ackAfter,
    ...(db ? { DATABASE_URL: db.url } : { DATABASE_URL: undefined, REDIS_URL: undefined, CLICKHOUSE_URL: undefined }),
  }
  const server = await startServer(env).catch(async (err: unknown) => {
    await db?.close()
    throw err
  })
  try {
    const keys: string[] = []
    for (let i = 0; i < TENANTS; i++) {
      const slug = `bench-${randomBytes(4).toString('hex')}`
      const tenant = await admin(server.port, server.adminKey, '/tenants', { name: slug, slug })
      await admin(server.port, server.adminKey, `/tenants/${tenant.id}/brands`, { name: 'main', slug: 'main' })
      keys.push((await admin(server.port, server.adminKey, `/tenants/${tenant.id}/keys`, { name: 'bench', scopes: ['events:write'] })).key as string)
    }
    // Warm-up that also registers every player (10k per tenant), so the run updates existing players.
    const reg = keys.map((_, t) =>
      Array.from({ length: PLAYERS / 100 }, (_, b) =>
        JSON.stringify({ events: Array.from({ length: 100 }, (_, i) => ({ player_id: `player-${b * 100 + i}`, event_type: 'registration', event_id: `reg-${t}-${b}-${i}`, payload: { country: 'SE', currency: 'EUR', language: 'en' } })) }),
      ),
    )
    await sendAll(server.port, keys, reg)

    // Enough distinct bodies for ~30k events/s over the whole run: a load that wraps around would re-send
    // every event and measure the dedupe path only.
    const batchCount = Math.max(1200, Math.ceil((BATCH_SECONDS * 30_000) / 100 / TENANTS))
    const batchBodies = keys.map(() => makeBodies({ count: batchCount, batchSize: 100, players: PLAYERS, repeatShare: REPEAT_SHARE }))
    const pid = server.proc.pid as number
    let cpu0 = cpuSeconds(pid)
    const threads0 = process.env.BENCH_THREADS === '1' ? threadCpu(pid) : undefined
    const stores0 = threads0 && storeCpu()
    const batches = await runLoad({ port: server.port, keys, bodies: batchBodies, concurrency: BATCH_CONCURRENCY, durationMs: BATCH_SECONDS * 1000, onStart: () => recordPerf(`${mode}-${ackAfter}-batches`, BATCH_SECONDS) })
    const batchCpu = cpuSeconds(pid) - cpu0
    if (threads0) out(`  ${mode}, batches: server CPU µs/event by thread: ${cpuParts(threads0, threadCpu(pid), batches.requests * 100)}${storeLine(stores0, batches.requests * 100)}`)
    const label = `${mode === 'servers' ? 'PostgreSQL + Redis + chDB' : 'embedded (PGlite + chDB, no Redis)'}, ack after ${ackAfter === 'clickhouse' ? 'ClickHouse insert' : 'PostgreSQL spool'}`
    if (ackAfter === 'postgres' && db) await reportSpoolDrain(server.dir, db.url)
    const lines = [line(`${label}, batches of 100 (${BATCH_CONCURRENCY} in flight)`, batches, 100, batchCpu)]
    if (batches.errors) out(`  non-200 answers: batches ${JSON.stringify(batches.statuses)}`)
    if (SINGLE_SECONDS > 0) {
      const singleBodies = keys.map(() => makeBodies({ count: Math.max(40_000, Math.ceil((SINGLE_SECONDS * 15_000) / TENANTS)), batchSize: 1, players: PLAYERS, repeatShare: REPEAT_SHARE }))
      cpu0 = cpuSeconds(pid)
      const singleThreads0 = process.env.BENCH_THREADS === '1' ? threadCpu(pid) : undefined
      const singleStores0 = singleThreads0 && storeCpu()
      const singles = await runLoad({ port: server.port, keys, bodies: singleBodies, concurrency: SINGLE_CONCURRENCY, durationMs: SINGLE_SECONDS * 1000, onStart: () => recordPerf(`${mode}-${ackAfter}-singles`, SINGLE_SECONDS) })
      const singleCpu = cpuSeconds(pid) - cpu0
      if (singleThreads0) out(`  ${mode}, singles: server CPU µs/event by thread: ${cpuParts(singleThreads0, threadCpu(pid), singles.requests)}${storeLine(singleStores0, singles.requests)}`)
      if (singles.errors) out(`  non-200 answers: singles ${JSON.stringify(singles.statuses)}`)
      lines.push(line(`${label}, single events (${SINGLE_CONCURRENCY} in flight)`, singles, 1, singleCpu))
    }
    return {
      lines,
      batchEps: (batches.requests * 100) / batches.seconds,
    }
  } finally {
    server.proc.kill('SIGTERM')
    await new Promise((r) => server.proc.once('exit', r))
    rmSync(server.dir, { recursive: true, force: true })
    await db?.close()
  }
}

/**
 * Spool mode acknowledges before ClickHouse has the events: after the load, say how far the flusher was
 * behind and how long it took to catch up (PostgreSQL server only; PGlite is locked by the server).
 */
async function reportSpoolDrain(dataDir: string, databaseUrl: string) {
  const sink = `chdb:${readFileSync(join(dataDir, 'clickhouse', 'respin-instance-id'), 'utf8').trim()}`
  const { default: postgres } = await import('postgres')
  const pg = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    const backlog = async () => Number((await pg<{ n: string }[]>`select coalesce(sum(row_count), 0) as n from event_spool where sink = ${sink}`)[0]?.n)
    const atEnd = await backlog()
    const t0 = performance.now()
    while ((await backlog()) > 0 && performance.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 50))
    out(`  spool: ${atEnd.toLocaleString('en')} events not yet in ClickHouse when the load stopped; all flushed ${Math.round(performance.now() - t0)} ms later`)
  } finally {
    await pg.end()
  }
}

/** Sends every body once (warm-up), 8 in flight. */
async function sendAll(port: number, keys: string[], bodies: string[][]) {
  const jobs = bodies.flatMap((list, t) => list.map((b) => [keys[t] as string, b] as const))
  let next = 0
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < jobs.length) {
        const [key, body] = jobs[next++] as readonly [string, string]
        await fetch(`http://127.0.0.1:${port}/api/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body })
      }
    }),
  )
}

/** The ceiling: the same rows inserted straight into chDB, 5,000 and 100 rows per insert. */
async function ceiling(): Promise<{ big: number; small: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'respin-bench-ch-'))
  const ch = await openClickHouse({ clickhouseUrl: undefined, dataDir: dir }, createLogger('silent'))
  try {
    await migrateClickHouse(ch)
    const bodies = makeBodies({ count: 1000, batchSize: 100, players: PLAYERS, repeatShare: 0 })
    const encode = (list: string[]) => transformBodies(list, { tenantId: '00000000-0000-4000-8000-000000000001', brandId: '00000000-0000-4000-8000-000000000002' }).rows
    const bigChunks = Array.from({ length: 20 }, (_, i) => encode(bodies.slice(i * 50, i * 50 + 50)))
    let t0 = performance.now()
    for (const c of bigChunks) await ch.insertRowBinary('events', EVENT_COLUMNS, c)
    const big = 100_000 / ((performance.now() - t0) / 1000)
    const smallChunks = Array.from({ length: 300 }, (_, i) => encode(bodies.slice(i, i + 1)))
    t0 = performance.now()
    for (const c of smallChunks) await ch.insertRowBinary('events', EVENT_COLUMNS, c)
    const small = 30_000 / ((performance.now() - t0) / 1000)
    return { big, small }
  } finally {
    await ch.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

out(`machine: ${cpus()[0]?.model ?? '?'} x${availableParallelism()}, node ${process.version}; ${TENANTS} tenants x ${PLAYERS} players; ~20% money events, ${REPEAT_SHARE * 100}% re-sent event_ids; rate limit off`)
const results: string[] = []
let best = 0
// BENCH_ACK=clickhouse|postgres runs one acknowledgement mode only (both by default).
const ackModes = (process.env.BENCH_ACK ? [process.env.BENCH_ACK] : ['clickhouse', 'postgres']) as AckAfter[]
for (const ack of ackModes) {
  if (process.env.DATABASE_URL && process.env.REDIS_URL) {
    const r = await scenario('servers', ack)
    results.push(...r.lines)
    best = Math.max(best, r.batchEps)
  } else out('DATABASE_URL and REDIS_URL not both set: skipping the PostgreSQL + Redis run')
  // BENCH_EMBEDDED=0 / BENCH_CEILING=0 / BENCH_SINGLE_SECONDS=0 skip those parts (handy while iterating).
  if (process.env.BENCH_EMBEDDED !== '0') {
    const emb = await scenario('embedded', ack)
    results.push(...emb.lines)
    if (!process.env.DATABASE_URL) best = Math.max(best, emb.batchEps)
  }
}
const ceil = process.env.BENCH_CEILING === '0' ? undefined : await ceiling()
out('')
out('| scenario | events/s | requests/s | p50 ms | p95 ms | p99 ms | errors | stored / deduped | server CPU µs/event | load generator CPU µs/event |')
out('|---|---|---|---|---|---|---|---|---|---|')
for (const l of results) out(l)
out('')
if (ceil) {
  out(`ceiling, bare chDB insert of the same rows: ${Math.round(ceil.big).toLocaleString('en')} rows/s at 5,000 rows per insert, ${Math.round(ceil.small).toLocaleString('en')} rows/s at 100 rows per insert`)
  if (best > 0) out(`ratio, best batched ingestion (durable ack) / bare 5,000-row insert: ${(best / ceil.big).toFixed(2)}`)
}
out(`load average during the run: ${loadavg().map((l) => l.toFixed(1)).join(' ')} (on ${availableParallelism()} cores; above ~2 the figures are depressed by other work)`)

// `npm run bench -- webhooks`: the webhook engine (outbox → fan-out → dispatcher → receiver) against a
// local keep-alive receiver in its own process, over 100 brand-scoped endpoints.
// 1. Throughput: BENCH_EVENTS (20,000) outbox rows committed at once, one delivery each; deliveries/s
//    until the receiver has them all. Side by side, the ceiling: a bare undici client (keep-alive, 8
//    connections per endpoint, 256 in flight) posting the same bodies to the same receiver.
// 2. Latency: 1,000 events/s for BENCH_SECONDS (5) in transactions of 50; commit-to-receipt p50/p99.
// 3. The same with 10 of the 100 endpoints never answering (WEBHOOK_TIMEOUT_MS 5000 here): p99 of the 90.
// Runs on the PostgreSQL server of DATABASE_URL (a fresh database, dropped after) or embedded (PGlite).
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { Pool } from 'undici'
import { startApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { fanOut } from '../src/webhooks/dispatcher.ts'
import { recordOutcomes } from '../src/webhooks/queries.ts'
import { createEndpoint, deliveryBody } from '../src/webhooks/service.ts'
import { outboxWritten } from '../src/lib/outbox.ts'
import { cpuLine, postgresCpuMeter, readCpu } from './cpu.ts'
import { freshDatabase, type FreshDatabase } from './fresh-database.ts'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const RATE = 1000
const ENDPOINTS = 100
const SLOW = 10
const out = (s: string) => process.stdout.write(`${s}\n`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function startReceiver() {
  const proc = spawn(process.execPath, ['--import', './src/ts-loader.mjs', fileURLToPath(new URL('webhooks/receiver.ts', import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve) => proc.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()).port)))
  const base = `http://127.0.0.1:${port}`
  return {
    port,
    pid: proc.pid,
    stats: async () => (await (await fetch(`${base}/stats`)).json()) as { count: number; p50: number; p99: number; max: number },
    reset: () => fetch(`${base}/reset`).then((r) => r.text()),
    stop: () => proc.kill(),
  }
}

/**
 * The store's floor: what PostgreSQL and the driver cost per delivery for the queue's own statements,
 * with no HTTP at all. The engine's exact SQL (the outbox insert, `fanOut` with its deliveries leased as
 * the dispatcher's are, one batched outcome update per batch) on a connection of its own, one batch of
 * 500 (the fan-out's batch) at a time, after the app has stopped (so no engine takes the rows). A
 * delivery costs at least this floor plus the bare exchange, which bounds the engine / bare ratio on
 * this machine.
 */
async function storeFloor(url: string, tenantId: string, keyId: string, brandIds: string[], engineRate: number, bareRate: number) {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  const BATCH = 500
  const batches = Math.max(1, Math.round(EVENTS / BATCH))
  const token = `floor-${randomUUID()}`
  let adopted: { id: string }[] = []
  const loop = { reserve: () => ({ token, at: Date.now(), take: () => true, room: Number.POSITIVE_INFINITY }), adopt: (rows: { id: string }[]) => (adopted = rows) }
  let delivered = 0
  try {
    await sql`select 1` // the connection (and its backend) before the meter lists PostgreSQL's processes
    const pgCpu = postgresCpuMeter()
    const steps = new Map<string, number>()
    const step = async (name: string, fn: () => Promise<unknown>) => {
      const a = pgCpu()
      await fn()
      steps.set(name, (steps.get(name) ?? 0) + pgCpu() - a)
    }
    const cpu0 = readCpu()
    const t0 = performance.now()
    for (let b = 0; b < batches; b++) {
      await step('outbox insert', () => sql`
        insert into outbox (tenant_id, brand_id, event, data)
        select ${tenantId}, b, 'player.created', jsonb_build_object('player_id', gen_random_uuid(), 'external_id', 'f' || n, 't', ${Date.now()}::float8)
        from unnest(${Array.from({ length: BATCH }, (_, i) => brandIds[i % brandIds.length]!)}::uuid[], ${Array.from({ length: BATCH }, (_, i) => b * BATCH + i)}::int[]) as x(b, n)`)
      await step('fan-out', () => fanOut({ sql }, BATCH, { loop, keyId, leaseMs: 60_000 }))
      const at = new Date().toISOString()
      await step('outcomes', () => recordOutcomes(sql, adopted.map((r) => ({ id: r.id, owner: token, status: 'successful' as const, attempt: { n: 1, at, response_code: 200, duration_ms: 1, error: null, response_body: 'ok' } }))))
      delivered += adopted.length
    }
    const sec = (performance.now() - t0) / 1000
    const cpu = cpuLine(cpu0, readCpu(), delivered)
    const perStep = [...steps].map(([k, v]) => `${k} ${((v / Math.max(1, delivered)) * 1e6).toFixed(1)}`).join(', ')
    out(`| the store's floor: the engine's statements alone, no HTTP (${delivered} deliveries, batches of ${BATCH}, one at a time) | ${Math.round(delivered / sec)} deliveries/s; CPU µs per delivery: ${cpu}; PostgreSQL by statement: ${perStep} |`)
    out(`| engine rate / floor rate; bare rate / floor rate | ${(engineRate / (delivered / sec)).toFixed(2)}; ${(bareRate / (delivered / sec)).toFixed(2)} |`)
  } finally {
    await sql.end()
  }
}

async function main() {
  let db: FreshDatabase | undefined
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-bench-wh-'))
  if (process.env.DATABASE_URL) db = await freshDatabase('respin_bench_webhooks')
  const rx = await startReceiver()
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: db?.url,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_TIMEOUT_MS: '5000',
    SEGMENT_RECOMPUTE_INTERVAL_MS: '3600000',
  })
  const app = await startApp(config)
  const { sql } = app.ctx
  let closed = false
  out(`postgres: ${app.ctx.pg.kind}; load average before: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  try {
    const [tenant] = await sql<{ id: string }[]>`insert into tenants (name, slug) values ('bench', ${`bench-${Date.now()}`}) returning id`
    const brands = await sql<{ id: string }[]>`
      insert into brands (tenant_id, name, slug, is_default)
      select ${tenant!.id}, 'b' || i, 'b' || i, i = 0 from generate_series(0, ${ENDPOINTS - 1}) i returning id`
    const brandIds = brands.map((b) => b.id)
    const endpointIds: string[] = []
    for (let i = 0; i < ENDPOINTS; i++) {
      const e = await createEndpoint(app.ctx, { tenantId: tenant!.id, brandId: brandIds[i]!, url: `http://127.0.0.1:${rx.port}/e/${i}`, events: ['player.created'] })
      endpointIds.push(e.id)
    }

    const insertEvents = async (n: number, offset: number) => {
      const t = Date.now()
      const idx = Array.from({ length: n }, (_, i) => (offset + i) % ENDPOINTS)
      await sql`
        insert into outbox (tenant_id, brand_id, event, data)
        select ${tenant!.id}, b, 'player.created', jsonb_build_object('player_id', gen_random_uuid(), 'external_id', 'p' || n, 't', ${t}::float8)
        from unnest(${idx.map((i) => brandIds[i]!)}::uuid[], ${idx.map((i) => i + offset)}::int[]) as x(b, n)`
      // As every writer of its own outbox SQL does (lib/outbox.ts): embedded PostgreSQL has no NOTIFY, and
      // without this the embedded run measured the fan-out's idle poll instead of the engine.
      outboxWritten()
    }
    const waitCount = async (n: number, limitMs: number) => {
      const deadline = Date.now() + limitMs
      for (;;) {
        const s = await rx.stats()
        if (s.count >= n || Date.now() > deadline) return s
        await sleep(25)
      }
    }

    // 1. Throughput.
    await rx.reset()
    const cpu0 = readCpu({ receiver: rx.pid })
    const t0 = performance.now()
    await insertEvents(EVENTS, 0)
    const s1 = await waitCount(EVENTS, 300_000)
    const engineSec = (performance.now() - t0) / 1000
    const engineCpu = cpuLine(cpu0, readCpu({ receiver: rx.pid }), s1.count)
    const engineRate = s1.count / engineSec
    const [retried] = await sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where attempt_count > 1`

    // The ceiling: a bare client, same bodies, same receiver.
    const body = deliveryBody('player.created', new Date(), { player_id: '00000000-0000-0000-0000-000000000000', external_id: 'p1', brand_id: brandIds[0], t: 0 })
    const pool = new Pool(`http://127.0.0.1:${rx.port}`, { connections: 8 * ENDPOINTS, pipelining: 1 })
    await rx.reset()
    let next = 0
    const cpu1 = readCpu({ receiver: rx.pid })
    const t1 = performance.now()
    await Promise.all(
      Array.from({ length: 256 }, async () => {
        while (next < EVENTS) {
          const i = next++
          const res = await pool.request({ path: `/e/${i % ENDPOINTS}`, method: 'POST', body, headers: { 'content-type': 'application/json' } })
          await res.body.text()
        }
      }),
    )
    const bareSec = (performance.now() - t1) / 1000
    const bareRate = EVENTS / bareSec
    const bareCpu = cpuLine(cpu1, readCpu({ receiver: rx.pid }), EVENTS)
    await pool.close()

    // 2. Latency at 1,000 events/s.
    const paced = async (offset: number) => {
      await rx.reset()
      const batches = (SECONDS * RATE) / 50
      const start = Date.now()
      for (let b = 0; b < batches; b++) {
        const due = start + b * 50
        if (due > Date.now()) await sleep(due - Date.now())
        await insertEvents(50, offset + b * 50)
      }
      return waitCount(SECONDS * RATE, 30_000)
    }
    const s2 = await paced(0)

    // 3. Ten endpoints time out.
    for (let i = 0; i < SLOW; i++) await sql`update webhook_endpoints set url = ${`http://127.0.0.1:${rx.port}/slow/${i}`} where id = ${endpointIds[i]!}`
    await sleep(1200) // endpoint cache
    // Only the 90 answer: the run offsets events so each endpoint still gets 1/100 of them.
    const s3 = await paced(0)
    const expected90 = (SECONDS * RATE * (ENDPOINTS - SLOW)) / ENDPOINTS

    out('')
    out(`| measure | value |`)
    out(`|---|---|`)
    out(`| engine: ${EVENTS} deliveries over ${ENDPOINTS} endpoints | ${Math.round(engineRate)} deliveries/s (${engineSec.toFixed(1)} s; ${retried!.n} needed a retry) |`)
    out(`| bare undici client, same bodies and receiver | ${Math.round(bareRate)} requests/s |`)
    out(`| ratio engine / bare | ${(engineRate / bareRate).toFixed(2)} |`)
    if (engineCpu) out(`| CPU µs per delivery, engine (bench = the app's threads) | ${engineCpu} |`)
    if (bareCpu) out(`| CPU µs per request, bare client | ${bareCpu} |`)
    out(`| commit→receipt at ${RATE} events/s (${s2.count} delivered) | p50 ${s2.p50} ms, p99 ${s2.p99} ms, max ${s2.max} ms |`)
    out(`| same, ${SLOW} of ${ENDPOINTS} endpoints timing out: the other ${ENDPOINTS - SLOW} (${s3.count}/${expected90}) | p50 ${s3.p50} ms, p99 ${s3.p99} ms (${(s3.p99 / Math.max(1, s2.p99)).toFixed(2)}× the run without) |`)
    const keyId = app.ctx.secretBox.keyId
    await app.close()
    closed = true
    if (db) await storeFloor(db.url, tenant!.id, keyId, brandIds, engineRate, bareRate)
    out(`load average after: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  } finally {
    if (!closed) await app.close()
    rx.stop()
    await db?.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()

// `npm run bench -- campaigns`: campaign execution on the stores the environment names (embedded
// otherwise; with DATABASE_URL, a fresh database on that server, created and dropped: earlier runs' rows
// and dead tuples made the figures drift from run to run).
// 1. A one-shot to a BENCH_PLAYERS (100,000) player segment, in-app: time from the move to running until
//    every message is enqueued (campaign completed) and until every one is delivered (stored in the
//    inbox), messages/s, beside a bare baseline: the same number of notification rows inserted with one
//    INSERT ... SELECT (no rules, no keys).
// 2. Trigger latency: a triggered campaign runs throughout. While the one-shot is enqueued and delivered,
//    a deposit every 250 ms (a real-time send beside a 100k backlog); then BENCH_TRIGGERS (200) single
//    deposits one after another, idle; from each POST /events 200 to the message on the player's inbox
//    WebSocket (the measure).
import { randomBytes } from 'node:crypto'
import WebSocket from 'ws'
import { startApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freshDatabase, type FreshDatabase } from './fresh-database.ts'

const PLAYERS = Number(process.env.BENCH_PLAYERS ?? 100_000)
const TRIGGERS = Number(process.env.BENCH_TRIGGERS ?? 200)
const out = (s: string) => process.stdout.write(`${s}\n`)

const dataDir = mkdtempSync(join(tmpdir(), 'respin-bench-campaigns-'))
const adminKey = `admin-${randomBytes(16).toString('hex')}`
let db: FreshDatabase | undefined
if (process.env.DATABASE_URL) db = await freshDatabase('respin_bench_campaigns')
const app = await startApp(loadConfig({ ...process.env, ...(db ? { DATABASE_URL: db.url } : {}), LOG_LEVEL: 'error', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_KEY: adminKey, RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'postgres' }))
const origin = `http://127.0.0.1:${app.port}/api/v1`
const sql = app.ctx.sql

async function call(method: string, path: string, key: string, body?: unknown): Promise<any> {
  const res = await fetch(origin + path, { method, headers: { 'content-type': 'application/json', 'x-api-key': key }, body: body === undefined ? undefined : JSON.stringify(body) })
  const json = await res.json()
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`)
  return json
}
const wait = async (check: () => Promise<boolean>) => {
  while (!(await check())) await new Promise((r) => setTimeout(r, 50))
}

try {
  const n = randomBytes(4).toString('hex')
  const tenant = (await call('POST', '/admin/tenants', adminKey, { name: `bench ${n}`, slug: `bench-${n}` })).data
  const brand = (await call('POST', `/admin/tenants/${tenant.id}/brands`, adminKey, { name: 'main', slug: 'main' })).data
  const key = (await call('POST', `/admin/tenants/${tenant.id}/keys`, adminKey, { name: 'bench' })).data.key as string
  await sql`
    insert into players (tenant_id, brand_id, external_id, email)
    select ${tenant.id}, ${brand.id}, 'b' || g, 'b' || g || '@example.com' from generate_series(1, ${PLAYERS}) g`
  await sql`insert into player_profiles (player_id, tenant_id, brand_id) select id, tenant_id, brand_id from players where brand_id = ${brand.id}`
  const tpl = (await call('POST', '/notifications/templates', key, { name: 'hi', channel: 'in_app', body: 'Hello {{ name | there }}' })).data.id
  const seg = (await call('POST', '/segments', key, { name: 'all', type: 'dynamic', rules: {} })).data.id

  // Baseline: the same rows, bare.
  let t0 = performance.now()
  await sql.begin(async (tx) => {
    await tx`
      insert into notifications (tenant_id, brand_id, player_id, channel, template_id, payload, status)
      select tenant_id, brand_id, id, 'in_app', ${tpl}, '{}', 'baseline' from players where brand_id = ${brand.id}`
    await tx`delete from notifications where status = 'baseline' and brand_id = ${brand.id}`
  })
  const bareMs = performance.now() - t0

  // The triggered campaign runs from the start: probes during the one-shot measure a real-time send's
  // latency beside a 100k backlog (the bulk lane, sql/0140), the sequential deposits after it idle.
  const trig = (await call('POST', '/campaigns', key, { name: 'trig', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' } } })).data.id
  await call('PATCH', `/campaigns/${trig}`, key, { status: 'running' })
  // A probe player's inbox socket: when each of the trigger's messages arrived (the one-shot's are not counted).
  const probeSocket = async (external: string) => {
    const [player] = await sql<{ id: string }[]>`select id from players where brand_id = ${brand.id} and external_id = ${external}`
    const token = (await call('POST', `/players/${player!.id}/inbox/token`, key)).data.token as string
    const arrived: number[] = []
    const ws = new WebSocket(`${origin.replace('http', 'ws')}/inbox/ws?token=${encodeURIComponent(token)}`)
    ws.on('message', (raw) => {
      if ((JSON.parse(String(raw)) as { data?: { campaign_id?: string } }).data?.campaign_id === trig) arrived.push(performance.now())
    })
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
    return { ws, arrived }
  }
  // Probes of one player are posted one after the other (each after the previous 200), so the k-th message
  // on its socket answers the k-th probe.
  const latencies = async (probe: { ws: WebSocket; arrived: number[] }, acked: number[]) => {
    const until = performance.now() + 30_000
    while (probe.arrived.length < acked.length && performance.now() < until) await new Promise((r) => setTimeout(r, 20))
    probe.ws.close()
    // One still missing after 30 s counts at its wait so far (a lower bound).
    const end = performance.now()
    return acked.map((a, k) => Math.round((probe.arrived[k] ?? end) - a)).sort((a, b) => a - b)
  }
  const pctOf = (lat: number[], p: number) => lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))]

  const c = (await call('POST', '/campaigns', key, { name: 'bench', type: 'one_shot', channels: ['in_app'], target_segment_id: seg, config: { templates: { in_app: tpl } } })).data.id
  t0 = performance.now()
  await call('PATCH', `/campaigns/${c}`, key, { status: 'running' })
  const startMs = performance.now() - t0
  let oneShotDone = false
  const duringProbe = await probeSocket(`b${PLAYERS}`)
  const duringAcked: number[] = []
  const probing = (async () => {
    while (!oneShotDone) {
      await call('POST', '/events', key, { player_id: `b${PLAYERS}`, event_type: 'deposit', event_id: `probe-${n}-${duringAcked.length}`, timestamp: new Date().toISOString(), payload: { amount: 10, currency: 'EUR' } })
      duringAcked.push(performance.now())
      await new Promise((r) => setTimeout(r, 250))
    }
  })()
  await wait(async () => (await sql`select status from campaigns where id = ${c}`)[0]!.status === 'completed')
  const enqueuedMs = performance.now() - t0
  await wait(async () => (await sql<{ n: number }[]>`select count(*)::int as n from notifications where campaign_id = ${c} and status = 'delivered'`)[0]!.n >= PLAYERS)
  const deliveredMs = performance.now() - t0
  oneShotDone = true
  await probing
  const during = await latencies(duringProbe, duringAcked)
  out(`one-shot to ${PLAYERS} players (in-app), ${app.ctx.pg.kind} PostgreSQL:`)
  out(`  start (PATCH running, audience selected): ${startMs.toFixed(0)} ms`)
  out(`  all enqueued: ${(enqueuedMs / 1000).toFixed(1)} s (${Math.round(PLAYERS / (enqueuedMs / 1000))} messages/s)`)
  out(`  all delivered: ${(deliveredMs / 1000).toFixed(1)} s (${Math.round(PLAYERS / (deliveredMs / 1000))} messages/s)`)
  out(`  bare baseline (one INSERT ... SELECT of the same rows): ${bareMs.toFixed(0)} ms; enqueue/bare time ratio ${(enqueuedMs / bareMs).toFixed(1)}`)

  out(`trigger latency while the one-shot is enqueued and delivered (${during.length} probes, one every 250 ms; 200 → on the inbox WebSocket): p50 ${pctOf(during, 50)} ms, p99 ${pctOf(during, 99)} ms, max ${during[during.length - 1]} ms`)

  // Trigger latency, idle.
  const idleProbe = await probeSocket('b1')
  const idleAcked: number[] = []
  for (let i = 0; i < TRIGGERS; i++) {
    await call('POST', '/events', key, { player_id: 'b1', event_type: 'deposit', event_id: `bench-${n}-${i}`, timestamp: new Date().toISOString(), payload: { amount: 10, currency: 'EUR' } })
    idleAcked.push(performance.now())
  }
  const lat = await latencies(idleProbe, idleAcked)
  out(`trigger latency, ${TRIGGERS} sequential deposits (200 → on the inbox WebSocket): p50 ${pctOf(lat, 50)} ms, p99 ${pctOf(lat, 99)} ms, max ${lat[lat.length - 1]} ms`)
} finally {
  await app.close()
  await db?.close()
  rmSync(dataDir, { recursive: true, force: true })
}

// `npm run bench -- delivery`: message delivery from enqueue to accepted, through the real engine.
//  - in-app: BENCH_INAPP messages (default 20,000) enqueued for players with an open inbox WebSocket; a
//    delivery counts when its WebSocket message arrives. Rate and enqueue-to-WebSocket p50/p99. Twice:
//    enqueued one at a time (enqueueNotificationBatched, BENCH_ENQUEUE_CONCURRENCY, default 64, in flight: what POST /notifications/send does), and
//    in chunks of 1,000 (enqueueNotifications: what a campaign does), which leaves the dispatcher's rate.
//  - email: BENCH_EMAILS messages (default 10,000: at 2,000 the pools' start is a third of the run) to a local SMTP server (smtp-server, in a child process);
//    a delivery counts when the server has the whole message. Then, in the same run, a bare nodemailer
//    pool (the same connections) sends the same rendered messages to the same server: rate and ratio.
// With DATABASE_URL: a fresh database on that server (created and dropped); else embedded PGlite.
import { fork } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import nodemailer from 'nodemailer'
import WebSocket from 'ws'
import { startApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { enqueueNotificationBatched, enqueueNotifications } from '../src/notifications/service.ts'
import { cpuLine, readCpu } from './cpu.ts'
import { freshDatabase, type FreshDatabase } from './fresh-database.ts'

const IN_APP = Number(process.env.BENCH_INAPP ?? 20_000)
const EMAILS = Number(process.env.BENCH_EMAILS ?? 10_000)
const SOCKETS = Number(process.env.BENCH_SOCKETS ?? 500)
const ENQUEUE_CONCURRENCY = Number(process.env.BENCH_ENQUEUE_CONCURRENCY ?? 64)
const out = (s: string) => process.stdout.write(`${s}\n`)
/** Waits for `p`, at most `ms`; the timer is cleared either way (a pending one would keep the process alive). */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))])
  clearTimeout(timer)
}
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN
}

let db: FreshDatabase | undefined
if (process.env.DATABASE_URL) db = await freshDatabase('respin_bench_delivery')
const adminKey = `admin-${randomUUID()}`
const config = loadConfig({
  ...process.env,
  ...(db ? { DATABASE_URL: db.url } : {}),
  PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', ADMIN_KEY: adminKey, WEBHOOK_ALLOW_PRIVATE: 'true',
  DATA_DIR: process.env.BENCH_DATA_DIR ?? `/tmp/respin-bench-delivery-${process.pid}`,
})
const app = await startApp(config)
const origin = `http://127.0.0.1:${app.port}`
const sql = app.ctx.sql

async function api(method: string, path: string, key: string, body?: unknown) {
  const res = await fetch(`${origin}/api/v1${path}`, { method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined })
  const json = (await res.json()) as any
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`)
  return json
}
const tenant = (await api('POST', '/admin/tenants', adminKey, { name: 'bench', slug: `bench-${Date.now()}` })).data
const brand = (await api('POST', `/admin/tenants/${tenant.id}/brands`, adminKey, { name: 'main', slug: 'main' })).data
const key = (await api('POST', `/admin/tenants/${tenant.id}/keys`, adminKey, { name: 'bench' })).data.key as string

async function makePlayers(n: number, emailDomain?: string): Promise<string[]> {
  const ext = Array.from({ length: n }, () => `b-${randomUUID()}`)
  const rows = await sql<{ id: string }[]>`
    insert into players (tenant_id, brand_id, external_id, email)
    select ${tenant.id}, ${brand.id}, e, case when ${emailDomain ?? null}::text is null then null else e || '@' || ${emailDomain ?? null}::text end
    from unnest(${ext}::text[]) as e returning id`
  const ids = rows.map((r) => r.id)
  await sql`
    insert into player_profiles (player_id, tenant_id, brand_id, consent)
    select id, ${tenant.id}, ${brand.id}, '{"email": {"granted": true, "at": "2026-01-01T00:00:00Z"}}'::jsonb from unnest(${ids}::uuid[]) as id`
  return ids
}

/** Enqueues with a bounded number in flight; returns the enqueue time of each notification id. */
async function enqueueAll(players: string[], count: number, channel: 'in_app' | 'email', content: { subject: string; body: string }, mode: 'single' | 'chunks' = 'single') {
  const started = new Map<string, number>()
  if (mode === 'chunks') {
    for (let from = 0; from < count; from += 1000) {
      const t0 = performance.now()
      const inputs = Array.from({ length: Math.min(1000, count - from) }, (_, k) => ({
        tenantId: tenant.id, brandId: brand.id, playerId: players[(from + k) % players.length]!, channel, content, idempotencyKey: randomUUID(),
      }))
      const rs = await sql.begin((tx) => enqueueNotifications(tx, app.ctx, inputs))
      app.ctx.delivery?.wake()
      for (const r of rs) started.set(r.id, t0)
    }
    return started
  }
  let next = 0
  await Promise.all(Array.from({ length: ENQUEUE_CONCURRENCY }, async () => {
    while (next < count) {
      const i = next++
      const t0 = performance.now()
      const r = await enqueueNotificationBatched(sql, app.ctx, { tenantId: tenant.id, brandId: brand.id, playerId: players[i % players.length]!, channel, content })
      started.set(r.notification.id, t0)
    }
  }))
  return started
}

out(`machine: load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}, postgres: ${app.ctx.pg.kind}`)

// --- in-app ---------------------------------------------------------------------------------------------
for (const mode of ['single', 'chunks'] as const) {
  const players = await makePlayers(SOCKETS)
  const received = new Map<string, number>()
  let done!: () => void
  const allIn = new Promise<void>((r) => (done = r))
  const sockets = await Promise.all(players.map(async (id) => {
    const { token } = (await api('POST', `/players/${id}/inbox/token`, key)).data
    const ws = new WebSocket(`ws://127.0.0.1:${app.port}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
    ws.on('message', (raw) => {
      received.set(JSON.parse(String(raw)).data.id, performance.now())
      if (received.size === IN_APP) done()
    })
    await new Promise((r) => ws.once('open', r))
    return ws
  }))
  const cpu0 = readCpu()
  const t0 = performance.now()
  const started = await enqueueAll(players, IN_APP, 'in_app', { subject: 'Bonus', body: 'Hello {{ name | player }}, a gift is waiting.' }, mode)
  const enqueuedIn = performance.now() - t0
  await within(allIn, 600_000)
  const total = performance.now() - t0
  const lat = [...received].map(([id, at]) => at - (started.get(id) ?? at))
  const how = mode === 'single' ? `one at a time, ${ENQUEUE_CONCURRENCY} in flight` : 'in chunks of 1,000'
  out(`in-app (enqueued ${how}): ${received.size}/${IN_APP} delivered to ${SOCKETS} sockets in ${(total / 1000).toFixed(1)} s = ${Math.round(received.size / (total / 1000))} msg/s (enqueue alone ${Math.round(IN_APP / (enqueuedIn / 1000))}/s); enqueue-to-WebSocket p50 ${pct(lat, 50).toFixed(0)} ms, p99 ${pct(lat, 99).toFixed(0)} ms`)
  const cpu = cpuLine(cpu0, readCpu(), received.size)
  if (cpu) out(`  CPU µs per message (bench = the app's threads and the WebSocket clients): ${cpu}`)
  for (const ws of sockets) ws.close()
}

// --- email ----------------------------------------------------------------------------------------------
{
  const accepted = new Map<string, number>()
  let bare = 0
  let bareRun = false
  let done!: () => void
  let allIn = new Promise<void>((r) => (done = r))
  // The SMTP server runs in a child process (bench/delivery/smtp-sink.ts); acceptance times come back in
  // ms since the epoch, turned into this process's performance.now() clock.
  const sink = fork(fileURLToPath(new URL('delivery/smtp-sink.ts', import.meta.url)), { execArgv: ['--import', './src/ts-loader.mjs'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const port = await new Promise<number>((resolve, reject) => {
    sink.once('message', (m) => resolve((m as { port: number }).port))
    sink.once('exit', (code) => reject(new Error(`SMTP sink exited with ${code}`)))
  })
  sink.on('message', (batch) => {
    if (!Array.isArray(batch)) return
    for (const r of batch as ({ id: string; at: number } | { bare: 1 })[]) {
      if ('id' in r) accepted.set(r.id, r.at - performance.timeOrigin)
      else bare++
    }
    if (bareRun ? bare === EMAILS : accepted.size === EMAILS) done()
  })
  await api('PUT', '/settings/channels/email', key, { smtp_url: `smtp://127.0.0.1:${port}`, from: 'Bench <bench@casino.example>', track_opens: true, track_clicks: true })
  const players = await makePlayers(Math.min(EMAILS, 1000), 'bench.example')
  const html = '<p>Hello {{ name | player }}</p><p>Your bonus is waiting: <a href="https://casino.example/bonus">claim it</a>.</p>'
  const cpu0 = readCpu({ smtp: sink.pid })
  const t0 = performance.now()
  const started = await enqueueAll(players, EMAILS, 'email', { subject: 'Your bonus', body: html })
  await within(allIn, 600_000)
  const total = performance.now() - t0
  const engineCpu = cpuLine(cpu0, readCpu({ smtp: sink.pid }), accepted.size)
  const lat = [...accepted].map(([id, at]) => at - (started.get(id) ?? at))
  const engineRate = accepted.size / (total / 1000)
  out(`email (engine): ${accepted.size}/${EMAILS} accepted in ${(total / 1000).toFixed(1)} s = ${Math.round(engineRate)} msg/s; enqueue-to-accepted p50 ${pct(lat, 50).toFixed(0)} ms, p99 ${pct(lat, 99).toFixed(0)} ms`)

  // The same messages through a bare nodemailer pool with the engine's connections (5 per brand).
  const [sample] = await sql<{ rendered: { subject: string; body: string } }[]>`select rendered from notifications where channel = 'email' and status = 'delivered' limit 1`
  const transport = nodemailer.createTransport({ pool: true, maxConnections: 5, maxMessages: Infinity, host: '127.0.0.1', port, secure: false, ignoreTLS: true })
  allIn = new Promise<void>((r) => (done = r))
  bareRun = true
  const cpu1 = readCpu({ smtp: sink.pid })
  const b0 = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < EMAILS) {
      const i = next++
      await transport.sendMail({ from: 'Bench <bench@casino.example>', to: `x${i}@bench.example`, subject: sample!.rendered.subject, html: sample!.rendered.body, text: 'Hello player\n\nYour bonus is waiting: claim it (https://casino.example/bonus).', headers: { 'List-Unsubscribe': '<http://localhost/u>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } })
    }
  }))
  await within(allIn, 60_000)
  const bareRate = bare / ((performance.now() - b0) / 1000)
  const bareCpu = cpuLine(cpu1, readCpu({ smtp: sink.pid }), bare)
  transport.close()
  out(`email (bare nodemailer pool, 5 connections): ${bare}/${EMAILS} in ${((performance.now() - b0) / 1000).toFixed(1)} s = ${Math.round(bareRate)} msg/s; engine/bare ratio ${(engineRate / bareRate).toFixed(2)}`)
  if (engineCpu) out(`  CPU µs per email, engine: ${engineCpu}`)
  if (bareCpu) out(`  CPU µs per email, bare pool: ${bareCpu}`)
  await new Promise<void>((r) => {
    sink.once('exit', () => r())
    sink.disconnect()
  })
}

await app.close()
await db?.close()

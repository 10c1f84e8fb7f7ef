// `npm run bench -- gamification`: the gamification engine under ingestion at full rate, against the real
// server (a child process running src/main.ts) on PostgreSQL + Redis when DATABASE_URL and REDIS_URL are
// set (a new database per run), else on the embedded defaults. Measures, per brand over 10k players:
//   1. events/s without rules, with 20 active missions (mixed types) + 5 active tournaments, and without
//      again (the ratio takes the mean of the two runs without), and the stream's backlog when the load stops;
//   2. event-to-profile latency p50/p99: a probe deposit's 200 → its mission progress visible in
//      GET /gamification/player/{id}, while the load runs;
//   2b. issue 16: the same load with 20 triggered in-app campaigns + 20 missions per brand (ratio to the
//      runs without rules), and the trigger latency under load: a probe event's 200 → its campaign
//      message on the player's inbox WebSocket (BENCH_CAMPAIGNS=0 skips it);
//   3. leaderboard reads at 100k participants: top 10 and one player's rank through the route, next to the
//      bare sorted-set read (ZREVRANGE/ZREVRANK in Redis; the in-process board in embedded mode) and a
//      plain by-id route (the HTTP floor).
// bench/RESULTS.md records runs.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import postgres from 'postgres'
import WebSocket from 'ws'
import { memoryLeaderboards, redisLeaderboards } from '../src/tournaments/leaderboard.ts'
import { cpuLine, readCpu, type CpuReading } from './cpu.ts'
import { freshDatabase } from './fresh-database.ts'
import { pct, runLoad } from './ingest/load.ts'
import { makeBodies } from './ingest/workload.ts'
import { freePort } from './free-port.ts'

const root = fileURLToPath(new URL('../', import.meta.url))
const TENANTS = Number(process.env.BENCH_TENANTS ?? 2)
// BENCH_CAMPAIGNS=0 skips issue 16's run (20 triggered campaigns + 20 missions, trigger latency under load).
const CAMPAIGNS = process.env.BENCH_CAMPAIGNS !== '0'
const PLAYERS = Number(process.env.BENCH_PLAYERS ?? 10_000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY ?? 16)
const LB_PARTICIPANTS = Number(process.env.BENCH_LB_PARTICIPANTS ?? 100_000)
const out = (s: string) => process.stdout.write(`${s}\n`)
/** Waits until the event stream has no row left for any consumer (servers only: embedded has no connection for it). */
async function drainStream(pg: postgres.Sql) {
  while (Number((await pg`select count(*)::int as n from event_stream`)[0]?.n) > 0) await new Promise((r) => setTimeout(r, 50))
}

async function startServer(env: Record<string, string | undefined>) {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'respin-bench-g-'))
  const adminKey = `admin-${randomBytes(12).toString('hex')}`
  const childEnv: Record<string, string | undefined> = { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_KEY: adminKey, LOG_LEVEL: 'warn', RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'postgres', ...env }
  for (const k of Object.keys(childEnv)) if (childEnv[k] === undefined) delete childEnv[k]
  // BENCH_CPU_PROF=dir: the server writes a V8 CPU profile there when it exits (where the time goes).
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []
  const proc: ChildProcess = spawn(process.execPath, [...prof, '--import', './src/ts-loader.mjs', 'src/main.ts'], { cwd: root, env: childEnv as NodeJS.ProcessEnv, stdio: ['ignore', 'ignore', 'inherit'] })
  const deadline = Date.now() + 90_000
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/api/v1/health`)).status === 200) break
    } catch {}
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error('server did not start')
    await new Promise((r) => setTimeout(r, 200))
  }
  return { proc, port, adminKey, dir }
}

async function api(port: number, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1${path}`, { method, headers: { 'content-type': 'application/json', 'x-api-key': key }, body: body === undefined ? undefined : JSON.stringify(body) })
  const json = (await res.json()) as { data: any } & Record<string, any>
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`)
  return json
}

/** Sends every body once, 8 in flight. */
async function sendAll(port: number, keys: string[], bodies: string[][]) {
  const jobs = bodies.flatMap((list, t) => list.map((b) => [keys[t] as string, b] as const))
  let next = 0
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < jobs.length) {
        const [key, body] = jobs[next++] as readonly [string, string]
        const res = await fetch(`http://127.0.0.1:${port}/api/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body })
        if (res.status !== 200) throw new Error(`events: ${res.status} ${await res.text()}`)
      }
    }),
  )
}

/** 20 missions (4 of each type, over the workload's event types) and 5 tournaments (each metric, filters). */
async function createRules(port: number, key: string): Promise<{ missions: string[]; tournaments: string[]; probeMission: string }> {
  const lp = (await api(port, key, 'POST', '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })).data.id
  const reward = { points: [{ currency_id: lp, amount: 5 }] }
  const filters = [
    { event_type: 'bet', measure: 'sum', filters: [{ field: 'game', op: 'in', value: ['starburst', 'book-of-ra'] }] },
    { event_type: 'deposit', measure: 'count' },
    { event_type: 'login', measure: 'count' },
    { event_type: 'win', measure: 'sum', filters: [{ field: 'amount', op: 'gte', value: 5 }] },
  ]
  const missions: string[] = []
  let probeMission = ''
  for (const type of ['one_time', 'daily', 'weekly', 'progressive', 'collaborative']) {
    for (const [i, f] of filters.entries()) {
      const rules = type === 'progressive' ? { ...f, stages: [{ target: 50, rewards: reward }, { target: 500, rewards: reward }, { target: 5000, rewards: reward }] }
        : { ...f, target: type === 'collaborative' ? 1e12 : i === 1 ? 1e9 : 200, timezone: 'Europe/Berlin' }
      const m = (await api(port, key, 'POST', '/gamification/missions', { name: `${type} ${i}`, type, rules, rewards: type === 'progressive' ? {} : reward })).data.id
      missions.push(m)
      if (type === 'one_time' && i === 1) probeMission = m
    }
  }
  const tournaments: string[] = []
  const configs = [{ metric: 'bet_amount' }, { metric: 'bet_count', providers: ['netent', 'pragmatic'] }, { metric: 'win_amount' }, { metric: 'ggr' }, { metric: 'bet_amount', games: ['starburst'], min_bet: 1 }]
  for (const [i, g] of configs.entries()) {
    tournaments.push((await api(port, key, 'POST', '/tournaments', { name: `T${i}`, status: 'active', game_config: g, ends_at: new Date(Date.now() + 3600_000).toISOString() })).data.id)
  }
  return { missions, tournaments, probeMission }
}

/**
 * Issue 16's rules: 20 triggered in-app campaigns (welcome on registration, thanks for a deposit of 100
 * or more, withdrawal follow-up, big win, a game's players; 4 of each, at most one message per player
 * each, as CRM triggers are) and 20 missions. `probe`: a campaign on the probe's own event type.
 */
async function createCampaignRules(port: number, key: string): Promise<{ campaigns: string[]; probe: string; missions: string[] }> {
  const tpl = (await api(port, key, 'POST', '/notifications/templates', { name: 'triggered', channel: 'in_app', body: 'Hello {{ name | there }}' })).data.id
  const triggers = [
    { event_type: 'registration' },
    { event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 100 }] },
    { event_type: 'withdrawal' },
    { event_type: 'win', filters: [{ field: 'amount', op: 'gte', value: 45 }] },
    { event_type: 'game_start', filters: [{ field: 'game', op: 'eq', value: 'crazy-time' }] },
  ]
  const campaigns: string[] = []
  for (let i = 0; i < 20; i++) {
    const c = (await api(port, key, 'POST', '/campaigns', { name: `trigger ${i}`, type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl }, trigger: triggers[i % 5], max_per_player: 1 } })).data.id
    await api(port, key, 'PATCH', `/campaigns/${c}`, { status: 'running' })
    campaigns.push(c)
  }
  const probe = (await api(port, key, 'POST', '/campaigns', { name: 'probe', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl }, trigger: { event_type: 'custom_probe' } } })).data.id
  await api(port, key, 'PATCH', `/campaigns/${probe}`, { status: 'running' })
  const rules = await createRules(port, key)
  for (const t of rules.tournaments) await api(port, key, 'PATCH', `/tournaments/${t}`, { status: 'cancelled' })
  return { campaigns, probe, missions: rules.missions }
}

async function scenario(mode: 'servers' | 'embedded') {
  const db = mode === 'servers' ? await freshDatabase('respin_bench_gam') : undefined
  const env = db ? { DATABASE_URL: db.url } : { DATABASE_URL: undefined, REDIS_URL: undefined, CLICKHOUSE_URL: undefined }
  const server = await startServer(env).catch(async (err: unknown) => {
    await db?.close()
    throw err
  })
  const port = server.port
  const pg = db ? postgres(db.url, { max: 2, onnotice: () => {} }) : undefined
  try {
    const keys: string[] = []
    const tenants: string[] = []
    for (let i = 0; i < TENANTS; i++) {
      const slug = `bench-${randomBytes(4).toString('hex')}`
      const tenant = (await api(port, server.adminKey, 'POST', '/admin/tenants', { name: slug, slug })).data
      await api(port, server.adminKey, 'POST', `/admin/tenants/${tenant.id}/brands`, { name: 'main', slug: 'main' })
      keys.push((await api(port, server.adminKey, 'POST', `/admin/tenants/${tenant.id}/keys`, { name: 'bench' })).data.key)
      tenants.push(tenant.id)
    }
    const reg = keys.map((_, t) =>
      Array.from({ length: PLAYERS / 100 }, (_, b) =>
        JSON.stringify({ events: Array.from({ length: 100 }, (_, i) => ({ player_id: `player-${b * 100 + i}`, event_type: 'registration', event_id: `reg-${t}-${b}-${i}`, payload: { country: 'SE', currency: 'EUR' } })) }),
      ),
    )
    await sendAll(port, keys, reg)
    const bodies = () => keys.map(() => makeBodies({ count: Math.max(800, Math.ceil((SECONDS * 30_000) / 100 / TENANTS)), batchSize: 100, players: PLAYERS, repeatShare: 0.05 }))
    // Where the two cores go per stored event: the server's threads, PostgreSQL, Redis and the load
    // generator (the bench's threads). A run with rules is read once its stream backlog is drained, so
    // the consumers' whole cost is in it.
    const cpuAt = () => readCpu({ server: server.proc.pid })
    const load = async () => {
      const cpu0 = cpuAt()
      const r = await runLoad({ port, keys, bodies: bodies(), concurrency: CONCURRENCY, durationMs: SECONDS * 1000 })
      return { eps: r.stored / r.seconds, p99: pct(r.latenciesMs, 99), errors: r.errors, stored: r.stored, cpu0 }
    }
    const cpuReport = (label: string, run: { stored: number; cpu0: CpuReading }) => {
      const line = cpuLine(run.cpu0, cpuAt(), run.stored)
      if (line) out(`CPU µs per stored event, ${label}: ${line}`)
    }
    const f = (n: number) => Math.round(n).toLocaleString('en')
    const ms = (n: number) => n.toFixed(2)
    out(`\n### ${mode} (${TENANTS} brands × ${PLAYERS.toLocaleString('en')} players, 100-event batches, ${CONCURRENCY} in flight, ${SECONDS} s per run, INGEST_ACK_AFTER=postgres)\n`)
    const without1 = await load()
    out(`without rules: ${f(without1.eps)} events/s, p99 ${ms(without1.p99)} ms, errors ${without1.errors}`)
    cpuReport('without rules', without1)
    const rules = await Promise.all(keys.map((k) => createRules(port, k)))
    const withRules = await load()
    const backlogAtStop = pg ? Number((await pg`select count(*)::int as n from event_stream`)[0]?.n) : Number.NaN
    // Drain time of the backlog: watched through the probe tenant's profile below in embedded mode.
    const t0 = performance.now()
    if (pg) await drainStream(pg)
    const drainMs = pg ? performance.now() - t0 : Number.NaN
    out(`with 20 missions + 5 tournaments per brand: ${f(withRules.eps)} events/s, p99 ${ms(withRules.p99)} ms, errors ${withRules.errors}; stream backlog at stop ${Number.isNaN(backlogAtStop) ? 'n/a (embedded)' : `${f(backlogAtStop)} rows, drained in ${f(drainMs)} ms`}`)
    if (pg) cpuReport('with 20 missions + 5 tournaments, until the stream is drained', withRules)

    // Event-to-profile latency while the load runs again.
    const probeKey = keys[0] as string
    const probeMission = (rules[0] as { probeMission: string }).probeMission
    await api(port, probeKey, 'POST', '/events', { player_id: 'probe', event_type: 'login', event_id: `probe-${randomBytes(4).toString('hex')}` })
    await new Promise((r) => setTimeout(r, 1500))
    const players = (await api(port, probeKey, 'GET', '/players?search=probe')).data as { id: string; external_id: string }[]
    const probeId = (players.find((p) => p.external_id === 'probe') as { id: string }).id
    const progress = async () => {
      const p = (await api(port, probeKey, 'GET', `/gamification/player/${probeId}`)).data
      return (p.active_missions.find((m: { mission_id: string }) => m.mission_id === probeMission)?.progress ?? 0) as number
    }
    const latencies: number[] = []
    let stop = false
    const background = runLoad({ port, keys, bodies: bodies(), concurrency: CONCURRENCY, durationMs: (SECONDS + 20) * 1000 })
    const probing = (async () => {
      await new Promise((r) => setTimeout(r, 1000))
      let expected = await progress()
      for (let i = 0; i < 40 && !stop; i++) {
        await api(port, probeKey, 'POST', '/events', { player_id: 'probe', event_type: 'deposit', event_id: `probe-${randomBytes(6).toString('hex')}`, payload: { amount: 10, currency: 'EUR' } })
        const acked = performance.now()
        expected++
        while ((await progress()) < expected) {
          if (performance.now() - acked > 30_000) break
          await new Promise((r) => setTimeout(r, 5))
        }
        latencies.push(performance.now() - acked)
        await new Promise((r) => setTimeout(r, 200))
      }
    })()
    await probing
    stop = true
    await background
    const lat = Float64Array.from(latencies).sort()
    out(`event-to-profile latency under load (${lat.length} probes): p50 ${ms(pct(lat, 50))} ms, p99 ${ms(pct(lat, 99))} ms, max ${ms(lat[lat.length - 1] ?? Number.NaN)} ms`)

    // The same load with the rules switched off again (cancelled): the second baseline.
    for (const [t, r] of rules.entries()) {
      for (const m of r.missions) await api(port, keys[t] as string, 'PATCH', `/gamification/missions/${m}`, { status: 'cancelled' })
      for (const tr of r.tournaments) await api(port, keys[t] as string, 'PATCH', `/tournaments/${tr}`, { status: 'cancelled' })
    }
    if (pg) await drainStream(pg)
    else await new Promise((r) => setTimeout(r, 5000))
    const without2 = await load()
    out(`without rules again: ${f(without2.eps)} events/s, p99 ${ms(without2.p99)} ms, errors ${without2.errors}`)
    cpuReport('without rules again', without2)

    // Issue 16: the same load with 20 triggered campaigns + 20 missions per brand, then the trigger latency
    // under load.
    let campaignRun: { eps: number; p99: number; errors: number; lat: Float64Array } | undefined
    if (CAMPAIGNS) {
      const campaignRules = await Promise.all(keys.map((k) => createCampaignRules(port, k)))
      const withCampaigns = await load()
      if (pg) {
        await drainStream(pg)
        cpuReport('with 20 triggered campaigns + 20 missions, until the stream is drained (not the deliveries)', withCampaigns)
      }
      // The issue's measure: a probe event's 200 → its message on the player's inbox WebSocket. One probe
      // player with a socket open; a probe 250 ms after the previous one's 200 for as long as the load runs
      // (not after its message, so a slow consumer cannot thin the sample). The k-th message on the socket
      // answers the k-th probe (one player's events are applied in order); one still missing 10 s after
      // the load is counted at the wait so far (a lower bound), so a consumer that falls behind shows.
      const probePlayer = (await api(port, probeKey, 'POST', '/players', { external_id: 'trigger-probe' })).data.id as string
      const token = (await api(port, probeKey, 'POST', `/players/${probePlayer}/inbox/token`)).data.token as string
      const arrived: number[] = []
      const socket = new WebSocket(`ws://127.0.0.1:${port}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
      socket.on('message', () => arrived.push(performance.now()))
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
      const acked: number[] = []
      const loadMs = (SECONDS + 20) * 1000
      const loadStart = performance.now()
      const bg = runLoad({ port, keys, bodies: bodies(), concurrency: CONCURRENCY, durationMs: loadMs })
      await new Promise((r) => setTimeout(r, 1000))
      while (performance.now() - loadStart < loadMs - 2000) {
        await api(port, probeKey, 'POST', '/events', { player_id: 'trigger-probe', event_type: 'custom_probe', event_id: `tp-${randomBytes(6).toString('hex')}` })
        acked.push(performance.now())
        await new Promise((r) => setTimeout(r, 250))
      }
      await bg
      const backlog = pg ? Number((await pg`select count(*)::int as n from event_stream where consumer = 'campaigns'`)[0]?.n) : Number.NaN
      out(`campaigns consumer backlog when the load stopped: ${Number.isNaN(backlog) ? 'n/a (embedded)' : f(backlog)} events`)
      if (pg) {
        // What the triggers sent: the probe's message waits behind these in the delivery queue.
        const [sent] = await pg<{ n: number; queued: number }[]>`
          select count(*)::int as n, count(*) filter (where status = 'queued')::int as queued from notifications where campaign_id is not null`
        out(`triggered messages enqueued during the load: ${f(sent?.n ?? 0)}; still queued for delivery when it stopped: ${f(sent?.queued ?? 0)}`)
      }
      const waitUntil = performance.now() + 10_000
      while (arrived.length < acked.length && performance.now() < waitUntil) await new Promise((r) => setTimeout(r, 20))
      const end = performance.now()
      socket.close()
      const triggerLat = acked.map((a, k) => (arrived[k] ?? end) - a)
      campaignRun = { ...withCampaigns, lat: Float64Array.from(triggerLat).sort() }
      for (const [t, r] of campaignRules.entries()) {
        for (const c of [...r.campaigns, r.probe]) await api(port, keys[t] as string, 'PATCH', `/campaigns/${c}`, { status: 'cancelled' })
        for (const m of r.missions) await api(port, keys[t] as string, 'PATCH', `/gamification/missions/${m}`, { status: 'cancelled' })
      }
      out(`with 20 triggered campaigns + 20 missions per brand: ${f(withCampaigns.eps)} events/s, p99 ${ms(withCampaigns.p99)} ms, errors ${withCampaigns.errors}`)
      out(`trigger latency under load (${campaignRun.lat.length} probes, 200 → on the WebSocket): p50 ${ms(pct(campaignRun.lat, 50))} ms, p99 ${ms(pct(campaignRun.lat, 99))} ms`)
    }

    // Leaderboard at 100k participants: one bet each from 100k players into a bet_count tournament.
    const lbKey = keys[1] ?? probeKey
    const lbTournament = (await api(port, lbKey, 'POST', '/tournaments', { name: 'Big', status: 'active', game_config: { metric: 'bet_count' } })).data.id
    const lbBodies = Array.from({ length: LB_PARTICIPANTS / 100 }, (_, b) =>
      JSON.stringify({ events: Array.from({ length: 100 }, (_, i) => ({ player_id: `lb-${b * 100 + i}`, event_type: 'bet', event_id: `lb-${b}-${i}`, payload: { amount: 1, currency: 'EUR', game: 'x' } })) }),
    )
    const fill0 = performance.now()
    await sendAll(port, [lbKey], [lbBodies])
    for (;;) {
      const total = (await api(port, lbKey, 'GET', `/tournaments/${lbTournament}/leaderboard?limit=1`)).total as number
      if (total >= LB_PARTICIPANTS) break
      if (performance.now() - fill0 > 600_000) throw new Error(`leaderboard filled to ${total} only`)
      await new Promise((r) => setTimeout(r, 250))
    }
    const fillSeconds = (performance.now() - fill0) / 1000
    const someone = (await api(port, lbKey, 'GET', `/tournaments/${lbTournament}/leaderboard?limit=1&offset=${LB_PARTICIPANTS / 2}`)).data[0].player_id as string
    const time = async (n: number, fn: () => Promise<unknown>) => {
      for (let i = 0; i < 20; i++) await fn()
      const t: number[] = []
      for (let i = 0; i < n; i++) {
        const s = performance.now()
        await fn()
        t.push(performance.now() - s)
      }
      const sorted = Float64Array.from(t).sort()
      return { p50: pct(sorted, 50), p99: pct(sorted, 99) }
    }
    const top = await time(500, () => api(port, lbKey, 'GET', `/tournaments/${lbTournament}/leaderboard?limit=10`))
    const rank = await time(500, () => api(port, lbKey, 'GET', `/tournaments/${lbTournament}/leaderboard?limit=1&player_id=${someone}`))
    const floor = await time(500, () => api(port, lbKey, 'GET', `/tournaments/${lbTournament}`))
    let bareTop = { p50: Number.NaN, p99: Number.NaN }
    let bareRank = { p50: Number.NaN, p99: Number.NaN }
    // The board layer the route reads through (src/tournaments/leaderboard.ts), called here directly:
    // what the engine adds to a sorted-set read, without the HTTP exchange.
    let boardTop: { p50: number; p99: number } | undefined
    let boardRank: { p50: number; p99: number } | undefined
    if (mode === 'servers' && process.env.REDIS_URL) {
      const redis = new Redis(process.env.REDIS_URL)
      const z = `rsp:lb2:{${lbTournament}}`
      const member = ((await redis.hget(`rsp:lbp2:{${lbTournament}}`, someone)) as string).split('|').slice(1).join('|')
      const board = redisLeaderboards(redis)
      for (let round = 0; round < 2; round++) {
        // Alternating, twice: the first round warms both sides up, the second is reported.
        bareTop = await time(500, () => redis.zrevrange(z, 0, 9, 'WITHSCORES'))
        boardTop = await time(500, () => board.top(lbTournament, 0, 10))
        bareRank = await time(500, () => Promise.all([redis.zrevrank(z, member), redis.zscore(z, member)]))
        boardRank = await time(500, () => board.rankOf(lbTournament, someone))
      }
      redis.disconnect()
    } else {
      const b = memoryLeaderboards()
      await b.update('t', Array.from({ length: LB_PARTICIPANTS }, (_, i) => ({ playerId: `p${i}`, externalId: `e${i}`, score: i % 1000, reachedMs: i, version: 1 })))
      bareTop = await time(500, () => b.top('t', 0, 10))
      bareRank = await time(500, () => b.rankOf('t', `p${LB_PARTICIPANTS / 2}`))
    }
    const base = (without1.eps + without2.eps) / 2
    out('\nSummary:\n')
    out('| run | events/s | p99 ms | errors |')
    out('|---|---:|---:|---:|')
    out(`| without rules | ${f(without1.eps)} | ${ms(without1.p99)} | ${without1.errors} |`)
    out(`| with 20 missions + 5 tournaments per brand | ${f(withRules.eps)} | ${ms(withRules.p99)} | ${withRules.errors} |`)
    out(`| without rules (again, rules cancelled) | ${f(without2.eps)} | ${ms(without2.p99)} | ${without2.errors} |`)
    out(`\nratio with/without: **${(withRules.eps / base).toFixed(2)}**; stream backlog when the load stopped: ${Number.isNaN(backlogAtStop) ? 'n/a (embedded)' : `${f(backlogAtStop)} rows, drained in ${f(drainMs)} ms`}`)
    out(`event-to-profile latency under load (${lat.length} probes): p50 ${ms(pct(lat, 50))} ms, p99 ${ms(pct(lat, 99))} ms`)
    if (campaignRun) {
      out(`with 20 triggered campaigns + 20 missions per brand: ${f(campaignRun.eps)} events/s, ratio **${(campaignRun.eps / base).toFixed(2)}** (issue 16)`)
      out(`trigger latency under load (${campaignRun.lat.length} probes, 200 → on the WebSocket): p50 ${ms(pct(campaignRun.lat, 50))} ms, p99 ${ms(pct(campaignRun.lat, 99))} ms`)
    }
    out(`\nleaderboard at ${f(LB_PARTICIPANTS)} participants (filled by events in ${fillSeconds.toFixed(1)} s), 500 sequential reads each:\n`)
    out('| read | p50 ms | p99 ms |')
    out('|---|---:|---:|')
    out(`| route: top 10 | ${ms(top.p50)} | ${ms(top.p99)} |`)
    out(`| route: one player's rank | ${ms(rank.p50)} | ${ms(rank.p99)} |`)
    out(`| bare ${mode === 'servers' ? 'Redis ZREVRANGE 0 9' : 'in-process board top 10'} | ${ms(bareTop.p50)} | ${ms(bareTop.p99)} |`)
    out(`| bare ${mode === 'servers' ? 'Redis ZREVRANK + ZSCORE' : 'in-process board rank'} | ${ms(bareRank.p50)} | ${ms(bareRank.p99)} |`)
    out(`| HTTP floor: GET /tournaments/{id} | ${ms(floor.p50)} | ${ms(floor.p99)} |`)
    if (boardTop && boardRank) {
      out(`| board layer (the route's read, no HTTP): top 10 | ${ms(boardTop.p50)} | ${ms(boardTop.p99)} |`)
      out(`| board layer: one player's rank | ${ms(boardRank.p50)} | ${ms(boardRank.p99)} |`)
      out(`\nboard layer / bare (p50): top 10 ${(boardTop.p50 / bareTop.p50).toFixed(2)}×, rank ${(boardRank.p50 / bareRank.p50).toFixed(2)}×; route − HTTP floor (p50): top 10 ${ms(top.p50 - floor.p50)} ms, rank ${ms(rank.p50 - floor.p50)} ms`)
    }
  } finally {
    server.proc.kill('SIGTERM')
    await new Promise((r) => server.proc.once('exit', r))
    rmSync(server.dir, { recursive: true, force: true })
    await pg?.end()
    await db?.close()
  }
}

const modes = (process.env.BENCH_MODES ?? (process.env.DATABASE_URL && process.env.REDIS_URL ? 'servers,embedded' : 'embedded')).split(',') as ('servers' | 'embedded')[]
for (const mode of modes) await scenario(mode)

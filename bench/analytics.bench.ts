// `npm run bench -- analytics`: every analytics and report route through the HTTP API over one brand of
// BENCH_EVENTS events (default 10,000,000; ~200k players, several currencies, 24 months), on the embedded
// defaults (PGlite, chDB), in process. Loading goes straight into the stores: players and profiles in
// large PostgreSQL statements, events by INSERT ... SELECT FROM numbers() inside chDB (through the
// rollups' materialized views, as ingestion's inserts do), in insertion order ≈ time order, their seq
// numbers counted in export_seq as the spool would. Then per route p50/p95 over BENCH_RUNS runs, the
// ceiling (a bare `SELECT event_type, count(), sum(amount) ... GROUP BY event_type` over the same rows,
// same engine) and each route's ratio to it, and the export rate (rows/s through the API) of each dataset.
//
// BENCH_EVENTS, BENCH_PLAYERS (200000), BENCH_RUNS (7), BENCH_EXPORT_ROWS (200000) tune the run; BENCH_ONLY
// (comma-separated substrings of route names) times only the matching routes. BENCH_DATA_DIR keeps the
// stores in that directory after the run and reuses a dataset already loaded there (loading 10M events
// takes minutes; a reused one skips straight to the timings).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import { startApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000_000)
const PLAYERS = Number(process.env.BENCH_PLAYERS ?? 200_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 7)
const EXPORT_ROWS = Number(process.env.BENCH_EXPORT_ROWS ?? 200_000)
const out = (s: string) => process.stdout.write(`${s}\n`)
// Follows next_cursor from the first page until `rows` rows (or the end), parsing every page.
const EXPORT_CLIENT = `
  const { parentPort, workerData: { url, key, rows: want } } = require('node:worker_threads')
  ;(async () => {
    let cursor = null
    let rows = 0
    const a = performance.now()
    while (rows < want) {
      const res = await fetch(url + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''), { headers: { 'x-api-key': key } })
      const page = JSON.parse(await res.text())
      if (res.status !== 200) throw new Error(res.status + ' ' + JSON.stringify(page))
      rows += page.data.length
      if (!page.next_cursor || !page.data.length) break
      cursor = page.next_cursor
    }
    parentPort.postMessage({ rows, ms: performance.now() - a })
  })()
`

for (const k of ['DATABASE_URL', 'CLICKHOUSE_URL', 'REDIS_URL']) delete process.env[k]
const keptDir = process.env.BENCH_DATA_DIR
const marker = keptDir && join(keptDir, 'bench-loaded')
const shape = `${EVENTS} events, ${PLAYERS} players\n`
const reuse = marker !== undefined && marker !== '' && existsSync(marker)
if (reuse && readFileSync(marker, 'utf8') !== shape) throw new Error(`BENCH_DATA_DIR holds ${readFileSync(marker, 'utf8').trim()}, not ${shape.trim()}`)
if (keptDir) mkdirSync(keptDir, { recursive: true })
const dir = keptDir ?? mkdtempSync(join(tmpdir(), 'respin-bench-analytics-'))
const adminKey = 'bench-admin-key-0123456789'
const app = await startApp(loadConfig({ DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', ADMIN_KEY: adminKey, LOG_LEVEL: 'warn', RATE_LIMIT_INGEST_PER_MIN: '0' }))
const origin = `http://127.0.0.1:${app.port}/api/v1`
const { sql, ch } = app.ctx
out(`analytics bench: ${EVENTS.toLocaleString()} events, ${PLAYERS.toLocaleString()} players, ${availableParallelism()} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`)

async function api(path: string, key: string, body?: unknown) {
  const res = await fetch(origin + path, { method: body ? 'POST' : 'GET', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined })
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${text}`)
  return JSON.parse(text)
}
try {
  const tenant = reuse
    ? ((await sql<{ id: string }[]>`select id from tenants where slug = 'bench'`)[0] as { id: string })
    : (await api('/admin/tenants', adminKey, { name: 'bench', slug: 'bench' })).data
  const brand = reuse
    ? ((await sql<{ id: string }[]>`select id from brands where tenant_id = ${tenant.id} and slug = 'main'`)[0] as { id: string })
    : (await api(`/admin/tenants/${tenant.id}/brands`, adminKey, { name: 'main', slug: 'main' })).data
  const key = (await api(`/admin/tenants/${tenant.id}/keys`, adminKey, { name: 'bench' })).data.key as string
  if (!reuse) await load()
  if (marker && !reuse) writeFileSync(marker, shape)

  // ---- load: players (PostgreSQL), then events (ClickHouse) in time order.
  async function load() {
    const t0 = performance.now()
    const to = Date.UTC(2026, 10, 1)
    const from = to - 730 * 86_400_000
    for (let i = 0; i < PLAYERS; i += 20_000) {
      const n = Math.min(20_000, PLAYERS - i)
      const ids = Array.from({ length: n }, (_, k) => `p${i + k}`)
      const created = ids.map((_, k) => new Date(from + Math.floor(((i + k) / PLAYERS) * (to - from))).toISOString())
      await sql`
        with ins as (
          insert into players (tenant_id, brand_id, external_id, created_at)
          select ${tenant.id}, ${brand.id}, x, c from unnest(${ids}::text[], ${created}::timestamptz[]) as u(x, c)
          returning id, tenant_id, brand_id, external_id)
        insert into player_profiles (player_id, tenant_id, brand_id, currency, event_count, deposit_count)
        select id, tenant_id, brand_id, (array['EUR','USD','GBP'])[1 + (substr(external_id, 2)::int % 3)], 50, 1 from ins`
    }
    await sql`analyze players, player_profiles` // what autovacuum does on a server after such a load
    const tPlayers = performance.now()
    out(`loaded ${PLAYERS.toLocaleString()} players in ${((tPlayers - t0) / 1000).toFixed(1)} s`)

    // Event n happens at from + n/N of the span (insertion order = time order), its player and type hashed
    // from n; every player's registration is a separate first block. Money types get amounts in cents.
    const span = to - from
    const TYPES = "['bet','bet','bet','bet','bet','bet','bet','bet','bet','win','win','win','win','win','win','login','login','game_start','deposit','deposit','deposit_failed','withdrawal','bet_rollback','win_rollback','bonus_granted','bonus_completed']"
    const chunk = 1_000_000
    const insertEvents = async (offset: number, n: number, registrations: boolean) => {
      const player = registrations ? 'number' : `cityHash64(number, 1) % ${PLAYERS}`
      const type = registrations ? "'registration'" : `${TYPES}[1 + cityHash64(number, 2) % 26]`
      const time = registrations ? `${from} + intDiv(number * ${span}, ${PLAYERS})` : `${from} + intDiv(number * ${span}, ${EVENTS})`
      await ch.command(`
        INSERT INTO events (tenant_id, brand_id, event_id, player_id, event_type, source_type, event_time, received_at, seq, session_id,
          amount, currency, method, game, provider, category, round_id, country, language, device, os, browser, platform, status, bonus_id, channel, granted, raw)
        SELECT toUUID('${tenant.id}'), toUUID('${brand.id}'), concat('e', toString(number)), concat('p', toString(pl)), ty, ty,
          fromUnixTimestamp64Milli(toInt64(${time}), 'UTC') AS at, at, ${registrations ? 1 : PLAYERS + 1} + number, concat('s', toString(pl)),
          if(ty IN ('bet','win','bet_rollback','win_rollback','deposit','deposit_failed','withdrawal','bonus_granted','bonus_completed'),
             toDecimal128((1 + cityHash64(number, 3) % 20000) / 100, 8), toDecimal128(0, 8)),
          if(ty IN ('bet','win','bet_rollback','win_rollback','deposit','deposit_failed','withdrawal','bonus_granted','bonus_completed'), ['EUR','USD','GBP'][1 + pl % 3], ''),
          if(ty IN ('deposit','withdrawal','deposit_failed'), 'card', ''),
          if(ty IN ('bet','win','bet_rollback','win_rollback','game_start'), concat('game', toString(cityHash64(number, 4) % 200)), ''),
          if(ty IN ('bet','win','bet_rollback','win_rollback','game_start'), concat('prov', toString(cityHash64(number, 4) % 200 % 20)), ''),
          if(ty IN ('bet','win','bet_rollback','win_rollback','game_start'), ['slots','live','table','crash','bingo'][1 + cityHash64(number, 4) % 200 % 5], ''),
          '',
          if(ty IN ('registration','login'), ['IT','DE','GB','ES','FR','US','BR','SE'][1 + pl % 8], ''), '',
          if(ty IN ('registration','login'), ['mobile','desktop','tablet'][1 + pl % 3], ''),
          if(ty IN ('registration','login'), ['ios','android','windows','macos'][1 + pl % 4], ''),
          if(ty IN ('registration','login'), ['chrome','safari','firefox'][1 + pl % 3], ''),
          if(ty IN ('registration','login'), ['web','app'][1 + pl % 2], ''),
          '', if(ty IN ('bonus_granted','bonus_completed'), concat('bonus', toString(cityHash64(number, 5) % 30)), ''), '', NULL,
          concat('{"player_id":"p', toString(pl), '","event_type":"', ty, '","event_id":"e', toString(number), '","payload":{"amount":', toString((1 + cityHash64(number, 3) % 20000) / 100), ',"currency":"EUR"}}')
        FROM (SELECT number, ${player} AS pl, ${type} AS ty FROM numbers(${offset}, ${n}))
        SETTINGS max_partitions_per_insert_block = 0, max_insert_threads = 2`)
    }
    await insertEvents(0, PLAYERS, true)
    for (let i = 0; i < EVENTS - PLAYERS; i += chunk) {
      await insertEvents(i, Math.min(chunk, EVENTS - PLAYERS - i), false)
      if ((i / chunk) % 2 === 1) out(`  ${(i + chunk + PLAYERS).toLocaleString()} events loaded (${((performance.now() - tPlayers) / 1000).toFixed(0)} s)`)
    }
    await sql`insert into export_seq (sink, next) values (${ch.sinkId}, ${EVENTS + 2}) on conflict (sink) do update set next = excluded.next`
    const [count] = await ch.query<{ n: string }>('SELECT toString(count()) AS n FROM events')
    out(`loaded ${Number(count?.n).toLocaleString()} events in ${((performance.now() - tPlayers) / 1000).toFixed(1)} s`)
    await ch.command('OPTIMIZE TABLE rollup_players FINAL').catch(() => {})
    out(`ready after ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  }

  // ---- latency per route, and the ceiling.
  const stats = (ms: number[]) => {
    const s = [...ms].sort((a, b) => a - b)
    const at = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] as number
    return { p50: at(0.5), p95: at(0.95) }
  }
  // Each route's runs alternate with runs of the bare scan, so its ratio compares the two under the same
  // conditions: on a shared machine the scan alone moved 2–3× within one run (bench/RESULTS.md, session 17).
  const bareScan = () => ch.query(`SELECT event_type, count(), sum(amount) FROM events WHERE tenant_id = {t:UUID} AND brand_id = {b:UUID} GROUP BY event_type`, { t: tenant.id, b: brand.id })
  async function sideBySide(fn: () => Promise<unknown>) {
    await fn() // warm-up
    await bareScan()
    const ms: number[] = []
    const bareMs: number[] = []
    for (let i = 0; i < RUNS; i++) {
      let a = performance.now()
      await bareScan()
      bareMs.push(performance.now() - a)
      a = performance.now()
      await fn()
      ms.push(performance.now() - a)
    }
    return { route: stats(ms), bare: stats(bareMs) }
  }
  const routes: [string, string][] = [
    ['summary', '/analytics/summary'],
    ['timeseries (30 d, UTC)', '/analytics/timeseries'],
    ['timeseries (1 y, Europe/Rome)', `/analytics/timeseries?from=2025-11-01&tz=Europe/Rome`],
    ...['country', 'device', 'os', 'browser', 'platform', 'game', 'provider', 'category', 'heatmap', 'bonus_roi'].map((d) => [`revenue ${d}`, `/analytics/revenue?dimension=${d}`] as [string, string]),
    ['revenue game (from 90 d)', `/analytics/revenue?dimension=game&from=2026-08-01`],
    ['cohorts (12)', '/analytics/cohorts'],
    ['cohorts (36)', '/analytics/cohorts?months=36'],
    ...['day', 'week', 'status', 'country', 'game', 'event_type'].flatMap((d) =>
      ['players', 'events', 'deposits', 'wagered'].map((m) => [`report ${m} × ${d}`, `/reports/run?metric=${m}&dimension=${d}`] as [string, string])),
  ]
  if (process.env.BENCH_EXPLAIN) {
    const scope = "tenant_id = {t:UUID} AND brand_id = {b:UUID}"
    for (const q of [
      `SELECT seq FROM events WHERE ${scope} AND seq > 500000 AND seq < 100000000 ORDER BY seq LIMIT 1000`,
      `SELECT * FROM events WHERE ${scope} AND seq > 500000 AND seq <= (SELECT max(seq) FROM (SELECT seq FROM events WHERE ${scope} AND seq > 500000 AND seq < 100000000 ORDER BY seq LIMIT 1000)) ORDER BY seq`,
    ]) {
      for (const r of await ch.query<{ explain: string }>(`EXPLAIN indexes = 1, projections = 1 ${q}`, { t: tenant.id, b: brand.id })) out(r.explain)
      const a = performance.now()
      await ch.query(q, { t: tenant.id, b: brand.id })
      out(`  ${(performance.now() - a).toFixed(1)} ms`)
    }
  }
  const only = process.env.BENCH_ONLY?.split(',')
  out('\nceiling: a bare `SELECT event_type, count(), sum(amount) ... GROUP BY event_type`, timed alternately with each route')
  out(`| route | p50 ms | p95 ms | bare p50 / p95 ms | p95 / bare p95 |\n|---|---:|---:|---:|---:|`)
  const bareAll: number[] = []
  for (const [name, path] of routes) {
    if (only && !only.some((x) => name.includes(x))) continue
    const { route: s, bare } = await sideBySide(() => api(path, key))
    bareAll.push(bare.p95)
    out(`| ${name} | ${s.p50.toFixed(1)} | ${s.p95.toFixed(1)} | ${bare.p50.toFixed(1)} / ${bare.p95.toFixed(1)} | ${(s.p95 / bare.p95).toFixed(2)} |`)
  }
  const sortedBare = [...bareAll].sort((x, y) => x - y)
  out(`bare scan p95 over the routes: min ${sortedBare[0]?.toFixed(1)}, median ${sortedBare[Math.floor(sortedBare.length / 2)]?.toFixed(1)}, max ${sortedBare.at(-1)?.toFixed(1)} ms`)

  // ---- export rates through the API (limit 1000), by a client on a thread of its own, as a client in
  // another process would be: its parsing of the pages does not take the server's event loop.
  out(`\n| export | rows | s | rows/s |\n|---|---:|---:|---:|`)
  for (const dataset of ['events', 'transactions', 'players']) {
    const client = new Worker(EXPORT_CLIENT, { eval: true, workerData: { url: `${origin}/export/${dataset}?limit=1000`, key, rows: EXPORT_ROWS } })
    const [result] = (await once(client, 'message')) as [{ rows: number; ms: number }]
    const s = result.ms / 1000
    out(`| ${dataset} | ${result.rows.toLocaleString()} | ${s.toFixed(2)} | ${Math.round(result.rows / s).toLocaleString()} |`)
  }
} finally {
  await app.close()
  if (!keptDir) rmSync(dir, { recursive: true, force: true })
}

// Router overhead: GET /api/v1/health and an authenticated no-op route through Respin's router, against a
// bare uWS handler, in the same run. Prints requests/s and the ratio (aim ≥ 0.8).
import { spawn, spawnSync } from 'node:child_process'
import autocannon from 'autocannon'

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

const server = spawn(process.execPath, ['--import', './src/ts-loader.mjs', new URL('./router/server.ts', import.meta.url).pathname], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: process.env,
})
const ports = await new Promise<{ bare: number; bareNode: number; respin: number; key: string; engine: string }>((resolve) => {
  let out = ''
  server.stdout.on('data', (c: Buffer) => {
    out += c
    const line = out.split('\n').find((l) => l.startsWith('{"bare"'))
    if (line) resolve(JSON.parse(line))
  })
})

// Every target gets the same request bytes (the key header too), so the load generator, which shares
// the cores with the server, spends the same on each and the ratio measures the server alone.
const headers = { 'x-api-key': ports.key }
/**
 * wrk (Debian package `wrk`, written in C) when installed: it needs far less CPU per request than a Node
 * load generator, which matters because it shares the 2 cores with the server. autocannon otherwise.
 */
const hasWrk = spawnSync('wrk', ['--version']).error === undefined
function loadWithWrk(url: string): { rps: number; p99: number } {
  const out = spawnSync('wrk', ['-t1', '-c64', `-d${DURATION_S}s`, '--latency', '-H', `x-api-key: ${ports.key}`, url], { encoding: 'utf8' }).stdout
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
  const p99 = /\s99%\s+([\d.]+)(us|ms|s)/.exec(out)
  const p99ms = p99 ? Number(p99[1]) * (p99[2] === 'us' ? 0.001 : p99[2] === 's' ? 1000 : 1) : NaN
  if (!rps || /Non-2xx/.test(out)) throw new Error(`${url}: wrk run failed\n${out}`)
  return { rps, p99: Math.round(p99ms * 10) / 10 }
}

async function load(url: string): Promise<{ rps: number; p99: number }> {
  if (hasWrk) return loadWithWrk(url)
  const result = await autocannon({ url, connections: 64, pipelining: 4, duration: DURATION_S, headers })
  // A stray socket error at connection setup is noise; anything more, or any non-2xx, is a broken run.
  if (result.non2xx > 0 || result.errors > Math.max(1, result.requests.total / 1000)) {
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`)
  }
  return { rps: result.requests.average, p99: result.latency.p99 }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
const runs: Record<string, { rps: number; p99: number }[]> = { bare: [], bareNode: [], health: [], noop: [] }
await load(`http://127.0.0.1:${ports.bare}/api/v1/health`) // warm-up (JIT, connections)
for (let round = 0; round < ROUNDS; round++) {
  // Interleaved, so drift on a shared machine hits all three alike.
  runs.bare!.push(await load(`http://127.0.0.1:${ports.bare}/api/v1/health`))
  runs.bareNode!.push(await load(`http://127.0.0.1:${ports.bareNode}/api/v1/health`))
  runs.health!.push(await load(`http://127.0.0.1:${ports.respin}/api/v1/health`))
  runs.noop!.push(await load(`http://127.0.0.1:${ports.respin}/api/v1/_bench/noop`))
}
server.kill('SIGTERM')

const bare = median(runs.bare!.map((r) => r.rps))
const row = (name: string, key: string) => {
  const rps = median(runs[key]!.map((r) => r.rps))
  const p99 = median(runs[key]!.map((r) => r.p99))
  return `| ${name} | ${Math.round(rps).toLocaleString('en')} | ${p99} | ${(rps / bare).toFixed(2)} |`
}
process.stdout.write(
  [
    `router overhead, HTTP_ENGINE=${ports.engine}: ${ROUNDS} rounds × ${DURATION_S}s, 64 connections, ${hasWrk ? 'wrk (1 thread)' : 'autocannon, 4 pipelined'}, medians (load generator on the same machine)`,
    '| target | req/s | p99 ms | ratio to bare uWS |',
    '|---|---|---|---|',
    row('bare uWS handler', 'bare'),
    row('bare node:http handler', 'bareNode'),
    row('GET /api/v1/health (router, cached checks)', 'health'),
    row('GET authenticated no-op (router + key auth + scope)', 'noop'),
    '',
  ].join('\n'),
)
const healthRatio = median(runs.health!.map((r) => r.rps)) / bare
const noopRatio = median(runs.noop!.map((r) => r.rps)) / bare
process.stdout.write(`ratio health ${healthRatio.toFixed(2)}, authenticated no-op ${noopRatio.toFixed(2)} (target ≥ 0.80)\n`)
const bareNodeRps = median(runs.bareNode!.map((r) => r.rps))
process.stdout.write(
  `to bare node:http: health ${(median(runs.health!.map((r) => r.rps)) / bareNodeRps).toFixed(2)}, no-op ${(median(runs.noop!.map((r) => r.rps)) / bareNodeRps).toFixed(2)}\n`,
)

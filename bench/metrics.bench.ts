// The cost /metrics adds to every request: one histogram sample per request (observeRequest: label
// bounding + prom-client's labelled histogram), against a bare baseline doing the least a counter per route
// could (one Map lookup and increment), in the same run. Also the time to render one scrape.
import { Histogram, Registry } from 'prom-client'
import { createMetrics } from '../src/lib/metrics.ts'

const N = Number(process.env.BENCH_N ?? 2_000_000)
const ROUTES = ['/events', '/players/:id', '/players', '/segments/:id', '/health', 'unmatched']
const STATUSES = [200, 200, 200, 201, 400, 404]

function bare(): number {
  const counts = new Map<string, number>()
  const t0 = performance.now()
  for (let i = 0; i < N; i++) {
    const k = ROUTES[i % 6] as string
    counts.set(k, (counts.get(k) ?? 0) + 1)
  }
  return performance.now() - t0
}

function observed(): number {
  const m = createMetrics({ defaultMetrics: false })
  const t0 = performance.now()
  for (let i = 0; i < N; i++) m.observeRequest(ROUTES[i % 6] as string, 'GET', STATUSES[i % 6] as number, (i % 100) / 1000)
  return performance.now() - t0
}

/** What observeRequest did first: prom-client's labelled histogram (hashes the label object per call). */
function promClient(): number {
  const h = new Histogram({ name: 'x', help: 'x', labelNames: ['route', 'method', 'status'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [new Registry()] })
  const t0 = performance.now()
  for (let i = 0; i < N; i++) h.observe({ route: ROUTES[i % 6] as string, method: 'GET', status: String(STATUSES[i % 6]) }, (i % 100) / 1000)
  return performance.now() - t0
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
bare()
observed() // warm-up
const b: number[] = []
const o: number[] = []
const p: number[] = []
promClient()
for (let r = 0; r < 5; r++) {
  b.push(bare())
  o.push(observed())
  p.push(promClient())
}
const m = createMetrics()
for (let i = 0; i < 10_000; i++) m.observeRequest(ROUTES[i % 6] as string, 'GET', STATUSES[i % 6] as number, 0.001)
m.registerQueue('q', () => ({ depth: 1, oldestAgeSeconds: 0 }))
await m.render()
const t0 = performance.now()
for (let i = 0; i < 50; i++) await m.render()
const renderMs = (performance.now() - t0) / 50
const ns = (ms: number) => Math.round((ms * 1e6) / N)
process.stdout.write(
  [
    `metrics: ${N.toLocaleString('en')} requests × 5 rounds, medians`,
    '| what | ns per request | ratio to bare |',
    '|---|---|---|',
    `| bare Map counter per route | ${ns(median(b))} | 1.00 |`,
    `| observeRequest (histogram, bounded labels) | ${ns(median(o))} | ${(median(o) / median(b)).toFixed(1)} |`,
    `| prom-client labelled Histogram.observe | ${ns(median(p))} | ${(median(p) / median(b)).toFixed(1)} |`,
    `render one scrape (default metrics + 36 series): ${renderMs.toFixed(2)} ms`,
    '',
  ].join('\n'),
)

// The bench's webhook receiver, in a process of its own so its CPU is not the dispatcher's: node:http with
// keep-alive. Paths /e/<n> answer 200 at once; /slow/<n> never answer (the sender's timeout ends them).
// Each body's data.t (ms since the epoch, set when its outbox row was committed) gives the commit-to-
// receipt latency. GET /stats → { count, byPrefix, latencies: { fast: [p50, p99] } }; POST /reset clears.
import { createServer } from 'node:http'

let count = 0
let latencies: number[] = []
const start = () => {
  count = 0
  latencies = []
}
const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0)

const server = createServer((req, res) => {
  if (req.url === '/stats') {
    const sorted = [...latencies].sort((a, b) => a - b)
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ count, p50: pct(sorted, 50), p99: pct(sorted, 99), max: sorted.at(-1) ?? 0 }))
    return
  }
  if (req.url === '/reset') {
    start()
    res.end('ok')
    return
  }
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    if (req.url?.startsWith('/slow/')) return // never answered
    count++
    const t = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { t?: number } }).data?.t
    if (typeof t === 'number') latencies.push(Date.now() - t)
    res.end('ok')
  })
})
server.keepAliveTimeout = 30_000
server.headersTimeout = 60_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})

// HTTP under hostile and slow clients (docs/http.md), against the router bench's server (HTTP_ENGINE from the
// environment): 1,000 slowloris connections trickling a head in, /health latency meanwhile, and an honest
// 1 MB upload at 16 KB/s (64 s) that must be answered, not cut.
import { spawn } from 'node:child_process'
import net from 'node:net'

const SLOWLORIS = Number(process.env.BENCH_SLOWLORIS ?? 1000)
const UPLOAD_BYTES = 1024 * 1024
const UPLOAD_RATE = 16 * 1024 // bytes per second

const server = spawn(process.execPath, ['--import', './src/ts-loader.mjs', new URL('./router/server.ts', import.meta.url).pathname], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: process.env,
})
const info = await new Promise<{ respin: number; key: string; engine: string }>((resolve) => {
  let out = ''
  server.stdout.on('data', (c: Buffer) => {
    out += c
    const line = out.split('\n').find((l) => l.startsWith('{"bare"'))
    if (line) resolve(JSON.parse(line))
  })
})
const port = info.respin

/** A slowloris connection: the request line, then one header line every 2 s, never the blank line. */
function slowloris(): Promise<number | undefined> {
  return new Promise((resolve) => {
    const started = Date.now()
    const socket = net.connect({ port, host: '127.0.0.1' })
    let n = 0
    const timer = setInterval(() => socket.write(`x-slow-${n++}: 1\r\n`), 2000)
    socket.on('connect', () => socket.write('GET /api/v1/health HTTP/1.1\r\nHost: bench\r\n'))
    socket.on('error', () => {})
    // Read what the server sends (its 408), or the end of the stream is only noticed at the next write.
    socket.on('data', () => {})
    socket.on('close', () => {
      clearInterval(timer)
      resolve(Date.now() - started)
    })
    setTimeout(() => socket.destroy(), 60_000).unref()
  })
}

/** 1 MB at 16 KB/s: one event padded with JSON whitespace, so the server must read all of it to answer. */
function slowUpload(): Promise<{ status: string; seconds: number }> {
  const event = JSON.stringify({ player_id: 'slow-upload', event_type: 'login' })
  const body = Buffer.from(' '.repeat(UPLOAD_BYTES - event.length) + event)
  return new Promise((resolve) => {
    const started = Date.now()
    const socket = net.connect({ port, host: '127.0.0.1' })
    let answer = ''
    socket.on('data', (c) => (answer += c))
    socket.on('error', () => {})
    socket.on('close', () => resolve({ status: answer.split('\r\n')[0] || 'no answer (connection closed)', seconds: (Date.now() - started) / 1000 }))
    socket.on('connect', () => {
      socket.write(`POST /api/v1/events HTTP/1.1\r\nHost: bench\r\nx-api-key: ${info.key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`)
      let sent = 0
      const chunk = UPLOAD_RATE / 4
      const timer = setInterval(() => {
        socket.write(body.subarray(sent, sent + chunk))
        sent += chunk
        if (sent >= body.length) clearInterval(timer)
      }, 250)
    })
  })
}

async function healthLatencies(untilMs: number): Promise<number[]> {
  const out: number[] = []
  while (Date.now() < untilMs) {
    const t0 = performance.now()
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/health`)
    await res.arrayBuffer()
    out.push(performance.now() - t0)
    await new Promise((r) => setTimeout(r, 10))
  }
  return out
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))] as number
const upload = slowUpload()
const lorises = Array.from({ length: SLOWLORIS }, slowloris)
const latencies = await healthLatencies(Date.now() + 15_000)
const closedAfter = (await Promise.all(lorises)).filter((x): x is number => x !== undefined)
const up = await upload
server.kill('SIGTERM')

process.stdout.write(
  [
    `hostile clients, HTTP_ENGINE=${info.engine}: ${SLOWLORIS} slowloris connections (a header line every 2 s), /health polled meanwhile, 1 MB uploaded at 16 KB/s`,
    '| measure | value |',
    '|---|---|',
    `| slowloris connections closed by the server | ${closedAfter.length} of ${SLOWLORIS}, after ${(pct(closedAfter, 50) / 1000).toFixed(1)} s (median), ${(Math.max(...closedAfter) / 1000).toFixed(1)} s (max) |`,
    `| /health meanwhile (${latencies.length} requests) | p50 ${pct(latencies, 50).toFixed(1)} ms, p99 ${pct(latencies, 99).toFixed(1)} ms |`,
    `| 1 MB at 16 KB/s | ${up.status} after ${up.seconds.toFixed(1)} s |`,
    '',
  ].join('\n'),
)

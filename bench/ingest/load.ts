// A small closed-loop HTTP load generator (node:http, keep-alive): `concurrency` requests in flight,
// each client sends its next body as soon as the previous answer arrives.
import { Agent, request } from 'node:http'

export interface LoadResult {
  requests: number
  errors: number
  statuses: Record<number, number>
  seconds: number
  latenciesMs: Float64Array
  stored: number
  deduped: number
}

export async function runLoad(opts: {
  port: number
  keys: string[]
  bodies: string[][]
  concurrency: number
  durationMs: number
}): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: opts.concurrency })
  const lat: number[] = []
  const statuses: Record<number, number> = {}
  let errors = 0
  let stored = 0
  let deduped = 0
  const started = performance.now()
  const end = started + opts.durationMs
  const send = (key: string, body: string) =>
    new Promise<void>((resolve) => {
      const t0 = performance.now()
      const req = request(
        { agent, host: '127.0.0.1', port: opts.port, method: 'POST', path: '/api/v1/events', headers: { 'content-type': 'application/json', 'x-api-key': key, 'content-length': Buffer.byteLength(body) } },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('end', () => {
            const status = res.statusCode ?? 0
            statuses[status] = (statuses[status] ?? 0) + 1
            if (status === 200) {
              lat.push(performance.now() - t0)
              const r = JSON.parse(Buffer.concat(chunks).toString()) as { stored: number; deduped: number }
              stored += r.stored
              deduped += r.deduped
            } else errors++
            resolve()
          })
        },
      )
      req.on('error', () => {
        errors++
        resolve()
      })
      req.end(body)
    })
  const clients = Array.from({ length: opts.concurrency }, async (_, c) => {
    const tenant = c % opts.keys.length
    const bodies = opts.bodies[tenant] as string[]
    let i = Math.floor(c / opts.keys.length)
    while (performance.now() < end) {
      await send(opts.keys[tenant] as string, bodies[i % bodies.length] as string)
      i += Math.ceil(opts.concurrency / opts.keys.length)
    }
  })
  await Promise.all(clients)
  const seconds = (performance.now() - started) / 1000
  agent.destroy()
  return { requests: lat.length, errors, statuses, seconds, latenciesMs: Float64Array.from(lat).sort(), stored, deduped }
}

export const pct = (sorted: Float64Array, p: number) => (sorted.length ? (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number) : Number.NaN)

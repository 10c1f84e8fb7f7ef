// A small closed-loop HTTP/1.1 load generator: `concurrency` keep-alive connections, each sending its next
// request as soon as the previous answer arrives.
//
// It writes pre-encoded request bytes on raw sockets and reads answers with a minimal parser, because it
// shares the 2 cores with the server: node:http's client spent ~176 µs of CPU per single-event request
// (more than PostgreSQL did for it), so the bench measured the load generator as much as the server.
import { connect, type Socket } from 'node:net'

export interface LoadResult {
  requests: number
  errors: number
  statuses: Record<number, number>
  seconds: number
  latenciesMs: Float64Array
  stored: number
  deduped: number
  /** CPU the load generator itself spent (user + system, µs) while the load ran: it shares the cores. */
  clientCpuUs: number
}

/** Request bytes per tenant and body, built before the clock starts. */
function encodeRequests(keys: string[], bodies: string[][]): Buffer[][] {
  return bodies.map((list, t) => {
    const head = `POST /api/v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nx-api-key: ${keys[t]}\r\ncontent-length: `
    return list.map((body) => {
      const b = Buffer.from(body)
      return Buffer.concat([Buffer.from(`${head}${b.length}\r\n\r\n`), b])
    })
  })
}

const HEADER_END = Buffer.from('\r\n\r\n')

/**
 * Reads HTTP/1.1 answers off one connection. The server (uWS) always sends content-length; anything
 * else (chunked, a closed connection) fails the run loudly instead of skewing it.
 */
class AnswerReader {
  private buf: Buffer = Buffer.alloc(0)
  constructor(private readonly onAnswer: (status: number, body: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk
    for (;;) {
      const end = this.buf.indexOf(HEADER_END)
      if (end < 0) return
      const head = this.buf.toString('latin1', 0, end)
      const len = /\r\ncontent-length: *(\d+)/i.exec(head)
      if (!len) throw new Error(`load: answer without content-length: ${head}`)
      const total = end + 4 + Number(len[1])
      if (this.buf.length < total) return
      this.onAnswer(Number(head.slice(9, 12)), this.buf.subarray(end + 4, total))
      this.buf = this.buf.subarray(total)
    }
  }
}

export async function runLoad(opts: {
  port: number
  keys: string[]
  bodies: string[][]
  concurrency: number
  durationMs: number
  /** Called when the clock starts (after the requests are encoded and the connections open). */
  onStart?: () => void
}): Promise<LoadResult> {
  const requests = encodeRequests(opts.keys, opts.bodies)
  const lat: number[] = []
  const statuses: Record<number, number> = {}
  let errors = 0
  let stored = 0
  let deduped = 0
  const sockets = await Promise.all(
    Array.from({ length: opts.concurrency }, () =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect({ port: opts.port, host: '127.0.0.1', noDelay: true }, () => resolve(s))
        s.once('error', reject)
      }),
    ),
  )
  opts.onStart?.()
  const cpu0 = process.cpuUsage()
  const started = performance.now()
  const end = started + opts.durationMs
  const clients = sockets.map(
    (socket, c) =>
      new Promise<void>((resolve, reject) => {
        const tenant = c % opts.keys.length
        const list = requests[tenant] as Buffer[]
        const step = Math.ceil(opts.concurrency / opts.keys.length)
        let i = Math.floor(c / opts.keys.length)
        let t0 = 0
        const next = () => {
          if (performance.now() >= end) {
            socket.end()
            return resolve()
          }
          t0 = performance.now()
          socket.write(list[i % list.length] as Buffer)
          i += step
        }
        const reader = new AnswerReader((status, body) => {
          statuses[status] = (statuses[status] ?? 0) + 1
          if (status === 200) {
            lat.push(performance.now() - t0)
            const r = JSON.parse(body.toString()) as { stored: number; deduped: number }
            stored += r.stored
            deduped += r.deduped
          } else errors++
          next()
        })
        socket.on('data', (chunk: Buffer) => {
          try {
            reader.push(chunk)
          } catch (err) {
            socket.destroy()
            reject(err)
          }
        })
        socket.on('error', reject)
        socket.on('close', () => {
          if (performance.now() < end) reject(new Error('load: the server closed a connection mid-run'))
        })
        next()
      }),
  )
  await Promise.all(clients)
  const seconds = (performance.now() - started) / 1000
  const cpu = process.cpuUsage(cpu0)
  for (const s of sockets) s.destroy()
  return { requests: lat.length, errors, statuses, seconds, latenciesMs: Float64Array.from(lat).sort(), stored, deduped, clientCpuUs: cpu.user + cpu.system }
}

export const pct = (sorted: Float64Array, p: number) => (sorted.length ? (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number) : Number.NaN)

// Speaks HTTP/1.x over a raw TCP socket, byte for byte as given: for the cases a client library would
// never send (split heads, pipelining, malformed lines, stalled bodies).
import net from 'node:net'

export interface RawResult {
  /** Everything the server sent. */
  text: string
  /** Each response's status code, in order. */
  statuses: number[]
  /** The server closed the connection before `waitMs` ran out. */
  closedByServer: boolean
  /** When the server closed it, in ms after connecting (undefined if it did not). */
  closedAfterMs: number | undefined
}

export interface RawOptions {
  /** Pause between parts, ms. */
  gapMs?: number
  /** Give up (and close from our side) after this long, ms. */
  waitMs?: number
  /** Stop waiting once this many responses are complete (their bodies by content-length). */
  responses?: number
}

/** Complete responses (head + content-length body) at the start of `text`. */
export function parseResponses(text: string): { status: number; headers: Record<string, string>; body: string }[] {
  const out: { status: number; headers: Record<string, string>; body: string }[] = []
  let rest = text
  for (;;) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1) return out
    const lines = rest.slice(0, end).split('\r\n')
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1])
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':')
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
    }
    const length = Number(headers['content-length'] ?? 0)
    const bodyBytes = Buffer.from(rest.slice(end + 4))
    if (bodyBytes.length < length) return out
    out.push({ status, headers, body: bodyBytes.subarray(0, length).toString() })
    rest = bodyBytes.subarray(length).toString()
  }
}

export function rawRequest(port: number, parts: (string | Buffer)[], opts: RawOptions = {}): Promise<RawResult> {
  const { gapMs = 0, waitMs = 5000, responses } = opts
  return new Promise((resolve) => {
    const started = Date.now()
    const socket = net.connect({ port, host: '127.0.0.1', noDelay: true })
    let text = ''
    let closedAfterMs: number | undefined
    let settled = false
    const finish = (closedByServer: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ text, statuses: parseResponses(text).map((r) => r.status), closedByServer, closedAfterMs })
    }
    const timer = setTimeout(() => finish(false), waitMs)
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1')
      if (responses !== undefined && parseResponses(text).length >= responses) finish(false)
    })
    socket.on('error', () => {})
    socket.on('close', () => {
      closedAfterMs = Date.now() - started
      finish(true)
    })
    let i = 0
    const next = () => {
      if (settled || i >= parts.length) return
      socket.write(parts[i++] as string | Buffer)
      if (gapMs > 0) setTimeout(next, gapMs)
      else next()
    }
    socket.once('connect', next)
  })
}

/** Splits `data` into pieces of `size` bytes, as a network with that segment size would deliver it. */
export function segments(data: string, size: number): string[] {
  const out: string[] = []
  for (let i = 0; i < data.length; i += size) out.push(data.slice(i, i + size))
  return out
}

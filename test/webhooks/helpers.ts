// A real webhook receiver (node:http) that records every request with its raw body, and polling helpers.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Received {
  path: string
  headers: IncomingHttpHeaders
  body: string
  json: any
  at: number
}

export type Respond = (req: Received, res: ServerResponse) => unknown

export interface Receiver {
  url: (path?: string) => string
  port: number
  received: Received[]
  /** Requests to one path. */
  at(path: string): Received[]
  /** Replace the behaviour for one path (default: 200 "ok"). */
  on(path: string, respond: Respond): void
  close(): Promise<void>
}

export async function startReceiver(t: { teardown(fn: () => unknown): void }): Promise<Receiver> {
  const received: Received[] = []
  const behaviours = new Map<string, Respond>()
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      let json: unknown
      try {
        json = JSON.parse(body)
      } catch {
        json = undefined
      }
      const path = (req.url ?? '/').split('?')[0]!
      const r: Received = { path, headers: req.headers, body, json, at: Date.now() }
      received.push(r)
      const respond = behaviours.get(path)
      if (respond) void respond(r, res)
      else res.end('ok')
    })
  })
  server.keepAliveTimeout = 5000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  t.teardown(close)
  return {
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    port,
    received,
    at: (path) => received.filter((r) => r.path === path),
    on: (path, respond) => behaviours.set(path, respond),
    close,
  }
}

export { sleep, waitFor } from '../helpers/wait.ts'

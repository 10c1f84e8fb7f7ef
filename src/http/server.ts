// Building the server is separate from listening, so tests and the bench can start it on port 0.
import uWS from 'uWebSockets.js'
import type { AppContext } from '../context.ts'
import type { RouteDef } from './route.ts'
import { registerRoutes, type Traffic } from './router.ts'

export interface HttpServer {
  /** Resolves with the bound port (useful with port 0). */
  listen(port: number, host: string): Promise<number>
  /** Stops accepting connections. In-flight requests finish; their stores stay open until the caller closes them. */
  close(): void
  /** Resolves when no request is in flight, or after timeoutMs. */
  drain(timeoutMs: number): Promise<void>
}

export function createServer(ctx: AppContext, routes: RouteDef[]): HttpServer {
  const app = uWS.App()
  const traffic: Traffic = { inFlight: 0, draining: false }
  registerRoutes(app, ctx, routes, traffic)
  let listenSocket: uWS.us_listen_socket | undefined
  return {
    listen(port, host) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`cannot listen on ${host}:${port}`))
          listenSocket = socket
          resolve(uWS.us_socket_local_port(socket as unknown as uWS.us_socket))
        })
      })
    },
    close() {
      traffic.draining = true
      if (listenSocket) uWS.us_listen_socket_close(listenSocket)
      listenSocket = undefined
    },
    async drain(timeoutMs) {
      const deadline = Date.now() + timeoutMs
      while (traffic.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    },
  }
}

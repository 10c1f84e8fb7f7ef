// Building the server is separate from listening, so tests and the bench can start it on port 0.
// Two engines under one router (docs/http.md): node:http by default, uWebSockets.js with HTTP_ENGINE=uws.
import type { Server } from 'node:http'
import uWS from 'uWebSockets.js'
import type { AppContext } from '../context.ts'
import type { InboxHub } from '../notifications/inbox-socket.ts'
import { createNodeHttpServer, RouteTable } from './node-server.ts'
import type { RouteDef } from './route.ts'
import { registerRoutes, type RouteRegistry, type Traffic } from './router.ts'
import { registerMetricsRoute } from '../system/metrics-route.ts'

export interface HttpServer {
  /** Resolves with the bound port (useful with port 0). */
  listen(port: number, host: string): Promise<number>
  /** Stops accepting connections. In-flight requests finish; their stores stay open until the caller closes them. */
  close(): void
  /** Resolves when no request is in flight, or after timeoutMs. */
  drain(timeoutMs: number): Promise<void>
}

export function createServer(ctx: AppContext, routes: RouteDef[]): HttpServer {
  const traffic: Traffic = { inFlight: 0, draining: false }
  const engine = ctx.config.httpEngine === 'uws' ? uwsEngine() : nodeEngine(ctx)
  registerRoutes(engine.routes, ctx, routes, traffic)
  registerMetricsRoute(engine.routes, ctx, traffic)
  if (ctx.inbox) engine.attachInbox(ctx.inbox)
  return {
    listen: engine.listen,
    close() {
      traffic.draining = true
      engine.close()
    },
    async drain(timeoutMs) {
      const deadline = Date.now() + timeoutMs
      while (traffic.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
      engine.closeIdle()
    },
  }
}

interface Engine {
  routes: RouteRegistry
  listen(port: number, host: string): Promise<number>
  /** Stops accepting connections. */
  close(): void
  /** Closes keep-alive connections that carry no request. */
  closeIdle(): void
  /** Serves the inbox WebSocket (src/notifications/inbox-socket.ts) on this engine. */
  attachInbox(hub: InboxHub): void
}

const SERVED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'])

function nodeEngine(ctx: AppContext): Engine {
  const table = new RouteTable()
  const server: Server = createNodeHttpServer(table, {
    headersTimeoutMs: ctx.config.httpHeadersTimeoutMs,
    // One log line and one sample per request, as the router writes for the requests it sees.
    onRefused: ({ requestId, status, method, error }) => {
      // The method as a label only when it is one we serve: a client's own word would grow the series.
      ctx.metrics?.observeRequest('refused', method && SERVED_METHODS.has(method) ? method : 'other', status, 0)
      ctx.log.info({ reqId: requestId, route: 'refused', method, status, error }, 'request')
    },
  })
  return {
    routes: table,
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(port, host, () => {
          server.off('error', reject)
          resolve((server.address() as { port: number }).port)
        })
      }),
    close: () => {
      server.close()
      server.closeIdleConnections()
    },
    closeIdle: () => server.closeIdleConnections(),
    attachInbox: (hub) => hub.attachNode(server),
  }
}

function uwsEngine(): Engine {
  const app = uWS.App()
  let listenSocket: uWS.us_listen_socket | undefined
  return {
    routes: app as unknown as RouteRegistry,
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`cannot listen on ${host}:${port}`))
          listenSocket = socket
          resolve(uWS.us_socket_local_port(socket as unknown as uWS.us_socket))
        })
      }),
    close: () => {
      if (listenSocket) uWS.us_listen_socket_close(listenSocket)
      listenSocket = undefined
    },
    closeIdle: () => {},
    attachInbox: (hub) => hub.attach(app),
  }
}

// The inbox WebSocket (contract-engines §3): GET /api/v1/inbox/ws?token=... opens a socket for one player,
// who receives { type: "message", data: <inbox item> } for each new in-app message, from whichever API
// process delivered it. With a PostgreSQL server the delivering transaction NOTIFYs (so only committed
// messages are announced) and every process's listener publishes to its own sockets; embedded PGlite is
// one process, so the dispatcher publishes locally after the commit.
import { ServerResponse, type IncomingMessage, type Server as NodeHttpServer } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type postgres from 'postgres'
import type { TemplatedApp, WebSocket } from 'uWebSockets.js'
import { WebSocketServer, type WebSocket as NodeWebSocket } from 'ws'
import type { AppContext } from '../context.ts'
import { listenerConnection } from '../db/postgres.ts'
import { API_PREFIX, requestIdFrom } from '../http/router.ts'
import type { Sql } from './delivery-queries.ts'
import { playerOfInboxToken, type InboxItem } from './engagement.ts'

export const INBOX_CHANNEL = 'respin_inbox'
/** NOTIFY payloads are limited to 8000 bytes: larger items are announced by id and read back. */
const MAX_NOTIFY_BYTES = 7900

export interface InboxHub {
  /** Adds the WebSocket route to a uWS app (src/http/server.ts, HTTP_ENGINE=uws). */
  attach(app: TemplatedApp): void
  /** Serves the same route on a node:http server's upgrades (the default engine), with `ws`. */
  attachNode(server: NodeHttpServer): void
  /**
   * Announces delivered messages. Server mode: one pg_notify per message on `tx`, in one statement (sent
   * when it commits); embedded: nothing, the caller publishes after the commit (publishLocal()).
   */
  announceMany(tx: Sql, items: { playerId: string; item: InboxItem }[]): Promise<void>
  /** Embedded mode: publish what announce() queued in the transaction that just committed. */
  publishLocal(items: { playerId: string; item: InboxItem }[]): void
  readonly crossProcess: boolean
  /** Open sockets in this process. */
  readonly sockets: number
  close(): Promise<void>
}

/** What one delivered message's NOTIFY carries: the item, or only its id when the item is too large. */
function notifyPayload(playerId: string, item: InboxItem): string {
  const payload = JSON.stringify({ p: playerId, d: item })
  return Buffer.byteLength(payload) > MAX_NOTIFY_BYTES ? JSON.stringify({ p: playerId, id: item.id }) : payload
}

interface SocketData {
  playerId: string
}

const topicOf = (playerId: string) => `inbox:${playerId}`
const INBOX_PATH = `${API_PREFIX}/inbox/ws`
/** A node socket that missed a ping for this long is closed (uWS's idleTimeout does the same there). */
const NODE_PING_MS = 30_000

/** A refused upgrade, answered like every error of the API: the spec's body, a request id, Retry-After on 503. */
interface Refusal { status: string; code: string; error: string; requestId: string }

const refusalBody = (r: Refusal) => JSON.stringify({ error: r.error, code: r.code, request_id: r.requestId })
const retryAfter = (r: Refusal) => (r.code === 'SERVICE_UNAVAILABLE' ? '5' : undefined)

function refuseUpgrade(socket: Duplex, r: Refusal): void {
  const body = refusalBody(r)
  const after = retryAfter(r)
  const head = `HTTP/1.1 ${r.status}\r\nconnection: close\r\ncontent-type: application/json\r\nx-request-id: ${r.requestId}\r\n` +
    `${after ? `retry-after: ${after}\r\n` : ''}content-length: ${Buffer.byteLength(body)}\r\n\r\n`
  socket.end(head + body)
}

/**
 * node:http hands every request carrying `Connection: Upgrade` to the 'upgrade' listeners once there is
 * one (ours, for the inbox socket). An upgrade to anything else is ignored, as RFC 9110 §7.8 lets a
 * server do (curl --http2 asks for h2c on every http:// URL): the request is served by the server's
 * ordinary handler, on a connection that closes after the answer (node stopped parsing HTTP on it). A
 * request with a body is refused instead: the body was left unparsed on the socket.
 */
function serveIgnoringUpgrade(server: NodeHttpServer, req: IncomingMessage, socket: Duplex, requestId: string): void {
  const declaresBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0
  if (declaresBody) {
    return refuseUpgrade(socket, { status: '400 Bad Request', code: 'BAD_REQUEST', error: `upgrade to ${req.headers.upgrade} is not supported`, requestId })
  }
  const res = new ServerResponse(req)
  res.shouldKeepAlive = false
  res.assignSocket(socket as Socket)
  res.on('finish', () => {
    res.detachSocket(socket as Socket)
    socket.end()
  })
  if (!req.complete) req.push(null) // no body: a route reading one sees it end at once
  server.emit('request', req, res)
}

const UNAUTHORIZED = { status: '401 Unauthorized', code: 'UNAUTHORIZED', error: 'invalid or expired inbox token' }
const UNAVAILABLE = { status: '503 Service Unavailable', code: 'SERVICE_UNAVAILABLE', error: 'the inbox token could not be checked; retry' }

export async function createInboxHub(ctx: Pick<AppContext, 'config' | 'sql' | 'pg' | 'log' | 'clock'>): Promise<InboxHub> {
  const apps: TemplatedApp[] = []
  // The node engine's sockets by player (uWS keeps its own topics).
  const nodeSockets = new Map<string, Set<NodeWebSocket>>()
  const closers: (() => void)[] = []
  const GOING_AWAY = 1001
  let open = 0
  const publish = (playerId: string, item: InboxItem) => {
    const message = JSON.stringify({ type: 'message', data: item })
    for (const app of apps) app.publish(topicOf(playerId), message)
    for (const socket of nodeSockets.get(playerId) ?? []) socket.send(message)
  }

  let listener: postgres.Sql | undefined
  let unlisten: (() => Promise<void>) | undefined
  const crossProcess = ctx.pg.kind !== 'pglite' && !!ctx.config.databaseUrl
  if (crossProcess) {
    listener = listenerConnection(ctx.config.databaseUrl as string, 'respin-inbox')
    const sub = await listener.listen(INBOX_CHANNEL, (message) => {
      const { p, d, id } = JSON.parse(message) as { p: string; d?: InboxItem; id?: string }
      if (d) return publish(p, d)
      if ((apps.length === 0 && nodeSockets.size === 0) || !id) return
      // Announced by id only (a large message): read it back for this process's sockets.
      ctx.sql<{ id: string; rendered: { subject: string | null; body: string }; campaign_id: string | null; created_at: Date; read_at: Date | null }[]>`
        select id, rendered, campaign_id, created_at, read_at from notifications where id = ${id}`
        .then(([row]) => {
          if (row) publish(p, { id: row.id, subject: row.rendered?.subject ?? null, body: row.rendered?.body ?? '', campaign_id: row.campaign_id, created_at: row.created_at.toISOString(), read_at: null })
        })
        .catch((err: unknown) => ctx.log.error({ err }, 'inbox message not read back for its sockets'))
    })
    unlisten = () => sub.unlisten()
  }

  return {
    crossProcess,
    get sockets() {
      return open
    },
    attach(app) {
      apps.push(app)
      // Open sockets, for a close frame each at shutdown (uWS's own close would just drop them).
      const sockets = new Set<WebSocket<SocketData>>()
      closers.push(() => {
        for (const ws of sockets) ws.end(GOING_AWAY, 'server shutting down')
      })
      app.ws<SocketData>(`${API_PREFIX}/inbox/ws`, {
        idleTimeout: 120,
        sendPingsAutomatically: true,
        maxPayloadLength: 4096,
        // A client that stops reading is closed once 1 MB waits for it (it reloads the inbox when it
        // reconnects), not left open while uWS silently drops the frames it cannot buffer.
        maxBackpressure: 1024 * 1024,
        closeOnBackpressureLimit: 1, // (a number in these typings: 1 = true)
        upgrade: (res, req, context) => {
          const token = new URLSearchParams(req.getQuery() ?? '').get('token') ?? ''
          const key = req.getHeader('sec-websocket-key')
          const protocol = req.getHeader('sec-websocket-protocol')
          const extensions = req.getHeader('sec-websocket-extensions')
          const requestId = requestIdFrom(req.getHeader('x-request-id'))
          const refuse = (r: Refusal) => {
            res.writeStatus(r.status).writeHeader('content-type', 'application/json').writeHeader('x-request-id', r.requestId)
            const after = retryAfter(r)
            if (after) res.writeHeader('retry-after', after)
            res.end(refusalBody(r))
          }
          let aborted = false
          res.onAborted(() => (aborted = true))
          playerOfInboxToken(ctx, token).then(
            (playerId) => {
              if (aborted) return
              res.cork(() => {
                if (!playerId) return refuse({ ...UNAUTHORIZED, requestId })
                res.upgrade<SocketData>({ playerId }, key, protocol, extensions, context)
              })
            },
            (err: unknown) => {
              ctx.log.error({ err }, 'inbox socket upgrade failed')
              if (!aborted) res.cork(() => refuse({ ...UNAVAILABLE, requestId }))
            },
          )
        },
        open: (ws: WebSocket<SocketData>) => {
          open++
          sockets.add(ws)
          ws.subscribe(topicOf(ws.getUserData().playerId))
        },
        close: (ws: WebSocket<SocketData>) => {
          open--
          sockets.delete(ws)
        },
      })
    },
    attachNode(server) {
      const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 })
      const alive = new WeakSet<NodeWebSocket>()
      const pinger = setInterval(() => {
        for (const socket of wss.clients) {
          if (!alive.has(socket)) {
            socket.terminate()
            continue
          }
          alive.delete(socket)
          socket.ping()
        }
      }, NODE_PING_MS)
      pinger.unref()
      closers.push(() => {
        clearInterval(pinger)
        // 1001 "going away" (RFC 6455 §7.4.1): a client tells a restart from a network fault by it, and
        // reconnects. One that does not answer the close within a second is dropped.
        for (const socket of wss.clients) {
          socket.close(GOING_AWAY, 'server shutting down')
          setTimeout(() => socket.terminate(), 1000).unref()
        }
        wss.close()
      })
      server.on('upgrade', (req, socket: Duplex, head: Buffer) => {
        socket.on('error', () => socket.destroy())
        const given = req.headers['x-request-id']
        const requestId = requestIdFrom(typeof given === 'string' ? given : undefined)
        let url: URL
        try {
          url = new URL(req.url ?? '/', 'http://inbox')
        } catch {
          // A target no URL parser takes (`//host:99999/`): thrown here it would end the process.
          return refuseUpgrade(socket, { status: '400 Bad Request', code: 'BAD_REQUEST', error: 'malformed request target', requestId })
        }
        if (url.pathname !== INBOX_PATH) return serveIgnoringUpgrade(server, req, socket, requestId)
        playerOfInboxToken(ctx, url.searchParams.get('token') ?? '').then(
          (playerId) => {
            if (socket.destroyed) return
            if (!playerId) {
              return refuseUpgrade(socket, { ...UNAUTHORIZED, requestId })
            }
            wss.handleUpgrade(req, socket, head, (ws) => {
              open++
              alive.add(ws)
              ws.on('pong', () => alive.add(ws))
              // A frame over maxPayload or a malformed one: ws emits 'error' on the socket, and an error
              // event nobody listens to ends the whole process. The client loses its socket, nothing more.
              ws.on('error', () => ws.terminate())
              let set = nodeSockets.get(playerId)
              if (!set) nodeSockets.set(playerId, (set = new Set()))
              set.add(ws)
              ws.on('close', () => {
                open--
                set.delete(ws)
                if (set.size === 0) nodeSockets.delete(playerId)
              })
            })
          },
          (err: unknown) => {
            ctx.log.error({ err }, 'inbox socket upgrade failed')
            refuseUpgrade(socket, { ...UNAVAILABLE, requestId })
          },
        )
      })
    },
    async announceMany(tx, items) {
      if (!crossProcess || !items.length) return
      const payloads = items.map(({ playerId, item }) => notifyPayload(playerId, item))
      await tx`select pg_notify(${INBOX_CHANNEL}, x) from unnest(${payloads}::text[]) as x`
    },
    publishLocal(items) {
      if (crossProcess) return
      for (const { playerId, item } of items) publish(playerId, item)
    },
    async close() {
      for (const close of closers) close()
      await unlisten?.()
      await listener?.end({ timeout: 2 })
    },
  }
}

// HTTP client for calls to tenant-configured targets (webhooks, Telegram api_base_url, push endpoints).
// It connects only to the address src/lib/url-policy.ts checked: the connector's DNS lookup answers with
// that address, so nothing between check and connect can resolve the name differently. One keep-alive
// pool per (origin, address) with a bounded number of connections, a timeout covering the whole request
// including the response body, and redirects are never followed (a 3xx is returned as it is).
import { Pool, buildConnector } from 'undici'
import { createWorkerClient } from '../workers/rpc.ts'
import type { CheckedUrl } from './url-policy.ts'

/**
 * The kept bytes of a body as text to store: a character cut at the end of the prefix is left out (a
 * streaming decode keeps it back) rather than shown as U+FFFD, and NUL, which PostgreSQL stores in neither
 * text nor jsonb (the attempt log and the channels' errors would fail to record, and the work be sent
 * again), becomes U+FFFD.
 */
export function bodyText(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes, { stream: true }).replaceAll('\u0000', '\uFFFD')
}

export interface OutboundResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** The first `keepBodyBytes` bytes of the body, as UTF-8 (invalid sequences replaced). */
  bodyPrefix: string
  durationMs: number
}

export interface OutboundRequest {
  method?: string
  headers?: Record<string, string>
  body?: string | Buffer
  /** Abort after this many ms (connect, send, headers and reading the body). */
  timeoutMs: number
  /**
   * Whose connections to use (e.g. a webhook endpoint's id): pools are per (poolKey, origin, address), so
   * two targets on one host do not share, and cannot exhaust, each other's connections. Default: one pool
   * per origin and address.
   */
  poolKey?: string
}

export interface OutboundHttpOptions {
  /** Connections per pool (poolKey + origin + address) at most (default 8). */
  connectionsPerTarget?: number
  /** Body bytes kept for the caller (default 1024). The rest is read and dropped, up to maxBodyBytes. */
  keepBodyBytes?: number
  /** Response bodies larger than this are cut off and the connection closed (default 64 KiB). */
  maxBodyBytes?: number
  /** Idle pools are closed after this long (default 60 s). */
  idlePoolMs?: number
  /** Idle keep-alive sockets are closed after this long (default 4 s, below common server timeouts). */
  keepAliveTimeoutMs?: number
}

export interface OutboundHttp {
  /** Sends a request to the checked URL. Rejects with OutboundTimeoutError or a network error. */
  request(target: CheckedUrl, req: OutboundRequest): Promise<OutboundResponse>
  /** Number of open target pools (for tests and metrics). */
  readonly pools: number
  close(): Promise<void>
}

export class OutboundTimeoutError extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`)
    this.name = 'OutboundTimeoutError'
  }
}

/** undici's own timeouts (set to ours, so either may fire first) report as our timeout. */
const UNDICI_TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

interface PoolEntry {
  pool: Pool
  lastUsed: number
  active: number
}

export function createOutboundHttp(opts: OutboundHttpOptions = {}): OutboundHttp {
  const connections = opts.connectionsPerTarget ?? 8
  const keepBytes = opts.keepBodyBytes ?? 1024
  const maxBytes = opts.maxBodyBytes ?? 64 * 1024
  const idleMs = opts.idlePoolMs ?? 60_000
  const keepAliveMs = opts.keepAliveTimeoutMs ?? 4000
  const pools = new Map<string, PoolEntry>()

  function poolFor(target: CheckedUrl, poolKey = ''): PoolEntry {
    const origin = target.url.origin
    const id = `${poolKey}|${origin}|${target.address}`
    let entry = pools.get(id)
    if (!entry) {
      const connect = buildConnector({
        // Every lookup answers the checked address (node's net asks with all: true when autoSelectFamily
        // is on). IP-literal hosts skip the lookup and were checked as written.
        lookup: pinnedLookup(target) as never,
        timeout: 10_000,
      })
      entry = {
        pool: new Pool(origin, { connections, connect, keepAliveTimeout: keepAliveMs, keepAliveMaxTimeout: keepAliveMs, pipelining: 1 }),
        lastUsed: Date.now(),
        active: 0,
      }
      pools.set(id, entry)
    }
    return entry
  }

  const sweeper = setInterval(() => {
    const now = Date.now()
    for (const [id, entry] of pools) {
      if (entry.active === 0 && now - entry.lastUsed > idleMs) {
        pools.delete(id)
        entry.pool.close().catch(() => {})
      }
    }
  }, Math.min(idleMs, 30_000))
  sweeper.unref()

  return {
    async request(target, req) {
      const entry = poolFor(target, req.poolKey)
      entry.active++
      entry.lastUsed = Date.now()
      const started = performance.now()
      const controller = new AbortController()
      // The error is made only when the timer fires: an Error's stack trace costs more than the rest of
      // a keep-alive request's bookkeeping.
      const timer = setTimeout(() => controller.abort(new OutboundTimeoutError(req.timeoutMs)), req.timeoutMs)
      try {
        const res = await entry.pool.request({
          origin: target.url.origin,
          path: target.url.pathname + target.url.search,
          method: (req.method ?? 'POST') as 'POST',
          headers: req.headers,
          body: req.body,
          signal: controller.signal,
          // Our own timer bounds the whole exchange; undici's defaults (300 s) would only be later.
          headersTimeout: req.timeoutMs,
          bodyTimeout: req.timeoutMs,
        })
        const kept: Buffer[] = []
        let keptBytes = 0
        let total = 0
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          total += chunk.length
          if (keptBytes < keepBytes) {
            const part = chunk.subarray(0, keepBytes - keptBytes)
            kept.push(part)
            keptBytes += part.length
          }
          if (total > maxBytes) {
            res.body.destroy()
            break
          }
        }
        return {
          status: res.statusCode,
          headers: res.headers,
          bodyPrefix: bodyText(Buffer.concat(kept)),
          durationMs: Math.round(performance.now() - started),
        }
      } catch (err) {
        if (controller.signal.aborted || UNDICI_TIMEOUTS.has((err as { code?: string }).code ?? '')) throw new OutboundTimeoutError(req.timeoutMs)
        throw err
      } finally {
        clearTimeout(timer)
        entry.active--
        entry.lastUsed = Date.now()
      }
    },
    get pools() {
      return pools.size
    },
    async close() {
      clearInterval(sweeper)
      const all = [...pools.values()]
      pools.clear()
      await Promise.all(all.map((e) => e.pool.destroy().catch(() => {})))
    },
  }
}

/** A request as it crosses to the worker thread (a URL object does not: its href does). */
export interface WireRequest {
  target: Omit<CheckedUrl, 'url'> & { href: string }
  req: OutboundRequest
}
/** Its result: the response, or what went wrong (errors cross threads without their class). */
export type WireResult = { res: OutboundResponse } | { timeoutMs: number } | { error: string }

/**
 * createOutboundHttp on a worker thread of its own (outbound-http.worker.ts): the HTTP exchanges, TLS and
 * socket writes run there, so a busy sender (webhooks: ~40 % of its process was undici) leaves the main
 * thread to its queries. Same requests, same errors (OutboundTimeoutError for a timeout).
 */
export function createOutboundHttpOnWorker(opts: OutboundHttpOptions = {}): Pick<OutboundHttp, 'request' | 'close'> {
  const worker = createWorkerClient<WireRequest, WireResult>({
    url: new URL('./outbound-http.worker.ts', import.meta.url),
    data: opts,
    onLost: (why) => ({ error: `outbound http ${why}` }),
  })
  return {
    async request(target, req) {
      const { url, ...rest } = target
      const r = await worker.call({ target: { ...rest, href: url.href }, req })
      if ('res' in r) return r.res
      if ('timeoutMs' in r) throw new OutboundTimeoutError(r.timeoutMs)
      throw new Error(r.error)
    },
    close: () => worker.close(),
  }
}

/**
 * A `lookup` for node's net/tls/http(s) options (e.g. an https.Agent handed to a library) that answers
 * with the checked address only.
 */
export function pinnedLookup(target: Pick<CheckedUrl, 'address' | 'family'>) {
  const pinned = { address: target.address, family: target.family }
  return (_host: string, options: { all?: boolean } | undefined, cb: (...args: unknown[]) => void) => {
    if (options?.all) cb(null, [pinned])
    else cb(null, pinned.address, pinned.family)
  }
}

// The default HTTP engine: node:http (llhttp) under the same router as uWS. It answers every request: HTTP/1.0,
// heads up to 16 KB in any segmentation, pipelined requests in order, 431 / 400 / 408 / 413 in the spec's
// error shape. Why not uWS by default, and what each engine does with each case: docs/http.md.
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { AppError } from '../errors.ts'
import { renderError, STATUS_TEXT } from './errors.ts'
import { newRequestId, type HttpRequest, type HttpResponse, type RouteRegistry } from './router.ts'

/** The largest request head (request line + header lines) served; larger ones get 431. */
export const MAX_HEAD_BYTES = 16 * 1024
/** The most header lines served; more get 431. */
export const MAX_HEADER_LINES = 100
/** Idle keep-alive connections are closed after this long (uWS's figure). */
const KEEP_ALIVE_MS = 10_000
/** A whole request (head and body) may take at most this long: 1 MB at 16 KB/s takes 64 s. */
const REQUEST_TIMEOUT_MS = 300_000

type Handler = (res: HttpResponse, req: HttpRequest) => void

interface TrieNode {
  fixed: Map<string, TrieNode>
  param: TrieNode | undefined
  handlers: Map<string, Handler>
}
const trieNode = (): TrieNode => ({ fixed: new Map(), param: undefined, handlers: new Map() })

/**
 * uWS's routing rules over a segment trie: `:name` matches one segment, a fixed segment wins over a
 * parameter at the same place, and `any('/*')` catches what nothing else matches.
 */
export class RouteTable implements RouteRegistry {
  readonly #root = trieNode()
  #fallback: Handler | undefined

  get = (pattern: string, h: Handler) => this.#add('GET', pattern, h)
  post = (pattern: string, h: Handler) => this.#add('POST', pattern, h)
  put = (pattern: string, h: Handler) => this.#add('PUT', pattern, h)
  patch = (pattern: string, h: Handler) => this.#add('PATCH', pattern, h)
  del = (pattern: string, h: Handler) => this.#add('DELETE', pattern, h)
  headOfGet = (pattern: string, h: Handler) => this.#add('HEAD', pattern, h)
  any = (pattern: string, h: Handler) => {
    if (pattern !== '/*') throw new Error(`only any('/*') is supported, not ${pattern}`)
    this.#fallback = h
  }

  #add(method: string, pattern: string, handler: Handler): void {
    let node = this.#root
    for (const segment of pattern.split('/').slice(1)) {
      if (segment.startsWith(':')) node = node.param ??= trieNode()
      else {
        let next = node.fixed.get(segment)
        if (!next) node.fixed.set(segment, (next = trieNode()))
        node = next
      }
    }
    node.handlers.set(method, handler)
  }

  /** The handler and the raw (still percent-encoded) parameter values, or the fallback. */
  match(method: string, path: string): { handler: Handler | undefined; params: string[] } {
    const segments = path.split('/')
    const params: string[] = []
    const found = this.#walk(this.#root, segments, 1, method, params)
    return found ? { handler: found, params } : { handler: this.#fallback, params: [] }
  }

  #walk(node: TrieNode, segments: string[], i: number, method: string, params: string[]): Handler | undefined {
    if (i === segments.length) return node.handlers.get(method)
    const segment = segments[i] as string
    const fixed = node.fixed.get(segment)
    if (fixed) {
      const found = this.#walk(fixed, segments, i + 1, method, params)
      if (found) return found
    }
    if (node.param && segment !== '') {
      params.push(segment)
      const found = this.#walk(node.param, segments, i + 1, method, params)
      if (found) return found
      params.pop()
    }
    return undefined
  }
}

const EMPTY = new Uint8Array(0)

/** uWS's request API over node's IncomingMessage, for the router. */
class NodeRequest implements HttpRequest {
  constructor(
    private readonly req: IncomingMessage,
    private readonly path: string,
    private readonly query: string,
    private readonly params: string[],
  ) {}
  getHeader(name: string): string {
    const value = this.req.headers[name]
    return value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value
  }
  getQuery() {
    return this.query
  }
  getParameter(index: number) {
    return this.params[index]
  }
  getUrl() {
    return this.path
  }
  getCaseSensitiveMethod() {
    return this.req.method ?? ''
  }
}

/** uWS's response API over node's ServerResponse, for the router. */
class NodeResponse implements HttpResponse {
  #status = 200
  #headers: string[] = []
  #aborted: (() => void) | undefined
  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
  ) {
    // 'close' before the response finished: the client went away (mid-body, or while the handler ran).
    res.once('close', () => {
      if (!res.writableFinished) this.#aborted?.()
    })
  }
  onAborted(handler: () => void) {
    this.#aborted = handler // like uWS: the last handler set is the one called
    return this
  }
  onData(handler: (chunk: Uint8Array, isLast: boolean) => void) {
    this.req.on('data', (chunk: Buffer) => handler(chunk, false))
    this.req.once('end', () => handler(EMPTY, true))
    return this
  }
  cork(cb: () => void) {
    cb()
    return this
  }
  writeStatus(status: string) {
    this.#status = Number.parseInt(status, 10)
    return this
  }
  writeHeader(name: string, value: string) {
    this.#headers.push(name, value)
    return this
  }
  end(body: string | Buffer = '') {
    if (this.res.destroyed) return this
    if (!this.res.headersSent) {
      this.#headers.push('content-length', String(typeof body === 'string' ? Buffer.byteLength(body) : body.length))
      this.res.writeHead(this.#status, this.#headers)
    }
    this.res.end(body)
    return this
  }
  /** A streamed body (the router's sendStream): the head goes out chunked with the first part. */
  write(chunk: string | Buffer): boolean {
    if (this.res.destroyed) return true
    if (!this.res.headersSent) this.res.writeHead(this.#status, this.#headers)
    return this.res.write(chunk)
  }
  /** Called once the socket takes more after write() returned false (uWS's onWritable). */
  onWritable(cb: (offset: number) => boolean) {
    // Also on close: a client gone while we wait must not leave the stream's loop waiting forever.
    const go = () => {
      this.res.off('drain', go).off('close', go)
      cb(0)
    }
    this.res.once('drain', go).once('close', go)
    return this
  }
  /** Cuts a streamed answer short (it failed mid-way): the client sees an incomplete body, not a whole one. */
  close() {
    this.res.destroy()
    return this
  }
}

/** An error answered by the engine itself, before any route ran: the spec's error body, and close. */
function errorReply(err: AppError): { status: number; headers: string[]; body: string; requestId: string } {
  const rendered = renderError(err, newRequestId())
  const body = JSON.stringify(rendered.body)
  const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'connection', 'close', 'x-request-id', rendered.body.request_id]
  return { status: rendered.status, headers, body, requestId: rendered.body.request_id }
}

/** What llhttp refuses, as the spec's errors. */
function parseFailure(code: string | undefined): AppError {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return new AppError('HEADERS_TOO_LARGE', `request head larger than ${MAX_HEAD_BYTES} bytes`, { max_bytes: MAX_HEAD_BYTES })
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new AppError('REQUEST_TIMEOUT', 'the request did not arrive in time')
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return new AppError('PAYLOAD_TOO_LARGE', 'chunk extensions too large')
  return new AppError('BAD_REQUEST', `malformed HTTP request${code ? ` (${code})` : ''}`, code ? { reason: code } : undefined)
}

export interface NodeServerOptions {
  headersTimeoutMs: number
  /**
   * A request refused before any route saw it (a head too large, no Host, an unparsable request): the
   * router never logs or counts these, so the server reports each here.
   */
  onRefused?(refusal: { requestId: string; status: number; method: string | undefined; error: string }): void
}

export function createNodeHttpServer(table: RouteTable, opts: NodeServerOptions): http.Server {
  const server = http.createServer(
    {
      maxHeaderSize: MAX_HEAD_BYTES,
      headersTimeout: opts.headersTimeoutMs,
      requestTimeout: Math.max(REQUEST_TIMEOUT_MS, opts.headersTimeoutMs),
      keepAliveTimeout: KEEP_ALIVE_MS,
      // How often the two timeouts above are checked (node's default, 30 s, would let slowloris hold on for 40 s).
      connectionsCheckingInterval: 1000,
      // Checked below, so the 400 carries the spec's error body.
      requireHostHeader: false,
    },
    (req, res) => dispatch(table, req, res, opts),
  )
  // One more than served, so that "too many" can be told from "exactly the limit".
  server.maxHeadersCount = MAX_HEADER_LINES + 1
  server.on('clientError', (err: Error & { code?: string }, socket: Socket) => {
    const inProgress = (socket as unknown as { _httpMessage?: ServerResponse })._httpMessage
    if (err.code === 'ECONNRESET' || !socket.writable || inProgress?.headersSent) {
      socket.destroy()
      return
    }
    const failure = parseFailure(err.code)
    const { status, headers, body, requestId } = errorReply(failure)
    opts.onRefused?.({ requestId, status, method: undefined, error: failure.message })
    let head = `HTTP/1.1 ${STATUS_TEXT[status] ?? status}\r\n`
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`
    socket.end(`${head}\r\n${body}`)
    // A client that keeps sending after our answer is not waited for.
    setTimeout(() => socket.destroy(), 1000).unref()
  })
  return server
}

function dispatch(table: RouteTable, req: IncomingMessage, res: ServerResponse, opts: NodeServerOptions): void {
  const refuse = (err: AppError) => {
    const { status, headers, body, requestId } = errorReply(err)
    opts.onRefused?.({ requestId, status, method: req.method, error: err.message })
    res.writeHead(status, headers)
    res.end(body)
  }
  if (req.rawHeaders.length > MAX_HEADER_LINES * 2) {
    return refuse(new AppError('HEADERS_TOO_LARGE', `more than ${MAX_HEADER_LINES} header lines`, { max_lines: MAX_HEADER_LINES }))
  }
  // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without exactly one Host line.
  if (req.httpVersion === '1.1' && req.headers.host === undefined) return refuse(new AppError('BAD_REQUEST', 'the Host header is required'))
  let url = req.url ?? '/'
  if (url[0] !== '/') {
    // Absolute form (`GET http://host/path`), which servers must accept (RFC 9112 §3.2.2).
    try {
      const parsed = new URL(url)
      url = parsed.pathname + parsed.search
    } catch {
      return refuse(new AppError('BAD_REQUEST', 'malformed request target'))
    }
  }
  const q = url.indexOf('?')
  const path = q === -1 ? url : url.slice(0, q)
  const query = q === -1 ? '' : url.slice(q + 1)
  const { handler, params } = table.match(req.method ?? '', path)
  if (!handler) return refuse(new AppError('NOT_FOUND', `no route for ${req.method} ${path}`))
  handler(new NodeResponse(req, res), new NodeRequest(req, path, query, params))
}

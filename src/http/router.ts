// Turns route definitions into uWS handlers: precompiled TypeBox checks, query coercion, auth, scopes,
// brand resolution and error rendering, so feature handlers receive typed, validated input.
import { randomBytes } from 'node:crypto'
import Type, { type TSchema } from 'typebox'
import { Compile, type Validator } from 'typebox/compile'
import { safeEqual } from '../auth/keys.ts'
import type { Principal } from '../auth/types.ts'
import type { AppContext } from '../context.ts'
import { pgErrorCode } from '../db/postgres.ts'
import type { Logger } from '../lib/log.ts'
import { isUuid } from '../lib/schemas.ts'
import { AppError, badRequest, forbidden, unauthorized } from '../errors.ts'
import { renderError, STATUS_TEXT } from './errors.ts'
import { isResponseSpec, Reply, type RouteDef } from './route.ts'

export const API_PREFIX = '/api/v1'

interface CompiledRoute {
  def: RouteDef
  paramNames: string[]
  params?: Validator
  paramTypes: Record<string, string>
  /** Path params that are resource ids (format uuid). */
  idParams: string[]
  query?: Validator
  queryTypes: Record<string, string>
  body?: Validator
  /** The top-level fields the query and body schemas declare (undefined: any, the schema allows others). */
  queryKeys?: ReadonlySet<string>
  bodyKeys?: ReadonlySet<string>
  successStatus: number
  hasBody: boolean
  /**
   * With RESPONSE_SCHEMA_CHECK on: the check of each 2xx status's documented JSON body, compiled when the
   * route first answers with that status. Absent when the check is off, so it costs nothing then.
   */
  responseChecks?: Map<number, ResponseCheck>
}

/** How a 2xx answer of one status is checked: its compiled schema, nothing to check, or not documented at all. */
type ResponseCheck = Validator | 'skip' | 'undeclared'

/**
 * The part of uWS's request/response API the router uses. uWS's own objects have it; src/http/node-server.ts
 * provides it over node:http, so both engines share every line below.
 */
export interface HttpRequest {
  /** Lower-case name; '' when absent. */
  getHeader(name: string): string
  getQuery(): string | undefined
  getParameter(index: number): string | undefined
  getUrl(): string
  getCaseSensitiveMethod(): string
}
export interface HttpResponse {
  onAborted(handler: () => void): unknown
  onData(handler: (chunk: ArrayBuffer | Uint8Array, isLast: boolean) => void): unknown
  cork(cb: () => void): unknown
  writeStatus(status: string): unknown
  writeHeader(name: string, value: string): unknown
  end(body?: string | Buffer): unknown
}
/** How the router registers handlers: uWS's TemplatedApp, or the node:http engine's route table. */
export interface RouteRegistry {
  get(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
  post(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
  put(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
  patch(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
  del(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
  any(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
  /**
   * HEAD answered by a GET route's handler, the body left out: node's engine only (node:http drops a HEAD
   * response's body itself; uWS would send it, and runs behind a proxy that answers HEAD).
   */
  headOfGet?(pattern: string, handler: (res: HttpResponse, req: HttpRequest) => void): unknown
}

interface Conn {
  aborted: boolean
  /** Counted out of traffic.inFlight already: answered, or aborted before its handler ran. */
  settled: boolean
  traffic: Traffic
}

/** Shared by all handlers of one server: lets shutdown wait for in-flight requests. */
export interface Traffic {
  inFlight: number
  draining: boolean
}

/** Takes a request out of the in-flight count exactly once, whichever comes first: its answer or its abort. */
function settle(conn: Conn): void {
  if (conn.settled) return
  conn.settled = true
  conn.traffic.inFlight--
}

export function compileRoute(def: RouteDef): CompiledRoute {
  const compile = (schema: TSchema | undefined) => (schema ? Compile(schema) : undefined)
  return {
    def,
    paramNames: [...def.path.matchAll(/:(\w+)/g)].map((m) => m[1] as string),
    params: compile(def.params),
    paramTypes: scalarTypes(def.params),
    idParams: idParamsOf(def.params),
    query: compile(def.query),
    queryTypes: scalarTypes(def.query),
    body: compile(def.body),
    queryKeys: declaredKeys(def.query),
    bodyKeys: declaredKeys(def.body),
    successStatus: Math.min(...Object.keys(def.responses).map(Number)),
    hasBody: def.method !== 'GET' && def.method !== 'DELETE',
  }
}

export function registerRoutes(app: RouteRegistry, ctx: AppContext, routes: RouteDef[], traffic: Traffic): void {
  for (const def of routes) {
    const route = compileRoute(def)
    if (ctx.config.responseSchemaCheck !== 'off') route.responseChecks = new Map()
    const method = def.method === 'DELETE' ? 'del' : (def.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch')
    app[method](API_PREFIX + def.path, (res, req) => handle(ctx, route, res, req, traffic))
    if (def.atRoot) app[method](def.path, (res, req) => handle(ctx, route, res, req, traffic))
    // HEAD of every GET route (RFC 9110 §9.1: load balancers and uptime checks probe with it), but the
    // tracking links': a link scanner's HEAD is no open or click.
    if (def.method === 'GET' && app.headOfGet && !def.tags?.includes('tracking')) {
      app.headOfGet(API_PREFIX + def.path, (res, req) => handle(ctx, route, res, req, traffic))
      if (def.atRoot) app.headOfGet(def.path, (res, req) => handle(ctx, route, res, req, traffic))
    }
  }
  app.any('/*', (res, req) => {
    const conn = watch(res, traffic)
    const requestId = requestIdOf(req)
    const url = req.getUrl()
    const err = new AppError('NOT_FOUND', `no route for ${req.getCaseSensitiveMethod()} ${url}`)
    sendError(ctx, res, conn, err, requestId)
  })
}

function watch(res: HttpResponse, traffic: Traffic): Conn {
  const conn: Conn = { aborted: false, settled: false, traffic }
  traffic.inFlight++
  res.onAborted(() => {
    conn.aborted = true
  })
  return conn
}

const REQUEST_ID_RE = /^[\w.:-]{1,128}$/
/** The caller's x-request-id when it is a short token, else a new one. */
export const requestIdFrom = (given: string | undefined): string => (given && REQUEST_ID_RE.test(given) ? given : newRequestId())
const requestIdOf = (req: HttpRequest): string => requestIdFrom(req.getHeader('x-request-id'))

/**
 * Request ids only need to be unique: a random per-process prefix and a counter are, at a fraction of
 * the cost of a random UUID per request.
 */
const REQUEST_ID_PREFIX = randomBytes(6).toString('hex')
let requestCounter = 0
export const newRequestId = () => `${REQUEST_ID_PREFIX}-${(++requestCounter).toString(36)}`

/**
 * The headers copied for handlers (uWS's request is gone once the handler returns, and copying every
 * header costs more than a cheap route). Add a name here to make another header visible in `req.headers`.
 */
const NO_PARAMS: string[] = []
const READ_HEADERS = ['x-api-key', 'authorization', 'x-brand', 'x-request-id', 'content-length', 'content-type'] as const

function handle(ctx: AppContext, route: CompiledRoute, res: HttpResponse, req: HttpRequest, traffic: Traffic): void {
  // uWS's request object is valid only until this function returns: copy everything we need now.
  const conn = watch(res, traffic)
  const started = performance.now()
  const headers: Record<string, string> = {}
  for (const name of READ_HEADERS) {
    const value = req.getHeader(name)
    if (value) headers[name] = value
  }
  const given = headers['x-request-id']
  const requestId = given && REQUEST_ID_RE.test(given) ? given : newRequestId()
  const rawQuery = req.getQuery() ?? ''
  const rawParams = route.paramNames.length === 0 ? NO_PARAMS : route.paramNames.map((_, i) => req.getParameter(i) ?? '')
  // A HEAD answered by its GET route (node engine) is logged and counted as the HEAD it is.
  const method = route.def.method === 'GET' && req.getCaseSensitiveMethod() === 'HEAD' ? 'HEAD' : route.def.method
  const meta: Meta = { requestId, started, method, path: loggedPath(req.getUrl(), route, rawParams), route: route.def.path, tenantId: undefined as string | undefined }

  const fail = (err: unknown) => {
    try {
      sendError(ctx, res, conn, err, requestId, meta)
    } catch (e) {
      ctx.log.error({ err: e, cause: err, reqId: requestId }, 'http: the error response could not be written')
    }
  }
  // A reply the engine refuses (a header value node will not write, say) is a 500 for this request:
  // thrown here it would be an unhandled rejection, which ends the process.
  const respond = (result: unknown) => {
    try {
      const replyObj = result instanceof Reply ? result : new Reply(route.successStatus, result)
      if (isStream(replyObj.body)) return void sendStream(ctx, res, conn, replyObj, replyObj.body, meta)
      const body = serialize(replyObj)
      if (route.responseChecks && replyObj.status >= 200 && replyObj.status < 300) {
        const mismatch = checkResponse(route, route.responseChecks, replyObj, body)
        if (mismatch) {
          const details = { reason: 'RESPONSE_SCHEMA_MISMATCH', route: `${route.def.method} ${route.def.path}`, status: replyObj.status, errors: mismatch }
          if (ctx.config.responseSchemaCheck === 'error') return fail(new AppError('INTERNAL_ERROR', 'the response does not match the schema its route documents', details))
          ctx.log.warn({ reqId: requestId, tenantId: meta.tenantId, ...details }, 'http: response does not match its documented schema')
        }
      }
      send(ctx, res, conn, replyObj.status, body, replyObj.contentType, replyObj.headers, meta)
    } catch (err) {
      fail(err)
    }
  }
  // Synchronous when it can be (cached key, synchronous handler): uWS then writes pipelined responses
  // together in one corked batch, which is most of the gap between a router and a bare handler.
  const run = (body: Buffer | undefined) => {
    let result: unknown
    try {
      result = dispatch(ctx, route, { headers, rawQuery, rawParams, body, meta })
    } catch (err) {
      return fail(err)
    }
    if (result instanceof Promise) result.then(respond, fail)
    else respond(result)
  }

  if (!route.hasBody) return run(undefined)
  const declared = Number(headers['content-length'] ?? 0)
  const limit = ctx.config.bodyLimitBytes
  // The body is left unread: the answer closes the connection (node then discards the rest of the body).
  const refuse = (err: AppError) => {
    sendError(ctx, res, conn, new AppError(err.code, err.message, err.details, { connection: 'close' }), requestId, meta)
  }
  if (declared > limit) return refuse(tooLarge(limit))
  readBody(res, conn, limit, ctx.config.httpBodyTimeoutMs, run, refuse)
}

const tooLarge = (limit: number) =>
  new AppError('PAYLOAD_TOO_LARGE', `request body is larger than ${limit} bytes`, { limit })

/**
 * Collects the body; uWS reuses each chunk's memory after the callback, so chunks are copied. A body that
 * stops arriving for idleMs is answered 408: the clock restarts with every chunk, so a slow but steady
 * upload (a phone on a bad network) finishes, however long it takes in all. A client that goes away
 * mid-body is counted out of the in-flight requests here, as its handler will never run.
 */
function readBody(res: HttpResponse, conn: Conn, limit: number, idleMs: number, done: (body: Buffer) => void, refuse: (err: AppError) => void): void {
  const chunks: Buffer[] = []
  let size = 0
  let finished = false
  const stalled = () => {
    finished = true
    refuse(new AppError('REQUEST_TIMEOUT', `no request body bytes for ${idleMs} ms`, { timeout_ms: idleMs }))
  }
  const timer = setTimeout(stalled, idleMs)
  res.onAborted(() => {
    conn.aborted = true
    if (finished) return
    finished = true
    clearTimeout(timer)
    settle(conn)
  })
  res.onData((chunk, isLast) => {
    if (finished) return
    size += chunk.byteLength
    if (size > limit) {
      finished = true
      clearTimeout(timer)
      return refuse(tooLarge(limit))
    }
    if (isLast) {
      finished = true
      clearTimeout(timer)
      if (chunks.length === 0) return done(Buffer.from(new Uint8Array(chunk)))
      chunks.push(Buffer.from(new Uint8Array(chunk)))
      return done(Buffer.concat(chunks, size))
    }
    chunks.push(Buffer.from(new Uint8Array(chunk)))
    timer.refresh()
  })
}

interface Incoming {
  headers: Record<string, string>
  rawQuery: string
  rawParams: string[]
  body: Buffer | undefined
  meta: { requestId: string; tenantId: string | undefined }
}

function dispatch(ctx: AppContext, route: CompiledRoute, inc: Incoming): unknown {
  const { def } = route
  const query = parseQuery(inc.rawQuery)
  if (def.auth === 'public') return invoke(ctx, route, inc, query, undefined)
  const key = keyOf(inc.headers, query)
  if (def.auth === 'admin') return authorizeAdmin(ctx, key).then(() => invoke(ctx, route, inc, query, undefined))
  if (!key) throw unauthorized('API key required')
  const cached = ctx.auth.authenticateCached(key)
  if (cached !== undefined) return invoke(ctx, route, inc, query, checkScope(cached, def.scope, inc))
  return ctx.auth.authenticate(key).then((principal) => invoke(ctx, route, inc, query, checkScope(principal, def.scope, inc)))
}

function checkScope(principal: Principal | null, scope: RouteDef['scope'], inc: Incoming): Principal {
  if (!principal) throw unauthorized()
  inc.meta.tenantId = principal.tenantId
  if (principal.scopes.length > 0 && !principal.scopes.includes(scope)) {
    throw forbidden(`this API key lacks the ${scope === 'full' ? 'full access' : `'${scope}'`} scope`)
  }
  return principal
}

/** Validates params, query and body, then calls the handler. Returns its result, a value or a promise. */
function invoke(ctx: AppContext, route: CompiledRoute, inc: Incoming, query: Record<string, unknown>, principal: Principal | undefined): unknown {
  let params: unknown
  if (route.params) {
    const raw: Record<string, unknown> = {}
    route.paramNames.forEach((name, i) => (raw[name] = safeDecode(inc.rawParams[i] ?? '')))
    // A path id that is no UUID (an external_id, say) names no resource: 404 like an unknown one (the
    // spec: 404 for every endpoint with an {id}, 400 for a bad body or query).
    for (const name of route.idParams) {
      if (!isUuid(raw[name])) throw new AppError('NOT_FOUND', `no resource has this ${name} (ids are UUIDs)`, { errors: [{ in: 'path', field: name, message: 'must be a UUID' }] })
    }
    params = validate(route.params, coerce(raw, route.paramTypes), 'path')
  }
  const validQuery = route.query ? onlyDeclared(validate(route.query, coerce(query, route.queryTypes), 'query'), route.queryKeys) : undefined
  let body: unknown
  if (route.body) {
    if (!inc.body || inc.body.length === 0) throw badRequest('request body is required')
    const json = parseJson(inc.body, inc.headers['content-type'])
    body = route.def.validateBody === false ? json : onlyDeclared(validate(route.body, json, 'body'), route.bodyKeys)
  }
  const req = new RouteRequest(ctx, inc, query, principal, params, validQuery, body)
  return (route.def.handler as (c: AppContext, r: unknown) => unknown)(ctx, req)
}

/** What a handler receives. A class, so the per-request object carries no closures of its own. */
class RouteRequest {
  readonly headers: Record<string, string>
  readonly requestId: string
  readonly rawBody: Buffer | undefined
  #log: Logger | undefined
  constructor(
    private readonly ctx: AppContext,
    private readonly inc: Incoming,
    private readonly rawQuery: Record<string, unknown>,
    readonly principal: Principal | undefined,
    readonly params: unknown,
    readonly query: unknown,
    readonly body: unknown,
  ) {
    this.headers = inc.headers
    this.requestId = inc.meta.requestId
    this.rawBody = inc.body
  }

  /** A child logger costs more than a cheap route's whole handler: made on first use only. */
  get log(): Logger {
    this.#log ??= this.ctx.log.child({ reqId: this.inc.meta.requestId, tenantId: this.inc.meta.tenantId })
    return this.#log
  }

  resolveBrand() {
    const { principal, rawQuery: query } = this
    // A repeated `brand` parameter names no one brand: refused rather than read as "no hint".
    if (Array.isArray(query.brand) && !(principal as Principal).brandId) {
      return Promise.reject(badRequest('the brand query parameter is given more than once', { errors: [{ in: 'query', field: 'brand', message: 'must be given once' }] }))
    }
    return this.ctx.auth.resolveBrand(principal as Principal, this.#brandHint())
  }

  hasBrandHint() {
    return (this.principal as Principal).brandId !== null || this.#brandHint() !== undefined
  }

  #brandHint(): string | undefined {
    const { rawQuery: query, body } = this
    // The body's top-level `brand` too: create bodies, PUT /settings/*, and POST /events (a batch's, or a
    // single event's: the body is the event), as docs/tenancy.md says. Ignoring it there would write the
    // events silently to the default brand.
    const bodyHint = typeof body === 'object' && body !== null ? (body as { brand?: unknown }).brand : undefined
    return this.headers['x-brand'] ?? (typeof query.brand === 'string' ? query.brand : undefined) ?? (typeof bodyHint === 'string' ? bodyHint : undefined)
  }
}

/** Key sources in the spec's order: x-api-key, Authorization: Bearer, api_key query parameter. */
function keyOf(headers: Record<string, string>, query: Record<string, unknown>): string | undefined {
  if (headers['x-api-key']) return headers['x-api-key']
  const authz = headers.authorization
  if (authz && /^bearer /i.test(authz)) return authz.slice(7).trim()
  return typeof query.api_key === 'string' ? query.api_key : undefined
}

async function authorizeAdmin(ctx: AppContext, key: string | undefined): Promise<void> {
  const adminKey = ctx.config.adminKey
  // Said first: with no ADMIN_KEY no key can work, and an operator trying keys should learn why.
  if (!adminKey) throw unauthorized('the admin API is off: start the server with ADMIN_KEY set to use it')
  if (!key) throw unauthorized('admin key required')
  if (adminKey && safeEqual(key, adminKey)) return
  // A valid operator key is known but not allowed here; anything else is simply unauthenticated.
  if (adminKey && (await ctx.auth.authenticate(key))) throw forbidden('operator keys cannot use the admin API')
  throw unauthorized('invalid admin key')
}

function parseQuery(raw: string): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  if (!raw) return out
  for (const [k, v] of new URLSearchParams(raw)) {
    const prev = out[k]
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

/**
 * How deeply objects and arrays may nest in a JSON body (the body itself is level 1). Deeper documents
 * overflow the stack of JSON.stringify when a value is written to a store, and no API shape needs them.
 */
export const MAX_JSON_DEPTH = 64

/**
 * The body as JSON, whatever content type it came with (curl's `-d` sends a form type with a JSON body,
 * and the README's examples use it); when it is not JSON, a body sent as something else is told so.
 */
function parseJson(buf: Buffer, contentType = ''): unknown {
  if (jsonDeeperThan(buf, MAX_JSON_DEPTH)) {
    throw badRequest(`JSON body nested deeper than ${MAX_JSON_DEPTH} levels`, { reason: 'TOO_DEEP', max_depth: MAX_JSON_DEPTH })
  }
  try {
    return JSON.parse(buf.toString('utf8'))
  } catch {
    const type = contentType.split(';')[0]?.trim().toLowerCase() ?? ''
    if (type && !/^application\/([\w.-]+\+)?json$/.test(type) && type !== 'text/plain') {
      throw badRequest(`the request body is not JSON (sent as ${type.slice(0, 100)}): the API takes application/json`)
    }
    throw badRequest('malformed JSON body')
  }
}

/** One pass over the raw bytes, skipping strings: is any `{`/`[` more than `max` levels deep? */
function jsonDeeperThan(buf: Buffer, max: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]
    if (inString) {
      if (c === 0x5c) i++ // backslash: skip the escaped byte
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return false
}

/** The JSON type of each top-level property, for turning query/path strings into typed values. */
/** The path params that are resource ids (format uuid): one that is no UUID is a 404, not a 400. */
export function idParamsOf(params: TSchema | undefined): string[] {
  const props = (params as { properties?: Record<string, { format?: unknown }> } | undefined)?.properties ?? {}
  return Object.entries(props).filter(([, p]) => p.format === 'uuid').map(([name]) => name)
}

function scalarTypes(schema: TSchema | undefined): Record<string, string> {
  const props = (schema as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties ?? {}
  return Object.fromEntries(Object.entries(props).map(([k, p]) => [k, typeof p.type === 'string' ? p.type : 'string']))
}

/**
 * Strict string → value conversion: "7" is an integer, "1.5" is not (it stays a string and fails the
 * check, where a lenient conversion would truncate it); "true"/"false" are booleans.
 */
function coerce(raw: Record<string, unknown>, types: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(raw)) {
    const type = types[k]
    if (typeof v !== 'string') out[k] = v
    else if (type === 'integer' && /^-?\d{1,15}$/.test(v)) out[k] = Number(v)
    else if (type === 'number' && v.trim() !== '' && Number.isFinite(Number(v))) out[k] = Number(v)
    else if (type === 'boolean' && (v === 'true' || v === 'false')) out[k] = v === 'true'
    else out[k] = v
  }
  return out
}

/**
 * The top-level fields an object schema declares, when it allows no others: the rest of a request's query
 * or body is dropped before the handler sees it ("unknown fields are ignored"), so a field the schema does
 * not name (a `tenantId` in a body, say) can never reach, let alone override, what the handler passes on.
 */
function declaredKeys(schema: TSchema | undefined): ReadonlySet<string> | undefined {
  const s = schema as { type?: unknown; properties?: Record<string, unknown>; additionalProperties?: unknown } | undefined
  if (!s || s.type !== 'object' || !s.properties || (s.additionalProperties !== undefined && s.additionalProperties !== false)) return undefined
  // `brand` is the request's brand hint on every brand-scoped route (RouteRequest's #brandHint), declared
  // by its schema or not (PUT /settings/* take it without storing it).
  return new Set([...Object.keys(s.properties), 'brand'])
}

function onlyDeclared(value: unknown, keys: ReadonlySet<string> | undefined): unknown {
  if (!keys || !value || typeof value !== 'object' || Array.isArray(value)) return value
  const o = value as Record<string, unknown>
  for (const k of Object.keys(o)) if (!keys.has(k)) delete o[k]
  return o
}

/** Fills defaults, then checks. */
function validate(v: Validator, value: unknown, where: 'path' | 'query' | 'body'): unknown {
  const candidate = v.Default(value)
  if (v.Check(candidate)) return candidate
  throw badRequest(`invalid ${where === 'path' ? 'path parameter' : where}`, { errors: describeErrors(v, candidate, where) })
}

export interface FieldError {
  in: 'path' | 'query' | 'body'
  field: string
  message: string
}

/** One entry per failing field, named by its dotted path (`events.3.event_id`). */
export function describeErrors(v: Validator, value: unknown, where: FieldError['in']): FieldError[] {
  const seen = new Set<string>()
  const out: FieldError[] = []
  // A value none of a union's choices takes (literals, enums, bare types: a status, a channel, a number or
  // null) is one error naming the choices, read from the schema, instead of one per branch ("must be equal
  // to constant" each) and the union's "must match a schema in anyOf". Said once per value.
  const unionsSaid = new Set<string>()
  for (const e of v.Errors(value)) {
    if (e.keyword === 'boolean') continue
    let message: string = e.message
    const union = e.keyword === 'anyOf' ? e.schemaPath : /^(.*)\/anyOf\/\d+$/.exec(e.schemaPath)?.[1]
    const choices = union === undefined ? undefined : unionChoices(atPointer(v.Type(), union))
    if (choices) {
      const said = `${e.instancePath}\u0000${union}`
      if (unionsSaid.has(said)) continue
      unionsSaid.add(said)
      message = `must be one of: ${choices.join(', ')}`
    } else if (e.keyword === 'enum') {
      message = `must be one of: ${((e.params as { allowedValues?: unknown[] }).allowedValues ?? []).map(shown).join(', ')}`
    }
    const base = e.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    const params = e.params as { requiredProperties?: string[]; additionalProperties?: string[] }
    const fields =
      e.keyword === 'required' && params.requiredProperties
        ? params.requiredProperties.map((p) => [...base, p].join('.'))
        : e.keyword === 'additionalProperties' && params.additionalProperties
          ? params.additionalProperties.map((p) => [...base, p].join('.'))
          : [base.join('.')]
    for (const field of fields) {
      const text = e.keyword === 'required' ? 'is required' : e.keyword === 'additionalProperties' ? 'is not allowed' : message
      const id = `${field}\u0000${text}`
      if (seen.has(id)) continue
      seen.add(id)
      out.push({ in: where, field: field || where, message: text })
    }
  }
  return out
}

/** A value an error names, as the client would write it: strings bare, everything else as JSON. */
const shown = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v))
/** The schema a JSON pointer (`#/properties/a/anyOf/0`) names within a schema. */
function atPointer(schema: unknown, pointer: string): unknown {
  let node = schema as Record<string, unknown> | undefined
  for (const part of pointer.replace(/^#\/?/, '').split('/').filter(Boolean)) node = node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')] as Record<string, unknown> | undefined
  return node
}

/** What a union of literals, enums and bare types admits (`draft, active`, `an integer, null`); undefined for any other union (a constrained type, an object). */
function unionChoices(schema: unknown): string[] | undefined {
  const branches = (schema as { anyOf?: unknown } | undefined)?.anyOf
  if (!Array.isArray(branches)) return undefined
  const out: string[] = []
  for (const b of branches as Record<string, unknown>[]) {
    if ('const' in b) out.push(shown(b.const))
    else if (Array.isArray(b.enum)) out.push(...b.enum.map(shown))
    else if (typeof b.type === 'string' && Object.keys(b).length === 1 && b.type !== 'object' && b.type !== 'array') out.push(typeName(b.type))
    else return undefined
  }
  return [...new Set(out)]
}

const typeName = (type: string | undefined) => (type === 'null' ? 'null' : /^[aeiou]/.test(type ?? '') ? `an ${type}` : `a ${type}`)

/** How many of a mismatching response's errors are reported (the first ones: the rest usually repeat them). */
const RESPONSE_ERRORS_SHOWN = 5
const isJsonType = (contentType: string) => /^application\/([\w.-]+\+)?json\b/i.test(contentType)

/**
 * RESPONSE_SCHEMA_CHECK: what the client receives (the serialised body, parsed back: Dates are strings
 * there, undefined fields gone) against the schema the route documents for that status. Returns the first
 * errors of a mismatch, undefined when it matches or is not JSON (CSV, HTML, an empty 204, Type.Unknown()).
 */
function checkResponse(route: CompiledRoute, checks: Map<number, ResponseCheck>, r: Reply, body: string | Buffer): { field: string; message: string }[] | undefined {
  if (!isJsonType(r.contentType) || body.length === 0) return undefined
  let check = checks.get(r.status)
  if (check === undefined) {
    check = responseCheckOf(route.def.responses[r.status])
    checks.set(r.status, check)
  }
  if (check === 'skip') return undefined
  if (check === 'undeclared') return [{ field: 'status', message: `the route documents no JSON response for status ${r.status}` }]
  let value: unknown
  try {
    value = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'))
  } catch {
    return [{ field: 'body', message: 'is not valid JSON' }]
  }
  if (check.Check(value)) return undefined
  return describeErrors(check, value, 'body')
    .slice(0, RESPONSE_ERRORS_SHOWN)
    .map(({ field, message }) => ({ field, message }))
}

function responseCheckOf(spec: RouteDef['responses'][number] | undefined): ResponseCheck {
  const schema = responseSchemaOf(spec)
  if (schema === 'undeclared') return 'undeclared'
  return !schema || Type.IsUnknown(schema) ? 'skip' : Compile(closed(schema) as TSchema)
}

/**
 * The schema with every object closed to the fields it names (where it sets no additionalProperties of its
 * own): an answer carrying a field its documentation does not name is a mismatch too.
 */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed)
  if (!schema || typeof schema !== 'object') return schema
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'const' || k === 'enum' || k === 'default' || k === 'examples' ? v : closed(v)
  for (const sym of Object.getOwnPropertySymbols(schema)) (out as Record<symbol, unknown>)[sym] = (schema as Record<symbol, unknown>)[sym]
  if (out.type === 'object' && out.properties && !('additionalProperties' in out) && !('patternProperties' in out)) out.additionalProperties = false
  return out
}

/** The JSON schema a documented response declares: undefined when it declares none (an empty 204). */
function responseSchemaOf(spec: RouteDef['responses'][number] | undefined): TSchema | undefined | 'undeclared' {
  if (!spec) return 'undeclared'
  if (!isResponseSpec(spec)) return spec
  if ('content' in spec) {
    const json = Object.keys(spec.content).find(isJsonType)
    return json ? spec.content[json] : 'undeclared'
  }
  return isJsonType(spec.contentType) ? spec.schema : 'undeclared'
}

function serialize(r: Reply): string | Buffer {
  if (typeof r.body === 'string' || Buffer.isBuffer(r.body)) return r.body
  return JSON.stringify(r.body)
}

interface Meta {
  requestId: string
  started: number
  method: string
  path: string
  /** The route template (`/players/:id`): the metrics label and the log field to group by. */
  route: string
  tenantId: string | undefined
}

function send(
  ctx: AppContext,
  res: HttpResponse,
  conn: Conn,
  status: number,
  body: string | Buffer,
  contentType: string,
  headers: Record<string, string>,
  meta: Meta | undefined,
): void {
  if (meta) finishRequest(ctx, meta, status)
  settle(conn)
  if (conn.aborted) return
  res.cork(() => {
    res.writeStatus(STATUS_TEXT[status] ?? String(status))
    res.writeHeader('content-type', contentType)
    if (conn.traffic.draining) res.writeHeader('connection', 'close')
    if (meta) res.writeHeader('x-request-id', meta.requestId)
    for (const name in headers) res.writeHeader(name, headers[name] as string)
    res.end(body)
  })
}

const isStream = (body: unknown): body is AsyncIterable<string | Buffer> =>
  typeof body === 'object' && body !== null && Symbol.asyncIterator in body

/**
 * A body given as an async iterable of chunks (a large export): written as it is produced, waiting for
 * the socket to drain when the server has buffered a chunk. The status goes out with the first chunk, so
 * a failure mid-way can only cut the connection (logged): the client sees a truncated body, never a wrong
 * one. A response object without write() (an engine that cannot stream) gets the whole body at once.
 */
async function sendStream(ctx: AppContext, res: HttpResponse, conn: Conn, r: Reply, body: AsyncIterable<string | Buffer>, meta: Meta): Promise<void> {
  const stream = res as HttpResponse & { write?(chunk: string | Buffer): boolean; onWritable?(cb: (offset: number) => boolean): unknown; close?(): unknown }
  if (typeof stream.write !== 'function' || typeof stream.onWritable !== 'function') {
    let whole: Buffer
    try {
      const parts: Buffer[] = []
      for await (const chunk of body) parts.push(Buffer.from(chunk))
      whole = Buffer.concat(parts)
    } catch (err) {
      return sendError(ctx, res, conn, err, meta.requestId, meta)
    }
    return send(ctx, res, conn, r.status, whole, r.contentType, r.headers, meta)
  }
  let failed = false
  let started = false
  const head = () => {
    res.writeStatus(STATUS_TEXT[r.status] ?? String(r.status))
    res.writeHeader('content-type', r.contentType)
    res.writeHeader('x-request-id', meta.requestId)
    for (const name in r.headers) res.writeHeader(name, r.headers[name] as string)
    started = true
  }
  try {
    for await (const chunk of body) {
      if (conn.aborted) break
      let ok = true
      res.cork(() => {
        if (!started) head()
        ok = stream.write!(chunk)
      })
      if (!ok && !conn.aborted) await new Promise<void>((resolve) => stream.onWritable!(() => (resolve(), true)))
    }
  } catch (err) {
    failed = true
    ctx.log.error({ err, reqId: meta.requestId, tenantId: meta.tenantId }, 'streamed response failed mid-way; connection closed')
  }
  if (failed && !started) return sendError(ctx, res, conn, new Error('export failed'), meta.requestId, meta)
  finishRequest(ctx, meta, failed ? 500 : r.status)
  settle(conn)
  if (conn.aborted) return
  if (failed) stream.close?.()
  else res.cork(() => {
    if (!started) head()
    res.end()
  })
}

function sendError(ctx: AppContext, res: HttpResponse, conn: Conn, err: unknown, requestId: string, meta?: Meta): void {
  const rendered = renderError(err, requestId)
  if (rendered.status >= 500) ctx.log.error({ err, reqId: requestId, tenantId: meta?.tenantId }, 'request failed')
  // Only the SQLSTATE and where (table, constraint): the server's message quotes the refused value, which
  // may be personal data. A foreign key's name tells a race (a row deleted meanwhile) from a wrong reference.
  else if (!(err instanceof AppError)) {
    const where = err as { table_name?: string; constraint_name?: string }
    ctx.log.warn({ sqlstate: pgErrorCode(err), table: where.table_name, constraint: where.constraint_name, reqId: requestId, tenantId: meta?.tenantId }, 'request value refused by the database')
  }
  send(ctx, res, conn, rendered.status, JSON.stringify(rendered.body), 'application/json', rendered.headers, meta ?? {
    requestId,
    started: performance.now(),
    method: '',
    path: '',
    route: UNMATCHED_ROUTE,
    tenantId: undefined,
  })
}

/** The route label of a request no route matched (any path: the label must stay one value). */
const UNMATCHED_ROUTE = 'unmatched'

/**
 * The path as the request line logs it. A `:token` segment (tracking and unsubscribe links) is the
 * credential itself, one that unsubscribes a player: the log shows `:token` in its place.
 */
function loggedPath(url: string, route: { paramNames: string[] }, rawParams: readonly string[]): string {
  const i = route.paramNames.indexOf('token')
  const token = i >= 0 ? rawParams[i] : undefined
  return token ? url.split(token).join(':token') : url
}

/** At the end of every request: its histogram sample (src/lib/metrics.ts) and its one log line. */
function finishRequest(ctx: AppContext, meta: Meta, status: number): void {
  const ms = performance.now() - meta.started
  ctx.metrics?.observeRequest(meta.route, meta.method || 'other', status, ms / 1000)
  if (!ctx.log.isLevelEnabled('info')) return
  // The URL path never carries the key (api_key is in the query string, which is not logged).
  ctx.log.info(
    { reqId: meta.requestId, route: meta.route, tenantId: meta.tenantId, method: meta.method, path: meta.path, status, ms: Math.round(ms * 100) / 100 },
    'request',
  )
}

// Turns route definitions into uWS handlers: precompiled TypeBox checks, query coercion, auth, scopes,
// brand resolution and error rendering, so feature handlers receive typed, validated input.
import { randomUUID } from 'node:crypto'
import type { TSchema } from 'typebox'
import { Compile, type Validator } from 'typebox/compile'
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js'
import { safeEqual } from '../auth/keys.ts'
import type { Principal } from '../auth/types.ts'
import type { AppContext } from '../context.ts'
import { AppError, badRequest, forbidden, unauthorized } from '../errors.ts'
import { renderError, STATUS_TEXT } from './errors.ts'
import { Reply, type RouteDef } from './route.ts'

export const API_PREFIX = '/api/v1'

interface CompiledRoute {
  def: RouteDef
  paramNames: string[]
  params?: Validator
  query?: Validator
  body?: Validator
  successStatus: number
  hasBody: boolean
}

interface Conn {
  aborted: boolean
  traffic: Traffic
}

/** Shared by all handlers of one server: lets shutdown wait for in-flight requests. */
export interface Traffic {
  inFlight: number
  draining: boolean
}

export function compileRoute(def: RouteDef): CompiledRoute {
  const compile = (schema: TSchema | undefined) => (schema ? Compile(schema) : undefined)
  return {
    def,
    paramNames: [...def.path.matchAll(/:(\w+)/g)].map((m) => m[1] as string),
    params: compile(def.params),
    query: compile(def.query),
    body: compile(def.body),
    successStatus: Math.min(...Object.keys(def.responses).map(Number)),
    hasBody: def.method !== 'GET' && def.method !== 'DELETE',
  }
}

export function registerRoutes(app: TemplatedApp, ctx: AppContext, routes: RouteDef[], traffic: Traffic): void {
  for (const def of routes) {
    const route = compileRoute(def)
    const method = def.method === 'DELETE' ? 'del' : (def.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch')
    app[method](API_PREFIX + def.path, (res, req) => handle(ctx, route, res, req, traffic))
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
  const conn = { aborted: false, traffic }
  traffic.inFlight++
  res.onAborted(() => {
    conn.aborted = true
  })
  return conn
}

const REQUEST_ID_RE = /^[\w.:-]{1,128}$/
function requestIdOf(req: HttpRequest): string {
  const given = req.getHeader('x-request-id')
  return given && REQUEST_ID_RE.test(given) ? given : randomUUID()
}

function handle(ctx: AppContext, route: CompiledRoute, res: HttpResponse, req: HttpRequest, traffic: Traffic): void {
  // uWS's request object is valid only until this function returns: copy everything we need now.
  const conn = watch(res, traffic)
  const started = performance.now()
  const headers: Record<string, string> = {}
  req.forEach((name, value) => {
    headers[name] = value
  })
  const requestId = headers['x-request-id'] && REQUEST_ID_RE.test(headers['x-request-id']) ? headers['x-request-id'] : randomUUID()
  const rawQuery = req.getQuery() ?? ''
  const rawParams = route.paramNames.map((_, i) => req.getParameter(i) ?? '')
  const meta = { requestId, started, method: route.def.method, path: req.getUrl(), tenantId: undefined as string | undefined }

  const run = (body: Buffer | undefined) => {
    dispatch(ctx, route, { headers, rawQuery, rawParams, body, meta }).then(
      (result) => {
        const replyObj = result instanceof Reply ? result : new Reply(route.successStatus, result)
        send(ctx, res, conn, replyObj.status, serialize(replyObj), replyObj.contentType, replyObj.headers, meta)
      },
      (err: unknown) => sendError(ctx, res, conn, err, requestId, meta),
    )
  }

  if (!route.hasBody) return run(undefined)
  const declared = Number(headers['content-length'] ?? 0)
  const limit = ctx.config.bodyLimitBytes
  if (declared > limit) return sendError(ctx, res, conn, tooLarge(limit), requestId, meta)
  readBody(res, limit, run, () => sendError(ctx, res, conn, tooLarge(limit), requestId, meta))
}

const tooLarge = (limit: number) =>
  new AppError('PAYLOAD_TOO_LARGE', `request body is larger than ${limit} bytes`, { limit })

/** Collects the body; uWS reuses each chunk's memory after the callback, so chunks are copied. */
function readBody(res: HttpResponse, limit: number, done: (body: Buffer) => void, overflow: () => void): void {
  const chunks: Buffer[] = []
  let size = 0
  let failed = false
  res.onData((chunk, isLast) => {
    if (failed) return
    size += chunk.byteLength
    if (size > limit) {
      failed = true
      return overflow()
    }
    if (isLast) {
      if (chunks.length === 0) return done(Buffer.from(new Uint8Array(chunk)))
      chunks.push(Buffer.from(new Uint8Array(chunk)))
      return done(Buffer.concat(chunks, size))
    }
    chunks.push(Buffer.from(new Uint8Array(chunk)))
  })
}

interface Incoming {
  headers: Record<string, string>
  rawQuery: string
  rawParams: string[]
  body: Buffer | undefined
  meta: { requestId: string; tenantId: string | undefined }
}

async function dispatch(ctx: AppContext, route: CompiledRoute, inc: Incoming): Promise<unknown> {
  const { def } = route
  const query = parseQuery(inc.rawQuery)
  let principal: Principal | undefined
  if (def.auth !== 'public') {
    const key = keyOf(inc.headers, query)
    if (def.auth === 'admin') await authorizeAdmin(ctx, key)
    else {
      principal = await authorizeKey(ctx, key, def.scope)
      inc.meta.tenantId = principal.tenantId
    }
  }
  const params = route.params
    ? validate(route.params, Object.fromEntries(route.paramNames.map((n, i) => [n, safeDecode(inc.rawParams[i] ?? '')])), 'path')
    : undefined
  const validQuery = route.query ? validate(route.query, query, 'query') : undefined
  let body: unknown
  if (route.body) {
    if (!inc.body || inc.body.length === 0) throw badRequest('request body is required')
    body = def.validateBody === false ? parseJson(inc.body) : validate(route.body, parseJson(inc.body), 'body')
  }
  const log = ctx.log.child({ reqId: inc.meta.requestId, tenantId: inc.meta.tenantId })
  const req = {
    params,
    query: validQuery,
    body,
    headers: inc.headers,
    requestId: inc.meta.requestId,
    log,
    principal,
    rawBody: inc.body,
    resolveBrand: () => {
      const bodyHint = typeof body === 'object' && body !== null ? (body as { brand?: unknown }).brand : undefined
      const hint = inc.headers['x-brand'] ?? (typeof query.brand === 'string' ? query.brand : undefined) ?? (typeof bodyHint === 'string' ? bodyHint : undefined)
      return ctx.auth.resolveBrand(principal as Principal, hint)
    },
  }
  return (def.handler as (c: AppContext, r: unknown) => unknown)(ctx, req)
}

/** Key sources in the spec's order: x-api-key, Authorization: Bearer, api_key query parameter. */
function keyOf(headers: Record<string, string>, query: Record<string, unknown>): string | undefined {
  if (headers['x-api-key']) return headers['x-api-key']
  const authz = headers.authorization
  if (authz && /^bearer /i.test(authz)) return authz.slice(7).trim()
  return typeof query.api_key === 'string' ? query.api_key : undefined
}

async function authorizeKey(ctx: AppContext, key: string | undefined, scope: RouteDef['scope']): Promise<Principal> {
  if (!key) throw unauthorized('API key required')
  const principal = await ctx.auth.authenticate(key)
  if (!principal) throw unauthorized()
  if (principal.scopes.length > 0 && !principal.scopes.includes(scope)) {
    throw forbidden(`this API key lacks the ${scope === 'full' ? 'full access' : `'${scope}'`} scope`)
  }
  return principal
}

async function authorizeAdmin(ctx: AppContext, key: string | undefined): Promise<void> {
  if (!key) throw unauthorized('admin key required')
  const adminKey = ctx.config.adminKey
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

function parseJson(buf: Buffer): unknown {
  try {
    return JSON.parse(buf.toString('utf8'))
  } catch {
    throw badRequest('malformed JSON body')
  }
}

/** Converts query/path strings to the schema's types, fills defaults, then checks. */
function validate(v: Validator, value: unknown, where: 'path' | 'query' | 'body'): unknown {
  const candidate = where === 'body' ? v.Default(value) : v.Default(v.Convert(value))
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
  for (const e of v.Errors(value)) {
    if (e.keyword === 'boolean') continue
    const base = e.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    const params = e.params as { requiredProperties?: string[]; additionalProperties?: string[] }
    const fields =
      e.keyword === 'required' && params.requiredProperties
        ? params.requiredProperties.map((p) => [...base, p].join('.'))
        : e.keyword === 'additionalProperties' && params.additionalProperties
          ? params.additionalProperties.map((p) => [...base, p].join('.'))
          : [base.join('.')]
    for (const field of fields) {
      const message = e.keyword === 'required' ? 'is required' : e.keyword === 'additionalProperties' ? 'is not allowed' : e.message
      const id = `${field}\u0000${message}`
      if (seen.has(id)) continue
      seen.add(id)
      out.push({ in: where, field: field || where, message })
    }
  }
  return out
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
  if (meta) logRequest(ctx, meta, status)
  conn.traffic.inFlight--
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

function sendError(ctx: AppContext, res: HttpResponse, conn: Conn, err: unknown, requestId: string, meta?: Meta): void {
  const rendered = renderError(err, requestId)
  if (rendered.status >= 500) ctx.log.error({ err, reqId: requestId, tenantId: meta?.tenantId }, 'request failed')
  send(ctx, res, conn, rendered.status, JSON.stringify(rendered.body), 'application/json', rendered.headers, meta ?? {
    requestId,
    started: performance.now(),
    method: '',
    path: '',
    tenantId: undefined,
  })
}

function logRequest(ctx: AppContext, meta: Meta, status: number): void {
  if (!ctx.log.isLevelEnabled('info')) return
  // The URL path never carries the key (api_key is in the query string, which is not logged).
  ctx.log.info(
    { reqId: meta.requestId, tenantId: meta.tenantId, method: meta.method, path: meta.path, status, ms: Math.round((performance.now() - meta.started) * 100) / 100 },
    'request',
  )
}

// A route is one declarative object: validation, handler types and the OpenAPI document all come from it.
import type { Static, TSchema } from 'typebox'
import type { Brand, Principal } from '../auth/types.ts'
import type { AppContext } from '../context.ts'
import type { Logger } from '../lib/log.ts'

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
/** `full` is held only by keys with no scopes (full access). */
export type Scope = 'read' | 'events:write' | 'full'

type In<S> = S extends TSchema ? Static<S> : undefined

interface BaseRequest<P, Q, B> {
  params: In<P>
  query: In<Q>
  body: In<B>
  /** Lower-case header names; only those the router reads (READ_HEADERS in router.ts). */
  headers: Record<string, string>
  requestId: string
  log: Logger
  /** The request body exactly as received (POST/PUT/PATCH). */
  rawBody?: Buffer
}

export interface PublicRequest<P = unknown, Q = unknown, B = unknown> extends BaseRequest<P, Q, B> {}
export interface AdminRequest<P = unknown, Q = unknown, B = unknown> extends BaseRequest<P, Q, B> {}
export interface KeyRequest<P = unknown, Q = unknown, B = unknown> extends BaseRequest<P, Q, B> {
  principal: Principal
  /**
   * The brand this request acts on: the pinned brand of a brand-pinned key, else the `x-brand` header,
   * `brand` query parameter or body `brand` field (id or slug), else the tenant's default brand.
   */
  resolveBrand(): Promise<Brand>
  /** Whether the request names a brand at all (a pinned key, or any of resolveBrand's hints). */
  hasBrandHint(): boolean
}

/** What a handler may return instead of a bare body: a status, headers, or a non-JSON body. */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
    readonly contentType = 'application/json',
  ) {}
}
export const reply = (status: number, body: unknown, headers?: Record<string, string>, contentType?: string) =>
  new Reply(status, body, headers, contentType)

/**
 * A documented response other than a bare JSON schema: one content type (`contentType`, `schema`), or
 * several (`content`: content type → schema, e.g. JSON and CSV), with optional response headers.
 */
export type ResponseSpec = { description: string; headers?: Record<string, { description: string; schema: TSchema }> } & (
  | { contentType: string; schema?: TSchema }
  | { content: Record<string, TSchema> }
)

/** Whether a documented response is a ResponseSpec (description and content types) rather than a bare JSON schema. */
export function isResponseSpec(spec: TSchema | ResponseSpec): spec is ResponseSpec {
  return typeof (spec as { description?: unknown }).description === 'string' && ('contentType' in spec || 'content' in spec)
}

interface RouteShape<P, Q, B> {
  method: Method
  /** Relative to /api/v1, with uWS-style parameters: `/players/:id`. */
  path: string
  operationId: string
  tags: string[]
  summary: string
  description?: string
  params?: P
  query?: Q
  body?: B
  /** Success responses by status; the lowest is the default status of a bare returned body. */
  responses: Record<number, TSchema | ResponseSpec>
  /** Documents the brand hint (`x-brand`, `brand`) for this route in OpenAPI. */
  brandScoped?: boolean
  /**
   * Also served at the path without the /api/v1 prefix: links players follow under PUBLIC_BASE_URL
   * (tracking, contract-engines §3). The prefixed path stays for links already sent.
   */
  atRoot?: boolean
  /** Extra error statuses worth documenting beyond the standard ones (e.g. 429, 503). */
  errors?: number[]
  /**
   * false: the router parses the JSON body but leaves checking it to the handler (`body` then only documents
   * it), for bodies whose alternatives need field-precise errors, like POST /events' single-or-batch body.
   */
  validateBody?: boolean
}

export interface RouteDef extends RouteShape<TSchema | undefined, TSchema | undefined, TSchema | undefined> {
  auth: 'public' | 'admin' | 'key'
  scope: Scope
  // Each define* function below types `req` precisely; the router only needs this loose form.
  handler: (ctx: AppContext, req: never) => unknown
}

export function defineRoute<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
>(
  route: RouteShape<P, Q, B> & { scope?: Scope; handler: (ctx: AppContext, req: KeyRequest<P, Q, B>) => unknown },
): RouteDef {
  return { ...route, auth: 'key', scope: route.scope ?? (route.method === 'GET' ? 'read' : 'full') } as RouteDef
}

export function definePublicRoute<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
>(route: RouteShape<P, Q, B> & { handler: (ctx: AppContext, req: PublicRequest<P, Q, B>) => unknown }): RouteDef {
  return { ...route, auth: 'public', scope: 'full' } as RouteDef
}

export function defineAdminRoute<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
>(route: RouteShape<P, Q, B> & { handler: (ctx: AppContext, req: AdminRequest<P, Q, B>) => unknown }): RouteDef {
  return { ...route, auth: 'admin', scope: 'full' } as RouteDef
}

// The OpenAPI 3.1 document, generated from the same route table the router serves.
import type { TSchema } from 'typebox'
import { ErrorBody } from '../lib/schemas.ts'
import { isResponseSpec, type RouteDef } from './route.ts'
import { API_PREFIX, idParamsOf } from './router.ts'

type Json = Record<string, unknown>

const ERROR_TEXT: Record<number, string> = {
  400: 'Malformed request or failed validation (details.errors names each field); unknown brand hint; no active brand',
  401: 'API key missing, invalid, revoked or expired',
  403: 'The key lacks the required scope',
  404: 'Not found, or not visible to the caller',
  408: 'The request body stopped arriving (docs/http.md)',
  413: 'Request body too large',
  429: 'Tenant over its per-minute ingestion budget (Retry-After header)',
  500: 'Unexpected failure',
  503: 'Temporarily unable to accept the request (Retry-After header)',
}

/** Copies a TypeBox schema to plain JSON, hoisting every `$id` schema into components.schemas. */
function toJsonSchema(schema: TSchema, components: Json): Json {
  const walk = (node: unknown, top: boolean): unknown => {
    if (Array.isArray(node)) return node.map((n) => walk(n, false))
    if (!node || typeof node !== 'object') return node
    const obj = node as Json
    if (typeof obj.$id === 'string' && !top) {
      const name = obj.$id
      if (!components[name]) components[name] = walk(obj, true)
      return { $ref: `#/components/schemas/${name}` }
    }
    const out: Json = {}
    for (const [k, v] of Object.entries(obj)) if (k !== '$id') out[k] = walk(v, false)
    return out
  }
  const plain = JSON.parse(JSON.stringify(schema)) as Json
  if (typeof plain.$id === 'string') return walk(plain, false) as Json
  return walk(plain, true) as Json
}

function parameters(schema: TSchema | undefined, where: 'path' | 'query', components: Json): Json[] {
  if (!schema) return []
  const plain = toJsonSchema(schema, components) as { properties?: Record<string, Json>; required?: string[] }
  return Object.entries(plain.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    // A parameter with a default may be omitted, even though the schema lists it as required.
    required: where === 'path' || ((plain.required ?? []).includes(name) && s.default === undefined),
    schema: s,
    ...(typeof s.description === 'string' ? { description: s.description } : {}),
  }))
}

export function buildOpenApi(routes: RouteDef[], version: string): Json {
  const components: Json = {}
  const paths: Record<string, Json> = {}
  for (const route of routes) {
    const path = API_PREFIX + route.path.replace(/:(\w+)/g, '{$1}')
    const params = [...parameters(route.params, 'path', components), ...parameters(route.query, 'query', components)]
    if (route.brandScoped) {
      params.push({ name: 'x-brand', in: 'header', required: false, schema: { type: 'string' }, description: 'Brand id or slug (ignored for brand-pinned keys)' })
      if (!params.some((p) => p.name === 'brand')) {
        params.push({ name: 'brand', in: 'query', required: false, schema: { type: 'string' }, description: 'Brand id or slug (ignored for brand-pinned keys)' })
      }
    }
    const responses: Json = {}
    for (const [status, spec] of Object.entries(route.responses)) {
      if (isResponseSpec(spec)) {
        const content: Json = {}
        if ('content' in spec) {
          for (const [type, schema] of Object.entries(spec.content)) content[type] = { schema: toJsonSchema(schema, components) }
        } else {
          content[spec.contentType] = { schema: spec.schema ? toJsonSchema(spec.schema, components) : { type: 'string' } }
        }
        const headers = Object.fromEntries(
          Object.entries(spec.headers ?? {}).map(([name, h]) => [name, { description: h.description, schema: toJsonSchema(h.schema, components) }]),
        )
        responses[status] = { description: spec.description, ...(spec.headers ? { headers } : {}), content }
      } else {
        responses[status] = { description: 'Success', content: { 'application/json': { schema: toJsonSchema(spec as TSchema, components) } } }
      }
    }
    const errorStatuses = new Set<number>([500, ...(route.errors ?? [])])
    if (route.auth !== 'public') [401, 403].forEach((s) => errorStatuses.add(s))
    // A path id that is no UUID is a 404 (router.ts); other path params (an enum, say) can be a 400.
    const checkedParams = Object.keys((route.params as { properties?: object } | undefined)?.properties ?? {}).length > idParamsOf(route.params).length
    if (checkedParams || route.query || route.body || route.brandScoped) errorStatuses.add(400)
    if (route.params) errorStatuses.add(404)
    // A body that stops arriving is 408 (HTTP_BODY_TIMEOUT_MS), one too large 413.
    if (route.body) [408, 413].forEach((s) => errorStatuses.add(s))
    for (const status of [...errorStatuses].sort()) {
      if (responses[status]) continue
      responses[status] = {
        description: ERROR_TEXT[status] ?? 'Error',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      }
    }
    const operation: Json = {
      operationId: route.operationId,
      tags: route.tags,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      ...(params.length ? { parameters: params } : {}),
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: toJsonSchema(route.body, components) } } } } : {}),
      responses,
      security:
        route.auth === 'public'
          ? []
          : [{ ApiKeyHeader: [] }, { BearerAuth: [] }, { ApiKeyQuery: [] }],
    }
    if (route.auth === 'key' && route.scope !== 'full') operation['x-required-scope'] = route.scope
    if (route.auth === 'admin') operation['x-required-role'] = 'super_admin'
    paths[path] = { ...(paths[path] ?? {}), [route.method.toLowerCase()]: operation }
  }
  // Registers ErrorBody (its $id is 'Error') as components.schemas.Error, which every error response refers to.
  toJsonSchema(ErrorBody, components)
  return {
    openapi: '3.1.0',
    info: {
      title: 'Respin API',
      version,
      description: 'CRM and gamification backend for online gaming operators. Keys start with `rsp_`; send them in `x-api-key` (preferred), `Authorization: Bearer`, or the `api_key` query parameter.',
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        ApiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        BearerAuth: { type: 'http', scheme: 'bearer' },
        ApiKeyQuery: { type: 'apiKey', in: 'query', name: 'api_key', description: 'Documented for POST /events senders that cannot set headers; URLs may be logged, so prefer a header.' },
      },
    },
  }
}

// POST /events. The router reads and parses the body; this route checks it with precompiled TypeBox
// validators (single event or batch, with field-precise errors), resolves the brand, applies the limiter
// and hands the request to ingestion.
import { Compile } from 'typebox/compile'
import type { AppContext } from '../context.ts'
import { badRequest } from '../errors.ts'
import { defineRoute } from '../http/route.ts'
import { describeErrors, type FieldError } from '../http/router.ts'
import { parseEventTime } from './canonical.ts'
import { ingestEvents } from './service.ts'
import { EventBatch, IncomingEvent, IngestBody, IngestResponse, MAX_BATCH } from './schemas.ts'

/** Event times the events table accepts (ClickHouse partitions by month; see docs/ingestion.md). */
const EARLIEST = Date.UTC(2000, 0, 1)
const MAX_FUTURE_MS = 24 * 3600 * 1000

const checkBatch = Compile(EventBatch)
const checkSingle = Compile(IncomingEvent)

/** The events of a valid body, or a 400 naming each failing field (`events.3.event_id`). */
export function validateIngestBody(body: unknown): IncomingEvent[] {
  const isBatch = typeof body === 'object' && body !== null && !Array.isArray(body) && 'events' in body
  const v = isBatch ? checkBatch : checkSingle
  if (v.Check(body)) {
    const events = isBatch ? (body as EventBatch).events : [body as IncomingEvent]
    const latest = Date.now() + MAX_FUTURE_MS
    const errors: FieldError[] = []
    events.forEach((e, i) => {
      if (e.timestamp === undefined) return
      const at = parseEventTime(e.timestamp)
      if (!(at >= EARLIEST && at <= latest)) {
        errors.push({ in: 'body', field: isBatch ? `events.${i}.timestamp` : 'timestamp', message: 'must be between 2000-01-01 and one day from now' })
      }
    })
    if (errors.length) throw badRequest('invalid event', { errors })
    return events
  }
  const errors = describeErrors(v, body, 'body')
  const count = isBatch && Array.isArray((body as { events: unknown }).events) ? (body as { events: unknown[] }).events.length : undefined
  throw badRequest(count !== undefined && (count === 0 || count > MAX_BATCH) ? `a batch holds 1 to ${MAX_BATCH} events` : 'invalid event', { errors })
}
type EventBatch = { events: IncomingEvent[] }

const HALF_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Text PostgreSQL cannot store, refused with a 400 before anything is written: a NUL character (`\u0000`)
 * or half of a surrogate pair (a cut emoji, `\ud83d`). Accepted, such an event failed inside the ingest
 * transaction, and the request got a 503 asking for a retry that could never succeed. JSON carries them
 * only escaped, so a byte search of the raw body spares the walk for every other request.
 */
function refuseUnstorableText(raw: Buffer | undefined, events: IncomingEvent[], isBatch: boolean): void {
  if (!raw || !(raw.includes('\\u0000') || raw.includes('\\ud') || raw.includes('\\uD'))) return
  const unstorable = (v: string) => v.includes('\u0000') || HALF_SURROGATE.test(v)
  const find = (v: unknown, path: string): string | undefined => {
    if (typeof v === 'string') return unstorable(v) ? path : undefined
    if (typeof v !== 'object' || v === null) return undefined
    for (const [k, x] of Object.entries(v)) {
      const at = path ? `${path}.${k}` : k
      if (unstorable(k)) return at
      const found = find(x, at)
      if (found) return found
    }
    return undefined
  }
  const errors: FieldError[] = []
  events.forEach((e, i) => {
    const field = find(e, isBatch ? `events.${i}` : '')
    if (field) errors.push({ in: 'body', field, message: 'must not contain a NUL character or half of a UTF-16 surrogate pair' })
  })
  if (errors.length) throw badRequest('invalid event', { errors })
}

export const ingestRoute = defineRoute({
  method: 'POST',
  path: '/events',
  operationId: 'ingestEvents',
  tags: ['events'],
  summary: 'Ingest one player event or a batch of 1 to 100',
  description:
    'Stores the events durably (ClickHouse for events, PostgreSQL for players and profiles) before answering. ' +
    'Duplicates by event_id (per brand, at least 7 days) are counted in `deduped`. The key may also be passed as ' +
    '`api_key` query parameter. 429 when the tenant exceeds RATE_LIMIT_INGEST_PER_MIN, 503 when its backlog is full; ' +
    'both carry Retry-After.',
  scope: 'events:write',
  brandScoped: true,
  body: IngestBody,
  validateBody: false,
  responses: { 200: IngestResponse },
  errors: [429, 503],
  handler: async (ctx: AppContext, req) => {
    const events = validateIngestBody(req.body)
    refuseUnstorableText(req.rawBody, events, typeof req.body === 'object' && req.body !== null && 'events' in req.body)
    const brand = await req.resolveBrand()
    const ingest = ctx.ingest
    if (ingest) await ingest.limiter.hit(req.principal.tenantId)
    return ingestEvents(ctx, { tenantId: req.principal.tenantId, brandId: brand.id, events, raw: req.rawBody as Buffer })
  },
})

export const eventRoutes = [ingestRoute]

import Type, { type Static } from 'typebox'
import type { AppContext } from '../context.ts'
import { pingRedis } from '../db/redis.ts'
import { definePublicRoute, reply, type RouteDef } from '../http/route.ts'
import { FreeObject } from '../lib/schemas.ts'

const CHECK_TIMEOUT_MS = 1000
/** Health answers from a result at most this old, so a busy load balancer does not load the stores. */
const HEALTH_CACHE_MS = 1000

const Check = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('fail'), Type.Literal('embedded')]),
  latency_ms: Type.Optional(Type.Number()),
  error: Type.Optional(Type.String()),
  /** ingest_spool: events committed with their profiles and not yet in ClickHouse (docs/ingestion.md). */
  backlog: Type.Optional(Type.Integer()),
  /** ingest_spool: acknowledged events ClickHouse refuses as malformed, set aside in event_spool. */
  quarantined: Type.Optional(Type.Integer()),
  /**
   * false for a dependency the service runs without (Redis): its failure is reported here but leaves the
   * answer 200, so a load balancer does not take every process out at once for it.
   */
  required: Type.Optional(Type.Boolean()),
  /** What goes on without the dependency, when it is optional and failing. */
  impact: Type.Optional(Type.String()),
})
const Health = Type.Object(
  {
    status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
    version: Type.String(),
    timestamp: Type.String({ format: 'date-time' }),
    service: Type.String(),
    checks: Type.Record(Type.String(), Check),
  },
  { $id: 'Health' },
)

type CheckResult = Static<typeof Check>

async function timed(fn: () => Promise<void>): Promise<CheckResult> {
  const started = performance.now()
  try {
    await fn()
    return { status: 'ok', latency_ms: Math.round((performance.now() - started) * 10) / 10 }
  } catch (err) {
    return { status: 'fail', error: err instanceof Error ? err.message : 'failed' }
  }
}

type Checks = { healthy: boolean; checks: Record<string, CheckResult> }
const lastChecks = new WeakMap<AppContext, { at: number; result: Promise<Checks>; value?: Checks }>()

function runChecks(ctx: AppContext) {
  const now = Date.now()
  const cached = lastChecks.get(ctx)
  if (cached && now - cached.at < HEALTH_CACHE_MS) return cached.result
  const entry: { at: number; result: Promise<Checks>; value?: Checks } = { at: now, result: Promise.resolve() as never }
  entry.result = (async () => {
    const [postgres, clickhouse, redis] = await Promise.all([
      timed(() => ctx.pg.ping(CHECK_TIMEOUT_MS)),
      timed(async () => {
        await ctx.ch.ping(CHECK_TIMEOUT_MS)
        if (!ctx.ch.schemaReady) throw new Error('ClickHouse answers, but its migrations have not run yet (retried every 5 s)')
      }),
      ctx.redis ? timed(() => pingRedis(ctx.redis!, CHECK_TIMEOUT_MS)) : Promise.resolve<CheckResult>({ status: 'embedded' }),
    ])
    if (redis.status === 'fail') {
      // Ingestion goes on without Redis: the rate limiter fails open and dedupe falls back (docs/ingestion.md).
      Object.assign(redis, { required: false, impact: 'ingestion goes on: the rate limiter lets requests through and dedupe checks ids against the stores until Redis answers again (docs/ingestion.md)' })
    }
    if (clickhouse.status === 'fail' && ctx.config.ingestAckAfter === 'postgres' && redis.status === 'ok') {
      // Acknowledged after PostgreSQL, ingestion goes on into the spool (until it is full: ingest_spool
      // below then fails) and every route but analytics and exports answers. Every process shares the one
      // ClickHouse: a load balancer taking them all out for it would stop what still works. Not without
      // Redis: dedupe then checks every new event id against ClickHouse (dedupe.ts), so ingestion stops.
      Object.assign(clickhouse, { required: false, impact: 'ingestion goes on into the PostgreSQL spool and moves to ClickHouse when it answers; analytics and exports fail until then (docs/ingestion.md)' })
    }
    const checks: Record<string, CheckResult> = { postgres, clickhouse, redis }
    const spool = ctx.ingest?.spool
    if (spool) {
      const backlog = spool.backlog()
      const quarantined = spool.quarantined()
      // Set-aside events do not fail the check: ingestion goes on, and every process sharing the spool
      // would leave its load balancer at once. The count and the error log are the operator's signal.
      checks.ingest_spool = spool.full()
        ? { status: 'fail', backlog, error: 'too many events waiting for ClickHouse: ingestion answers 503 until the flusher catches up' }
        : { status: 'ok', backlog }
      if (quarantined > 0) checks.ingest_spool.quarantined = quarantined
    }
    entry.value = { healthy: Object.values(checks).every((c) => c.status !== 'fail' || c.required === false), checks }
    return entry.value
  })()
  lastChecks.set(ctx, entry)
  return entry.result
}

/** The last result while it is fresh and complete, so a cached answer needs no promise at all. */
function freshChecks(ctx: AppContext): Checks | undefined {
  const entry = lastChecks.get(ctx)
  return entry && Date.now() - entry.at < HEALTH_CACHE_MS ? entry.value : undefined
}

/** Serialised once per check run, not per request: `timestamp` is when the checks ran. */
const replies = new WeakMap<Checks, ReturnType<typeof reply>>()
function healthReply(ctx: AppContext, checked: Checks) {
  let cachedReply = replies.get(checked)
  if (!cachedReply) {
    const { healthy, checks } = checked
    const body = { status: healthy ? 'ok' : 'degraded', version: ctx.config.version, timestamp: new Date().toISOString(), service: 'respin', checks }
    cachedReply = reply(healthy ? 200 : 503, JSON.stringify(body))
    replies.set(checked, cachedReply)
  }
  return cachedReply
}

export const healthRoute = definePublicRoute({
  method: 'GET',
  path: '/health',
  operationId: 'getHealth',
  tags: ['system'],
  summary: 'Service health and dependency checks',
  description: `Public. 503 with status "degraded" for what stops the service: PostgreSQL not answering within ${CHECK_TIMEOUT_MS} ms, ClickHouse not answering (or its migrations not yet run) while ingestion needs it, the ingestion spool full. A failing optional dependency (Redis; ClickHouse while ingestion is acknowledged after PostgreSQL and Redis keeps dedupe) is reported in \`checks\` (\`required: false\`) with 200, so a load balancer keeps the process in service. Results (and their timestamp) are reused for up to ${HEALTH_CACHE_MS} ms. For liveness alone, GET /health/live.`,
  responses: { 200: Health, 503: Health },
  handler(ctx) {
    const fresh = freshChecks(ctx)
    return fresh ? healthReply(ctx, fresh) : runChecks(ctx).then((checks) => healthReply(ctx, checks))
  },
})

const Live = Type.Object({ status: Type.Literal('ok') })
const LIVE_BODY = JSON.stringify({ status: 'ok' })

/** Liveness: the process serves HTTP. Depends on nothing, so a stuck store never gets the process restarted. */
export const liveRoute = definePublicRoute({
  method: 'GET',
  path: '/health/live',
  operationId: 'getLiveness',
  tags: ['system'],
  summary: 'Liveness probe',
  description: 'Public. 200 as long as the process answers HTTP; checks no dependency (GET /health does).',
  responses: { 200: Live },
  handler: () => reply(200, LIVE_BODY),
})

export function openApiRoute(getDocument: () => unknown): RouteDef {
  return definePublicRoute({
    method: 'GET',
    path: '/openapi.json',
    operationId: 'getOpenApi',
    tags: ['system'],
    summary: 'This OpenAPI 3.1 document',
    responses: { 200: FreeObject },
    handler: () => getDocument(),
  })
}

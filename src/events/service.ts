// Ingestion: the front-end half (mapping and counting of an already validated request, then the tenant's
// actor) and the background service that owns the actors, the worker pool, dedupe and the limiter.
import type { AppContext } from '../context.ts'
import { createIngestPool } from '../workers/pool.ts'
import { createDedupe } from './dedupe.ts'
import { createMappingCache, type MappingCache } from './mapping-cache.ts'
import { createPipeline, type IngestItem, type Pipeline, type PipelineOptions } from './pipeline.ts'
import { createRateLimiter, type RateLimiter } from './rate-limit.ts'
import { createSpool, type Spool } from './spool.ts'
import type { IncomingEvent, IngestResponse } from './schemas.ts'

export interface IngestEngine {
  limiter: RateLimiter
  mappings: MappingCache
  pipeline: Pipeline
  spool: Spool
}

export const DEFAULT_PIPELINE_OPTIONS = { maxQueuedEvents: 20_000, maxGroupEvents: 5_000 }
/** With this many events waiting for ClickHouse in the spool, requests get 503 (and health says so). */
const MAX_SPOOLED_EVENTS = 2_000_000

/** Background service: registered in app.ts, it sets ctx.ingest for the route. */
export async function startIngestService(ctx: AppContext) {
  const pool = createIngestPool()
  // Both modes commit the events to the spool with the profiles; INGEST_ACK_AFTER=clickhouse then inserts
  // them before answering, and the flusher only moves what a failure or a crash left behind.
  const spool = createSpool({ sql: ctx.sql, ch: ctx.ch, log: ctx.log, intervalMs: ctx.config.ingestFlushIntervalMs, maxBacklog: MAX_SPOOLED_EVENTS })
  // Events a previous process committed but did not move go first, so ClickHouse is complete for the
  // dedupe checks of this one.
  await spool.flush('all').catch((err: unknown) => ctx.log.error({ err }, 'ingest spool: startup flush failed; retrying in the background'))
  spool.start()
  // Dedupe verifies ids against ClickHouse; spooled events of other processes are not there yet.
  const dedupe = createDedupe({ redis: ctx.redis, ch: ctx.ch, log: ctx.log, beforeVerify: (scope) => spool.flush(scope) })
  const engine: IngestEngine = {
    limiter: createRateLimiter({ limitPerMin: ctx.config.rateLimitIngestPerMin, redis: ctx.redis, log: ctx.log }),
    mappings: createMappingCache({ sql: ctx.sql, bus: ctx.bus }),
    pipeline: createPipeline({
      sql: ctx.sql, dedupe, pool, log: ctx.log, spool, stream: ctx.stream,
      options: { ...DEFAULT_PIPELINE_OPTIONS, ackAfter: ctx.config.ingestAckAfter } satisfies PipelineOptions,
      onGroupWritten: ctx.metrics && ((events, requests) => ctx.metrics?.ingestGroup(events, requests)),
    }),
    spool,
  }
  // The spool is the ingestion's queue: its depth in events and the age of its oldest row (how far
  // ClickHouse is behind PostgreSQL: the flush lag), across every process writing to this ClickHouse.
  ctx.metrics?.registerQueue('ingest_spool', async () => {
    const [row] = await ctx.sql<{ depth: number; age: number }[]>`
      select coalesce(sum(row_count), 0)::float8 as depth,
             coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as age
      from event_spool where sink = ${ctx.ch.sinkId}`
    return { depth: Number(row?.depth ?? 0), oldestAgeSeconds: Math.max(0, Number(row?.age ?? 0)) }
  })
  ctx.ingest = engine
  return {
    async stop() {
      // The HTTP server has drained its requests by now; wait for anything still in a mailbox.
      await engine.pipeline.drain()
      ctx.ingest = undefined
      await spool.stop()
      await dedupe.stop()
      await pool.close()
    },
  }
}

/** Maps and counts one validated request, hands it to its tenant's actor and waits for the durable write. */
export async function ingestEvents(
  ctx: AppContext,
  input: { tenantId: string; brandId: string; events: IncomingEvent[]; raw: Buffer },
): Promise<IngestResponse> {
  const engine = ctx.ingest
  if (!engine) throw new Error('ingest service not started')
  const receivedAt = Date.now()
  const mapping = await engine.mappings.get(input.brandId)
  const n = input.events.length
  const keep = new Uint8Array(n)
  const eventIds: (string | undefined)[] = new Array(n)
  const unknownAt: number[] = []
  const rejectedTypes = new Set<string>()
  let ignored = 0
  let rejected = 0
  for (let i = 0; i < n; i++) {
    const event = input.events[i] as IncomingEvent
    const res = mapping.resolve(event.event_type)
    eventIds[i] = event.event_id
    if (res.action === 'ignore') ignored++
    else if (res.action === 'reject') {
      rejected++
      rejectedTypes.add(event.event_type)
    } else {
      keep[i] = 1
      if (res.unknown) unknownAt.push(i)
    }
  }
  const item: IngestItem = { brandId: input.brandId, mapping: mapping.config, raw: input.raw, eventIds, keep, receivedAt, deduped: 0, stored: 0 }
  if (item.keep.some((k) => k === 1)) await engine.pipeline.submit(input.tenantId, item)
  ctx.metrics?.ingestEvents({ stored: item.stored, deduped: item.deduped, rejected, ignored })
  const unknown = new Set<string>()
  for (const i of unknownAt) if (item.keep[i] === 1) unknown.add((input.events[i] as IncomingEvent).event_type)
  return {
    received: n,
    stored: item.stored,
    deduped: item.deduped,
    rejected,
    ignored,
    unknown_event_types: [...unknown],
    rejected_event_types: [...rejectedTypes],
    status: 'queued',
    timestamp: ctx.clock().toISOString(),
  }
}

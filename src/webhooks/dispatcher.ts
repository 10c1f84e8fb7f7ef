// The webhook engine, started with the app (src/app.ts) in every process:
// - fan-out: outbox rows → one delivery per subscribed active endpoint, in one transaction per batch that
//   also marks the rows dispatched (SKIP LOCKED: each row is fanned out by exactly one process);
// - dispatch: the shared work loop (src/engine/work-loop.ts) claims due deliveries with a lease and runs
//   them on an actor pool, one actor per endpoint, so a slow or dead endpoint only delays itself;
// - upkeep: deactivation after 5 days of failures happens as attempts fail; retention pruning runs
//   every minute.
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { randomUUID } from 'node:crypto'
import { confirmLease, startTicker, startWorkLoop, type Lease, type QueueTable, type WorkLoop } from '../engine/work-loop.ts'
import { createBatcher } from '../engine/batcher.ts'
import { preferIndexWalks } from '../db/postgres.ts'
import { tableQueueProbe } from '../lib/metrics.ts'
import { createOutboundHttpOnWorker, OutboundTimeoutError } from '../lib/outbound-http.ts'
import { SecretBoxError } from '../lib/secret-box.ts'
import { checkUrl, systemResolver, UrlPolicyError, type ResolvedAddress, type Resolver } from '../lib/url-policy.ts'
import { ALL_EVENTS } from './catalog.ts'
import { onOutboxWritten } from '../lib/outbox.ts'
import * as q from './queries.ts'
import { deliveryBody } from './service.ts'
import { signatureHeaders } from './signing.ts'

export const MAX_ATTEMPTS = 5
/** An endpoint whose attempts have all failed for this long is deactivated. */
export const DEACTIVATE_AFTER_MS = 5 * 24 * 3600 * 1000
/** How long a pending delivery of an inactive endpoint waits before it is looked at again. */
const INACTIVE_RECHECK_MS = 60_000
/** Attempts of one endpoint in flight at once, and connections to it (keep-alive). */
const PER_ENDPOINT_CONCURRENCY = 8
/**
 * An endpoint whose last attempt failed (a timeout, a refusal, an error status) gets one attempt at a time
 * and holds at most this many deliveries in memory until an attempt succeeds: endpoints hanging until
 * their timeout would otherwise take 8 of the process's slots each, and 32 of them all of its slots and
 * memory, stalling every other tenant's webhooks for as long as they hang.
 */
const FAILING_ENDPOINT_HELD = 2
const GLOBAL_CONCURRENCY = 256
/** Outbox rows fanned out per transaction. */
const FANOUT_BATCH = 500
/** Outbox rows a fan-out takes even when this process has no room to run their deliveries (see fanOut). */
export const FANOUT_MIN = 50
/** Endpoints (URL, secrets, active) are re-read at most this long after a change made elsewhere. */
const ENDPOINT_CACHE_MS = 1000
/** Positive DNS answers are reused this long (each attempt still checks and pins the address). */
const DNS_CACHE_MS = 10_000
/** A failed lookup is reused this long. */
const DNS_FAILURE_CACHE_MS = 2_000
const JITTER = 0.1

const queueFor = (keyId: string): QueueTable => ({
  table: 'webhook_deliveries',
  keyColumn: 'endpoint_id',
  dueColumn: 'run_at',
  ownerColumn: 'lease_owner',
  // Only deliveries this process can sign (sql/0051): all of them when every process has the same key.
  where: (sql) => sql`status = 'pending' and key_id = ${keyId}`,
})

interface Endpoint {
  id: string
  url: string
  active: boolean
  secret: string
  previousSecret: string | null
  failing: boolean
}

export interface WebhookEngine {
  /** Look for new outbox rows and due deliveries now. */
  wake(): void
  /** An endpoint was changed through this process: drop its cached copy. */
  endpointChanged(id: string): void
}

/** The delay before attempt n+1 (n = attempts made, 1..4), with ±10 % jitter so retries spread out. */
export function retryDelayMs(delaysSec: number[], attemptsMade: number, random = Math.random): number {
  const base = (delaysSec[Math.min(attemptsMade, delaysSec.length) - 1] ?? 60) * 1000
  return Math.round(base * (1 - JITTER + 2 * JITTER * random()))
}

export function startWebhookService(ctx: AppContext): BackgroundService {
  const { sql, log, config } = ctx
  // The HTTP exchanges on a worker thread: they were ~40 % of a busy sender's main thread.
  const http = createOutboundHttpOnWorker({ connectionsPerTarget: PER_ENDPOINT_CONCURRENCY })
  const endpoints = endpointCache(ctx)
  // An endpoint changed through any process (secret, URL, active, deleted): forgotten here before that
  // request answers, so no attempt of this process uses what it was.
  ctx.bus.subscribe('webhook_endpoint', (id) => endpoints.forget(id))
  const resolve = cachingResolver(systemResolver)
  // An attempt takes at most the timeout plus a few queries; a crashed process's rows are retried after this.
  const leaseMs = config.webhookTimeoutMs + 5000
  const QUEUE = queueFor(ctx.secretBox.keyId)
  const userAgent = `Respin-Webhooks/${config.version}`

  async function attempt(row: q.DeliveryRow, lease: Lease): Promise<void> {
    let endpoint: Endpoint | undefined
    try {
      endpoint = await endpoints.get(row.endpoint_id)
    } catch (err) {
      if (!(err instanceof SecretBoxError)) throw err
      // The secret was sealed under another key (SECRET_KEY or the key file changed): nothing can be
      // signed. A failed attempt, logged, rather than a silent retry loop.
      log.error({ err, endpointId: row.endpoint_id }, 'webhook secret cannot be opened')
      await outcomes.add(failedWithoutRequest(row, lease, `signing secret unavailable: ${err.message}`))
      return
    }
    const postponeWhileInactive = async () => {
      // Unless the endpoint was resumed meanwhile (the copy here may be up to a second old).
      if (!(await q.postponeWhileInactive(sql, row.id, lease.owner, INACTIVE_RECHECK_MS))) {
        endpoints.forget(row.endpoint_id)
        dispatch.wake()
      }
    }
    if (!endpoint) return // deleted: its deliveries went with it
    if (!endpoint.active) return postponeWhileInactive()
    // Lease enough for the whole attempt (its timeout and a margin); the loop keeps it while the attempt
    // is in flight, so no other claim POSTs the same delivery meanwhile.
    if (!(await confirmLease(sql, QUEUE, row.id, lease, config.webhookTimeoutMs + 2000))) return
    // Read again right before signing (a cache hit unless the endpoint changed meanwhile): a PATCH answered
    // while the lease was being confirmed holds for this request (its secret, its URL, its deactivation).
    endpoint = await endpoints.get(row.endpoint_id).catch(() => endpoint)
    if (!endpoint) return
    if (!endpoint.active) return postponeWhileInactive()
    const n = row.attempt_count + 1
    const at = new Date()
    let responseCode: number | null = null
    let error: string | null = null
    let responseBody: string | null = null
    const started = performance.now()
    try {
      // The policy again at every attempt, and the request goes to the address it checked.
      const target = await checkUrl(endpoint.url, { allowPrivate: config.webhookAllowPrivate, resolve })
      const res = await http.request(target, {
        method: 'POST',
        body: row.body,
        timeoutMs: config.webhookTimeoutMs,
        // Each endpoint its own keep-alive connections, even when several share a host.
        poolKey: endpoint.id,
        headers: {
          'content-type': 'application/json',
          'user-agent': userAgent,
          'x-respin-event': row.event,
          ...signatureHeaders({
            deliveryId: row.id,
            timestamp: Math.floor(at.getTime() / 1000),
            body: row.body,
            secret: endpoint.secret,
            previousSecret: endpoint.previousSecret,
          }),
        },
      })
      responseCode = res.status
      responseBody = res.bodyPrefix
      if (res.status < 200 || res.status > 299) error = res.status >= 300 && res.status < 400 ? `redirect (${res.status}) not followed` : `HTTP ${res.status}`
    } catch (err) {
      error =
        err instanceof OutboundTimeoutError ? `timeout after ${config.webhookTimeoutMs} ms`
        : err instanceof UrlPolicyError ? `url policy: ${err.message}`
        : `network: ${(err as Error).message || String(err)}`
    }
    const ok = error === null
    const outcome: q.Outcome = {
      id: row.id,
      owner: lease.owner,
      attempt: { n, at: at.toISOString(), response_code: responseCode, duration_ms: Math.round(performance.now() - started), error, response_body: responseBody },
      status: ok ? 'successful' : n >= MAX_ATTEMPTS ? 'failed' : 'pending',
      retryInMs: ok || n >= MAX_ATTEMPTS ? undefined : retryDelayMs(config.webhookRetryDelaysSec, n),
    }
    await outcomes.add(outcome)
    ctx.metrics?.outcome('webhook', outcome.status === 'pending' ? 'retrying' : outcome.status)
    if (!ok) ctx.metrics?.queueFailure('webhook-dispatch')
    if (ok) dispatch.succeeded(endpoint.id)
    else dispatch.failed(endpoint.id)
    if (ok && endpoint.failing) {
      endpoint.failing = false
      await q.noteEndpointSuccess(sql, endpoint.id)
    } else if (!ok) {
      endpoint.failing = true
      if (await q.noteEndpointFailure(sql, endpoint.id, DEACTIVATE_AFTER_MS)) {
        endpoints.forget(endpoint.id)
        log.warn({ endpointId: endpoint.id }, 'webhook endpoint deactivated after 5 days of failed deliveries')
      }
    }
  }

  function failedWithoutRequest(row: q.DeliveryRow, lease: Lease, error: string): q.Outcome {
    const n = row.attempt_count + 1
    return {
      id: row.id,
      owner: lease.owner,
      attempt: { n, at: new Date().toISOString(), response_code: null, duration_ms: 0, error, response_body: null },
      status: n >= MAX_ATTEMPTS ? 'failed' : 'pending',
      retryInMs: n >= MAX_ATTEMPTS ? undefined : retryDelayMs(config.webhookRetryDelaysSec, n),
    }
  }

  const outcomes = outcomeBatcher(ctx)
  const dispatch = startWorkLoop<q.DeliveryRow>({
    name: 'webhook-dispatch',
    sql,
    log,
    queue: QUEUE,
    keyOf: (row) => row.endpoint_id,
    handle: attempt,
    leaseMs,
    perKeyConcurrency: PER_ENDPOINT_CONCURRENCY,
    globalConcurrency: GLOBAL_CONCURRENCY,
    maxPerKey: 4 * PER_ENDPOINT_CONCURRENCY,
    // An endpoint whose last attempt in this process failed: one attempt at a time until one succeeds.
    failingHeld: FAILING_ENDPOINT_HELD,
    maxInMemory: 4 * GLOBAL_CONCURRENCY,
    idleIntervalMs: 1000,
    metrics: ctx.metrics,
  })
  // The outbox is the fan-out's queue: platform events not yet turned into deliveries.
  ctx.metrics?.registerQueue('outbox', tableQueueProbe(sql, 'outbox', 'dispatched_at is null', 'created_at'))

  const fanout = startTicker({
    name: 'webhook-fanout',
    log,
    idleIntervalMs: 1000,
    // Engines write outbox rows in many small transactions (every delivery batch's message.* events):
    // one fan-out per wake was three statements per such insert. 10 ms gathers them (latency target 1 s).
    coalesceMs: 10,
    async step() {
      const n = await fanOut(ctx, FANOUT_BATCH, { loop: dispatch, keyId: ctx.secretBox.keyId, leaseMs })
      if (n.claimable > 0) dispatch.wake()
      if (n.rows < n.limit) return false
      if (n.limit === FANOUT_BATCH) return true
      // Held back by the dispatcher's room: the next attempt that ends wakes the fan-out again.
      dispatch.whenRoom(wakeFanout)
      return false
    },
  })
  const wakeFanout = () => fanout.wake()

  const upkeep = startTicker({
    name: 'webhook-upkeep',
    log,
    idleIntervalMs: 60_000,
    async step() {
      const pruned = await q.prune(sql, config.webhookRetentionDays, 5000)
      if (pruned.deliveries || pruned.outbox) log.info(pruned, 'webhook retention: pruned')
      return pruned.deliveries === 5000 || pruned.outbox === 5000
    },
  })

  // Servers: the outbox trigger (sql/0050) notifies every process when events commit.
  let unlisten: (() => Promise<void>) | undefined
  // Embedded: one process holds the database, so every outbox write is this process's, and each tells the
  // fan-out (lib/outbox.ts) before its commit: it looks a moment later (most transactions here commit
  // within milliseconds) and once more after 250 ms (a longer one); the 1 s poll catches anything else.
  // Polling every 100 ms instead cost an idle embedded process ~10 queries a second.
  let unhear: (() => void) | undefined
  if (ctx.pg.kind === 'pglite') {
    let soon: NodeJS.Timeout | undefined
    let later: NodeJS.Timeout | undefined
    unhear = onOutboxWritten(() => {
      soon ??= setTimeout(() => {
        soon = undefined
        fanout.wake()
      }, 5)
      later ??= setTimeout(() => {
        later = undefined
        fanout.wake()
      }, 250)
      soon.unref()
      later.unref()
    })
  }
  if (ctx.pg.kind === 'postgres') {
    sql
      .listen('respin_outbox', () => fanout.wake())
      .then((l) => (unlisten = l.unlisten))
      .catch((err: unknown) => log.warn({ err }, 'webhooks: LISTEN failed; polling only'))
  }

  ctx.webhooks = {
    wake() {
      fanout.wake()
      dispatch.wake()
    },
    endpointChanged(id) {
      endpoints.forget(id)
    },
  }

  return {
    async stop() {
      ctx.webhooks = undefined
      unhear?.()
      await unlisten?.().catch(() => {})
      await fanout.stop()
      await upkeep.stop()
      await dispatch.stop()
      await outcomes.flush()
      await http.close()
    },
  }
}

/**
 * Leasing at fan-out: deliveries this process can sign and has room for are inserted already leased to
 * it and handed to its actor pool after the commit, so they skip the claim (a round trip and a row
 * update each). The rest are inserted due at once, for any process's claim.
 */
export interface FanOutLease {
  loop: Pick<WorkLoop<q.DeliveryRow>, 'reserve' | 'adopt'>
  keyId: string
  leaseMs: number
}

/**
 * One batch of the fan-out; returns the number of outbox rows it dispatched, how many it could take
 * (`limit`), and whether some deliveries await a claim.
 *
 * With a lease, the batch takes no more outbox rows than the dispatcher has room to run (but at least
 * FANOUT_MIN): in a burst the rest wait in the outbox, where they cost nothing, instead of being inserted
 * as deliveries for a later claim (a row update and a round trip each, ~30 % of a burst's PostgreSQL
 * time). FANOUT_MIN keeps rows no endpoint of this process runs (other events, other keys) moving.
 */
export async function fanOut(
  ctx: Pick<AppContext, 'sql'>,
  batch: number,
  lease?: FanOutLease,
): Promise<{ rows: number; limit: number; claimable: number }> {
  const reservation = lease?.loop.reserve()
  const limit = reservation ? Math.min(batch, Math.max(FANOUT_MIN, reservation.room)) : batch
  const result = await ctx.sql.begin(async (tx) => {
    await preferIndexWalks(tx)
    const rows = await q.lockOutboxBatch(tx, limit)
    if (!rows.length) return { rows: 0, claimable: 0, leased: [] as q.DeliveryRow[] }
    const tenants = [...new Set(rows.map((r) => r.tenant_id))]
    // A row's candidates, worked out once per (tenant, brand) of the batch: a brand-scoped endpoint gets
    // only its brand's events; tenant-wide events (no brand) go to all of the tenant's endpoints.
    const byTenant = new Map<string, q.ActiveEndpoint[]>()
    for (const e of await q.selectActiveEndpoints(tx, tenants)) {
      const list = byTenant.get(e.tenant_id)
      if (list) list.push(e)
      else byTenant.set(e.tenant_id, [e])
    }
    const byScope = new Map<string, q.ActiveEndpoint[]>()
    const candidatesOf = (row: q.OutboxRow): q.ActiveEndpoint[] => {
      const key = `${row.tenant_id}/${row.brand_id ?? ''}`
      let list = byScope.get(key)
      if (!list) {
        list = (byTenant.get(row.tenant_id) ?? []).filter((e) => !e.brand_id || !row.brand_id || e.brand_id === row.brand_id)
        byScope.set(key, list)
      }
      return list
    }
    const createdAt = new Date()
    const deliveries: q.FanOutDelivery[] = []
    for (const row of rows) {
      let body: string | undefined
      for (const e of candidatesOf(row)) {
        if (!e.events.includes(row.event) && !e.events.includes(ALL_EVENTS)) continue
        body ??= deliveryBody(row.event, createdAt, { ...row.data, brand_id: row.data.brand_id ?? row.brand_id })
        const leased = reservation !== undefined && e.key_id === lease!.keyId && reservation.take(e.id)
        deliveries.push({
          id: randomUUID(),
          tenant_id: row.tenant_id,
          endpoint_id: e.id,
          key_id: e.key_id,
          outbox_id: row.id,
          event: row.event,
          body,
          lease_owner: leased ? reservation.token : null,
        })
      }
    }
    const inserted = deliveries.length ? await q.insertFanOut(tx, deliveries, createdAt, lease?.leaseMs ?? 0) : new Set<string>()
    await q.markDispatched(tx, rows.map((r) => r.id))
    const leased: q.DeliveryRow[] = []
    let claimable = 0
    for (const d of deliveries) {
      if (!inserted.has(d.id)) continue
      if (d.lease_owner === null) {
        claimable++
        continue
      }
      leased.push({
        ...d,
        redelivery_of: null,
        status: 'pending',
        attempt_count: 0,
        next_attempt_at: createdAt,
        attempts: [],
        created_at: createdAt,
        completed_at: null,
      })
    }
    return { rows: rows.length, claimable, leased }
  })
  if (result.leased.length) lease!.loop.adopt(result.leased, reservation!)
  return { rows: result.rows, limit, claimable: result.claimable }
}

/** Endpoints with their secrets opened, cached briefly per process. */
function endpointCache(ctx: AppContext) {
  const cache = new Map<string, { at: number; value: Promise<Endpoint | undefined> }>()
  return {
    get(id: string): Promise<Endpoint | undefined> {
      const hit = cache.get(id)
      if (hit && Date.now() - hit.at < ENDPOINT_CACHE_MS) return hit.value
      const value = (async () => {
        const [row] = await ctx.sql<q.EndpointRow[]>`select * from webhook_endpoints where id = ${id}`
        if (!row) return undefined
        const previousValid = row.previous_secret_sealed && row.previous_secret_until && row.previous_secret_until.getTime() > Date.now()
        return {
          id: row.id,
          url: row.url,
          active: row.active,
          secret: ctx.secretBox.open(row.secret_sealed),
          previousSecret: previousValid ? ctx.secretBox.open(row.previous_secret_sealed!) : null,
          failing: row.failing_since !== null,
        }
      })()
      value.catch(() => cache.delete(id))
      cache.set(id, { at: Date.now(), value })
      if (cache.size > 10_000) for (const [key, v] of cache) if (Date.now() - v.at > ENDPOINT_CACHE_MS) cache.delete(key)
      return value
    },
    forget(id: string) {
      cache.delete(id)
    },
  }
}

/**
 * Lookups shared while in flight and their answers reused: at most one lookup per host at a time, so an
 * endpoint whose name server hangs holds one of the thread pool's threads, not one per attempt (libuv
 * gives DNS at most half of its 4, shared with every other lookup of the process). A failure is kept
 * briefly too, so a burst of attempts to a name that does not resolve costs one lookup.
 */
export function cachingResolver(inner: Resolver): Resolver {
  const cache = new Map<string, { at: number; ttl: number; value: Promise<ResolvedAddress[]> }>()
  return (host) => {
    const hit = cache.get(host)
    if (hit && Date.now() - hit.at < hit.ttl) return hit.value
    if (cache.size > 10_000) cache.clear()
    const entry = { at: Date.now(), ttl: DNS_CACHE_MS, value: inner(host) }
    cache.set(host, entry)
    entry.value.catch(() => {
      entry.at = Date.now()
      entry.ttl = DNS_FAILURE_CACHE_MS
    })
    return entry.value
  }
}

/**
 * Attempt outcomes written in batches: under load one UPDATE records many attempts instead of one
 * round trip each. A caller's promise resolves once its outcome is committed, so the work loop's lease
 * rules hold unchanged.
 */
function outcomeBatcher(ctx: Pick<AppContext, 'sql'>) {
  return createBatcher<q.Outcome, void>({
    maxSize: 500,
    async run(batch) {
      if (batch.length === 1) await q.recordOutcome(ctx.sql, batch[0]!)
      else await q.recordOutcomes(ctx.sql, batch)
      return batch.map(() => undefined)
    },
  })
}

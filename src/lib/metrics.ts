// Prometheus metrics (prom-client), one registry per app, served by GET /metrics (src/system/metrics-route.ts).
//
// Engines report through this small API instead of creating prom-client objects of their own, so every
// queue looks the same on a dashboard and label values stay bounded:
//   metrics.registerQueue('webhook_deliveries', async () => ({ depth, oldestAgeSeconds }))  // read at scrape
//   metrics.queueAttempt('webhook_deliveries'); metrics.queueFailure('webhook_deliveries')
//   metrics.outcome('webhook', 'successful')     // or ('message', 'delivered', 'email')
//   metrics.registerLag('event_stream', async () => seconds)
// Label values are names from code (queue names, outcomes, route templates), never tenant, player or key
// ids: anything that does not look like a short name becomes "other", and each metric keeps at most
// MAX_LABEL_SETS distinct values per label.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

export interface QueueProbe {
  /** Items waiting (due or not yet due) in the queue. */
  depth: number
  /** Age of the oldest waiting item that is due, in seconds (0 when none). */
  oldestAgeSeconds: number
}

export interface Metrics {
  registry: Registry
  /** One finished HTTP request; `route` is the route template (`/players/:id`), never the concrete path. */
  observeRequest(route: string, method: string, status: number, seconds: number): void
  /** Per-request ingestion outcome counts. */
  ingestEvents(counts: { stored: number; deduped: number; rejected: number; ignored: number }): void
  /** One ingest group written (events and requests it merged). */
  ingestGroup(events: number, requests: number): void
  /** A queue whose depth and oldest item's age are read at each scrape. Registering a name twice replaces the probe. */
  registerQueue(name: string, probe: () => Promise<QueueProbe> | QueueProbe): void
  queueAttempt(name: string, n?: number): void
  queueFailure(name: string, n?: number): void
  /** A delivery outcome: kind `webhook` or `message`, outcome `delivered`, `failed`, `suppressed`, ...; channel for messages. */
  outcome(kind: string, outcome: string, channel?: string): void
  /** A consumer's lag behind its source in seconds (event stream), read at each scrape. */
  registerLag(name: string, probe: () => Promise<number> | number): void
  /** The Prometheus text exposition. */
  render(): Promise<string>
}

/** How long one scrape-time probe may take before it is left out of that scrape. */
const PROBE_TIMEOUT_MS = 2_000
const MAX_LABEL_SETS = 100
const NAME_RE = /^[a-z/][a-z0-9_:./-]{0,126}$/i

/** Keeps label values to short names and a bounded set per label. */
function boundedLabel(): (value: string | undefined) => string {
  const seen = new Set<string>()
  return (value) => {
    if (value === undefined || value === '') return 'none'
    if (seen.has(value)) return value
    if (!NAME_RE.test(value) || seen.size >= MAX_LABEL_SETS) return 'other'
    seen.add(value)
    return value
  }
}

const withTimeout = <T>(p: Promise<T> | T): Promise<T> =>
  Promise.race([
    Promise.resolve(p),
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error('probe timed out')), PROBE_TIMEOUT_MS).unref()),
  ])

export function createMetrics(opts: { defaultMetrics?: boolean; onProbeError?: (probe: string, err: unknown) => void } = {}): Metrics {
  const registry = new Registry()
  // Event-loop lag (nodejs_eventloop_lag_*), heap (nodejs_heap_size_*), GC, handles, CPU, RSS.
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 })
  const routeLabel = boundedLabel()
  const queueLabel = boundedLabel()
  const outcomeLabel = boundedLabel()
  const lagLabel = boundedLabel()

  const http = new RequestHistogram(registry)
  const ingested = new Counter({
    name: 'respin_ingest_events_total',
    help: 'Events received by POST /events, by outcome (stored, deduped, rejected, ignored)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  })
  const groupEvents = new Histogram({
    name: 'respin_ingest_group_events',
    help: 'Events per ingest group (requests merged into one durable write)',
    buckets: [1, 10, 50, 100, 250, 500, 1000, 2500, 5000],
    registers: [registry],
  })
  const groupRequests = new Histogram({
    name: 'respin_ingest_group_requests',
    help: 'Requests merged into one ingest group',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250],
    registers: [registry],
  })
  const attempts = new Counter({ name: 'respin_queue_attempts_total', help: 'Work items attempted, by queue', labelNames: ['queue'] as const, registers: [registry] })
  const failures = new Counter({ name: 'respin_queue_failures_total', help: 'Work item attempts that failed, by queue', labelNames: ['queue'] as const, registers: [registry] })
  const outcomes = new Counter({
    name: 'respin_delivery_outcomes_total',
    help: 'Webhook and message delivery outcomes',
    labelNames: ['kind', 'outcome', 'channel'] as const,
    registers: [registry],
  })
  const queues = new Map<string, () => Promise<QueueProbe> | QueueProbe>()
  const lags = new Map<string, () => Promise<number> | number>()
  const failedProbes = new Map<string, number>()
  // Every scrape-time probe runs once per scrape, in parallel; the gauges below read that one snapshot
  // (prom-client collects all metrics of a scrape concurrently).
  let snapshot: Promise<{ queues: Map<string, QueueProbe>; lags: Map<string, number> }> | undefined
  const probeAll = () => {
    snapshot ??= (async () => {
      const out = { queues: new Map<string, QueueProbe>(), lags: new Map<string, number>() }
      const run = async <T>(name: string, probe: () => Promise<T> | T, into: Map<string, T>) => {
        try {
          into.set(name, await withTimeout(probe()))
        } catch (err) {
          failedProbes.set(name, (failedProbes.get(name) ?? 0) + 1)
          opts.onProbeError?.(name, err)
        }
      }
      await Promise.all([...[...queues].map(([n, p]) => run(n, p, out.queues)), ...[...lags].map(([n, p]) => run(n, p, out.lags))])
      setImmediate(() => (snapshot = undefined))
      return out
    })()
    return snapshot
  }
  new Counter({
    name: 'respin_metrics_probe_failures_total',
    help: 'Scrape-time probes (queue depth, lag) that failed or timed out; their gauges are left out of that scrape',
    labelNames: ['probe'] as const,
    registers: [registry],
    async collect() {
      await probeAll()
      this.reset()
      for (const [name, n] of failedProbes) this.inc({ probe: name }, n)
    },
  })
  new Gauge({
    name: 'respin_queue_depth',
    help: 'Items waiting in each engine queue',
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      const { queues } = await probeAll()
      this.reset()
      for (const [name, p] of queues) this.set({ queue: name }, p.depth)
    },
  })
  new Gauge({
    name: 'respin_queue_oldest_age_seconds',
    help: "Age of each engine queue's oldest due item",
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      const { queues } = await probeAll()
      this.reset()
      for (const [name, p] of queues) this.set({ queue: name }, p.oldestAgeSeconds)
    },
  })
  new Gauge({
    name: 'respin_consumer_lag_seconds',
    help: 'How far each consumer (event stream) is behind its source',
    labelNames: ['consumer'] as const,
    registers: [registry],
    async collect() {
      const { lags: values } = await probeAll()
      this.reset()
      for (const [name, v] of values) this.set({ consumer: name }, v)
    },
  })

  return {
    registry,
    observeRequest(route, method, status, seconds) {
      http.observe(route, method, status, seconds, routeLabel)
    },
    ingestEvents(c) {
      if (c.stored) ingested.inc({ outcome: 'stored' }, c.stored)
      if (c.deduped) ingested.inc({ outcome: 'deduped' }, c.deduped)
      if (c.rejected) ingested.inc({ outcome: 'rejected' }, c.rejected)
      if (c.ignored) ingested.inc({ outcome: 'ignored' }, c.ignored)
    },
    ingestGroup(events, requests) {
      groupEvents.observe(events)
      groupRequests.observe(requests)
    },
    registerQueue(name, probe) {
      queues.set(queueLabel(name), probe)
    },
    queueAttempt(name, n = 1) {
      attempts.inc({ queue: queueLabel(name) }, n)
    },
    queueFailure(name, n = 1) {
      failures.inc({ queue: queueLabel(name) }, n)
    },
    outcome(kind, outcome, channel) {
      outcomes.inc({ kind: outcomeLabel(kind), outcome: outcomeLabel(outcome), channel: outcomeLabel(channel) })
    },
    registerLag(name, probe) {
      lags.set(lagLabel(name), probe)
    },
    render: () => registry.metrics(),
  }
}

const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

interface Series {
  labels: { route: string; method: string; status: string }
  /** Observations per bucket (not cumulative), the last one for +Inf. */
  counts: Float64Array
  sum: number
  count: number
}

/**
 * The request histogram, on the path of every request. prom-client's labelled Histogram.observe hashes
 * its label object on every call (~1.8 µs a sample, bench/metrics.bench.ts); this one finds the series by
 * one string key and counts into a typed array, and hands prom-client's registry the same histogram
 * exposition at scrape time.
 */
class RequestHistogram {
  readonly name = 'respin_http_request_duration_seconds'
  readonly help = 'HTTP requests by route template, method and status'
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  #series = new Map<string, Series>()
  constructor(registry: Registry) {
    registry.registerMetric(this as never)
  }

  observe(route: string, method: string, status: number, seconds: number, label: (v: string) => string): void {
    const key = `${route} ${method} ${status}`
    let s = this.#series.get(key)
    if (!s) {
      s = { labels: { route: label(route), method: label(method), status: String(status) }, counts: new Float64Array(HTTP_BUCKETS.length + 1), sum: 0, count: 0 }
      // Label values outside the bounds fold into "other": merge with that series instead of a new one.
      const folded = `${s.labels.route} ${s.labels.method} ${status}`
      const existing = folded === key ? undefined : this.#series.get(folded)
      if (existing) s = existing
      else if (folded !== key) this.#series.set(folded, s)
      if (this.#series.size < 10_000) this.#series.set(key, s)
    }
    let i = 0
    while (i < HTTP_BUCKETS.length && seconds > (HTTP_BUCKETS[i] as number)) i++
    ;(s.counts as Float64Array)[i] = ((s.counts as Float64Array)[i] as number) + 1
    s.sum += seconds
    s.count++
  }

  async get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = []
    for (const s of new Set(this.#series.values())) {
      let acc = 0
      HTTP_BUCKETS.forEach((le, i) => {
        acc += s.counts[i] as number
        values.push({ labels: { ...s.labels, le }, value: acc, metricName: `${this.name}_bucket` })
      })
      values.push({ labels: { ...s.labels, le: '+Inf' }, value: s.count, metricName: `${this.name}_bucket` })
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` })
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  reset(): void {
    this.#series.clear()
  }
}

/**
 * A queue probe over a PostgreSQL table, for engines whose queue is a table: `depth` counts rows matching
 * `pending` (an SQL condition written in code, never user input), `oldestAgeSeconds` is the age of the
 * oldest such row by `dueColumn`.
 */
export function tableQueueProbe(
  sql: { unsafe(query: string): Promise<readonly Record<string, unknown>[]> },
  table: string,
  pending: string,
  dueColumn: string,
): () => Promise<QueueProbe> {
  const query =
    `select count(*)::float8 as depth, coalesce(extract(epoch from now() - min(${dueColumn}) filter (where ${dueColumn} <= now())), 0)::float8 as age ` +
    `from ${table} where ${pending}`
  return async () => {
    const [row] = await sql.unsafe(query)
    return { depth: Number(row?.depth ?? 0), oldestAgeSeconds: Math.max(0, Number(row?.age ?? 0)) }
  }
}

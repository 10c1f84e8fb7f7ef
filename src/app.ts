// Composition root: opens the stores, migrates, builds the AppContext and starts HTTP and background work.
// main.ts, the tests and the bench all start the service through startApp().
import { createAuthService } from './auth/service.ts'
import type { Config } from './config.ts'
import type { AppContext } from './context.ts'
import { openBus } from './db/bus.ts'
import { openClickHouse } from './db/clickhouse.ts'
import { startEmbeddedVacuum } from './db/embedded-vacuum.ts'
import { migrateClickHouseAtStart, migratePostgres } from './db/migrate.ts'
import { openPostgres } from './db/postgres.ts'
import { closeRedis, openRedis } from './db/redis.ts'
import { startEventStream } from './engine/event-stream.ts'
import { startIngestService } from './events/service.ts'
import { startGamificationEngine } from './gamification/engine.ts'
import type { RouteDef } from './http/route.ts'
import { allRoutes } from './http/routes.ts'
import { createServer } from './http/server.ts'
import { createLogger, type Logger } from './lib/log.ts'
import { createMetrics } from './lib/metrics.ts'
import { startErasureWorker } from './players/data-rights.ts'
import { startEventRetention } from './events/retention.ts'
import { openSecretBox } from './lib/secret-box.ts'
import { startSegmentRecompute } from './segments/recompute.ts'
import { startWebhookService } from './webhooks/dispatcher.ts'
import { startCampaignEngine } from './campaigns/engine.ts'
import { startDelivery } from './notifications/dispatcher.ts'

export interface App {
  ctx: AppContext
  port: number
  /** Stop accepting, let in-flight requests finish, stop background work, close the stores. */
  close(): Promise<void>
}

/** Long-running work started with the app (ingestion actors, schedulers, dispatchers). */
export interface BackgroundService {
  stop(): Promise<void>
}
type StartService = (ctx: AppContext) => Promise<BackgroundService> | BackgroundService

/**
 * An engine's view of the context: the same object (what an engine sets on it, such as ctx.delivery, is
 * set on the one the routes read), but `sql` is the engines' pool (src/db/postgres.ts, engineSql).
 */
const onEnginePool =
  (start: StartService): StartService =>
  (ctx) =>
    start(new Proxy(ctx, { get: (target, key) => (key === 'sql' ? target.pg.engineSql : Reflect.get(target, key)) }))

/** Features register their background services here. Ingestion answers requests: the API's pool. */
const backgroundServices: StartService[] = [
  // Before ingestion: the pipeline writes the stream's rows, engines register their consumers on it.
  onEnginePool(startEventStream),
  startIngestService,
  onEnginePool((ctx) => startSegmentRecompute(ctx, { intervalMs: ctx.config.segmentRecomputeIntervalMs })),
  onEnginePool(startErasureWorker),
  onEnginePool(startEventRetention),
  onEnginePool(startWebhookService),
  onEnginePool(startDelivery),
  onEnginePool(startGamificationEngine),
  // After the event stream: it registers the campaigns' consumer there.
  onEnginePool((ctx) => (ctx.campaigns = startCampaignEngine(ctx, { pollMs: ctx.config.campaignEnginePollMs }))),
  // Embedded PostgreSQL has no autovacuum: what it would do for the tables above.
  onEnginePool(startEmbeddedVacuum),
]

export async function startApp(
  config: Config,
  opts: { log?: Logger; extraRoutes?: RouteDef[]; clock?: () => Date } = {},
): Promise<App> {
  const log = opts.log ?? createLogger(config.logLevel, { redact: config.logRedact })
  const pg = await openPostgres({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }, log)
  const ch = await openClickHouse({ clickhouseUrl: config.clickhouseUrl, dataDir: config.dataDir }, log)
  const redis = openRedis(config.redisUrl, log)
  let chMigrations: { stop(): Promise<void> } | undefined
  const closeStores = async () => {
    await chMigrations?.stop()
    await closeRedis(redis)
    await ch.close()
    await pg.close()
  }
  try {
    // Both settle before either failure is thrown: the catch below closes the stores, and closing ClickHouse
    // under its running migrations would log their failure as an error beside the real cause.
    const [pgMigrated, chMigrated] = await Promise.allSettled([migratePostgres(pg.sql), migrateClickHouseAtStart(ch, log)])
    if (chMigrated.status === 'fulfilled') chMigrations = chMigrated.value
    if (pgMigrated.status === 'rejected') throw pgMigrated.reason
    if (chMigrated.status === 'rejected') throw chMigrated.reason
    const pgApplied = pgMigrated.value
    const chStart = chMigrated.value
    const chApplied = chStart.applied
    if (pgApplied.length || chApplied.length) log.info({ postgres: pgApplied, clickhouse: chApplied }, 'migrations applied')
    const bus = await openBus(pg, log, config.databaseUrl)
    const clock = opts.clock ?? (() => new Date())
    const ctx: AppContext = { config, log, pg, sql: pg.sql, ch, redis, bus, clock, auth: createAuthService({ sql: pg.sql, bus, clock }), secretBox: openSecretBox({ secretKey: config.secretKey, dataDir: config.dataDir }) }
    ctx.metrics = createMetrics({ onProbeError: (probe, err) => log.warn({ err, probe }, 'metrics: probe failed') })
    const services = [] as BackgroundService[]
    for (const start of backgroundServices) services.push(await start(ctx))
    const server = createServer(ctx, [...allRoutes(config.version), ...(opts.extraRoutes ?? [])])
    const port = await server.listen(config.port, config.host)
    log.info({ port, host: config.host, postgres: pg.kind, clickhouse: ch.kind, redis: redis ? 'server' : 'in-process' }, 'respin listening')
    let closing: Promise<void> | undefined
    return {
      ctx,
      port,
      close() {
        closing ??= (async () => {
          server.close()
          await server.drain(10_000)
          for (const service of services.reverse()) await service.stop()
          await bus.close()
          await closeStores()
        })()
        return closing
      },
    }
  } catch (err) {
    await closeStores().catch(() => {})
    throw err
  }
}

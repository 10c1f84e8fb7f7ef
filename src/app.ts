// Composition root: opens the stores, migrates, builds the AppContext and starts HTTP and background work.
// main.ts, the tests and the bench all start the service through startApp().
import { createAuthService } from './auth/service.ts'
import type { Config } from './config.ts'
import type { AppContext } from './context.ts'
import { openBus } from './db/bus.ts'
import { openClickHouse } from './db/clickhouse.ts'
import { migrateClickHouse, migratePostgres } from './db/migrate.ts'
import { openPostgres } from './db/postgres.ts'
import { closeRedis, openRedis } from './db/redis.ts'
import { startIngestService } from './events/service.ts'
import type { RouteDef } from './http/route.ts'
import { allRoutes } from './http/routes.ts'
import { createServer } from './http/server.ts'
import { createLogger, type Logger } from './lib/log.ts'
import { startSegmentRecompute } from './segments/recompute.ts'

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

/** Features register their background services here. */
const backgroundServices: StartService[] = [
  startIngestService,
  (ctx) => startSegmentRecompute(ctx, { intervalMs: ctx.config.segmentRecomputeIntervalMs }),
]

export async function startApp(
  config: Config,
  opts: { log?: Logger; extraRoutes?: RouteDef[]; clock?: () => Date } = {},
): Promise<App> {
  const log = opts.log ?? createLogger(config.logLevel)
  const pg = await openPostgres({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }, log)
  const ch = await openClickHouse({ clickhouseUrl: config.clickhouseUrl, dataDir: config.dataDir }, log)
  const redis = openRedis(config.redisUrl, log)
  const closeStores = async () => {
    await closeRedis(redis)
    await ch.close()
    await pg.close()
  }
  try {
    const [pgApplied, chApplied] = await Promise.all([migratePostgres(pg.sql), migrateClickHouse(ch)])
    if (pgApplied.length || chApplied.length) log.info({ postgres: pgApplied, clickhouse: chApplied }, 'migrations applied')
    const bus = await openBus(pg, log, config.databaseUrl)
    const clock = opts.clock ?? (() => new Date())
    const ctx: AppContext = { config, log, pg, sql: pg.sql, ch, redis, bus, clock, auth: createAuthService({ sql: pg.sql, bus, clock }) }
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

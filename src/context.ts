import type { AuthService } from './auth/service.ts'
import type { Config } from './config.ts'
import type { Bus } from './db/bus.ts'
import type { ClickHouse } from './db/clickhouse.ts'
import type { Postgres, Sql } from './db/postgres.ts'
import type { Redis } from './db/redis.ts'
import type { IngestEngine } from './events/service.ts'
import type { Logger } from './lib/log.ts'

/** Everything a feature needs, built once in app.ts and passed explicitly. No module singletons. */
export interface AppContext {
  config: Config
  log: Logger
  pg: Postgres
  sql: Sql
  ch: ClickHouse
  /** Present only when REDIS_URL is set; features fall back to in-process state otherwise. */
  redis: Redis | undefined
  bus: Bus
  auth: AuthService
  /** Injectable time, for expiry and scheduling tests. */
  clock: () => Date
  /** Set by the ingestion service (src/events/service.ts) while it runs. */
  ingest?: IngestEngine
}

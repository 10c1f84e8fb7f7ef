import type { AuthService } from './auth/service.ts'
import type { Config } from './config.ts'
import type { Bus } from './db/bus.ts'
import type { ClickHouse } from './db/clickhouse.ts'
import type { Postgres, Sql } from './db/postgres.ts'
import type { EventStream } from './engine/event-stream.ts'
import type { GamificationEngine } from './gamification/engine.ts'
import type { Redis } from './db/redis.ts'
import type { CampaignEngine } from './campaigns/engine.ts'
import type { IngestEngine } from './events/service.ts'
import type { Logger } from './lib/log.ts'
import type { Metrics } from './lib/metrics.ts'
import type { SecretBox } from './lib/secret-box.ts'

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
  /** Encrypts tenant secrets at rest (src/lib/secret-box.ts); its key is never in the database. */
  secretBox: SecretBox
  /** Set by the webhook service (src/webhooks/dispatcher.ts) while it runs: wake it after queueing work. */
  webhooks?: { wake(): void; endpointChanged(id: string): void }
  /** Set by the ingestion service (src/events/service.ts) while it runs. */
  ingest?: IngestEngine
  /** Set by the campaign engine (src/campaigns/engine.ts) while it runs. */
  campaigns?: CampaignEngine
  /**
   * Set by the delivery service (src/notifications/dispatcher.ts) while it runs: wakes its poller, and
   * (on a PostgreSQL server) delivers in-app campaign sends in their enqueueing transaction.
   */
  delivery?: { wake(): void; inAppNow?: import('./notifications/dispatcher.ts').InAppNow }
  /** The inbox WebSocket hub of the delivery service; src/http/server.ts attaches its route. */
  inbox?: import('./notifications/inbox-socket.ts').InboxHub
  /** Set by startEventStream (src/engine/event-stream.ts) while it runs: engines register consumers on it. */
  stream?: EventStream
  /** Set by startGamificationEngine (src/gamification/engine.ts) while it runs. */
  gamification?: GamificationEngine
  /** Prometheus metrics (src/lib/metrics.ts); engines register their queues here. */
  metrics?: Metrics
}

// The only module that reads process.env. Parsed once at boot; a bad value stops the process.
import { readFileSync } from 'node:fs'
import Type, { type Static } from 'typebox'
import { Compile } from 'typebox/compile'

/** package.json's version, also when the process is started without npm (the image runs node directly). */
const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version

const Bool = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')])
/** Milliseconds: timers take at most 2^31 − 1 (node runs a longer delay after 1 ms); checked in loadConfig. */
const Ms = Type.String({ pattern: '^[1-9][0-9]{0,9}$' })
const MAX_TIMER_MS = 2 ** 31 - 1

const Env = Type.Object({
  PORT: Type.Optional(Type.String({ pattern: '^[0-9]{1,5}$' })),
  HOST: Type.Optional(Type.String({ minLength: 1 })),
  ADMIN_KEY: Type.Optional(Type.String({ minLength: 16 })),
  DATA_DIR: Type.Optional(Type.String({ minLength: 1 })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  CLICKHOUSE_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  RATE_LIMIT_INGEST_PER_MIN: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
  WEBHOOK_TIMEOUT_MS: Type.Optional(Ms),
  WEBHOOK_RETRY_DELAYS: Type.Optional(Type.String({ pattern: '^[0-9]+(,[0-9]+){3}$' })),
  WEBHOOK_ALLOW_PRIVATE: Type.Optional(Bool),
  LOG_LEVEL: Type.Optional(
    Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  ),
  BODY_LIMIT_BYTES: Type.Optional(Type.String({ pattern: '^[1-9][0-9]*$' })),
  SEGMENT_RECOMPUTE_INTERVAL_MS: Type.Optional(Ms),
  INGEST_ACK_AFTER: Type.Optional(Type.Union([Type.Literal('clickhouse'), Type.Literal('postgres')])),
  INGEST_FLUSH_INTERVAL_MS: Type.Optional(Ms),
  CAMPAIGN_ENGINE_POLL_MS: Type.Optional(Ms),
  METRICS_TOKEN: Type.Optional(Type.String({ minLength: 16 })),
  LOG_REDACT: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.*"\\[\\]-]+(,[A-Za-z0-9_.*"\\[\\]-]+)*$' })),
  EVENT_RETENTION_DAYS: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,5}$' })),
  SECRET_KEY: Type.Optional(Type.String({ minLength: 32 })),
  WEBHOOK_RETENTION_DAYS: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,5}$' })),
  PUBLIC_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://[^/]+(/.*)?$' })),
  DELIVERY_RETRY_DELAYS: Type.Optional(Type.String({ pattern: '^[0-9]+(,[0-9]+){3}$' })),
  DELIVERY_CHECK_MAX_AGE_MS: Type.Optional(Ms),
  TRACKING_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  HTTP_ENGINE: Type.Optional(Type.Union([Type.Literal('node'), Type.Literal('uws')])),
  HTTP_HEADERS_TIMEOUT_MS: Type.Optional(Ms),
  HTTP_BODY_TIMEOUT_MS: Type.Optional(Ms),
  GAMIFICATION_TICK_MS: Type.Optional(Ms),
  EVENT_STREAM_LOOPS: Type.Optional(Type.String({ pattern: '^([1-9]|[1-5][0-9]|6[0-4])$' })),
  RESPONSE_SCHEMA_CHECK: Type.Optional(Type.Union([Type.Literal('off'), Type.Literal('log'), Type.Literal('error')])),
})

export interface Config {
  port: number
  host: string
  adminKey: string | undefined
  dataDir: string
  databaseUrl: string | undefined
  clickhouseUrl: string | undefined
  redisUrl: string | undefined
  rateLimitIngestPerMin: number
  webhookTimeoutMs: number
  webhookRetryDelaysSec: number[]
  webhookAllowPrivate: boolean
  logLevel: string
  bodyLimitBytes: number
  segmentRecomputeIntervalMs: number
  /** When POST /events answers: once the events are in ClickHouse, or once they are spooled in PostgreSQL. */
  ingestAckAfter: 'clickhouse' | 'postgres'
  /** How often the spool flusher runs (with ingestAckAfter = clickhouse it only moves what was left behind). */
  ingestFlushIntervalMs: number
  /** Where players' browsers and mail clients reach us (tracking, unsubscribe, inbox links); no trailing slash. */
  publicBaseUrl: string
  /** Seconds before message delivery attempts 2..5. */
  deliveryRetryDelaysSec: number[]
  /** An email whose delivery rules were checked longer ago than this when its SMTP connection frees goes back to be checked again. */
  deliveryCheckMaxAgeMs: number
  /** Key of tracking and unsubscribe tokens; unset: generated once and kept in the database (app_secrets). */
  trackingSecret: string | undefined
  /** node: node:http, answers every request (default); uws: uWebSockets.js, faster, only behind a proxy (docs/http.md). */
  httpEngine: 'node' | 'uws'
  /** A request head must arrive completely within this time (slowloris); 408 and close otherwise. */
  httpHeadersTimeoutMs: number
  /** A request body may pause this long between chunks; 408 and close after. */
  httpBodyTimeoutMs: number
  /** How often the gamification engine expires missions and ends tournaments that are due. */
  gamificationTickMs: number
  /** Claim loops per event-stream consumer and process; unset: 4 on a PostgreSQL server, 1 embedded. */
  eventStreamLoops: number | undefined
  version: string
  /** How often the campaign engine looks for due work (start_at, ticks, runs, journey steps) it was not woken for. */
  campaignEnginePollMs: number
  /** Bearer token of GET /metrics; unset: no metrics route. */
  metricsToken: string | undefined
  /** Extra log paths to redact (pino paths), on top of the built-in key and PII list (src/lib/log.ts). */
  logRedact: string[]
  /** Events older than this many days are dropped by whole monthly partitions; unset: kept forever. */
  eventRetentionDays: number | undefined
  /** Key material of the secret box (src/lib/secret-box.ts); unset = a key file under dataDir. */
  secretKey: string | undefined
  /** Completed webhook deliveries and dispatched outbox rows are pruned after this many days. */
  webhookRetentionDays: number
  /**
   * Whether the router checks every 2xx JSON body against the schema its route documents (src/http/router.ts):
   * off (default; costs nothing), log (a warning per mismatch), error (a 500 instead: the test suite's setting).
   */
  responseSchemaCheck: 'off' | 'log' | 'error'
}

/** Every environment variable the service reads (docker-compose.yml may set only these: a test checks it). */
export const ENV_VARS: readonly string[] = Object.keys(Env.properties)

/** Names of config fields that must never be logged in clear. */
export const SECRETS = ['adminKey', 'databaseUrl', 'clickhouseUrl', 'redisUrl', 'secretKey', 'trackingSecret', 'metricsToken'] as const

const checkEnv = Compile(Env)
const MS_VARS = ['WEBHOOK_TIMEOUT_MS', 'SEGMENT_RECOMPUTE_INTERVAL_MS', 'INGEST_FLUSH_INTERVAL_MS', 'CAMPAIGN_ENGINE_POLL_MS', 'DELIVERY_CHECK_MAX_AGE_MS', 'HTTP_HEADERS_TIMEOUT_MS', 'HTTP_BODY_TIMEOUT_MS', 'GAMIFICATION_TICK_MS'] as const

export class ConfigError extends Error {}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings mean "unset", as in most shells' `VAR= cmd`.
  const picked: Record<string, string> = {}
  for (const key of Object.keys(Env.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') picked[key] = value
  }
  if (!checkEnv.Check(picked)) {
    const problems = checkEnv.Errors(picked).map((e) => `${e.instancePath.slice(1) || 'env'}: ${e.message}`)
    throw new ConfigError(`invalid configuration: ${[...new Set(problems)].join('; ')}`)
  }
  const e = picked as Static<typeof Env>
  const port = Number(e.PORT ?? 8080)
  if (port > 65535) throw new ConfigError('invalid configuration: PORT must be 0..65535')
  for (const name of MS_VARS) {
    if (e[name] !== undefined && Number(e[name]) > MAX_TIMER_MS) throw new ConfigError(`invalid configuration: ${name} must be at most ${MAX_TIMER_MS} (ms)`)
  }
  // A prefix is not a URL: a space or a bad port would go out in every tracking link, or fail at start.
  for (const name of ['DATABASE_URL', 'CLICKHOUSE_URL', 'REDIS_URL', 'PUBLIC_BASE_URL'] as const) {
    let value = e[name]
    // postgres.js takes several hosts (`h1:5432,h2:5432`, tried in turn) and parses the URL with the first.
    if (name === 'DATABASE_URL' && value) value = value.replace(/^([a-z]+:\/\/(?:[^@/?#]*@)?)([^/?#]*)/, (_, pre: string, hosts: string) => pre + hosts.split(',')[0])
    if (value !== undefined && !URL.canParse(value)) throw new ConfigError(`invalid configuration: ${name} is not a URL`)
  }
  return {
    port,
    host: e.HOST ?? '0.0.0.0',
    adminKey: e.ADMIN_KEY,
    dataDir: e.DATA_DIR ?? './data',
    databaseUrl: e.DATABASE_URL,
    clickhouseUrl: e.CLICKHOUSE_URL,
    redisUrl: e.REDIS_URL,
    rateLimitIngestPerMin: Number(e.RATE_LIMIT_INGEST_PER_MIN ?? 6000),
    webhookTimeoutMs: Number(e.WEBHOOK_TIMEOUT_MS ?? 10_000),
    webhookRetryDelaysSec: (e.WEBHOOK_RETRY_DELAYS ?? '60,300,900,3600').split(',').map(Number),
    webhookAllowPrivate: e.WEBHOOK_ALLOW_PRIVATE === 'true' || e.WEBHOOK_ALLOW_PRIVATE === '1',
    logLevel: e.LOG_LEVEL ?? 'info',
    bodyLimitBytes: Number(e.BODY_LIMIT_BYTES ?? 1024 * 1024),
    segmentRecomputeIntervalMs: Number(e.SEGMENT_RECOMPUTE_INTERVAL_MS ?? 60_000),
    ingestAckAfter: e.INGEST_ACK_AFTER ?? 'postgres',
    ingestFlushIntervalMs: Number(e.INGEST_FLUSH_INTERVAL_MS ?? 1000),
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${port}`).replace(/\/+$/, ''),
    deliveryRetryDelaysSec: (e.DELIVERY_RETRY_DELAYS ?? '60,300,900,3600').split(',').map(Number),
    deliveryCheckMaxAgeMs: Number(e.DELIVERY_CHECK_MAX_AGE_MS ?? 10_000),
    trackingSecret: e.TRACKING_SECRET,
    httpEngine: e.HTTP_ENGINE ?? 'node',
    httpHeadersTimeoutMs: Number(e.HTTP_HEADERS_TIMEOUT_MS ?? 10_000),
    httpBodyTimeoutMs: Number(e.HTTP_BODY_TIMEOUT_MS ?? 10_000),
    gamificationTickMs: Number(e.GAMIFICATION_TICK_MS ?? 1000),
    eventStreamLoops: e.EVENT_STREAM_LOOPS ? Number(e.EVENT_STREAM_LOOPS) : undefined,
    version: PACKAGE_VERSION,
    campaignEnginePollMs: Number(e.CAMPAIGN_ENGINE_POLL_MS ?? 1000),
    metricsToken: e.METRICS_TOKEN,
    logRedact: e.LOG_REDACT ? e.LOG_REDACT.split(',') : [],
    eventRetentionDays: e.EVENT_RETENTION_DAYS ? Number(e.EVENT_RETENTION_DAYS) : undefined,
    secretKey: e.SECRET_KEY,
    webhookRetentionDays: Number(e.WEBHOOK_RETENTION_DAYS ?? 30),
    responseSchemaCheck: e.RESPONSE_SCHEMA_CHECK ?? 'off',
  }
}

/** The config with secrets replaced, for the startup log line. */
export function redactConfig(config: Config): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...config }
  for (const key of SECRETS) if (copy[key] !== undefined) copy[key] = '[redacted]'
  return copy
}

// RATE_LIMIT_INGEST_PER_MIN: POST /events requests per tenant per fixed minute window. Shared by every
// process through Redis (one EVALSHA per request); in-process without Redis. When Redis is configured but
// down, requests go through and the outage is logged: the limiter never fails or delays a request.
import type { Redis } from '../db/redis.ts'
import { AppError } from '../errors.ts'
import type { Logger } from '../lib/log.ts'

export interface RateLimiter {
  /** Counts one request; throws 429 RATE_LIMITED (with Retry-After) when the tenant is over budget. */
  hit(tenantId: string): Promise<void>
}

const WINDOW_MS = 60_000
const HIT_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`

type RedisWithHit = Redis & { rspRateHit(key: string, windowMs: number): Promise<number> }

const limited = (retryAfterSec: number, limit: number) =>
  new AppError('RATE_LIMITED', `ingestion rate limit of ${limit} requests per minute exceeded`, { limit, window_seconds: 60 }, {
    'retry-after': String(Math.max(1, retryAfterSec)),
  })

export function createRateLimiter(deps: { limitPerMin: number; redis: Redis | undefined; log: Logger; now?: () => number }): RateLimiter {
  const { limitPerMin: limit, log } = deps
  const now = deps.now ?? Date.now
  if (limit <= 0) return { hit: async () => {} }

  const local = new Map<string, { window: number; count: number }>()
  const hitLocal = (tenantId: string) => {
    const t = now()
    const window = Math.floor(t / WINDOW_MS)
    let e = local.get(tenantId)
    if (!e || e.window !== window) {
      if (local.size > 100_000) local.clear()
      e = { window, count: 0 }
      local.set(tenantId, e)
    }
    if (++e.count > limit) throw limited(Math.ceil(((window + 1) * WINDOW_MS - t) / 1000), limit)
  }
  if (!deps.redis) return { hit: async (tenantId) => hitLocal(tenantId) }

  const redis = deps.redis as RedisWithHit
  redis.defineCommand('rspRateHit', { numberOfKeys: 1, lua: HIT_LUA })
  let downSince = 0
  return {
    async hit(tenantId) {
      const t = now()
      const window = Math.floor(t / WINDOW_MS)
      let count: number
      try {
        count = await redis.rspRateHit(`rsp:rl:${tenantId}:${window}`, WINDOW_MS + 1000)
      } catch (err) {
        // Fail open, as the spec asks; log once per outage.
        if (!downSince) log.warn({ err }, 'rate limiter: redis unavailable, letting requests through')
        downSince ||= Date.now()
        return
      }
      if (downSince) {
        log.info({ downMs: Date.now() - downSince }, 'rate limiter: redis is back')
        downSince = 0
      }
      if (count > limit) throw limited(Math.ceil(((window + 1) * WINDOW_MS - t) / 1000), limit)
    },
  }
}

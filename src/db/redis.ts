// Redis when REDIS_URL is set. Commands fail fast instead of queueing while Redis is away, so callers
// (dedupe, rate limiter, health) can degrade the documented way instead of hanging a request.
import { Redis } from 'ioredis'
import type { Logger } from '../lib/log.ts'
import { withTimeout } from './postgres.ts'

export type { Redis }

export function openRedis(redisUrl: string | undefined, log: Logger): Redis | undefined {
  if (!redisUrl) return undefined
  const redis = new Redis(redisUrl, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  })
  let lastError = ''
  redis.on('error', (err: Error) => {
    // ioredis repeats the same error on every reconnect attempt: log each distinct one once.
    if (err.message !== lastError) log.warn({ err }, 'redis error')
    lastError = err.message
  })
  redis.on('ready', () => {
    if (lastError) log.info('redis reconnected')
    lastError = ''
  })
  return redis
}

export async function pingRedis(redis: Redis, timeoutMs: number): Promise<void> {
  await withTimeout(redis.ping(), timeoutMs, 'redis')
}

export async function closeRedis(redis: Redis | undefined): Promise<void> {
  if (!redis) return
  try {
    await withTimeout(redis.quit(), 1000, 'redis quit')
  } catch {
    redis.disconnect()
  }
}

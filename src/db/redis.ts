// Redis when REDIS_URL is set. Commands fail fast instead of queueing while Redis is away, so callers
// (dedupe, rate limiter, health) can degrade the documented way instead of hanging a request.
import { Redis } from 'ioredis'
import type { Logger } from '../lib/log.ts'
import { withTimeout } from './postgres.ts'

export type { Redis }

const COMMAND_TIMEOUT_MS = 2000

/** Each client's last connection error ('' while connected), for health to say why it fails. */
const lastErrors = new WeakMap<Redis, () => string>()

export function openRedis(redisUrl: string | undefined, log: Logger): Redis | undefined {
  if (!redisUrl) return undefined
  const redis = new Redis(redisUrl, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  })
  let lastError = ''
  lastErrors.set(redis, () => lastError)
  redis.on('error', (err: Error) => {
    // ioredis repeats the same error on every reconnect attempt: log each distinct one once.
    if (err.message !== lastError) log.warn({ err }, 'redis error')
    lastError = err.message
  })
  // When the current connection was made, and whether it was already dropped for a timeout.
  let connectedAt = 0
  let dropped = false
  redis.on('connect', () => {
    connectedAt = Date.now()
    dropped = false
  })
  redis.on('ready', () => {
    if (lastError) log.info('redis reconnected')
    lastError = ''
  })
  // A Redis that keeps the connection but stops answering would cost every command its full
  // commandTimeout, one after another: 2 s on each ingest request's rate-limit check and again on its
  // dedupe claim, for as long as it lasts. After the first timeout the connection is dropped and made
  // again; until a new one passes ioredis's ready check (which itself times out against a silent server),
  // commands fail at once and their callers take their documented fallbacks.
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    const sent = send(...args) as Promise<unknown>
    sent.catch((err: unknown) => {
      if ((err as Error)?.message !== 'Command timed out' || redis.status !== 'ready' || dropped) return
      // A command of this connection times out no sooner than COMMAND_TIMEOUT_MS after it was made: an
      // earlier one was sent on the connection before (ioredis re-sends it once) and says nothing of this one.
      if (Date.now() - connectedAt < COMMAND_TIMEOUT_MS) return
      dropped = true
      lastError = 'Command timed out'
      log.warn('redis: a command timed out; reconnecting (commands fail at once until it answers again)')
      redis.disconnect(true)
    })
    return sent
  }) as Redis['sendCommand']
  return redis
}

/**
 * A PING within timeoutMs. While the client is not connected, ioredis refuses the command with its own
 * wording ("Stream isn't writeable and enableOfflineQueue options is false"), which tells an operator
 * nothing: the error is then why it is not connected (`connect ECONNREFUSED 127.0.0.1:6390`).
 */
export async function pingRedis(redis: Redis, timeoutMs: number): Promise<void> {
  try {
    await withTimeout(redis.ping(), timeoutMs, 'redis')
  } catch (err) {
    const cause = lastErrors.get(redis)?.()
    if (redis.status !== 'ready' && cause) throw new Error(`not connected (${redis.status}): ${cause}`)
    throw err
  }
}

export async function closeRedis(redis: Redis | undefined): Promise<void> {
  if (!redis) return
  try {
    await withTimeout(redis.quit(), 1000, 'redis quit')
  } catch {
    redis.disconnect()
  }
}

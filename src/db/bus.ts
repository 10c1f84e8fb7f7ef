// Cache invalidation across every process serving the API. With a PostgreSQL server it rides on
// LISTEN/NOTIFY; embedded PGlite is single-process, so local delivery is all there is.
import { randomUUID } from 'node:crypto'
import type { Logger } from '../lib/log.ts'
import type { Postgres } from './postgres.ts'

export type BusTopic = 'api_key' | 'brand' | 'event_mapping'
type Handler = (payload: string) => void

export interface Bus {
  /** Delivers to local subscribers at once, and to other processes before resolving (best effort, ≤1 s). */
  publish(topic: BusTopic, payload: string): Promise<void>
  subscribe(topic: BusTopic, handler: Handler): void
  close(): Promise<void>
}

const CHANNEL = 'respin_invalidate'

export async function openBus(pg: Postgres, log: Logger): Promise<Bus> {
  const handlers = new Map<string, Handler[]>()
  const deliver = (topic: string, payload: string) => {
    for (const handler of handlers.get(topic) ?? []) handler(payload)
  }
  const subscribe = (topic: BusTopic, handler: Handler) => {
    handlers.set(topic, [...(handlers.get(topic) ?? []), handler])
  }
  if (pg.kind === 'pglite') {
    return { publish: async (topic, payload) => deliver(topic, payload), subscribe, close: async () => {} }
  }

  // Our own notification coming back tells us PostgreSQL has handed it to every listener.
  const echoes = new Map<string, () => void>()
  const listener = await pg.sql.listen(CHANNEL, (message) => {
    const [nonce, topic, payload] = JSON.parse(message) as [string, string, string]
    const echo = echoes.get(nonce)
    if (echo) return echo()
    deliver(topic, payload)
  })
  return {
    async publish(topic, payload) {
      deliver(topic, payload)
      const nonce = randomUUID()
      const echoed = new Promise<void>((resolve) => {
        echoes.set(nonce, resolve)
        setTimeout(resolve, 1000).unref()
      })
      try {
        await pg.sql`select pg_notify(${CHANNEL}, ${JSON.stringify([nonce, topic, payload])})`
        await echoed
      } catch (err) {
        log.error({ err, topic }, 'invalidation not broadcast')
      } finally {
        echoes.delete(nonce)
      }
    },
    subscribe,
    close: () => listener.unlisten(),
  }
}

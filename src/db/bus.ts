// Cache invalidation across every process serving the API. With a PostgreSQL server it rides on
// LISTEN/NOTIFY; embedded PGlite is single-process, so local delivery is all there is.
import { randomUUID } from 'node:crypto'
import type { Logger } from '../lib/log.ts'
import { listenerConnection, type Postgres } from './postgres.ts'

export type BusTopic = 'api_key' | 'brand' | 'event_mapping' | 'event_stream_interest' | 'webhook_endpoint'
type Handler = (payload: string) => void

export interface Bus {
  /**
   * Delivers to local subscribers at once and resolves when every process listening on the bus has
   * applied the message (or after ACK_TIMEOUT_MS, logged), so a revocation is effective everywhere once
   * the request that made it is answered.
   */
  publish(topic: BusTopic, payload: string): Promise<void>
  subscribe(topic: BusTopic, handler: Handler): void
  close(): Promise<void>
}

const CHANNEL = 'respin_invalidate'
const ACK_CHANNEL = 'respin_invalidate_ack'
/** Identifies the bus connections in pg_stat_activity, so a publisher knows how many acks to expect. */
const BUS_APPLICATION = 'respin-bus'
const ACK_TIMEOUT_MS = 5000

/**
 * `publishOnly`: a process that changes state but caches none of it (the admin CLI) publishes and waits
 * for the others' acknowledgements without listening for invalidations itself, under another application
 * name, so publishers elsewhere neither count it nor wait for it (a CLI run starting or exiting during
 * a revocation held the admin API's answer for the 5 s timeout).
 */
export async function openBus(pg: Postgres, log: Logger, databaseUrl?: string, opts: { publishOnly?: boolean } = {}): Promise<Bus> {
  const handlers = new Map<string, Handler[]>()
  const deliver = (topic: string, payload: string) => {
    for (const handler of handlers.get(topic) ?? []) handler(payload)
  }
  const subscribe = (topic: BusTopic, handler: Handler) => {
    handlers.set(topic, [...(handlers.get(topic) ?? []), handler])
  }
  if (pg.kind === 'pglite' || !databaseUrl) {
    return { publish: async (topic, payload) => deliver(topic, payload), subscribe, close: async () => {} }
  }

  // A connection of its own, named, so every process's listener can be counted.
  const application = opts.publishOnly ? `${BUS_APPLICATION}-publisher` : BUS_APPLICATION
  const sql = listenerConnection(databaseUrl, application, 2)
  const waiting = new Map<string, (from: string) => void>()
  const self = randomUUID()
  const messages = opts.publishOnly
    ? undefined
    : await sql.listen(CHANNEL, (message) => {
        const [nonce, topic, payload] = JSON.parse(message) as [string, string, string]
        deliver(topic, payload)
        sql`select pg_notify(${ACK_CHANNEL}, ${JSON.stringify([nonce, self])})`.catch((err: unknown) =>
          log.error({ err, topic }, 'invalidation not acknowledged'),
        )
      })
  const acks = await sql.listen(ACK_CHANNEL, (message) => {
    const [nonce, from] = JSON.parse(message) as [string, string]
    waiting.get(nonce)?.(from)
  })
  return {
    async publish(topic, payload) {
      deliver(topic, payload)
      const nonce = randomUUID()
      const acked = new Set<string>()
      let expected = Infinity
      let done!: () => void
      const allAcked = new Promise<void>((resolve) => (done = resolve))
      waiting.set(nonce, (from) => {
        acked.add(from)
        if (acked.size >= expected) done()
      })
      const timer = setTimeout(() => {
        log.warn({ topic, acked: acked.size, expected }, 'invalidation: not every process acknowledged in time')
        done()
      }, ACK_TIMEOUT_MS)
      // The whole publish is bounded by the timer, the count and the notify too (a bus connection being
      // re-established would otherwise hold the caller for the driver's connect timeout).
      const broadcast = (async () => {
        // postgres.js keeps one LISTEN connection per bus, so each listening process shows one
        // BUS_APPLICATION session whose last statement was a LISTEN.
        const [row] = await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where application_name = ${BUS_APPLICATION} and datname = current_database() and query ilike 'listen%'`
        // (A publish-only process counts none of its own: no listener of it answers.)
        expected = opts.publishOnly ? row?.n ?? 0 : Math.max(1, row?.n ?? 1)
        if (acked.size >= expected) done()
        await sql`select pg_notify(${CHANNEL}, ${JSON.stringify([nonce, topic, payload])})`
      })()
      broadcast.catch((err: unknown) => {
        log.error({ err, topic }, 'invalidation not broadcast')
        done()
      })
      try {
        await allAcked
      } finally {
        clearTimeout(timer)
        waiting.delete(nonce)
      }
    },
    subscribe,
    async close() {
      await messages?.unlisten()
      await acks.unlisten()
      await sql.end({ timeout: 2 })
    },
  }
}

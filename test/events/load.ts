// Load for the fault tests: concurrent clients sending batches with fixed event ids, each batch re-sent
// (same ids) until it is acknowledged, the way a well-behaved client retries. What the service answered is
// recorded, so a test can assert it failed cleanly (503 in the error shape), never with a 500 or a hang.
import type { Harness } from '../helpers/harness.ts'
import { ev, exportedEvents, post, uid } from './helpers.ts'

export interface LoadResult {
  batches: Record<string, unknown>[][]
  /** Every answer by status. */
  statuses: Map<number, number>
  /** Sum of `stored` over the acknowledging answers (a re-send after an ambiguous failure may say deduped). */
  stored: number
  deduped: number
  /** Non-200 answers not in the error shape. */
  malformed: string[]
}

export async function sendUnderLoad(
  h: Harness,
  key: string,
  opts: { batches: number; size: number; concurrency: number; onAcked?: (acked: number) => void | Promise<void> },
): Promise<LoadResult> {
  const player = uid('load')
  const batches = Array.from({ length: opts.batches }, (_, b) =>
    Array.from({ length: opts.size }, (_, i) => ev({ player_id: `${player}-${(b * opts.size + i) % 17}`, event_type: i % 5 === 0 ? 'deposit' : 'bet', payload: { amount: 1, currency: 'EUR' } })),
  )
  const result: LoadResult = { batches, statuses: new Map(), stored: 0, deduped: 0, malformed: [] }
  let next = 0
  let acked = 0
  const worker = async () => {
    for (let b = next++; b < batches.length; b = next++) {
      for (let attempt = 0; ; attempt++) {
        let status = 0
        let body: Record<string, unknown> = {}
        let text = ''
        try {
          const res = await post(h, key, { events: batches[b] })
          status = res.status
          body = res.body as Record<string, unknown>
          text = res.text
        } catch (err) {
          status = -1 // the connection failed: no answer at all
          text = String(err)
        }
        result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1)
        if (status === 200) {
          result.stored += body.stored as number
          result.deduped += body.deduped as number
          acked++
          await opts.onAcked?.(acked)
          break
        }
        if (status !== -1 && (typeof body.code !== 'string' || typeof body.request_id !== 'string')) result.malformed.push(`${status} ${text.slice(0, 200)}`)
        if (attempt > 200) throw new Error(`batch ${b} never acknowledged; last answer ${status} ${text.slice(0, 300)}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    }
  }
  await Promise.all(Array.from({ length: opts.concurrency }, worker))
  return result
}

/** GET /export/events after the spool is flushed: rows and distinct ids of a full scan. */
export async function countExported(h: Harness, key: string): Promise<{ rows: number; unique: number }> {
  await h.app.ctx.ingest?.spool.flush('all')
  return exportedEvents(h.origin, key)
}

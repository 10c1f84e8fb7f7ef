// Every message a campaign sends goes through enqueueRunSends: it enqueues the notifications through the
// delivery's enqueueNotifications (src/notifications/service.ts: the send rules are checked there and again
// right before sending) with the exactly-once key (campaign, run, player, step, channel) as their
// idempotency key, unique per tenant in the notifications table. A second attempt (a crash and retry, a
// duplicate event, another process) meets the key taken and enqueues nothing; two at once wait on the
// unique index, and the second then finds the first's row.
import type { AppContext } from '../context.ts'
import { enqueueNotifications } from '../notifications/service.ts'
import type { Channel } from '../notifications/schemas.ts'
import type { Sql } from './queries.ts'

export interface CampaignForSend {
  id: string
  tenant_id: string
  brand_id: string
  config: Record<string, unknown>
}

export interface SendItem {
  playerId: string
  channel: string
  templateId: string
}

export type SendDeps = Pick<AppContext, 'clock' | 'delivery'> & Partial<Pick<AppContext, 'metrics'>>

export const sendKey = (campaignId: string, runId: string, playerId: string, step: string, channel: string) =>
  `campaign:${campaignId}:${runId}:${playerId}:${step}:${channel}`

/** The sends of one run and step ('' outside journeys). */
export interface RunSends {
  c: CampaignForSend
  runId: string
  step: string
  items: SendItem[]
  /** A one-shot's or recurring tick's chunk: the delivery's bulk lane (sql/0140). */
  bulk?: boolean
}

/**
 * Enqueues the items of one run and step ('' outside journeys) not sent before; returns how many were
 * new. Must run on a transaction.
 */
export function enqueueCampaignSends(tx: Sql, deps: SendDeps, c: CampaignForSend, runId: string, step: string, items: SendItem[], opts: { bulk?: boolean } = {}): Promise<number> {
  return enqueueRunSends(tx, deps, [{ c, runId, step, items, bulk: opts.bulk }])
}

/**
 * The sends of many runs (of any campaigns) in a few statements: the rules and the insert of every message
 * at once (enqueueNotifications). The notification's unique idempotency key is the exactly-once key: a
 * key that exists already keeps its notification and nothing new is sent. The stream's triggered
 * enrolments use it for a whole batch of events, the one-shot chunks for one run. Returns how many were new.
 */
export async function enqueueRunSends(tx: Sql, deps: SendDeps, runs: RunSends[]): Promise<number> {
  // A key twice in one call (the same run and step listed twice) is one send: its first listing.
  const sends = new Map<string, { run: RunSends; item: SendItem }>()
  for (const run of runs) {
    for (const item of run.items) {
      const key = sendKey(run.c.id, run.runId, item.playerId, run.step, item.channel)
      if (!sends.has(key)) sends.set(key, { run, item })
    }
  }
  if (!sends.size) return 0
  // The whole set in one go: the rules for every message in a few queries, one insert.
  const results = await enqueueNotifications(
    tx,
    deps,
    [...sends].map(([key, { run, item }]) => {
      const c = run.c
      return {
        tenantId: c.tenant_id,
        brandId: c.brand_id,
        playerId: item.playerId,
        channel: item.channel as Channel,
        templateId: item.templateId,
        class: c.config.class === 'transactional' ? ('transactional' as const) : ('marketing' as const),
        campaignId: c.id,
        payload: c.config.payload && typeof c.config.payload === 'object' ? (c.config.payload as Record<string, unknown>) : {},
        idempotencyKey: key,
        bulk: run.bulk === true,
      }
    }),
  )
  return results.filter((r) => r.created).length
}

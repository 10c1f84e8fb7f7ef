// Every message a campaign sends goes through enqueueCampaignSends: it claims the exactly-once key
// (campaign, run, player, step, channel) in campaign_sends and enqueues the notifications through the
// delivery's enqueueNotifications (src/notifications/service.ts: the send rules are checked there and again
// right before sending) in the SAME transaction, so a key that exists has its notification and a second
// attempt (a crash and retry, a duplicate event, another process) finds the key taken and enqueues
// nothing. The notification also carries the key as its idempotency key, a second guard in its own table.
import { randomUUID } from 'node:crypto'
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
 * The sends of many runs (of any campaigns) in a few statements: one claim of their keys, the rules and
 * the insert of every message at once (enqueueNotifications). The stream's triggered enrolments use it
 * for a whole batch of events, the one-shot chunks for one run. Returns how many were new.
 */
export async function enqueueRunSends(tx: Sql, deps: SendDeps, runs: RunSends[]): Promise<number> {
  const flat = runs.flatMap((r) => r.items.map((i) => ({ ...i, run: r })))
  if (!flat.length) return 0
  // The notification ids are chosen here, so the claim records them and nothing has to be updated after
  // (an UPDATE ... FROM unnest() per chunk went to a nested loop over the whole table on stale statistics).
  const notificationIds = flat.map(() => randomUUID())
  const claimed = await tx<{ notification_id: string }[]>`
    insert into campaign_sends (campaign_id, run_id, player_id, step, channel, notification_id)
    select x.campaign_id, x.run_id, x.player_id, x.step, x.channel, x.notification_id
    from unnest(${flat.map((f) => f.run.c.id)}::uuid[], ${flat.map((f) => f.run.runId)}::uuid[], ${flat.map((f) => f.playerId)}::uuid[],
                ${flat.map((f) => f.run.step)}::text[], ${flat.map((f) => f.channel)}::text[], ${notificationIds}::uuid[])
      as x(campaign_id, run_id, player_id, step, channel, notification_id)
    on conflict do nothing
    returning notification_id`
  if (!claimed.length) return 0
  const byId = new Map<string, (typeof flat)[number]>(flat.map((f, i) => [notificationIds[i]!, f]))
  const sends = claimed.map((k) => ({ id: k.notification_id, ...byId.get(k.notification_id)! }))
  // The whole set in one go: the rules for every message in a few queries, one insert (it used to
  // enqueue one message at a time, ~5 statements each).
  const results = await enqueueNotifications(
    tx,
    deps,
    sends.map((s) => {
      const c = s.run.c
      return {
        id: s.id,
        tenantId: c.tenant_id,
        brandId: c.brand_id,
        playerId: s.playerId,
        channel: s.channel as Channel,
        templateId: s.templateId,
        class: c.config.class === 'transactional' ? ('transactional' as const) : ('marketing' as const),
        campaignId: c.id,
        payload: c.config.payload && typeof c.config.payload === 'object' ? (c.config.payload as Record<string, unknown>) : {},
        idempotencyKey: sendKey(c.id, s.run.runId, s.playerId, s.run.step, s.channel),
        bulk: s.run.bulk === true,
      }
    }),
  )
  // A notification that existed already under the key (the second guard) keeps its id: recorded instead.
  const moved = sends.map((s, i) => ({ s, id: results[i]!.id })).filter((m) => m.id !== m.s.id)
  if (moved.length) {
    await tx`
      update campaign_sends s set notification_id = x.notification_id
      from unnest(${moved.map((m) => m.s.run.c.id)}::uuid[], ${moved.map((m) => m.s.run.runId)}::uuid[], ${moved.map((m) => m.s.run.step)}::text[],
                  ${moved.map((m) => m.s.playerId)}::uuid[], ${moved.map((m) => m.s.channel)}::text[], ${moved.map((m) => m.id)}::uuid[])
        as x(campaign_id, run_id, step, player_id, channel, notification_id)
      where s.campaign_id = x.campaign_id and s.run_id = x.run_id and s.step = x.step and s.player_id = x.player_id and s.channel = x.channel`
  }
  return claimed.length
}

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

export type SendDeps = Pick<AppContext, 'clock'> & { delivery?: { wake(): void } }

export const sendKey = (campaignId: string, runId: string, playerId: string, step: string, channel: string) =>
  `campaign:${campaignId}:${runId}:${playerId}:${step}:${channel}`

/**
 * Enqueues the items of one run and step ('' outside journeys) not sent before; returns how many were
 * new. Must run on a transaction.
 */
export async function enqueueCampaignSends(tx: Sql, deps: SendDeps, c: CampaignForSend, runId: string, step: string, items: SendItem[]): Promise<number> {
  if (!items.length) return 0
  // The notification ids are chosen here, so the claim records them and nothing has to be updated after
  // (an UPDATE ... FROM unnest() per chunk went to a nested loop over the whole table on stale statistics).
  const notificationIds = items.map(() => randomUUID())
  const claimed = await tx<{ player_id: string; channel: string; notification_id: string }[]>`
    insert into campaign_sends (campaign_id, run_id, player_id, step, channel, notification_id)
    select ${c.id}::uuid, ${runId}::uuid, x.player_id, ${step}, x.channel, x.notification_id
    from unnest(${items.map((i) => i.playerId)}::uuid[], ${items.map((i) => i.channel)}::text[], ${notificationIds}::uuid[]) as x(player_id, channel, notification_id)
    on conflict do nothing
    returning player_id, channel, notification_id`
  if (!claimed.length) return 0
  const template = new Map(items.map((i) => [`${i.playerId}|${i.channel}`, i.templateId]))
  const payload = c.config.payload && typeof c.config.payload === 'object' ? (c.config.payload as Record<string, unknown>) : {}
  const klass = c.config.class === 'transactional' ? 'transactional' : 'marketing'
  // The whole chunk in one go: the rules for every message in a few queries, one insert (it used to
  // enqueue one message at a time, ~5 statements each).
  const results = await enqueueNotifications(
    tx,
    deps,
    claimed.map((k) => ({
      id: k.notification_id,
      tenantId: c.tenant_id,
      brandId: c.brand_id,
      playerId: k.player_id,
      channel: k.channel as Channel,
      templateId: template.get(`${k.player_id}|${k.channel}`)!,
      class: klass,
      campaignId: c.id,
      payload,
      idempotencyKey: sendKey(c.id, runId, k.player_id, step, k.channel),
    })),
  )
  // A notification that existed already under the key (the second guard) keeps its id: recorded instead.
  const moved = claimed.filter((k, i) => results[i]!.id !== k.notification_id)
  if (moved.length) {
    await tx`
      update campaign_sends s set notification_id = x.notification_id
      from unnest(${moved.map((k) => k.player_id)}::uuid[], ${moved.map((k) => k.channel)}::text[], ${moved.map((k) => results[claimed.indexOf(k)]!.id)}::uuid[]) as x(player_id, channel, notification_id)
      where s.campaign_id = ${c.id} and s.run_id = ${runId} and s.step = ${step} and s.player_id = x.player_id and s.channel = x.channel`
  }
  return claimed.length
}

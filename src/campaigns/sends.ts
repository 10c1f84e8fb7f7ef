// Every message a campaign sends goes through enqueueCampaignSends: it claims the exactly-once key
// (campaign, run, player, step, channel) in campaign_sends and enqueues the notification through the
// delivery's enqueueNotification (src/notifications/service.ts: the send rules are checked there and again
// right before sending) in the SAME transaction, so a key that exists has its notification and a second
// attempt (a crash and retry, a duplicate event, another process) finds the key taken and enqueues
// nothing. The notification also carries the key as its idempotency key, a second guard in its own table.
import type { AppContext } from '../context.ts'
import { enqueueNotification } from '../notifications/service.ts'
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

/** Enqueues issued at once on the transaction's connection (pipelined), per group. */
const PIPELINE = 64

export const sendKey = (campaignId: string, runId: string, playerId: string, step: string, channel: string) =>
  `campaign:${campaignId}:${runId}:${playerId}:${step}:${channel}`

/**
 * Enqueues the items of one run and step ('' outside journeys) not sent before; returns how many were
 * new. Must run on a transaction.
 */
export async function enqueueCampaignSends(tx: Sql, deps: SendDeps, c: CampaignForSend, runId: string, step: string, items: SendItem[]): Promise<number> {
  if (!items.length) return 0
  const claimed = await tx<{ player_id: string; channel: string }[]>`
    insert into campaign_sends (campaign_id, run_id, player_id, step, channel)
    select ${c.id}::uuid, ${runId}::uuid, x.player_id, ${step}, x.channel
    from unnest(${items.map((i) => i.playerId)}::uuid[], ${items.map((i) => i.channel)}::text[]) as x(player_id, channel)
    on conflict do nothing
    returning player_id, channel`
  if (!claimed.length) return 0
  const template = new Map(items.map((i) => [`${i.playerId}|${i.channel}`, i.templateId]))
  const payload = c.config.payload && typeof c.config.payload === 'object' ? (c.config.payload as Record<string, unknown>) : {}
  const klass = c.config.class === 'transactional' ? 'transactional' : 'marketing'
  const ids: string[] = []
  for (let i = 0; i < claimed.length; i += PIPELINE) {
    const group = claimed.slice(i, i + PIPELINE)
    const results = await Promise.all(
      group.map((k) =>
        enqueueNotification(tx, deps, {
          tenantId: c.tenant_id,
          brandId: c.brand_id,
          playerId: k.player_id,
          channel: k.channel as Channel,
          templateId: template.get(`${k.player_id}|${k.channel}`)!,
          class: klass,
          campaignId: c.id,
          payload,
          idempotencyKey: sendKey(c.id, runId, k.player_id, step, k.channel),
        }),
      ),
    )
    for (const r of results) ids.push(r.notification.id)
  }
  await tx`
    update campaign_sends s set notification_id = x.notification_id
    from unnest(${claimed.map((k) => k.player_id)}::uuid[], ${claimed.map((k) => k.channel)}::text[], ${ids}::uuid[]) as x(player_id, channel, notification_id)
    where s.campaign_id = ${c.id} and s.run_id = ${runId} and s.step = ${step} and s.player_id = x.player_id and s.channel = x.channel`
  return claimed.length
}

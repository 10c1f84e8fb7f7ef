// Gathers the facts the send rules need (rules.ts) for one notification and asks decide(). The one way
// a send is checked, at enqueue and again right before the channel call.
import * as dq from './delivery-queries.ts'
import { capWindows, decide, zoneOf, type Channel, type Decision, type MessageClass } from './rules.ts'

export interface CheckInput {
  id?: string
  playerId: string
  brandId: string
  channel: Channel
  class: MessageClass
  campaignId: string | null
}

export async function checkSend(sql: dq.Sql, n: CheckInput, now: Date): Promise<{ decision: Decision; recipient: dq.Recipient | undefined }> {
  const recipient = await dq.selectRecipient(sql, n.playerId, n.campaignId)
  // A player deleted meanwhile has no address at all.
  if (!recipient) return { decision: { action: 'suppress', reason: 'no_address' }, recipient }
  const settings = dq.withDefaults(recipient.delivery_settings ?? undefined)
  const cancelled = recipient.campaign_status === 'cancelled'
  let capCounts: number[] = []
  if (n.class === 'marketing' && settings.frequency_caps.length > 0) {
    const windows = capWindows(settings, n.channel, zoneOf(recipient, settings), now)
    capCounts = await dq.countSentSince(sql, n.playerId, windows.map((w) => ({ channel: w.cap.channel, since: w.since })), n.id)
  }
  const decision = decide({
    class: n.class,
    channel: n.channel,
    player: { status: recipient.status, consent: recipient.consent, timezone: recipient.timezone },
    hasAddress: dq.hasAddress(recipient, n.channel),
    undeliverable: dq.isUndeliverable(recipient, n.channel),
    campaignCancelled: cancelled,
    campaignPaused: recipient.campaign_status === 'paused',
    settings,
    capCounts,
    now,
  })
  return { decision, recipient }
}

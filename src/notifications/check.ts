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

/**
 * checkSend for many messages at once (a campaign chunk): the same facts in three queries whatever the
 * count, and the same decide(). Messages of one batch do not count towards each other's frequency caps
 * here; the dispatcher's check right before sending (one player at a time, under a lock) does.
 */
export async function checkSends(sql: dq.Sql, ns: CheckInput[], now: Date): Promise<Decision[]> {
  if (!ns.length) return []
  const recipients = await dq.selectRecipients(sql, [...new Set(ns.map((n) => n.playerId))])
  const campaignIds = [...new Set(ns.map((n) => n.campaignId).filter((id): id is string => id !== null))]
  const campaignStatus = new Map<string, string>()
  if (campaignIds.length) {
    const rows = await sql<{ id: string; status: string }[]>`select id, status from campaigns where id = any(${campaignIds}::uuid[])`
    for (const r of rows) campaignStatus.set(r.id, r.status)
  }
  // Cap windows per message, and the earliest instant any of them counts from.
  const windows = ns.map((n) => {
    const r = recipients.get(n.playerId)
    if (!r || n.class !== 'marketing') return []
    const settings = dq.withDefaults(r.delivery_settings ?? undefined)
    return settings.frequency_caps.length ? capWindows(settings, n.channel, zoneOf(r, settings), now) : []
  })
  const since = windows.flat().map((w) => w.since.getTime())
  const sent = since.length
    ? await dq.selectSentSince(sql, [...new Set(ns.filter((_, i) => windows[i]!.length).map((n) => n.playerId))], new Date(Math.min(...since)))
    : new Map<string, { channel: string; sent_at: Date }[]>()
  return ns.map((n, i) => {
    const recipient = recipients.get(n.playerId)
    if (!recipient) return { action: 'suppress', reason: 'no_address' }
    const status = n.campaignId ? campaignStatus.get(n.campaignId) : undefined
    const rows = sent.get(n.playerId) ?? []
    return decide({
      class: n.class,
      channel: n.channel,
      player: { status: recipient.status, consent: recipient.consent, timezone: recipient.timezone },
      hasAddress: dq.hasAddress(recipient, n.channel),
      undeliverable: dq.isUndeliverable(recipient, n.channel),
      campaignCancelled: status === 'cancelled',
      campaignPaused: status === 'paused',
      settings: dq.withDefaults(recipient.delivery_settings ?? undefined),
      capCounts: windows[i]!.map((w) => rows.filter((r) => (w.cap.channel === 'any' || r.channel === w.cap.channel) && r.sent_at >= w.since).length),
      now,
    })
  })
}

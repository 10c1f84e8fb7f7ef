// Gathers the facts the send rules need (rules.ts) for a batch of notifications and asks decide() for
// each. The one way a send is checked, at enqueue and again right before the channel call.
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

export interface Checked {
  decision: Decision
  /** Undefined when the player no longer exists (the decision is then a suppression). */
  recipient: dq.Recipient | undefined
}

/** One message's check: checkSends of one (its own row, when it has an id, is not counted against its caps). */
export async function checkSend(sql: dq.Sql, n: CheckInput, now: Date): Promise<Checked> {
  const [checked] = await checkSends(sql, [n], now, { inFlight: true })
  return checked!
}

/**
 * The send rules' check of many messages at once: the facts in at most three queries whatever the
 * count, and decide() per message. At enqueue (a campaign chunk) messages of one batch do not count towards each other's
 * frequency caps: like the single check, only messages in flight count, and queued ones are not yet.
 * With `inFlight` (the dispatcher, right before sending, under the players' locks) the batch's own rows
 * are left out of the counts and each message decided `send` counts against the ones after it, exactly
 * as if they had been checked one at a time in order.
 */
export async function checkSends(sql: dq.Sql, ns: CheckInput[], now: Date, opts: { inFlight?: boolean } = {}): Promise<Checked[]> {
  if (!ns.length) return []
  const recipients = await dq.selectRecipients(sql, [...new Set(ns.map((n) => n.playerId))])
  const campaignIds = [...new Set(ns.map((n) => n.campaignId).filter((id): id is string => id !== null))]
  const campaignStatus = new Map<string, string>()
  if (campaignIds.length) {
    // No lock: a resume committing between this read and the settlement is caught there (settleChecks
    // reads the status again). A share lock here would hold every send of the process behind a resume's
    // or a cancel's update of a whole campaign's messages.
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
    : new Map<string, { id: string; channel: string; sent_at: Date }[]>()
  const own = opts.inFlight ? new Set(ns.map((n) => n.id)) : undefined
  if (own) for (const [player, rows] of sent) sent.set(player, rows.filter((r) => !own.has(r.id)))
  return ns.map((n, i) => {
    const recipient = recipients.get(n.playerId)
    // A player deleted meanwhile has no address at all.
    if (!recipient) return { decision: { action: 'suppress', reason: 'no_address' }, recipient }
    const status = n.campaignId ? campaignStatus.get(n.campaignId) : undefined
    const rows = sent.get(n.playerId) ?? []
    const decision = decide({
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
    if (own && decision.action === 'send' && n.class === 'marketing') {
      const mine = { id: n.id ?? '', channel: n.channel, sent_at: now }
      if (sent.has(n.playerId)) rows.push(mine)
      else sent.set(n.playerId, [mine])
    }
    return { decision, recipient }
  })
}

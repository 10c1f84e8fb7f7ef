// The send rules of contract-engines §3, the responsible-gaming core of delivery: who may receive which
// message, now, later (quiet hours) or never (and why). One pure function, called when a notification is
// enqueued AND again right before the channel call (src/notifications/dispatcher.ts): no send path sends
// without a `send` decision from decide(). No I/O: the caller gathers the facts (player, contact points,
// settings, counts) and the decision is recorded on the notification.
import { startOfDay, startOfIsoWeek, windowEnd } from '../lib/zoned-time.ts'

export type Channel = 'email' | 'telegram' | 'push' | 'in_app'
export type MessageClass = 'marketing' | 'transactional'
export type PlayerStatus = 'active' | 'suspended' | 'self_excluded' | 'closed'

export type SuppressReason =
  | 'self_excluded'
  | 'suspended'
  | 'closed'
  | 'no_consent'
  | 'unsubscribed'
  | 'frequency_cap'
  | 'no_address'
  | 'undeliverable_address'
  | 'campaign_cancelled'

export interface FrequencyCap {
  channel: Channel | 'any'
  max: number
  per: 'day' | 'week'
}

export interface DeliverySettings {
  frequency_caps: FrequencyCap[]
  quiet_hours: { start: string; end: string; timezone: string } | null
  consent_policy: Record<Channel, 'opt_in' | 'opt_out'>
}

export const DEFAULT_DELIVERY_SETTINGS: DeliverySettings = {
  frequency_caps: [],
  quiet_hours: null,
  consent_policy: { email: 'opt_in', telegram: 'opt_in', push: 'opt_out', in_app: 'opt_out' },
}

/** A consent entry as kept on the profile; `source: 'unsubscribe'` when the player used an unsubscribe link. */
export interface ConsentEntry {
  granted: boolean
  source?: string
}

export interface RuleFacts {
  class: MessageClass
  channel: Channel
  player: {
    status: PlayerStatus
    /** The profile's consent per channel, from consent_update events and unsubscribes. */
    consent: Record<string, ConsentEntry | undefined>
    /** IANA name, or null. */
    timezone: string | null
  }
  /** The channel's contact point exists (email address, chat id, a push subscription; in_app always). */
  hasAddress: boolean
  /** The email address hard-bounced and has not changed since. */
  undeliverable: boolean
  /** The campaign that sent it was cancelled meanwhile. */
  campaignCancelled: boolean
  /** The campaign that sent it is paused: its queued messages wait for the resume. */
  campaignPaused?: boolean
  settings: DeliverySettings
  /**
   * Marketing messages already handed to a channel for this player, one count per window of capWindows()
   * (same order). Not needed for transactional messages.
   */
  capCounts: number[]
  now: Date
}

export type Decision =
  | { action: 'send' }
  | { action: 'suppress'; reason: SuppressReason }
  /** Quiet hours: wait until `until`, then decide again. */
  | { action: 'hold'; until: Date }
  /** Its campaign is paused: stays queued until the campaign resumes, then decided again. */
  | { action: 'wait' }

/** The player's zone for caps and quiet hours: theirs, else the quiet hours' zone, else UTC. */
export function zoneOf(player: { timezone: string | null }, settings: DeliverySettings): string {
  return player.timezone ?? settings.quiet_hours?.timezone ?? 'UTC'
}

export interface CapWindow {
  cap: FrequencyCap
  /** Count messages sent at or after this instant (start of the player's calendar day / ISO week). */
  since: Date
}

/** The windows whose counts decide() needs for a marketing message on `channel`. */
export function capWindows(settings: DeliverySettings, channel: Channel, timeZone: string, now: Date): CapWindow[] {
  return settings.frequency_caps
    .filter((cap) => cap.channel === 'any' || cap.channel === channel)
    .map((cap) => ({ cap, since: cap.per === 'day' ? startOfDay(now, timeZone) : startOfIsoWeek(now, timeZone) }))
}

export function decide(f: RuleFacts): Decision {
  const suppress = (reason: SuppressReason): Decision => ({ action: 'suppress', reason })
  if (f.campaignCancelled) return suppress('campaign_cancelled')
  // Never to a closed account, whatever the class.
  if (f.player.status === 'closed') return suppress('closed')
  if (f.class === 'marketing') {
    if (f.player.status === 'self_excluded') return suppress('self_excluded')
    if (f.player.status === 'suspended') return suppress('suspended')
    if (f.player.status !== 'active') return suppress('suspended')
    const consent = f.player.consent[f.channel]
    if (consent && !consent.granted) return suppress(consent.source === 'unsubscribe' ? 'unsubscribed' : 'no_consent')
    if (!consent && f.settings.consent_policy[f.channel] === 'opt_in') return suppress('no_consent')
  }
  if (!f.hasAddress) return suppress('no_address')
  if (f.undeliverable) return suppress('undeliverable_address')
  if (f.campaignPaused) return { action: 'wait' }
  if (f.class === 'transactional') return { action: 'send' }

  const zone = zoneOf(f.player, f.settings)
  const windows = capWindows(f.settings, f.channel, zone, f.now)
  for (let i = 0; i < windows.length; i++) {
    if ((f.capCounts[i] ?? 0) >= (windows[i] as CapWindow).cap.max) return suppress('frequency_cap')
  }
  const quiet = f.settings.quiet_hours
  if (quiet) {
    const until = windowEnd(f.now, quiet, zone)
    if (until) return { action: 'hold', until }
  }
  return { action: 'send' }
}

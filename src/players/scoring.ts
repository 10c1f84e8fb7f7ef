// Pure player scoring: lifecycle stage, churn/value/engagement scores and the next best action, computed
// from the profile aggregates ingestion maintains. No I/O; docs/players.md documents every rule here, and
// src/segments/fields.ts mirrors lifecycleStage() in SQL (lifecycleStageSql) for the lifecycle_stage field.

export const LIFECYCLE_STAGES = ['new', 'ftd', 'active', 'vip', 'at_risk', 'churned'] as const
export type LifecycleStage = (typeof LIFECYCLE_STAGES)[number]

export const PLAYER_STATUSES = ['active', 'suspended', 'self_excluded', 'closed'] as const
export type PlayerStatus = (typeof PLAYER_STATUSES)[number]

/** Thresholds of the lifecycle rules, shared with the SQL version. */
export const LIFECYCLE = {
  /** Days without activity after which a player is at risk (depositors only). */
  atRiskAfterDays: 14,
  /** Days without activity after which a player is churned. */
  churnedAfterDays: 30,
  /** Lifetime deposit total (profile currency) from which an active depositor is a VIP. */
  vipDepositTotal: 5000,
} as const

const DAY_MS = 86_400_000

export interface ScoringInput {
  status: string
  /** When the player record was created (registration). */
  created_at: Date
  deposit_count: number
  deposit_total: number
  first_deposit_at: Date | null
  last_deposit_at: Date | null
  last_login_at: Date | null
  last_seen_at: Date | null
  bet_total: number
  win_total: number
  ggr: number
  event_count: number
  /** Per channel: { email: { granted: true, at: '...' } }. */
  consent: Record<string, unknown>
  has_email: boolean
}

export interface Scores {
  /** 0..100: how likely the player is to stop playing (grows with days since last activity). */
  churn: number
  /** 0..100: monetary value (log-scaled lifetime deposits and positive GGR). */
  value: number
  /** 0..100: recency, volume of activity and deposit frequency. */
  engagement: number
}

export type Priority = 'high' | 'medium' | 'low'
export type ChannelHint = 'personal' | 'email' | 'push' | 'any'

export interface NextBestAction {
  action: string
  priority: Priority
  reason: string
  channelHint: ChannelHint
}

const clamp = (n: number, lo = 0, hi = 100) => Math.min(hi, Math.max(lo, n))
const round = (n: number) => Math.round(n)

/** The latest of last_seen_at, last_login_at, last_deposit_at; the registration time when none is set. */
export function lastActivityAt(p: Pick<ScoringInput, 'created_at' | 'last_seen_at' | 'last_login_at' | 'last_deposit_at'>): Date {
  let latest: number | undefined
  for (const d of [p.last_seen_at, p.last_login_at, p.last_deposit_at]) if (d && (latest === undefined || d.getTime() > latest)) latest = d.getTime()
  // Events dated before the registration (history imported later) still say when the player was active.
  return new Date(latest ?? p.created_at.getTime())
}

export function daysSince(d: Date, now: Date): number {
  return Math.max(0, (now.getTime() - d.getTime()) / DAY_MS)
}

/**
 * First matching rule wins:
 * 1. inactive > 30 days → churned
 * 2. no deposit yet → new
 * 3. depositor inactive > 14 days → at_risk
 * 4. deposit_total ≥ 5000 → vip
 * 5. exactly one deposit → ftd
 * 6. otherwise → active
 */
export function lifecycleStage(p: ScoringInput, now: Date): LifecycleStage {
  const idle = daysSince(lastActivityAt(p), now)
  if (idle > LIFECYCLE.churnedAfterDays) return 'churned'
  if (p.deposit_count <= 0) return 'new'
  if (idle > LIFECYCLE.atRiskAfterDays) return 'at_risk'
  if (p.deposit_total >= LIFECYCLE.vipDepositTotal) return 'vip'
  if (p.deposit_count === 1) return 'ftd'
  return 'active'
}

/** 25 points per decade: 10 → 26, 100 → 50, 1 000 → 75, 10 000 → 100. */
const logScore = (amount: number) => clamp(25 * Math.log10(1 + Math.max(0, amount)))

export function scores(p: ScoringInput, now: Date): Scores {
  const idle = daysSince(lastActivityAt(p), now)
  // Nothing to fear in the first 3 idle days, then linear up to certainty at 30 days.
  const churn = clamp(((idle - 3) / (LIFECYCLE.churnedAfterDays - 3)) * 100)
  const value = 0.7 * logScore(p.deposit_total) + 0.3 * logScore(p.ggr)
  const recency = 50 * clamp(1 - idle / LIFECYCLE.churnedAfterDays, 0, 1)
  const volume = 30 * clamp(Math.log10(1 + Math.max(0, p.event_count)) / 4, 0, 1) // 10 000 events = full
  const frequency = 20 * clamp(p.deposit_count / 10, 0, 1) // 10 deposits = full
  return { churn: round(churn), value: round(value), engagement: round(recency + volume + frequency) }
}

function consentState(consent: Record<string, unknown>, channel: string): boolean | undefined {
  const entry = consent[channel]
  if (entry && typeof entry === 'object' && typeof (entry as { granted?: unknown }).granted === 'boolean') {
    return (entry as { granted: boolean }).granted
  }
  return undefined
}

/**
 * The channel for a mass-market action: email when the player has an address and has not refused email,
 * else push unless refused, else any (no consent information to go by, or both refused: the operator
 * picks a channel the player did consent to, such as in_app).
 */
export function marketingChannel(p: ScoringInput): ChannelHint {
  const email = consentState(p.consent, 'email')
  const push = consentState(p.consent, 'push')
  if (p.has_email && email !== false) return 'email'
  if (push !== false && (push === true || email === false)) return 'push'
  return 'any'
}

const HIGH_VALUE = 60
const LOW_ENGAGEMENT = 40

/** Decision table of docs/players.md, first match wins. Never a marketing action for a blocked player. */
export function nextBestAction(p: ScoringInput, now: Date): NextBestAction {
  if (p.status === 'self_excluded') {
    return { action: 'respect_exclusion', priority: 'low', channelHint: 'any', reason: 'player is self-excluded: no marketing contact of any kind' }
  }
  if (p.status === 'suspended' || p.status === 'closed') {
    return { action: 'none', priority: 'low', channelHint: 'any', reason: `player account is ${p.status}: no marketing contact` }
  }
  const stage = lifecycleStage(p, now)
  const s = scores(p, now)
  const idle = Math.floor(daysSince(lastActivityAt(p), now))
  const channel = marketingChannel(p)
  const tag = `(churn ${s.churn}, value ${s.value}, engagement ${s.engagement})`
  switch (stage) {
    case 'churned':
      return s.value >= HIGH_VALUE
        ? { action: 'vip_winback_call', priority: 'high', channelHint: 'personal', reason: `high-value player inactive for ${idle} days ${tag}` }
        : { action: 'winback_offer', priority: p.deposit_count > 0 ? 'medium' : 'low', channelHint: channel, reason: `inactive for ${idle} days ${tag}` }
    case 'at_risk':
      return s.value >= HIGH_VALUE
        ? { action: 'vip_retention_call', priority: 'high', channelHint: 'personal', reason: `high-value depositor inactive for ${idle} days ${tag}` }
        : { action: 'retention_bonus', priority: 'high', channelHint: channel, reason: `depositor inactive for ${idle} days ${tag}` }
    case 'new': {
      // "Registered within 7 days": measured in time, as the lifecycle thresholds are; whole days in the text.
      const age = Math.floor(daysSince(p.created_at, now))
      return daysSince(p.created_at, now) <= 7
        ? { action: 'ftd_welcome_offer', priority: 'high', channelHint: channel, reason: `registered ${age} days ago without a first deposit ${tag}` }
        : { action: 'deposit_reminder', priority: 'medium', channelHint: channel, reason: `registered ${age} days ago, still no deposit ${tag}` }
    }
    case 'ftd':
      return { action: 'second_deposit_offer', priority: 'high', channelHint: channel, reason: `one deposit so far: convert to a repeat depositor ${tag}` }
    case 'vip':
      return s.engagement < LOW_ENGAGEMENT
        ? { action: 'vip_reengagement', priority: 'high', channelHint: 'personal', reason: `VIP with falling engagement ${tag}` }
        : { action: 'vip_personal_offer', priority: 'medium', channelHint: 'personal', reason: `VIP in good standing ${tag}` }
    case 'active':
      return s.engagement < LOW_ENGAGEMENT
        ? { action: 'engagement_mission', priority: 'medium', channelHint: consentState(p.consent, 'push') === false ? channel : 'push', reason: `active depositor with low engagement ${tag}` }
        : { action: 'loyalty_reward', priority: 'low', channelHint: channel, reason: `engaged active depositor ${tag}` }
  }
}

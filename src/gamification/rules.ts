// The shared rule language of contract-engines §1 (event filters, measures) and the rule shapes of
// missions, badges and tournaments (§5): validated when written (400 naming the field), compiled once
// into predicates the engine runs per event. The filter itself is src/lib/event-filter.ts, shared with campaigns.
import type { InterestEntry, StreamEvent } from '../engine/event-stream.ts'
import type { FieldError } from '../http/router.ts'
import { checkEventFilter, matchesFilter, type EventCondition, type FieldError as FilterFieldError } from '../lib/event-filter.ts'
import { CURRENCY_CODE_RE } from '../events/canonical.ts'
import { isTimeZone } from '../lib/zoned-time.ts'
import { isUuid } from '../lib/schemas.ts'

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
const err = (field: string, message: string): FieldError => ({ in: 'body', field, message })

/** `{ event_type, filters? }` at `path` (e.g. `rules`), by the shared checker; measure too when `withMeasure`. */
export function validateEventFilter(v: unknown, path: string, opts: { withMeasure?: boolean } = {}): FieldError[] {
  const found: FilterFieldError[] = []
  checkEventFilter(v, path, found)
  const out: FieldError[] = [...found]
  if (opts.withMeasure && isObj(v) && v.measure !== undefined && v.measure !== 'count' && v.measure !== 'sum') {
    out.push(err(`${path}.measure`, 'must be count or sum'))
  }
  return out
}

export interface EventFilter {
  event_type: string
  filters?: EventCondition[]
  measure?: 'count' | 'sum'
}

/** A predicate over stream events: the type matches and every condition holds (src/lib/event-filter.ts). */
export function compileFilter(f: EventFilter): (e: StreamEvent) => boolean {
  return (e) => matchesFilter(e, f)
}

/** What a matching event adds: 1 (count) or its amount (sum; 0 without one). Exact decimal strings. */
export function measureOf(measure: 'count' | 'sum' | undefined, e: StreamEvent): string {
  if (measure !== 'sum') return '1'
  const a = e.fields.amount
  return typeof a === 'string' && a !== '' && !a.startsWith('-') ? a : '0'
}

/** The event types whose rollbacks take back what the type added (§1). */
export const ROLLBACK_OF: Record<string, string> = { bet: 'bet_rollback', win: 'win_rollback' }

// ---- Mission rules (§5) ----------------------------------------------------------------------------

export interface MissionRules extends EventFilter {
  target?: number
  stages?: { target: number; rewards?: Rewards }[]
  timezone?: string
  opt_in?: boolean
}
export interface Rewards {
  points?: { currency_id: string; amount: number }[]
  badge_ids?: string[]
  bonus_ids?: string[]
}


/** Shape of a rewards object; the ids' existence in the brand is checked by the caller (references). */
export function validateRewards(v: unknown, path: string): FieldError[] {
  if (v === undefined) return []
  if (!isObj(v)) return [err(path, 'must be an object { points, badge_ids, bonus_ids }')]
  const out: FieldError[] = []
  if (v.points !== undefined) {
    if (!Array.isArray(v.points)) out.push(err(`${path}.points`, 'must be an array of { currency_id, amount }'))
    else v.points.forEach((p, i) => {
      if (!isObj(p) || !isUuid(p.currency_id)) out.push(err(`${path}.points.${i}.currency_id`, 'must be a currency id'))
      if (!isObj(p) || typeof p.amount !== 'number' || !(p.amount > 0) || p.amount > 1e12) out.push(err(`${path}.points.${i}.amount`, 'must be a number > 0'))
    })
  }
  for (const k of ['badge_ids', 'bonus_ids'] as const) {
    const ids = v[k]
    if (ids === undefined) continue
    if (!Array.isArray(ids) || ids.length > 100) out.push(err(`${path}.${k}`, 'must be an array of ids'))
    else ids.forEach((id, i) => {
      if (!isUuid(id)) out.push(err(`${path}.${k}.${i}`, 'must be an id'))
    })
  }
  return out
}

export function validateMissionRules(type: string, rules: unknown): FieldError[] {
  const out = validateEventFilter(rules, 'rules', { withMeasure: true })
  if (!isObj(rules)) return out
  if (type === 'progressive') {
    const stages = rules.stages
    if (!Array.isArray(stages) || stages.length === 0 || stages.length > 100) {
      out.push(err('rules.stages', 'required for progressive missions: a non-empty array of { target, rewards }'))
    } else {
      let last = 0
      stages.forEach((s, i) => {
        // At most 1e15, as rules.target: progress is exact in micro-units up to there (and 1e400 in JSON is
        // Infinity, which jsonb would store as null, a target of 0).
        if (!isObj(s) || typeof s.target !== 'number' || !(s.target > 0) || s.target > 1e15) out.push(err(`rules.stages.${i}.target`, 'must be a number > 0 and at most 1e15'))
        else if (s.target <= last) out.push(err(`rules.stages.${i}.target`, 'stage targets must ascend'))
        else last = s.target
        if (isObj(s)) out.push(...validateRewards(s.rewards, `rules.stages.${i}.rewards`))
      })
    }
  } else {
    if (typeof rules.target !== 'number' || !(rules.target > 0) || rules.target > 1e15) out.push(err('rules.target', 'required: a number > 0'))
    if (rules.stages !== undefined) out.push(err('rules.stages', 'only progressive missions have stages'))
  }
  if (rules.timezone !== undefined && !isTimeZone(rules.timezone)) out.push(err('rules.timezone', 'must be an IANA time zone'))
  if (rules.opt_in !== undefined && typeof rules.opt_in !== 'boolean') out.push(err('rules.opt_in', 'must be a boolean'))
  return out
}

// ---- Badge criteria ----------------------------------------------------------------------------------

export type BadgeCriteria = (EventFilter & { target: number }) | { missions_completed: number } | { level_tier: number }

export function validateBadgeCriteria(c: unknown): FieldError[] {
  if (!isObj(c)) return [err('criteria', 'must be an object')]
  if ('missions_completed' in c) {
    return Number.isInteger(c.missions_completed) && (c.missions_completed as number) >= 1 ? [] : [err('criteria.missions_completed', 'must be an integer ≥ 1')]
  }
  if ('level_tier' in c) {
    return Number.isInteger(c.level_tier) && (c.level_tier as number) >= 1 ? [] : [err('criteria.level_tier', 'must be an integer ≥ 1')]
  }
  const out = validateEventFilter(c, 'criteria', { withMeasure: true })
  if (typeof c.target !== 'number' || !(c.target > 0) || c.target > 1e15) out.push(err('criteria.target', 'required: a number > 0 and at most 1e15 (or use missions_completed / level_tier)'))
  return out
}

// ---- Tournaments ---------------------------------------------------------------------------------------

export const TOURNAMENT_METRICS = ['bet_amount', 'win_amount', 'bet_count', 'ggr'] as const
export interface GameConfig {
  metric: (typeof TOURNAMENT_METRICS)[number]
  games?: string[]
  providers?: string[]
  categories?: string[]
  currency?: string
  min_bet?: number
}
export interface PrizePool {
  prizes?: { from_rank: number; to_rank: number; bonus_id?: string; points?: { currency_id: string; amount: number }[] }[]
}

export function validateGameConfig(g: unknown): FieldError[] {
  if (!isObj(g)) return [err('game_config', 'must be an object')]
  const out: FieldError[] = []
  if (!(TOURNAMENT_METRICS as readonly string[]).includes(g.metric as string)) out.push(err('game_config.metric', `required: one of ${TOURNAMENT_METRICS.join(', ')}`))
  for (const k of ['games', 'providers', 'categories'] as const) {
    const v = g[k]
    if (v !== undefined && (!Array.isArray(v) || v.length === 0 || v.length > 1000 || !v.every((x) => typeof x === 'string'))) {
      out.push(err(`game_config.${k}`, 'must be a non-empty array of strings'))
    }
  }
  if (g.currency !== undefined && (typeof g.currency !== 'string' || !CURRENCY_CODE_RE.test(g.currency))) out.push(err('game_config.currency', 'must be a currency code (3-letter ISO, or a ticker of 2–10 letters or digits)'))
  if (g.min_bet !== undefined && (typeof g.min_bet !== 'number' || !Number.isFinite(g.min_bet) || g.min_bet < 0)) out.push(err('game_config.min_bet', 'must be a finite number ≥ 0'))
  return out
}

export function validatePrizePool(p: unknown): FieldError[] {
  if (!isObj(p)) return [err('prize_pool', 'must be an object')]
  if (p.prizes === undefined) return []
  if (!Array.isArray(p.prizes) || p.prizes.length > 1000) return [err('prize_pool.prizes', 'must be an array of { from_rank, to_rank, bonus_id, points }')]
  const out: FieldError[] = []
  p.prizes.forEach((x, i) => {
    const at = `prize_pool.prizes.${i}`
    if (!isObj(x)) return out.push(err(at, 'must be an object'))
    if (!Number.isInteger(x.from_rank) || (x.from_rank as number) < 1) out.push(err(`${at}.from_rank`, 'must be an integer ≥ 1'))
    if (!Number.isInteger(x.to_rank) || (x.to_rank as number) < (x.from_rank as number)) out.push(err(`${at}.to_rank`, 'must be an integer ≥ from_rank'))
    if (x.bonus_id !== undefined && (!isUuid(x.bonus_id))) out.push(err(`${at}.bonus_id`, 'must be a bonus id'))
    out.push(...validateRewards({ points: x.points }, at))
    return undefined
  })
  return out
}

/** Does a bet/win event count for this tournament (filters, currency, min_bet)? Its score delta or null. */
export function tournamentDelta(g: GameConfig, e: StreamEvent): string | null {
  const t = e.type
  const kind = t === 'bet' || t === 'bet_rollback' ? 'bet' : t === 'win' || t === 'win_rollback' ? 'win' : null
  if (!kind) return null
  if (g.metric === 'bet_amount' || g.metric === 'bet_count') { if (kind !== 'bet') return null }
  else if (g.metric === 'win_amount') { if (kind !== 'win') return null }
  const f = e.fields
  // A rollback takes back what its round was credited (the engine's round credits), whatever filters it
  // meets: it may come without the game, provider or currency of the bet or win it cancels. At most, as
  // §1 says, a count's 1 or a sum its own amount ('0': no amount, the whole credit).
  if (t === 'bet_rollback' || t === 'win_rollback') {
    if (g.metric === 'bet_count') return '1'
    return typeof f.amount === 'string' && !f.amount.startsWith('-') ? f.amount : '0'
  }
  const inList = (list: string[] | undefined, v: unknown) => !list || (typeof v === 'string' && list.includes(v))
  if (!inList(g.games, f.game) || !inList(g.providers, f.provider) || !inList(g.categories, f.category)) return null
  if (g.currency && String(f.currency ?? '').toUpperCase() !== g.currency.toUpperCase()) return null
  const amount = typeof f.amount === 'string' && !f.amount.startsWith('-') ? f.amount : '0'
  if (kind === 'bet' && g.min_bet !== undefined && t === 'bet' && Number(amount) < g.min_bet) return null
  if (g.metric === 'bet_count') return '1'
  if (g.metric === 'ggr' && kind === 'win') return `-${amount}`
  return amount
}

/**
 * What a tournament could score, for the event stream's pre-test: each type its metric reads, with its
 * game, provider, category and currency lists (and min_bet for bets) as filters, rollbacks in full (as
 * tournamentDelta takes them). Every event that tournamentDelta scores passes them (they may pass a few
 * it then refuses, never the reverse).
 */
export function tournamentInterest(g: GameConfig): InterestEntry[] {
  const common: EventCondition[] = []
  if (g.games?.length) common.push({ field: 'game', op: 'in', value: g.games })
  if (g.providers?.length) common.push({ field: 'provider', op: 'in', value: g.providers })
  if (g.categories?.length) common.push({ field: 'category', op: 'in', value: g.categories })
  if (g.currency) common.push({ field: 'currency', op: 'eq', value: g.currency })
  return tournamentTypes(g).map((type) => type.endsWith('_rollback') ? type : ({
    type,
    // A bet without an amount (or a negative one) scores 0 against min_bet: only a positive min_bet refuses it.
    filters: type === 'bet' && g.min_bet !== undefined && g.min_bet > 0 ? [...common, { field: 'amount', op: 'gte', value: g.min_bet }] : common,
  }))
}

/** Event types a tournament's metric reads (rollbacks included). */
export function tournamentTypes(g: GameConfig): string[] {
  if (g.metric === 'win_amount') return ['win', 'win_rollback']
  if (g.metric === 'ggr') return ['bet', 'bet_rollback', 'win', 'win_rollback']
  return ['bet', 'bet_rollback']
}

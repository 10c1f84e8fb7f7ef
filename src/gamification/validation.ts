// Rule validation of the definition resources, run by the generic store on create and on the record a
// PATCH produces (contract-engines §1: invalid rules are a 400 naming the field, never a run-time
// surprise). An empty object (the create default) is accepted: a mission, badge or tournament without
// rules, which nothing progresses until rules are set.
import type { Sql } from '../db/postgres.ts'
import type { FieldError } from '../http/router.ts'
import type { Row } from './crud.ts'
import { validateBadgeCriteria, validateGameConfig, validateMissionRules, validatePrizePool, validateRewards, type Rewards } from './rules.ts'

const isEmpty = (v: unknown) => v == null || (typeof v === 'object' && Object.keys(v as object).length === 0)

export function checkMission(record: Row): FieldError[] {
  const out: FieldError[] = []
  if (!isEmpty(record.rules)) out.push(...validateMissionRules(String(record.type), record.rules))
  out.push(...validateRewards(record.rewards ?? undefined, 'rewards'))
  return out
}

export function checkBadge(record: Row): FieldError[] {
  return isEmpty(record.criteria) ? [] : validateBadgeCriteria(record.criteria)
}

export function checkTournament(record: Row): FieldError[] {
  const out: FieldError[] = []
  if (!isEmpty(record.game_config)) out.push(...validateGameConfig(record.game_config))
  if (!isEmpty(record.prize_pool)) out.push(...validatePrizePool(record.prize_pool))
  return out
}

/** Every id a rewards object names must exist in the brand: currencies, badges, bonuses. */
async function checkRewardRefs(sql: Sql, rewards: Rewards | undefined, path: string, brandId: string): Promise<FieldError[]> {
  if (!rewards || typeof rewards !== 'object') return []
  const out: FieldError[] = []
  const find = async (table: 'gamification_currencies' | 'gamification_badges' | 'bonuses', ids: string[]) => {
    if (!ids.length) return new Set<string>()
    const rows = await sql<{ id: string }[]>`select id from ${sql(table)} where brand_id = ${brandId} and id = any(${ids}::uuid[])`
    return new Set(rows.map((r) => r.id))
  }
  const points = Array.isArray(rewards.points) ? rewards.points : []
  const currencies = await find('gamification_currencies', points.map((p) => p.currency_id))
  points.forEach((p, i) => {
    if (!currencies.has(p.currency_id)) out.push({ in: 'body', field: `${path}.points.${i}.currency_id`, message: 'no such currency in this brand' })
  })
  for (const [k, table] of [['badge_ids', 'gamification_badges'], ['bonus_ids', 'bonuses']] as const) {
    const ids = Array.isArray(rewards[k]) ? (rewards[k] as string[]) : []
    const found = await find(table, ids)
    ids.forEach((id, i) => {
      if (!found.has(id)) out.push({ in: 'body', field: `${path}.${k}.${i}`, message: `no such ${k === 'badge_ids' ? 'badge' : 'bonus'} in this brand` })
    })
  }
  return out
}

export async function missionRefs(sql: Sql, record: Row, brandId: string): Promise<FieldError[]> {
  const out = await checkRewardRefs(sql, record.rewards as Rewards, 'rewards', brandId)
  const stages = (record.rules as { stages?: { rewards?: Rewards }[] } | null)?.stages
  if (Array.isArray(stages)) for (const [i, s] of stages.entries()) out.push(...(await checkRewardRefs(sql, s?.rewards, `rules.stages.${i}.rewards`, brandId)))
  return out
}

export async function tournamentRefs(sql: Sql, record: Row, brandId: string): Promise<FieldError[]> {
  const prizes = (record.prize_pool as { prizes?: { bonus_id?: string; points?: Rewards['points'] }[] } | null)?.prizes
  if (!Array.isArray(prizes)) return []
  const out: FieldError[] = []
  for (const [i, p] of prizes.entries()) {
    out.push(...(await checkRewardRefs(sql, { points: p.points, bonus_ids: p.bonus_id ? [p.bonus_id] : [] }, `prize_pool.prizes.${i}`, brandId)))
  }
  // A prize's bonus is named bonus_id, not bonus_ids.0.
  return out.map((e) => ({ ...e, field: e.field.replace(/\.bonus_ids\.0$/, '.bonus_id') }))
}

// Gamification definitions (descriptors for the generic store) and the player gamification profile.
import type { AppContext } from '../context.ts'
import { notFound } from '../errors.ts'
import type { FieldError } from '../http/router.ts'
import type { Visibility } from '../lib/visibility.ts'
import { iso, num } from '../lib/rows.ts'
import { endsAfterStarts, type ResourceDef, type Row } from './crud.ts'
import { checkBadge, checkMission, missionRefs } from './validation.ts'
import { findPlayerRef } from '../players/service.ts'
import * as q from './queries.ts'
import type { Badge, Level, Mission, PlayerGamificationProfile, PointCurrency } from './schemas.ts'

export const levelOut = (r: Row): Level => ({
  id: r.id as string,
  name: r.name as string,
  tier: r.tier as number,
  min_points: num(r.min_points) as number,
  max_points: num(r.max_points),
  benefits: r.benefits as Level['benefits'],
  created_at: iso(r.created_at) as string,
})

function maxAtLeastMin(record: Row): FieldError[] {
  const min = num(record.min_points)
  const max = num(record.max_points)
  if (min === null || max === null || max >= min) return []
  return [{ in: 'body', field: 'max_points', message: `must be greater than or equal to min_points (${min})` }]
}

export const levels: ResourceDef<Level> = {
  table: 'gamification_levels',
  label: 'level',
  columns: ['name', 'tier', 'min_points', 'max_points', 'benefits'],
  jsonColumns: ['benefits'],
  orderBy: ['tier', 'min_points', 'created_at'],
  toOut: levelOut,
  check: maxAtLeastMin,
}

export const missions: ResourceDef<Mission> = {
  table: 'gamification_missions',
  label: 'mission',
  columns: ['name', 'description', 'type', 'status', 'rules', 'rewards', 'max_completions_per_player', 'starts_at', 'ends_at'],
  jsonColumns: ['rules', 'rewards'],
  orderBy: ['created_at'],
  toOut: (r) => ({
    id: r.id as string,
    name: r.name as string,
    description: (r.description as string | null) ?? null,
    type: r.type as Mission['type'],
    status: r.status as Mission['status'],
    rules: r.rules as Mission['rules'],
    rewards: r.rewards as Mission['rewards'],
    max_completions_per_player: (r.max_completions_per_player as number | null) ?? null,
    starts_at: iso(r.starts_at),
    ends_at: iso(r.ends_at),
    created_at: iso(r.created_at) as string,
    updated_at: iso(r.updated_at) as string,
  }),
  check: (record) => [...endsAfterStarts(record), ...checkMission(record)],
  checkRefs: missionRefs,
}

export const badges: ResourceDef<Badge> = {
  table: 'gamification_badges',
  label: 'badge',
  columns: ['name', 'description', 'icon_url', 'criteria', 'rarity'],
  jsonColumns: ['criteria'],
  orderBy: ['created_at'],
  toOut: (r) => ({
    id: r.id as string,
    name: r.name as string,
    description: (r.description as string | null) ?? null,
    icon_url: (r.icon_url as string | null) ?? null,
    criteria: r.criteria as Badge['criteria'],
    rarity: r.rarity as Badge['rarity'],
    created_at: iso(r.created_at) as string,
  }),
  check: checkBadge,
}

export const currencies: ResourceDef<PointCurrency> = {
  table: 'gamification_currencies',
  label: 'currency',
  columns: ['name', 'symbol', 'type'],
  orderBy: ['created_at'],
  toOut: (r) => ({
    id: r.id as string,
    name: r.name as string,
    symbol: r.symbol as string,
    type: r.type as PointCurrency['type'],
    created_at: iso(r.created_at) as string,
  }),
}

/**
 * The player's gamification profile, in the player's own brand.
 *
 * Level points are the player's lifetime points earned in the brand's `virtual` currencies (contract-engines
 * §5; spending never lowers them). The current level is the highest-tier level whose min_points ≤ points
 * (null when none).
 */
export async function getPlayerProfile(
  ctx: AppContext,
  input: Visibility & { playerId: string },
): Promise<PlayerGamificationProfile> {
  const player = await findPlayerRef(ctx, input)
  if (!player) throw notFound('player')
  const now = ctx.clock()
  const [balances, points, active, earned] = await Promise.all([
    q.pointBalances(ctx.sql, player),
    q.levelPoints(ctx.sql, player),
    q.activeMissions(ctx.sql, { ...player, now }),
    q.earnedBadges(ctx.sql, player),
  ])
  const level = await q.levelForPoints(ctx.sql, { ...player, points })
  return {
    player_id: player.id,
    current_level: level ? levelOut(level) : null,
    point_balances: balances,
    active_missions: active,
    badges_earned: earned,
  }
}

// Reads behind the player gamification profile. The player itself is found through the players feature
// (findPlayerRef); these queries read the gamification tables for it.
import type { Sql } from '../db/postgres.ts'
import type { PlayerRef } from '../players/service.ts'
import { iso, num } from '../lib/rows.ts'
import type { Row } from './crud.ts'
import { periodStart } from './periods.ts'
import type { MissionRules } from './rules.ts'
import type { PlayerGamificationProfile } from './schemas.ts'

type Profile = PlayerGamificationProfile

/** One entry per currency of the player's brand, zero where the player holds nothing yet. */
export async function pointBalances(sql: Sql, p: PlayerRef): Promise<Profile['point_balances']> {
  const rows = await sql<Row[]>`
    select c.id as currency_id, c.name, c.symbol, c.type,
           coalesce(b.balance, 0) as balance, coalesce(b.lifetime_earned, 0) as lifetime_earned
    from gamification_currencies c
    left join player_point_balances b on b.currency_id = c.id and b.player_id = ${p.id}
    where c.tenant_id = ${p.tenantId} and c.brand_id = ${p.brandId}
    order by c.created_at, c.id`
  return rows.map((r) => ({
    currency_id: r.currency_id as string,
    name: r.name as string,
    symbol: r.symbol as string,
    type: r.type as string,
    balance: num(r.balance) as number,
    lifetime: num(r.lifetime_earned) as number,
    lifetime_earned: num(r.lifetime_earned) as number,
  }))
}


/** Lifetime points earned in the brand's virtual currencies: what the level is computed from. */
export async function levelPoints(sql: Sql, p: PlayerRef): Promise<number> {
  const [row] = await sql<{ points: string }[]>`
    select coalesce(sum(b.lifetime_earned), 0) as points
    from player_point_balances b join gamification_currencies c on c.id = b.currency_id
    where b.player_id = ${p.id} and c.brand_id = ${p.brandId} and c.type = 'virtual'`
  return Number(row?.points ?? 0)
}

export async function levelForPoints(sql: Sql, p: PlayerRef & { points: number }): Promise<Row | undefined> {
  const [row] = await sql<Row[]>`
    select * from gamification_levels
    where tenant_id = ${p.tenantId} and brand_id = ${p.brandId} and min_points <= ${String(p.points)}::numeric
    order by tier desc, min_points desc, created_at desc, id desc limit 1`
  return row
}

/**
 * Missions the player can work on now: the brand's `active` missions inside their time window that the
 * player has not completed the maximum number of times, with the player's progress (empty until the
 * gamification engine records some).
 */
export async function activeMissions(sql: Sql, p: PlayerRef & { now: Date }): Promise<Profile['active_missions']> {
  const rows = await sql<Row[]>`
    select m.id as mission_id, m.name, m.description, m.type, m.rules, m.rewards, m.max_completions_per_player, m.total,
           m.starts_at, m.ends_at, pm.value, pm.stage, pm.period_start, pm.joined_at, coalesce(pm.completions, 0) as completions,
           coalesce(pm.period_done, false) as period_done
    from gamification_missions m
    left join player_missions pm on pm.mission_id = m.id and pm.player_id = ${p.id}
    where m.tenant_id = ${p.tenantId} and m.brand_id = ${p.brandId} and m.status = 'active'
      and (m.starts_at is null or m.starts_at <= ${p.now})
      and (m.ends_at is null or m.ends_at > ${p.now})
      and (m.max_completions_per_player is null or coalesce(pm.completions, 0) < m.max_completions_per_player)
    order by m.created_at, m.id`
  // Missions without periods that the player completed are done for good (daily/weekly show until the period ends).
  return rows.filter((r) => !(r.period_done && (r.type === 'one_time' || r.type === 'progressive' || r.type === 'collaborative'))).map((r) => {
    const rules = (r.rules ?? {}) as MissionRules
    const type = r.type as Profile['active_missions'][number]['type']
    // A period that has ended since the last event starts again from 0.
    const current = periodStart(type, rules.timezone ?? 'UTC', p.now)
    const stored = r.period_start ? new Date(r.period_start as string) : null
    const stale = current !== null && (stored === null || stored.getTime() < current.getTime())
    const stage = stale ? 0 : Number(r.stage ?? 0)
    const target = type === 'progressive' ? (rules.stages?.[Math.min(stage, (rules.stages?.length ?? 1) - 1)]?.target ?? null) : (rules.target ?? null)
    const optIn = rules.opt_in === true
    return {
      mission_id: r.mission_id as string,
      name: r.name as string,
      description: (r.description as string | null) ?? null,
      type,
      rewards: r.rewards as Record<string, unknown>,
      max_completions_per_player: (r.max_completions_per_player as number | null) ?? null,
      starts_at: iso(r.starts_at),
      ends_at: iso(r.ends_at),
      progress: stale ? 0 : Number(r.value ?? 0),
      target,
      stage,
      completions: Number(r.completions),
      period_start: current ? current.toISOString() : null,
      opt_in: optIn,
      joined: !optIn || r.joined_at != null,
      ...(type === 'collaborative' ? { total: Number(r.total ?? 0) } : {}),
    }
  })
}

export async function earnedBadges(sql: Sql, p: PlayerRef): Promise<Profile['badges_earned']> {
  const rows = await sql<Row[]>`
    select b.id as badge_id, b.name, b.description, b.icon_url, b.rarity, pb.earned_at
    from player_badges pb join gamification_badges b on b.id = pb.badge_id
    where pb.player_id = ${p.id} and b.tenant_id = ${p.tenantId}
    order by pb.earned_at, b.id`
  return rows.map((r) => ({
    badge_id: r.badge_id as string,
    name: r.name as string,
    description: (r.description as string | null) ?? null,
    icon_url: (r.icon_url as string | null) ?? null,
    rarity: r.rarity as string,
    earned_at: iso(r.earned_at) as string,
  }))
}

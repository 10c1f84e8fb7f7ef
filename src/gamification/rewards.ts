// Rewards and their consequences, always on the caller's transaction so they commit with what earned
// them: points through the ledger (balances never below 0), the level that lifetime virtual points
// reach, badges (earned once), bonus grants (refused and recorded for a player who is not active), and
// the outbox events of each (gamification.level_changed, gamification.badge_earned, bonus.granted).
import type { ReservedSql, TransactionSql } from 'postgres'
import type { Sql } from '../db/postgres.ts'
import { badRequest } from '../errors.ts'
import { insertOutbox } from '../lib/outbox.ts'
import { iso } from '../lib/rows.ts'
import type { Rewards } from './rules.ts'

export type Tx = TransactionSql | ReservedSql | Sql

export interface PlayerKey {
  playerId: string
  tenantId: string
  brandId: string
}

export interface LedgerEntry {
  id: string
  player_id: string
  currency_id: string
  amount: number
  balance_after: number
  source: string
  source_id: string | null
  reason: string | null
  created_at: string
}

/**
 * One ledger entry and the balance it moves, atomically: a debit past the balance changes nothing and
 * throws 400 (the conditional update is the check, so concurrent debits can never overdraw). A credit of
 * a virtual currency raises lifetime points and may change the level.
 */
export async function movePoints(
  tx: Tx,
  p: PlayerKey & { currencyId: string; amount: string; source: string; sourceId?: string | null; reason?: string | null },
): Promise<LedgerEntry> {
  const credit = !p.amount.startsWith('-')
  if (credit) {
    await tx`insert into player_point_balances (player_id, currency_id, tenant_id) values (${p.playerId}, ${p.currencyId}, ${p.tenantId})
             on conflict do nothing`
  }
  const [bal] = await tx<{ balance: string }[]>`
    update player_point_balances set balance = balance + ${p.amount}::numeric,
      lifetime_earned = lifetime_earned + greatest(${p.amount}::numeric, 0), updated_at = now()
    where player_id = ${p.playerId} and currency_id = ${p.currencyId} and balance + ${p.amount}::numeric >= 0
    returning balance`
  if (!bal) throw badRequest('insufficient balance', { errors: [{ in: 'body', field: 'amount', message: 'the debit exceeds the balance' }] })
  const [row] = await tx<Record<string, unknown>[]>`
    insert into point_ledger (tenant_id, brand_id, player_id, currency_id, amount, balance_after, source, source_id, reason)
    values (${p.tenantId}, ${p.brandId}, ${p.playerId}, ${p.currencyId}, ${p.amount}::numeric, ${bal.balance}::numeric, ${p.source},
            ${p.sourceId ?? null}, ${p.reason ?? null})
    returning *`
  if (credit) await refreshLevel(tx, p)
  return ledgerOut(row!)
}

/** A point_ledger row as the API shows it: its UUID as the id (the bigserial only orders). */
export function ledgerOut(r: Record<string, unknown>) {
  return {
    id: r.entry_id as string, player_id: r.player_id as string, currency_id: r.currency_id as string, amount: Number(r.amount),
    balance_after: Number(r.balance_after), source: r.source as string, source_id: (r.source_id as string | null) ?? null,
    reason: (r.reason as string | null) ?? null, created_at: iso(r.created_at) as string,
  }
}

/** Creates the player's engine row if missing and locks it: every engine write for a player holds it. */
export async function lockPlayers(tx: Tx, players: { playerId: string; tenantId: string }[]): Promise<void> {
  if (!players.length) return
  const sorted = [...new Map(players.map((p) => [p.playerId, p])).values()].sort((a, b) => (a.playerId < b.playerId ? -1 : 1))
  await tx`
    insert into player_gamification (player_id, tenant_id)
    select * from unnest(${sorted.map((p) => p.playerId)}::uuid[], ${sorted.map((p) => p.tenantId)}::uuid[])
    on conflict do nothing`
  await tx`select 1 from player_gamification where player_id = any(${sorted.map((p) => p.playerId)}::uuid[]) order by player_id for update`
}

/**
 * The level of lifetime points in the brand's virtual currencies (spending never lowers it). A change is
 * recorded and announced, and may earn level_tier badges.
 */
export async function refreshLevel(tx: Tx, p: PlayerKey): Promise<void> {
  await refreshLevels(tx, [p])
}

/** refreshLevel for several players: one query finds whose level changed (rarely anyone's). */
export async function refreshLevels(tx: Tx, players: PlayerKey[]): Promise<void> {
  if (!players.length) return
  const rows = await tx<{ player_id: string; level_id: string | null; tier: number | null; previous: string | null }[]>`
    select p.player_id, lvl.id as level_id, lvl.tier, g.level_id as previous
    from unnest(${players.map((p) => p.playerId)}::uuid[], ${players.map((p) => p.brandId)}::uuid[]) with ordinality as p(player_id, brand_id, n)
    cross join lateral (
      select coalesce(sum(b.lifetime_earned), 0) as points
      from player_point_balances b join gamification_currencies c on c.id = b.currency_id
      where b.player_id = p.player_id and c.brand_id = p.brand_id and c.type = 'virtual'
    ) pts
    left join lateral (
      select l.id, l.tier from gamification_levels l
      where l.brand_id = p.brand_id and l.min_points <= pts.points
      order by l.tier desc, l.min_points desc, l.created_at desc, l.id desc limit 1
    ) lvl on true
    left join player_gamification g on g.player_id = p.player_id
    order by p.n`
  const byId = new Map(players.map((p) => [p.playerId, p]))
  for (const row of rows) {
    if (row.level_id === row.previous || row.level_id === null) continue
    const p = byId.get(row.player_id) as PlayerKey
    await tx`
      insert into player_gamification (player_id, tenant_id, level_id) values (${p.playerId}, ${p.tenantId}, ${row.level_id})
      on conflict (player_id) do update set level_id = excluded.level_id, updated_at = now()`
    await insertOutbox(tx as Sql, {
      tenantId: p.tenantId, brandId: p.brandId, event: 'gamification.level_changed',
      data: { player_id: p.playerId, level_id: row.level_id, tier: row.tier, previous_level_id: row.previous, brand_id: p.brandId },
    })
    await milestoneBadges(tx, p)
  }
}

/** Badges by missions completed or level tier reached that the player now qualifies for. */
export async function milestoneBadges(tx: Tx, p: PlayerKey): Promise<void> {
  await milestoneBadgesMany(tx, [p])
}

/** milestoneBadges for several players: one query finds the badges due (rarely any). */
export async function milestoneBadgesMany(tx: Tx, players: PlayerKey[]): Promise<void> {
  if (!players.length) return
  const due = await tx<{ player_id: string; id: string }[]>`
    select p.player_id, b.id
    from unnest(${players.map((p) => p.playerId)}::uuid[], ${players.map((p) => p.brandId)}::uuid[]) with ordinality as p(player_id, brand_id, n)
    join gamification_badges b on b.brand_id = p.brand_id
    left join player_gamification g on g.player_id = p.player_id
    left join gamification_levels l on l.id = g.level_id
    where not exists (select 1 from player_badges pb where pb.player_id = p.player_id and pb.badge_id = b.id)
      and ((b.criteria ? 'missions_completed' and coalesce(g.missions_completed, 0) >= (b.criteria->>'missions_completed')::numeric)
        or (b.criteria ? 'level_tier' and coalesce(l.tier, 0) >= (b.criteria->>'level_tier')::numeric))
    order by p.n, b.created_at, b.id`
  const byId = new Map(players.map((p) => [p.playerId, p]))
  for (const b of due) await awardBadge(tx, byId.get(b.player_id) as PlayerKey, b.id)
}

/** Earned once: a second award changes nothing. */
export async function awardBadge(tx: Tx, p: PlayerKey, badgeId: string): Promise<boolean> {
  const [row] = await tx<{ badge_id: string }[]>`
    insert into player_badges (player_id, badge_id, tenant_id)
    select ${p.playerId}, id, tenant_id from gamification_badges where id = ${badgeId} and brand_id = ${p.brandId}
    on conflict do nothing returning badge_id`
  if (!row) return false
  await insertOutbox(tx as Sql, {
    tenantId: p.tenantId, brandId: p.brandId, event: 'gamification.badge_earned',
    data: { player_id: p.playerId, badge_id: badgeId, brand_id: p.brandId },
  })
  return true
}

export interface GrantResult {
  id: string
  bonus_id: string
  player_id: string
  status: 'granted' | 'refused'
  refusal_reason: string | null
  reason: string | null
  source: string
  expires_at: string | null
  created_at: string
}

/**
 * The latest instant an RFC 3339 date-time can write (4-digit years): a grant's expiry past it (the documented
 * maximum expires_in_hours is ~245,000 years) is stored as this, so every API answer and bonus.granted carry
 * a date-time (JavaScript would write `+247003-…`, which no RFC 3339 parser reads).
 */
const LATEST_DATE_TIME = '9999-12-31T23:59:59.999Z'

/**
 * Grants a bonus, or records the refusal: the bonus must be active (else `bonus_inactive`) and the player
 * `active` (else `player_not_active`: responsible gaming, nothing is ever granted to such a player).
 */
export async function grantBonus(
  tx: Tx,
  p: PlayerKey & { bonusId: string; reason?: string | null; source: string; sourceId?: string | null },
): Promise<GrantResult> {
  const [info] = await tx<{ active: boolean; type: string; value: string; value_type: string; wagering_requirement: string; expires_in_hours: number | null; status: string; external_id: string }[]>`
    select b.active, b.type, b.value, b.value_type, b.wagering_requirement, b.expires_in_hours, pl.status, pl.external_id
    from bonuses b, players pl
    where b.id = ${p.bonusId} and b.brand_id = ${p.brandId} and pl.id = ${p.playerId}`
  const refusal = !info ? 'bonus_not_found' : !info.active ? 'bonus_inactive' : info.status !== 'active' ? 'player_not_active' : null
  const [row] = await tx<Record<string, unknown>[]>`
    insert into bonus_grants (tenant_id, brand_id, bonus_id, player_id, status, refusal_reason, reason, source, source_id, expires_at)
    select ${p.tenantId}, ${p.brandId}, ${p.bonusId}, ${p.playerId}, ${refusal ? 'refused' : 'granted'}, ${refusal}, ${p.reason ?? null},
           ${p.source}, ${p.sourceId ?? null},
           case when ${info?.expires_in_hours ?? null}::int is null or ${refusal}::text is not null then null
                else least(now() + make_interval(hours => ${info?.expires_in_hours ?? 0}::int), ${LATEST_DATE_TIME}::timestamptz) end
    where exists (select 1 from bonuses where id = ${p.bonusId} and brand_id = ${p.brandId}) -- as not found: no record
    returning *`
  // No row: the bonus is gone, also when a concurrent delete committed between the read above and the
  // insert (the read then saw it active). Nothing was granted: no bonus.granted, and 'bonus_not_found'.
  const refused = row ? refusal : 'bonus_not_found'
  const out: GrantResult = {
    id: (row?.id as string) ?? '', bonus_id: p.bonusId, player_id: p.playerId, status: refused ? 'refused' : 'granted', refusal_reason: refused,
    reason: p.reason ?? null, source: p.source, expires_at: iso(row?.expires_at), created_at: iso(row?.created_at ?? new Date()) as string,
  }
  if (!refused && info) {
    await insertOutbox(tx as Sql, {
      tenantId: p.tenantId, brandId: p.brandId, event: 'bonus.granted',
      data: {
        grant_id: out.id, bonus_id: p.bonusId, player_id: p.playerId, external_id: info.external_id, type: info.type,
        value: Number(info.value), value_type: info.value_type, wagering_requirement: Number(info.wagering_requirement),
        expires_at: out.expires_at, brand_id: p.brandId,
      },
    })
  }
  return out
}

/** A mission's, stage's or prize's rewards; players who are not active get none of them (recorded for bonuses). */
export async function grantRewards(tx: Tx, p: PlayerKey, rewards: Rewards | undefined, source: { kind: string; id: string }): Promise<void> {
  if (!rewards) return
  const [pl] = await tx<{ status: string }[]>`select status from players where id = ${p.playerId}`
  const active = pl?.status === 'active'
  for (const pts of rewards.points ?? []) {
    if (!active) continue
    const [cur] = await tx<{ id: string }[]>`select id from gamification_currencies where id = ${pts.currency_id} and brand_id = ${p.brandId}`
    if (!cur) continue
    await movePoints(tx, { ...p, currencyId: pts.currency_id, amount: String(pts.amount), source: source.kind, sourceId: source.id })
  }
  for (const badgeId of rewards.badge_ids ?? []) if (active) await awardBadge(tx, p, badgeId)
  // A bonus for an inactive player is refused and recorded (grantBonus checks the status itself).
  for (const bonusId of rewards.bonus_ids ?? []) await grantBonus(tx, { ...p, bonusId, source: source.kind, sourceId: source.id })
}

export interface RewardGrant {
  player: PlayerKey
  rewards: Rewards | undefined
  source: { kind: string; id: string }
}

/**
 * grantRewards for many grants (a batch of events' completions), in a few statements instead of ~7 per
 * grant: the players' statuses and the currencies in one round trip, every point credit (balances and
 * ledger, balance_after running in grant order) in one statement, the levels of every credited player in
 * one query. The effects are those of grantRewards for each grant in turn, except that a player's level
 * is checked once after all of the batch's credits (one level_changed from the first to the last level).
 * Badges and bonuses, rare, go one by one as in grantRewards.
 */
export async function grantRewardsMany(tx: Tx, grants: RewardGrant[]): Promise<void> {
  const todo = grants.filter((g) => g.rewards && (g.rewards.points?.length || g.rewards.badge_ids?.length || g.rewards.bonus_ids?.length))
  if (!todo.length) return
  const playerIds = [...new Set(todo.map((g) => g.player.playerId))]
  const currencyIds = [...new Set(todo.flatMap((g) => (g.rewards?.points ?? []).map((p) => p.currency_id)))]
  const [statuses, currencies] = await Promise.all([
    tx<{ id: string; status: string }[]>`select id, status from players where id = any(${playerIds}::uuid[])`,
    currencyIds.length ? tx<{ id: string; brand_id: string }[]>`select id, brand_id from gamification_currencies where id = any(${currencyIds}::uuid[])` : [],
  ])
  const active = new Set(statuses.filter((r) => r.status === 'active').map((r) => r.id))
  const brandOf = new Map(currencies.map((c) => [c.id, c.brand_id]))
  const credits: { p: PlayerKey; currency: string; amount: string; source: string; sourceId: string }[] = []
  for (const g of todo) {
    if (!active.has(g.player.playerId)) continue
    for (const pts of g.rewards?.points ?? []) {
      // Only a currency of the player's brand, as grantRewards; amounts are > 0 (validateRewards).
      if (brandOf.get(pts.currency_id) !== g.player.brandId || !(pts.amount > 0)) continue
      credits.push({ p: g.player, currency: pts.currency_id, amount: String(pts.amount), source: g.source.kind, sourceId: g.source.id })
    }
  }
  if (credits.length) {
    // One row per (player, currency) takes the sum (ON CONFLICT may touch a row once per statement); each
    // ledger row's balance_after is the final balance minus the credits after it, in grant order.
    await tx`
      with e as (
        select * from unnest(${credits.map((c) => c.p.playerId)}::uuid[], ${credits.map((c) => c.currency)}::uuid[],
                             ${credits.map((c) => c.p.tenantId)}::uuid[], ${credits.map((c) => c.p.brandId)}::uuid[],
                             ${credits.map((c) => c.amount)}::numeric[], ${credits.map((c) => c.source)}::text[],
                             ${credits.map((c) => c.sourceId)}::text[])
          with ordinality as e(player_id, currency_id, tenant_id, brand_id, amount, source, source_id, n)
      ), b as (
        insert into player_point_balances as pb (player_id, currency_id, tenant_id, balance, lifetime_earned)
        -- In key order: concurrent batches crediting the same players (a collaborative mission's
        -- contributors, not locked by the batch beforehand) take the balance rows' locks in one order.
        select player_id, currency_id, tenant_id, sum(amount), sum(amount) from e group by player_id, currency_id, tenant_id
        order by player_id, currency_id
        on conflict (player_id, currency_id) do update set balance = pb.balance + excluded.balance,
          lifetime_earned = pb.lifetime_earned + excluded.lifetime_earned, updated_at = now()
        returning player_id, currency_id, balance
      )
      insert into point_ledger (tenant_id, brand_id, player_id, currency_id, amount, balance_after, source, source_id, reason)
      select e.tenant_id, e.brand_id, e.player_id, e.currency_id, e.amount,
             b.balance - (sum(e.amount) over (partition by e.player_id, e.currency_id order by e.n desc) - e.amount),
             e.source, e.source_id, null
      from e join b on b.player_id = e.player_id and b.currency_id = e.currency_id
      order by e.n`
    await refreshLevels(tx, [...new Map(credits.map((c) => [c.p.playerId, c.p])).values()])
  }
  for (const g of todo) {
    for (const badgeId of g.rewards?.badge_ids ?? []) if (active.has(g.player.playerId)) await awardBadge(tx, g.player, badgeId)
    for (const bonusId of g.rewards?.bonus_ids ?? []) await grantBonus(tx, { ...g.player, bonusId, source: g.source.kind, sourceId: g.source.id })
  }
}

// PostgreSQL access for players and their profiles. Every query filters on tenant_id first.
import type { TransactionSql } from 'postgres'
import type { Sql as Pool } from '../db/postgres.ts'
import { likeContains } from '../lib/like.ts'
import { visibleTo, type Visibility } from '../lib/visibility.ts'

/** A pool or a transaction: every query here runs unchanged inside `sql.begin`. */
export type Sql = Pool | TransactionSql

export interface PlayerRow {
  id: string
  tenant_id: string
  brand_id: string
  external_id: string
  email: string | null
  phone: string | null
  status: string
  metadata: Record<string, unknown>
  created_at: Date
  updated_at: Date
}

/** Columns of player_profiles read by GET /players/{id} and the next best action; numerics as strings. */
export interface ProfileRow {
  language: string | null
  currency: string | null
  country: string | null
  name: string | null
  timezone: string | null
  consent: Record<string, unknown> | null
  event_count: string | null
  first_seen_at: Date | null
  last_seen_at: Date | null
  last_login_at: Date | null
  deposit_count: number | null
  deposit_total: string | null
  first_deposit_at: Date | null
  last_deposit_at: Date | null
  withdrawal_total: string | null
  bet_total: string | null
  win_total: string | null
  ggr: string | null
}

export type PlayerWithProfileRow = PlayerRow & ProfileRow

export async function selectPlayersPage(
  sql: Sql,
  q: { tenantId: string; brandId: string; search?: string; status?: string; limit: number; offset: number },
): Promise<{ rows: PlayerRow[]; total: number }> {
  const where = sql`
    p.tenant_id = ${q.tenantId} and p.brand_id = ${q.brandId}
    ${q.status ? sql`and p.status = ${q.status}` : sql``}
    ${q.search ? sql`and (p.email ilike ${likeContains(q.search)} or p.external_id ilike ${likeContains(q.search)})` : sql``}`
  const [counted] = await sql<{ total: string }[]>`select count(*) as total from players p where ${where}`
  const rows = await sql<PlayerRow[]>`
    select p.* from players p where ${where}
    order by p.created_at desc, p.id desc
    limit ${q.limit} offset ${q.offset}`
  return { rows, total: Number(counted?.total ?? 0) }
}

/** The player if visible: in the tenant and, for a brand-pinned key, in that brand. */
export async function selectPlayerWithProfile(
  sql: Sql,
  q: Visibility & { playerId: string },
): Promise<PlayerWithProfileRow | undefined> {
  const [row] = await sql<PlayerWithProfileRow[]>`
    select p.*, pp.language, pp.currency, pp.country, pp.name, pp.timezone, pp.consent, pp.event_count, pp.first_seen_at,
           pp.last_seen_at, pp.last_login_at, pp.deposit_count, pp.deposit_total, pp.first_deposit_at,
           pp.last_deposit_at, pp.withdrawal_total, pp.bet_total, pp.win_total, pp.ggr
    from players p left join player_profiles pp on pp.player_id = p.id
    where p.id = ${q.playerId} and ${visibleTo(sql, q, 'p')}`
  return row
}

/** The id, tenant and brand of a visible player. */
export async function selectPlayerRef(
  sql: Sql,
  q: Visibility & { playerId: string },
): Promise<{ id: string; tenant_id: string; brand_id: string } | undefined> {
  const [row] = await sql<{ id: string; tenant_id: string; brand_id: string }[]>`
    select id, tenant_id, brand_id from players where id = ${q.playerId} and ${visibleTo(sql, q)}`
  return row
}

/** Locks the player row for the rest of the transaction. */
export async function selectPlayerForUpdate(
  sql: Sql,
  q: Visibility & { playerId?: string; externalId?: string },
): Promise<PlayerRow | undefined> {
  const [row] = await sql<PlayerRow[]>`
    select * from players
    where ${visibleTo(sql, q)}
      ${q.playerId ? sql`and id = ${q.playerId}` : sql``}
      ${q.externalId !== undefined ? sql`and external_id = ${q.externalId}` : sql``}
    for update`
  return row
}

/** Inserts unless (brand, external_id) exists; undefined when it did. */
export async function insertPlayerIfAbsent(
  sql: Sql,
  p: { tenantId: string; brandId: string; externalId: string; email: string | null; phone: string | null; status: string; metadata: Record<string, unknown> },
): Promise<PlayerRow | undefined> {
  const [row] = await sql<PlayerRow[]>`
    insert into players (tenant_id, brand_id, external_id, email, phone, status, status_at, metadata)
    values (${p.tenantId}, ${p.brandId}, ${p.externalId}, ${p.email}, ${p.phone}, ${p.status},
            ${p.status === 'active' ? null : sql`now()`}, ${sql.json(p.metadata as never)})
    on conflict (brand_id, external_id) do nothing
    returning *`
  return row
}

export async function updatePlayer(
  sql: Sql,
  p: { id: string; email: string | null; phone: string | null; status: string; metadataPatch: Record<string, unknown> | undefined },
): Promise<PlayerRow> {
  const [row] = await sql<PlayerRow[]>`
    update players set
      email = ${p.email}, phone = ${p.phone}, status = ${p.status},
      -- A status set through the API is as of now: an older status_change to active does not undo it.
      status_at = case when status is distinct from ${p.status} then now() else status_at end,
      metadata = ${p.metadataPatch ? sql`metadata || ${sql.json(p.metadataPatch as never)}` : sql`metadata`},
      updated_at = now()
    where id = ${p.id}
    returning *`
  return row!
}

/** Creates the profile row, or sets language/currency on the existing one (only those given). */
export async function upsertProfileLocale(
  sql: Sql,
  p: { playerId: string; tenantId: string; brandId: string; language?: string; currency?: string },
): Promise<void> {
  await sql`
    insert into player_profiles (player_id, tenant_id, brand_id, language, currency)
    values (${p.playerId}, ${p.tenantId}, ${p.brandId}, ${p.language ?? 'en'}, ${p.currency ?? 'EUR'})
    on conflict (player_id) do update set
      language = ${p.language === undefined ? sql`player_profiles.language` : sql`excluded.language`},
      updated_at = now()`
  // A new currency on an existing profile moves its figures rather than relabel them (sql/0260).
  if (p.currency !== undefined) await sql`select respin_switch_currency(${p.playerId}, ${p.currency})`
}

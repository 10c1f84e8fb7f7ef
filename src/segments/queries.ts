// PostgreSQL access for segments and their members. Membership is always one query over
// `players p left join player_profiles pp`, narrowed to the segment's tenant and brand.
import type { TransactionSql } from 'postgres'
import type { Sql as Pool } from '../db/postgres.ts'
import { visibleTo, type Visibility } from '../lib/visibility.ts'
import { exactTimeSql } from '../lib/rows.ts'
import type { Fragment } from './fields.ts'
import { compileRules } from './rules.ts'

export type Sql = Pool | TransactionSql

export interface SegmentRow {
  id: string
  tenant_id: string
  brand_id: string
  name: string
  type: 'dynamic' | 'static'
  rules: Record<string, unknown>
  player_count: number | null
  members_fingerprint: string | null
  last_computed_at: Date | null
  created_at: Date
  updated_at: Date
}

export async function insertSegment(
  sql: Sql,
  s: { tenantId: string; brandId: string; name: string; type: string; rules: Record<string, unknown> },
): Promise<SegmentRow> {
  const [row] = await sql<SegmentRow[]>`
    insert into segments (tenant_id, brand_id, name, type, rules)
    values (${s.tenantId}, ${s.brandId}, ${s.name}, ${s.type}, ${sql.json(s.rules as never)})
    returning *`
  return row!
}

export async function selectSegments(sql: Sql, q: { tenantId: string; brandId: string; type?: string }): Promise<SegmentRow[]> {
  return sql<SegmentRow[]>`
    select * from segments
    where tenant_id = ${q.tenantId} and brand_id = ${q.brandId} ${q.type ? sql`and type = ${q.type}` : sql``}
    order by created_at, id`
}

export async function selectSegment(sql: Sql, q: Visibility & { segmentId: string }): Promise<SegmentRow | undefined> {
  const [row] = await sql<SegmentRow[]>`select * from segments where id = ${q.segmentId} and ${visibleTo(sql, q)}`
  return row
}

/** The membership condition of a segment (rules validated on write). */
export function memberCondition(sql: Sql, seg: Pick<SegmentRow, 'type' | 'rules'>, now: Date): Fragment {
  if (seg.type === 'static') {
    const ids = Array.isArray(seg.rules.player_ids) ? (seg.rules.player_ids as string[]) : []
    return ids.length ? sql`p.id = any(${ids}::uuid[])` : sql`false`
  }
  return compileRules(sql, seg.rules, now)
}

/** Count and an order-independent hash of the member ids: equal fingerprints mean equal membership. */
export async function countMembers(sql: Sql, seg: SegmentRow, now: Date): Promise<{ count: number; fingerprint: string }> {
  const [row] = await sql<{ n: number; h: string }[]>`
    select count(*)::int as n, coalesce(sum(hashtextextended(p.id::text, 0)), 0)::text as h
    from players p left join player_profiles pp on pp.player_id = p.id
    where p.tenant_id = ${seg.tenant_id} and p.brand_id = ${seg.brand_id} and ${memberCondition(sql, seg, now)}`
  return { count: row!.n, fingerprint: `${row!.n}:${row!.h}` }
}

export interface MemberRow {
  id: string
  /** created_at as UTC text with microseconds: the keyset position, exact where a JS Date is not. */
  pos: string
  external_id: string
  email: string | null
  phone: string | null
  name: string | null
  consent: unknown
  country: string | null
}

/** Members in creation order after the (created_at, id) position, at most `limit`. */
export async function selectMembersPage(
  sql: Sql,
  seg: SegmentRow,
  q: { after?: { pos: string; id: string }; limit: number; now: Date },
): Promise<MemberRow[]> {
  return sql<MemberRow[]>`
    select p.id, ${sql.unsafe(exactTimeSql('p.created_at'))} as pos,
           p.external_id, p.email, p.phone, pp.name, pp.consent, pp.country
    from players p left join player_profiles pp on pp.player_id = p.id
    where p.tenant_id = ${seg.tenant_id} and p.brand_id = ${seg.brand_id}
      and ${memberCondition(sql, seg, q.now)}
      -- The position is bound as text: a timestamptz parameter would be serialised through a JS Date,
      -- losing the microseconds, and the page would repeat its last row.
      ${q.after ? sql`and (p.created_at, p.id) > (${q.after.pos}::text::timestamptz, ${q.after.id}::uuid)` : sql``}
    order by p.created_at, p.id
    limit ${q.limit}`
}

/** Segment ids due for a recompute (never computed, or computed before `staleBefore`), in id order for paging. */
export async function selectDueSegmentIds(
  sql: Sql,
  q: { tenantId?: string; staleBefore: Date | null; afterId?: string; limit: number },
): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select id from segments
    where true
      ${q.tenantId ? sql`and tenant_id = ${q.tenantId}` : sql``}
      ${q.staleBefore ? sql`and (last_computed_at is null or last_computed_at < ${q.staleBefore})` : sql``}
      ${q.afterId ? sql`and id > ${q.afterId}` : sql``}
    order by id
    limit ${q.limit}`
  return rows.map((r) => r.id)
}

/** Locks a segment for its recompute; undefined when another process holds it. */
export async function lockSegment(sql: Sql, segmentId: string): Promise<SegmentRow | undefined> {
  const [row] = await sql<SegmentRow[]>`select * from segments where id = ${segmentId} for update skip locked`
  return row
}

export async function storeRecompute(sql: Sql, s: { id: string; count: number; fingerprint: string; at: Date }): Promise<void> {
  await sql`
    update segments set player_count = ${s.count}, members_fingerprint = ${s.fingerprint}, last_computed_at = ${s.at}
    where id = ${s.id}`
}

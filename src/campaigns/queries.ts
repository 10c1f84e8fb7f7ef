// SQL for campaigns. Every query filters on tenant_id; `brandId` (a brand-pinned key's brand, or the
// resolved brand of a list) narrows it further.
import type { TransactionSql } from 'postgres'
import type { Sql as Pool } from '../db/postgres.ts'
import { exactTimeSql } from '../lib/rows.ts'
import { visibleTo } from '../lib/visibility.ts'
import type { Campaign, CampaignType } from './schemas.ts'
import { EMPTY_STATS } from './stats.ts'
import type { CampaignStatus } from './status.ts'

/** The pool or a transaction: every query here runs unchanged inside `sql.begin`. */
export type Sql = Pool | TransactionSql

interface CampaignRow {
  id: string
  name: string
  description: string | null
  status: CampaignStatus
  type: CampaignType
  channels: Campaign['channels']
  target_segment_id: string | null
  schedule: Record<string, unknown>
  config: Record<string, unknown>
  stats: Campaign['stats']
  created_at: Date
  updated_at: Date
}

const campaignOut = (r: CampaignRow): Campaign => ({
  id: r.id,
  name: r.name,
  description: r.description,
  status: r.status,
  type: r.type,
  channels: r.channels,
  target_segment_id: r.target_segment_id,
  schedule: r.schedule,
  config: r.config,
  // Stored by the engine; a campaign that never ran still holds the issue-4 zeros: same keys, all 0.
  stats: { ...EMPTY_STATS, ...r.stats },
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
})

const columns = (sql: Sql) =>
  sql`id, name, description, status, type, channels, target_segment_id, schedule, config, stats, created_at, updated_at`

export interface NewCampaign {
  tenantId: string
  brandId: string
  name: string
  description: string | null
  type: CampaignType
  channels: string[]
  targetSegmentId: string | null
  schedule: Record<string, unknown>
  config: Record<string, unknown>
}

export async function insertCampaign(sql: Sql, c: NewCampaign): Promise<Campaign> {
  const [row] = await sql<CampaignRow[]>`
    insert into campaigns (tenant_id, brand_id, name, description, type, channels, target_segment_id, schedule, config)
    values (${c.tenantId}, ${c.brandId}, ${c.name}, ${c.description}, ${c.type}, ${sql.array(c.channels)}::text[],
            ${c.targetSegmentId}, ${sql.json(c.schedule as never)}, ${sql.json(c.config as never)})
    returning ${columns(sql)}`
  return campaignOut(row!)
}

export async function selectCampaigns(
  sql: Sql,
  f: { tenantId: string; brandId: string; status?: CampaignStatus; limit: number; offset: number },
): Promise<{ campaigns: Campaign[]; total: number }> {
  const where = sql`tenant_id = ${f.tenantId} and brand_id = ${f.brandId} ${f.status ? sql`and status = ${f.status}` : sql``}`
  const [rows, [count]] = await Promise.all([
    sql<CampaignRow[]>`
      select ${columns(sql)} from campaigns where ${where}
      order by created_at desc, id desc limit ${f.limit} offset ${f.offset}`,
    sql<{ total: number }[]>`select count(*)::int as total from campaigns where ${where}`,
  ])
  return { campaigns: rows.map(campaignOut), total: count?.total ?? 0 }
}

export async function selectCampaign(
  sql: Sql,
  k: { tenantId: string; brandId: string | null; campaignId: string },
): Promise<Campaign | undefined> {
  const [row] = await sql<CampaignRow[]>`
    select ${columns(sql)} from campaigns where id = ${k.campaignId} and ${visibleTo(sql, k)}`
  return row && campaignOut(row)
}

export interface CampaignChanges {
  name?: string
  description?: string | null
  status?: CampaignStatus
  channels?: string[]
  target_segment_id?: string | null
  config?: Record<string, unknown>
  schedule?: Record<string, unknown>
}

/**
 * Applies the changes. With `expectedStatus`, only while the campaign still has that status: undefined
 * when it does not (or is not visible), so two concurrent moves cannot both succeed.
 */
export async function updateCampaign(
  sql: Sql,
  k: { tenantId: string; brandId: string | null; campaignId: string; expectedStatus?: CampaignStatus; expectedUpdatedAt?: string },
  changes: CampaignChanges,
): Promise<Campaign | undefined> {
  const sets: Record<string, unknown> = {}
  if (changes.name !== undefined) sets.name = changes.name
  if (changes.description !== undefined) sets.description = changes.description
  if (changes.status !== undefined) sets.status = changes.status
  if (changes.channels !== undefined) sets.channels = sql.array(changes.channels)
  if (changes.target_segment_id !== undefined) sets.target_segment_id = changes.target_segment_id
  if (changes.config !== undefined) sets.config = sql.json(changes.config as never)
  if (changes.schedule !== undefined) sets.schedule = sql.json(changes.schedule as never)
  const [row] = await sql<CampaignRow[]>`
    update campaigns set ${sql(sets)}, updated_at = now()
    where id = ${k.campaignId} and ${visibleTo(sql, k)}
      ${k.expectedStatus ? sql`and status = ${k.expectedStatus}` : sql``}
      ${k.expectedUpdatedAt ? sql`and date_trunc('milliseconds', updated_at) = ${k.expectedUpdatedAt}::timestamptz` : sql``}
    returning ${columns(sql)}`
  return row && campaignOut(row)
}

export interface ParticipantRow {
  id: string
  player_id: string
  step: string | null
  status: 'active' | 'waiting' | 'completed' | 'exited'
  entered_at: Date
  updated_at: Date
  /** entered_at as UTC text with microseconds: the keyset position. */
  pos: string
}

export async function selectParticipants(
  sql: Sql,
  f: { campaignId: string; status?: string; after?: { pos: string; id: string }; limit: number },
): Promise<ParticipantRow[]> {
  return sql<ParticipantRow[]>`
    select id, player_id, step, status, entered_at, updated_at,
           ${sql.unsafe(exactTimeSql('entered_at'))} as pos
    from campaign_participants
    where campaign_id = ${f.campaignId}
      ${f.status ? sql`and status = ${f.status}` : sql``}
      ${f.after ? sql`and (entered_at, id) > (${f.after.pos}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    order by entered_at, id
    limit ${f.limit}`
}

// The hold-out: a deterministic hash of (campaign, player) puts `control_group_percent` of the audience in
// a control group that gets nothing. The same player is in the same arm of a campaign on every run and in
// every process. Computed in PostgreSQL when a whole segment is selected, in JavaScript for one player:
// both are md5 of "<campaign id>:<player id>", first 32 bits, modulo 10,000 basis points.
import { createHash } from 'node:crypto'
import type { Fragment } from '../segments/fields.ts'
import type { Sql } from './queries.ts'

const basisPoints = (percent: number) => Math.round(percent * 100)

/** Whether the player is held out. */
export function isControl(campaignId: string, playerId: string, percent: number): boolean {
  if (!(percent > 0)) return false
  const h = createHash('md5').update(`${campaignId}:${playerId}`).digest().readUInt32BE(0)
  return h % 10_000 < basisPoints(percent)
}

/** The same test as SQL over a player id column (a constant fragment; values are bound). */
export function controlSql(sql: Sql, campaignId: string, playerIdColumn: Fragment, percent: number): Fragment {
  if (!(percent > 0)) return sql`false`
  return sql`(('x' || substr(md5(${campaignId}::text || ':' || ${playerIdColumn}::text), 1, 8))::bit(32)::bigint % 10000 < ${basisPoints(percent)})`
}

export const controlPercentOf = (config: Record<string, unknown>) =>
  typeof config.control_group_percent === 'number' ? config.control_group_percent : 0

// Campaign stats (contract-engines §4): counted from the engine's own tables and the notifications the
// campaign enqueued, never incremented by hand, so they cannot drift. GET /campaigns/{id} computes them
// live; the engine writes them to campaigns.stats every few seconds for running campaigns (the list).
import type { Sql } from './queries.ts'

export interface CampaignStats {
  audience: number
  control: number
  sent: number
  delivered: number
  suppressed: number
  failed: number
  opened: number
  clicked: number
  bounced: number
  unsubscribed: number
  converted: number
  control_converted: number
}

export const EMPTY_STATS: CampaignStats = {
  audience: 0, control: 0, sent: 0, delivered: 0, suppressed: 0, failed: 0, opened: 0, clicked: 0, bounced: 0,
  unsubscribed: 0, converted: 0, control_converted: 0,
}

/**
 * `audience` = distinct players selected (hold-out included) plus journey participants entered by event,
 * `control` = distinct held-out players; message counters count notifications (one per channel): `sent`
 * every message that left the queue (delivered, bounced or failed after trying), `suppressed` those the
 * delivery rules stopped; `converted`/`control_converted` count players.
 */
export async function computeStats(sql: Sql, campaignIds: string[]): Promise<Map<string, CampaignStats>> {
  const out = new Map<string, CampaignStats>(campaignIds.map((id) => [id, { ...EMPTY_STATS }]))
  if (!campaignIds.length) return out
  const [audience, messages, conversions] = await Promise.all([
    sql<{ campaign_id: string; audience: number; control: number }[]>`
      select campaign_id, count(distinct player_id)::int as audience, count(distinct player_id) filter (where control)::int as control
      from (
        select campaign_id, player_id, control from campaign_audience where campaign_id = any(${campaignIds}::uuid[])
        union all
        select campaign_id, player_id, false from campaign_participants where campaign_id = any(${campaignIds}::uuid[])
      ) a
      group by campaign_id`,
    sql<{ campaign_id: string; status: string; n: number; opened: number; clicked: number; unsubscribed: number }[]>`
      select campaign_id, status, count(*)::int as n, count(opened_at)::int as opened, count(clicked_at)::int as clicked,
             count(unsubscribed_at)::int as unsubscribed
      from notifications
      where campaign_id = any(${campaignIds}::uuid[])
      group by campaign_id, status`,
    sql<{ campaign_id: string; converted: number; control_converted: number }[]>`
      select campaign_id, count(*) filter (where not control)::int as converted, count(*) filter (where control)::int as control_converted
      from campaign_conversions where campaign_id = any(${campaignIds}::uuid[])
      group by campaign_id`,
  ])
  for (const r of audience) Object.assign(out.get(r.campaign_id)!, { audience: r.audience, control: r.control })
  for (const r of messages) {
    const s = out.get(r.campaign_id)!
    if (r.status === 'delivered') s.delivered += r.n
    if (r.status === 'suppressed') s.suppressed += r.n
    if (r.status === 'failed') s.failed += r.n
    if (r.status === 'bounced') s.bounced += r.n
    if (r.status === 'delivered' || r.status === 'bounced' || r.status === 'failed') s.sent += r.n
    s.opened += r.opened
    s.clicked += r.clicked
    s.unsubscribed += r.unsubscribed
  }
  for (const r of conversions) Object.assign(out.get(r.campaign_id)!, { converted: r.converted, control_converted: r.control_converted })
  return out
}

/**
 * The engine keeps the stored stats of running and paused campaigns current, and of completed and cancelled
 * ones for this long after their last change; what changes a finished campaign's figures later (an open,
 * click, unsubscribe or read; a conversion, whose window runs up to a year) marks them stale
 * (markStatsStale), and the engine's next refresh counts them again.
 */
export const TERMINAL_STATS_REFRESHED_MS = 86_400_000

/**
 * These campaigns' figures just changed: finished ones are marked for the engine's next refresh (running
 * ones are refreshed anyway). A primary-key probe each, no write when already marked.
 */
export async function markStatsStale(sql: Sql, campaignIds: (string | null | undefined)[]): Promise<void> {
  const ids = [...new Set(campaignIds.filter((id): id is string => !!id))]
  if (!ids.length) return
  // Any finished campaign (not only those past the window): a change just before the window closes is
  // not lost to the engine's last refresh. At most one write per campaign between two refreshes.
  await sql`
    update campaigns set stats_stale = true
    where id = any(${ids}::uuid[]) and not stats_stale and status in ('completed', 'cancelled')`
}

/** Recomputes and stores the stats of these campaigns. */
export async function refreshStats(sql: Sql, campaignIds: string[]): Promise<Map<string, CampaignStats>> {
  // The stale mark is cleared before counting: a change committed while counting marks it again (cleared
  // after, that change would be lost until the next one).
  await sql`update campaigns set stats_stale = false where id = any(${campaignIds}::uuid[]) and stats_stale`
  const stats = await computeStats(sql, campaignIds)
  // Skipped while a chunk or a status change holds the row (the next refresh writes it): waiting would
  // queue every later chunk and trigger of the campaign behind this write (seen: 11–15 s stalls).
  for (const [id, s] of stats) {
    await sql`update campaigns set stats = ${sql.json(s as never)}
              where id = (select id from campaigns where id = ${id} for no key update skip locked)`
  }
  return stats
}

// Responsible gaming in journeys (contract-engines §4): a player who stops being active leaves every
// marketing journey at once, whichever way the status changed (a status_change event through the campaigns'
// stream consumer, or PATCH/POST /players in the request's own transaction). A leaf module: the players
// service calls it without depending on the campaign engine.
import type postgres from 'postgres'

/** These players leave the marketing journeys they are in (active or waiting), in the caller's transaction. */
export async function exitMarketingJourneys(tx: postgres.ISql, playerIds: string[], now: Date): Promise<void> {
  if (!playerIds.length) return
  await tx`
    update campaign_participants p set status = 'exited', wake_at = null, updated_at = ${now}
    from campaigns c
    where p.player_id = any(${playerIds}::uuid[]) and p.status in ('active', 'waiting')
      and c.id = p.campaign_id and c.type = 'journey' and coalesce(c.config->>'class', 'marketing') <> 'transactional'`
}

// One lock per player (a transaction-scoped advisory lock on hashtext(player id)) that orders a send's
// check against the changes that can forbid it.
//
// - A send takes it for its marketing recipients before its check, and holds it until its transaction
//   ends (src/notifications/check.ts and the callers: the dispatcher right before sending, campaign sends
//   that deliver in-app messages in their own transaction). So two processes cannot both pass one player's
//   frequency cap.
// - A change that can stop marketing to a player (a status change or a consent update, from ingestion or
//   the players API) takes it before it writes. Then either the send commits first (it
//   went out while it was allowed), or the change commits first and the send's check, a statement after
//   its lock, reads it. Without this, an in-app message checked and delivered in one transaction could
//   miss a self-exclusion that committed while that transaction ran. (An email is checked in one
//   transaction and handed to its SMTP server after that commits: a change in between is not seen there;
//   the check is at most DELIVERY_CHECK_MAX_AGE_MS old when it goes, docs/delivery.md.)
//
// Locks are taken in key order within a statement. A writer takes the gate before any row lock of its
// own (the send's notification insert waits on a locked player row through its foreign key), so the two
// never wait for each other in a cycle. A transaction that locks in several rounds (a campaign batch's
// enrolments, then its journey steps) could still meet another in a cycle; PostgreSQL then ends one of
// them, and its work is retried (the stream's per-event fallback, the dispatcher's next claim, ingestion's
// retries).
import type postgres from 'postgres'

type Sql = postgres.ISql

/** The gate of these players (by id), until the transaction ends. */
export async function lockSendGate(tx: Sql, playerIds: string[]): Promise<void> {
  if (!playerIds.length) return
  await tx`select pg_advisory_xact_lock(k) from (select distinct hashtext(x) as k from unnest(${playerIds}::text[]) as x order by 1) as l`
}

/**
 * The gate of the players with these (brand, external id) keys that exist, until the transaction ends.
 * Sent at once (`execute`), so ingestion can pipeline it before its other statements.
 */
export function lockSendGateByKey(tx: Sql, brandIds: string[], externalIds: string[]) {
  return tx`
    select pg_advisory_xact_lock(k) from (
      select distinct hashtext(p.id::text) as k
      from unnest(${brandIds}::uuid[], ${externalIds}::text[]) as x(brand_id, external_id)
      join players p on p.brand_id = x.brand_id and p.external_id = x.external_id
      order by 1) as l`.execute()
}

// Writes one group's players and profile deltas inside a transaction. Keeps a per-process set of the
// (brand, external id) pairs known to exist, so those players skip the upsert (the most expensive part for
// existing players). A stale entry (player deleted meanwhile) makes the profile update fail with
// MISSING_ROWS, rolling the transaction back; the caller then forgets the group's players (forget) and
// retries, and the upsert re-creates them.
//
// Every statement is sent without waiting for the one before (profiles are found by key, not by ids the
// upsert returns), so a group's transaction costs PostgreSQL one round trip, not one per statement.
import type { ReservedSql, TransactionSql } from 'postgres'
import { applyStatuses, updateProfiles, upsertPlayers } from './queries.ts'
import type { PlayerColumns, StatusColumns } from './transform.ts'

const MAX_CACHED = 500_000

export function createProfileWriter() {
  const known = new Set<string>()
  const keyOf = (brandId: string, externalId: string) => `${brandId}\u0000${externalId}`

  /**
   * Sends the statements at once, in lock order (players, then profiles, then statuses); resolves when
   * all have run. Remembers the upserted players: call forget() if the transaction does not commit.
   */
  async function write(tx: TransactionSql | ReservedSql, tenantId: string, p: PlayerColumns, statuses: StatusColumns): Promise<void> {
    const n = p.brand_id.length
    // Unknown players, and known ones whose email/phone this group sets, go through the upsert.
    const upsert: number[] = []
    for (let i = 0; i < n; i++) {
      if (p.email[i] !== null || p.phone[i] !== null || !known.has(keyOf(p.brand_id[i] as string, p.external_id[i] as string))) upsert.push(i)
    }
    const sent: Promise<unknown>[] = []
    if (upsert.length) {
      sent.push(
        upsertPlayers(tx, tenantId, {
          brand_id: upsert.map((i) => p.brand_id[i] as string),
          external_id: upsert.map((i) => p.external_id[i] as string),
          email: upsert.map((i) => p.email[i] ?? null),
          phone: upsert.map((i) => p.phone[i] ?? null),
        }),
      )
    }
    sent.push(updateProfiles(tx, tenantId, p))
    if (statuses.brand_id.length) sent.push(applyStatuses(tx, tenantId, statuses))
    await Promise.all(sent)
    if (known.size + upsert.length > MAX_CACHED) known.clear()
    for (const i of upsert) known.add(keyOf(p.brand_id[i] as string, p.external_id[i] as string))
  }

  /** After a rolled-back transaction: players it created do not exist, players it missed may not either. */
  function forget(p: PlayerColumns): void {
    p.brand_id.forEach((b, i) => known.delete(keyOf(b, p.external_id[i] as string)))
  }

  return { write, forget }
}

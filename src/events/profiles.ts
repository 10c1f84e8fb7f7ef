// Writes one group's players and profile deltas inside a transaction. Keeps a per-process cache of
// (brand, external id) → player id, so players already known skip the upsert (the most expensive part for
// existing players) and their profiles are found by primary key. A stale entry (player deleted meanwhile)
// makes the profile update fail (SQLSTATE RSP01, sql/0016), rolling the transaction back; the caller then forgets
// the group's players (forget) and retries, and the upsert re-creates them.
//
// Every statement is sent without waiting for the one before (players upserted in this group are found
// by key in SQL, not by the ids the upsert returns), so a group's transaction costs PostgreSQL one round
// trip, not one per statement.
import type { ReservedSql, TransactionSql } from 'postgres'
import { applyStatuses, updateProfiles, upsertPlayers } from './queries.ts'
import type { PlayerColumns, StatusColumns } from './transform.ts'

const MAX_CACHED = 500_000

export function createProfileWriter() {
  const ids = new Map<string, string>()
  const keyOf = (brandId: string, externalId: string) => `${brandId}\u0000${externalId}`

  /**
   * Sends the statements at once, in lock order (players, then profiles, then statuses); resolves when
   * all have run. Remembers the upserted players: call forget() if the transaction does not commit.
   */
  async function write(tx: TransactionSql | ReservedSql, p: PlayerColumns, statuses: StatusColumns): Promise<void> {
    const knownIds = p.brand_id.map((b, i) => ids.get(keyOf(b, p.external_id[i] as string)) ?? null)
    // Unknown players, and known ones whose email/phone this group sets, go through the upsert.
    const upsert: number[] = []
    knownIds.forEach((id, i) => {
      if (id === null || p.email[i] !== null || p.phone[i] !== null) upsert.push(i)
    })
    const sent: Promise<unknown>[] = []
    if (upsert.length) {
      sent.push(
        upsertPlayers(tx, {
          tenant_id: upsert.map((i) => p.tenant_id[i] as string),
          brand_id: upsert.map((i) => p.brand_id[i] as string),
          external_id: upsert.map((i) => p.external_id[i] as string),
          email: upsert.map((i) => p.email[i] ?? null),
          phone: upsert.map((i) => p.phone[i] ?? null),
        }).then((rows) => {
          if (ids.size + rows.length > MAX_CACHED) ids.clear()
          for (const r of rows) ids.set(keyOf(r.brand_id, r.external_id), r.id)
        }),
      )
    }
    sent.push(updateProfiles(tx, knownIds, p))
    if (statuses.brand_id.length) sent.push(applyStatuses(tx, statuses))
    await Promise.all(sent)
  }

  /** After a rolled-back transaction: players it created do not exist, players it missed may not either. */
  function forget(p: PlayerColumns): void {
    p.brand_id.forEach((b, i) => ids.delete(keyOf(b, p.external_id[i] as string)))
  }

  return { write, forget }
}

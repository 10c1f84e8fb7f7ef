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
import { lockSendGateByKey } from '../lib/send-gate.ts'
import { applyStatuses, switchCurrencies, updateProfiles, upsertPlayers } from './queries.ts'
import type { PlayerColumns, StatusColumns } from './transform.ts'

const MAX_CACHED = 500_000

export function createProfileWriter() {
  const ids = new Map<string, string>()
  const keyOf = (brandId: string, externalId: string) => `${brandId}\u0000${externalId}`

  /**
   * Sends the statements at once, in lock order (send gates, players, then profiles, then statuses); resolves when
   * all have run. Remembers the upserted players: call forget() if the transaction does not commit.
   */
  /**
   * Resolves to whether the statements may have written outbox rows (player.created for a player not in the
   * cache, status_changed, player.converted for a first deposit): most groups of known players write none.
   */
  async function write(tx: TransactionSql | ReservedSql, p: PlayerColumns, statuses: StatusColumns): Promise<boolean> {
    const knownIds = p.brand_id.map((b, i) => ids.get(keyOf(b, p.external_id[i] as string)) ?? null)
    // Unknown players, and known ones whose email/phone this group sets, go through the upsert.
    const upsert: number[] = []
    knownIds.forEach((id, i) => {
      if (id === null || p.email[i] !== null || p.phone[i] !== null) upsert.push(i)
    })
    const sent: Promise<unknown>[] = []
    // Players whose status or consent this group changes: their send gates first, before any row lock
    // (lib/send-gate.ts), so an in-app message being checked and delivered for one of them commits either
    // wholly before the change or checks after it. Only groups carrying such events pay for it.
    let gated: { brand: string[]; external: string[] } | undefined
    if (statuses.brand_id.length) gated = { brand: statuses.brand_id.slice(), external: statuses.external_id.slice() }
    for (let i = 0; i < p.consent.length; i++) {
      if (p.consent[i] === null) continue
      gated ??= { brand: [], external: [] }
      gated.brand.push(p.brand_id[i] as string)
      gated.external.push(p.external_id[i] as string)
    }
    if (gated) sent.push(lockSendGateByKey(tx, gated.brand, gated.external))
    if (upsert.length) {
      sent.push(
        upsertPlayers(tx, {
          tenant_id: upsert.map((i) => p.tenant_id[i] as string),
          brand_id: upsert.map((i) => p.brand_id[i] as string),
          external_id: upsert.map((i) => p.external_id[i] as string),
          email: upsert.map((i) => p.email[i] ?? null),
          phone: upsert.map((i) => p.phone[i] ?? null),
          currency: upsert.map((i) => p.currency[i] ?? null),
        }).then((rows) => {
          if (ids.size + rows.length > MAX_CACHED) ids.clear()
          for (const r of rows) ids.set(keyOf(r.brand_id, r.external_id), r.id)
        }),
      )
    }
    // Players before profiles, as every writer locks them (upsertPlayers, PATCH /players, the erasure).
    if (statuses.brand_id.length) sent.push(applyStatuses(tx, statuses))
    const switching = p.currency.flatMap((c, i) => (c === null ? [] : [i]))
    if (switching.length) {
      sent.push(switchCurrencies(tx, p.brand_id, p.external_id, switching.map((i) => p.brand_id[i] as string), switching.map((i) => p.external_id[i] as string), switching.map((i) => p.currency[i] as string)))
    }
    sent.push(updateProfiles(tx, knownIds, p))
    await Promise.all(sent)
    return upsert.length > 0 || statuses.brand_id.length > 0 || p.first_deposit_at.some((at) => at !== null)
  }

  /** After a rolled-back transaction: players it created do not exist, players it missed may not either. */
  function forget(p: PlayerColumns): void {
    p.brand_id.forEach((b, i) => ids.delete(keyOf(b, p.external_id[i] as string)))
  }

  return { write, forget }
}

// Writes one group's players and profile deltas inside a transaction. Keeps a per-process cache of
// (brand, external id) → player id, so players already known skip the upsert (the most expensive part
// for existing players) and their profiles are updated by primary key. A stale entry (player deleted
// meanwhile) is detected by the update's row count, dropped, and the write retried through the upsert.
import type { TransactionSql } from 'postgres'
import { applyStatuses, updateProfiles, upsertPlayers } from './queries.ts'
import type { PlayerColumns, StatusColumns } from './transform.ts'

const MAX_CACHED = 500_000

export class StalePlayerCache extends Error {}

export function createProfileWriter() {
  const ids = new Map<string, string>()
  const keyOf = (brandId: string, externalId: string) => `${brandId}\u0000${externalId}`

  async function write(tx: TransactionSql, tenantId: string, p: PlayerColumns, statuses: StatusColumns): Promise<void> {
    const n = p.brand_id.length
    const keys = p.brand_id.map((b, i) => keyOf(b, p.external_id[i] as string))
    // Unknown players, and known ones whose email/phone this group sets, go through the upsert.
    const upsert: number[] = []
    for (let i = 0; i < n; i++) {
      if (!ids.has(keys[i] as string) || p.email[i] !== null || p.phone[i] !== null) upsert.push(i)
    }
    if (upsert.length) {
      const rows = await upsertPlayers(tx, tenantId, {
        brand_id: upsert.map((i) => p.brand_id[i] as string),
        external_id: upsert.map((i) => p.external_id[i] as string),
        email: upsert.map((i) => p.email[i] ?? null),
        phone: upsert.map((i) => p.phone[i] ?? null),
      })
      if (ids.size + rows.length > MAX_CACHED) ids.clear()
      for (const r of rows) ids.set(keyOf(r.brand_id, r.external_id), r.id)
    }
    // Profiles in player id order (the lock order of updateProfiles).
    const order = Array.from({ length: n }, (_, i) => i)
    const idOf = order.map((i) => ids.get(keys[i] as string) as string)
    order.sort((a, b) => ((idOf[a] as string) < (idOf[b] as string) ? -1 : 1))
    const pick = <T>(col: T[]) => order.map((i) => col[i] as T)
    const sorted = Object.fromEntries(Object.entries(p).map(([k, col]) => [k, pick(col as unknown[])])) as unknown as PlayerColumns
    const sortedIds = pick(idOf)
    const updated = await updateProfiles(tx, tenantId, sortedIds, sorted)
    if (updated.length !== n) {
      const seen = new Set(updated)
      order.forEach((i) => {
        if (!seen.has(idOf[i] as string)) ids.delete(keys[i] as string)
      })
      throw new StalePlayerCache(`${n - updated.length} cached player ids were stale`)
    }
    if (statuses.brand_id.length) await applyStatuses(tx, tenantId, statuses)
  }

  /** After a rolled-back transaction the ids of players it created do not exist: forget them. */
  function forget(p: PlayerColumns): void {
    p.brand_id.forEach((b, i) => ids.delete(keyOf(b, p.external_id[i] as string)))
  }

  return { write, forget }
}

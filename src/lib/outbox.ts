// The transactional outbox (sql/0002_outbox.sql): a feature writes its platform event (player.created,
// segment.recomputed, campaign.created, ...) with this, inside the transaction of the change it reports,
// and the webhook dispatcher delivers it from there.
import type { TransactionSql } from 'postgres'
import type { Sql } from '../db/postgres.ts'

export interface OutboxEvent {
  tenantId: string
  /** The brand the event concerns; null for a tenant-wide event. */
  brandId: string | null
  /** A catalog name: `player.created`, `campaign.created`, ... */
  event: string
  data: Record<string, unknown>
}

/**
 * This process's listeners for outbox writes (the webhook fan-out on embedded PostgreSQL, which has no
 * NOTIFY to tell it). Told when a row is written, before its transaction commits: a listener looks again
 * shortly after.
 */
const outboxListeners = new Set<() => void>()

export function onOutboxWritten(listener: () => void): () => void {
  outboxListeners.add(listener)
  return () => outboxListeners.delete(listener)
}

/** For writers that insert outbox rows with their own SQL (ingestion), after they did. */
export function outboxWritten(): void {
  for (const listener of outboxListeners) listener()
}

/** Must run on the transaction (`tx`) that makes the change, so the event exists exactly when it does. */
export async function insertOutbox(sql: Sql | TransactionSql, e: OutboxEvent): Promise<void> {
  await sql`
    insert into outbox (tenant_id, brand_id, event, data)
    values (${e.tenantId}, ${e.brandId}, ${e.event}, ${sql.json(e.data as never)})`
  outboxWritten()
}

/** insertOutbox for many events in one statement (same transaction rule). */
export async function insertOutboxMany(sql: Sql | TransactionSql, es: OutboxEvent[]): Promise<void> {
  if (!es.length) return
  if (es.length === 1) return insertOutbox(sql, es[0]!)
  await sql`
    insert into outbox (tenant_id, brand_id, event, data)
    select tenant_id, brand_id, event, data::jsonb
    from unnest(${es.map((e) => e.tenantId)}::uuid[], ${es.map((e) => e.brandId)}::uuid[], ${es.map((e) => e.event)}::text[],
                ${es.map((e) => JSON.stringify(e.data))}::text[]) as x(tenant_id, brand_id, event, data)`
  outboxWritten()
}

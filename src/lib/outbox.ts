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

/** Must run on the transaction (`tx`) that makes the change, so the event exists exactly when it does. */
export async function insertOutbox(sql: Sql | TransactionSql, e: OutboxEvent): Promise<void> {
  await sql`
    insert into outbox (tenant_id, brand_id, event, data)
    values (${e.tenantId}, ${e.brandId}, ${e.event}, ${sql.json(e.data as never)})`
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
}

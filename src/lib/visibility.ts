// Who may see a resource by id (contract, "Brands and visibility"): any brand of the caller's tenant, or
// only its own brand for a brand-pinned key. Anything else is 404. One definition for every feature.
import type postgres from 'postgres'
import type { PendingQuery, Row } from 'postgres'
import type { Principal } from '../auth/types.ts'

export interface Visibility {
  tenantId: string
  /** The pinned brand of the key, or null for a tenant-wide key. */
  brandId: string | null
}

export const visibilityOf = (principal: Principal): Visibility => ({ tenantId: principal.tenantId, brandId: principal.brandId })

/**
 * `tenant_id = … [and brand_id = …]` for a visibility, on the columns of table alias `alias` when given
 * (`visibleTo(sql, v, 'p')` → `"p"."tenant_id" = $1 and "p"."brand_id" = $2`). `sql` is the pool or a
 * transaction.
 */
export function visibleTo(sql: postgres.ISql, v: Visibility, alias?: string): PendingQuery<Row[]> {
  const column = (name: string) => sql(alias ? `${alias}.${name}` : name)
  return v.brandId
    ? sql`${column('tenant_id')} = ${v.tenantId} and ${column('brand_id')} = ${v.brandId}`
    : sql`${column('tenant_id')} = ${v.tenantId}`
}

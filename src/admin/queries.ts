import type { TransactionSql } from 'postgres'
import type { Sql } from '../db/postgres.ts'
import type { ApiKey, Brand, Tenant } from './schemas.ts'

const iso = (d: Date | null) => (d ? d.toISOString() : null)

interface TenantRow { id: string; name: string; slug: string; created_at: Date }
interface BrandRow { id: string; tenant_id: string; name: string; slug: string; is_default: boolean; active: boolean; created_at: Date }
interface KeyRow { id: string; name: string; prefix: string; scopes: string[]; brand_id: string | null; created_at: Date; expires_at: Date | null; revoked_at: Date | null }

const tenantOut = (r: TenantRow): Tenant => ({ id: r.id, name: r.name, slug: r.slug, created_at: r.created_at.toISOString() })
export const brandOut = (r: BrandRow): Brand => ({ ...r, created_at: r.created_at.toISOString() })
const keyOut = (r: KeyRow): ApiKey => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  scopes: r.scopes as ApiKey['scopes'],
  brand_id: r.brand_id,
  created_at: r.created_at.toISOString(),
  expires_at: iso(r.expires_at),
  revoked_at: iso(r.revoked_at),
})

export async function insertTenant(sql: Sql, t: { name: string; slug: string }): Promise<Tenant> {
  const [row] = await sql<TenantRow[]>`insert into tenants (name, slug) values (${t.name}, ${t.slug}) returning *`
  return tenantOut(row!)
}

export async function selectTenants(sql: Sql): Promise<Tenant[]> {
  return (await sql<TenantRow[]>`select * from tenants order by created_at, id`).map(tenantOut)
}

export async function tenantExists(sql: Sql, tenantId: string): Promise<boolean> {
  return (await sql`select 1 from tenants where id = ${tenantId}`).length > 0
}

/** The tenant's first brand becomes its default. */
/**
 * Brands of one tenant are created and made default one at a time: under the tenant row's lock (no key
 * update: rows referencing the tenant are not held up), so "the first brand is the default" and a default
 * move each see the others' commits instead of colliding on the one-default index.
 */
async function lockTenant(tx: Sql, tenantId: string): Promise<void> {
  await tx`select 1 from tenants where id = ${tenantId} for no key update`
}

export async function insertBrand(sql: Sql, b: { tenantId: string; name: string; slug: string }): Promise<Brand> {
  return atomically(sql, async (tx) => {
    await lockTenant(tx, b.tenantId)
    const [row] = await tx<BrandRow[]>`
      insert into brands (tenant_id, name, slug, is_default)
      values (${b.tenantId}, ${b.name}, ${b.slug}, not exists (select 1 from brands where tenant_id = ${b.tenantId}))
      returning id, tenant_id, name, slug, is_default, active, created_at`
    return brandOut(row!)
  })
}

export async function selectBrand(sql: Sql, brandId: string): Promise<Brand | undefined> {
  const [row] = await sql<BrandRow[]>`
    select id, tenant_id, name, slug, is_default, active, created_at from brands where id = ${brandId}`
  return row && brandOut(row)
}

export async function updateBrand(
  sql: Sql,
  brandId: string,
  patch: { name?: string; active?: boolean; makeDefault?: boolean },
): Promise<Brand | undefined> {
  return atomically(sql, async (tx) => {
    if (patch.makeDefault) {
      const [owner] = await tx<{ tenant_id: string }[]>`select tenant_id from brands where id = ${brandId}`
      if (owner) await lockTenant(tx, owner.tenant_id)
    }
    const [current] = await tx<{ tenant_id: string }[]>`select tenant_id from brands where id = ${brandId} for update`
    if (!current) return undefined
    if (patch.makeDefault) {
      await tx`update brands set is_default = false, updated_at = now() where tenant_id = ${current.tenant_id} and is_default and id <> ${brandId}`
    }
    const [row] = await tx<BrandRow[]>`
      update brands set
        name = coalesce(${patch.name ?? null}, name),
        active = coalesce(${patch.active ?? null}, active),
        is_default = is_default or ${patch.makeDefault ?? false},
        updated_at = now()
      where id = ${brandId}
      returning id, tenant_id, name, slug, is_default, active, created_at`
    return brandOut(row!)
  })
}

/**
 * fn in a transaction of its own, or in a savepoint when `sql` already is a transaction (an audited admin
 * request runs its change and its audit row in one).
 */
export function atomically<T>(sql: Sql, fn: (tx: Sql) => Promise<T>): Promise<T> {
  if ('savepoint' in sql) return (sql as unknown as TransactionSql).savepoint((tx) => fn(tx as unknown as Sql)) as Promise<T>
  return sql.begin((tx) => fn(tx as unknown as Sql)) as Promise<T>
}

/** The audit trail's "before" of a key: what an admin sees of it, never its hash. */
export async function selectKey(sql: Sql, keyId: string): Promise<(ApiKey & { tenant_id: string }) | undefined> {
  const [row] = await sql<(KeyRow & { tenant_id: string })[]>`
    select id, tenant_id, name, prefix, scopes, brand_id, created_at, expires_at, revoked_at from api_keys where id = ${keyId}`
  return row && { ...keyOut(row), tenant_id: row.tenant_id }
}

export async function insertKey(
  sql: Sql,
  k: { tenantId: string; brandId: string | null; name: string; keyHash: string; prefix: string; scopes: string[]; expiresAt: string | null },
): Promise<ApiKey> {
  const [row] = await sql<KeyRow[]>`
    insert into api_keys (tenant_id, brand_id, name, key_hash, prefix, scopes, expires_at)
    values (${k.tenantId}, ${k.brandId}, ${k.name}, ${k.keyHash}, ${k.prefix}, ${sql.array(k.scopes)}, ${k.expiresAt})
    returning id, name, prefix, scopes, brand_id, created_at, expires_at, revoked_at`
  return keyOut(row!)
}

export async function selectKeys(sql: Sql, tenantId: string): Promise<ApiKey[]> {
  const rows = await sql<KeyRow[]>`
    select id, name, prefix, scopes, brand_id, created_at, expires_at, revoked_at
    from api_keys where tenant_id = ${tenantId} order by created_at, id`
  return rows.map(keyOut)
}

/** Revokes once; repeating returns the first revocation time. */
export async function revokeKey(sql: Sql, keyId: string): Promise<{ id: string; revoked_at: string; key_hash: string } | undefined> {
  const [row] = await sql<{ id: string; revoked_at: Date; key_hash: string }[]>`
    update api_keys set revoked_at = coalesce(revoked_at, now())
    where id = ${keyId} returning id, revoked_at, key_hash`
  return row && { id: row.id, revoked_at: row.revoked_at.toISOString(), key_hash: row.key_hash }
}

export async function selectMapping(sql: Sql, brandId: string): Promise<unknown | undefined> {
  const [row] = await sql<{ event_mapping: unknown }[]>`select event_mapping from brands where id = ${brandId}`
  return row?.event_mapping
}

export async function updateMapping(sql: Sql, brandId: string, mapping: unknown): Promise<boolean> {
  const rows = await sql`update brands set event_mapping = ${sql.json(mapping as never)}, updated_at = now() where id = ${brandId} returning id`
  return rows.length > 0
}

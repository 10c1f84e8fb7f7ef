// Key authentication and brand resolution, cached per process. Caches are dropped through the bus on
// revocation or brand changes, so a revoked key fails on its next request in every process.
import type { Bus } from '../db/bus.ts'
import type { Sql } from '../db/postgres.ts'
import { badRequest } from '../errors.ts'
import { hashApiKey, KEY_PREFIX } from './keys.ts'
import type { Brand, Principal } from './types.ts'
import { isUuid } from '../lib/schemas.ts'

/** A brand named by id or slug: an id first (a slug may look like a UUID too, and is then tried next). */
export function brandByHint<B extends { id: string; slug: string }>(list: B[], hint: string): B | undefined {
  return (isUuid(hint) ? list.find((b) => b.id === hint.toLowerCase()) : undefined) ?? list.find((b) => b.slug === hint)
}

/** Upper bound on how stale a cache entry can get if an invalidation were ever missed. */
const CACHE_TTL_MS = 60_000
const MAX_CACHED_KEYS = 50_000

export interface AuthService {
  /** The key's principal, or null when it is unknown, revoked or expired. */
  authenticate(rawKey: string): Promise<Principal | null>
  /** The same answer without I/O when the key is cached (null: known to be expired); undefined when not cached. */
  authenticateCached(rawKey: string): Principal | null | undefined
  resolveBrand(principal: Principal, hint: string | undefined): Promise<Brand>
  brandsOf(tenantId: string): Promise<Brand[]>
}

interface KeyRow {
  id: string
  tenant_id: string
  brand_id: string | null
  scopes: string[]
  expires_at: Date | null
}
interface BrandRow {
  id: string
  tenant_id: string
  name: string
  slug: string
  is_default: boolean
  active: boolean
}

export const toBrand = (r: BrandRow): Brand => ({
  id: r.id,
  tenantId: r.tenant_id,
  name: r.name,
  slug: r.slug,
  isDefault: r.is_default,
  active: r.active,
})

export function createAuthService(deps: { sql: Sql; bus: Bus; clock: () => Date }): AuthService {
  const { sql, bus, clock } = deps
  const keys = new Map<string, { principal: Principal; at: number }>()
  const brands = new Map<string, { list: Brand[]; at: number }>()
  bus.subscribe('api_key', (keyHash) => keys.delete(keyHash))
  bus.subscribe('brand', (tenantId) => brands.delete(tenantId))

  async function loadKey(hash: string): Promise<Principal | null> {
    const [row] = await sql<KeyRow[]>`
      select id, tenant_id, brand_id, scopes, expires_at from api_keys
      where key_hash = ${hash} and revoked_at is null`
    if (!row) return null
    return {
      keyId: row.id,
      tenantId: row.tenant_id,
      brandId: row.brand_id,
      scopes: row.scopes,
      expiresAt: row.expires_at ? row.expires_at.getTime() : null,
    }
  }

  async function brandsOf(tenantId: string): Promise<Brand[]> {
    const now = Date.now()
    const cached = brands.get(tenantId)
    if (cached && now - cached.at < CACHE_TTL_MS) return cached.list
    const rows = await sql<BrandRow[]>`
      select id, tenant_id, name, slug, is_default, active from brands where tenant_id = ${tenantId}`
    const list = rows.map(toBrand)
    brands.set(tenantId, { list, at: now })
    return list
  }

  return {
    async authenticate(rawKey) {
      if (!rawKey.startsWith(KEY_PREFIX) || rawKey.length > 200) return null
      const hash = hashApiKey(rawKey)
      const now = Date.now()
      let entry = keys.get(hash)
      if (!entry || now - entry.at >= CACHE_TTL_MS) {
        const principal = await loadKey(hash)
        if (!principal) return null
        if (keys.size >= MAX_CACHED_KEYS) keys.clear()
        entry = { principal, at: now }
        keys.set(hash, entry)
      }
      const { principal } = entry
      if (principal.expiresAt !== null && principal.expiresAt <= clock().getTime()) return null
      return principal
    },

    authenticateCached(rawKey) {
      if (!rawKey.startsWith(KEY_PREFIX) || rawKey.length > 200) return null
      const entry = keys.get(hashApiKey(rawKey))
      if (!entry || Date.now() - entry.at >= CACHE_TTL_MS) return undefined
      const { principal } = entry
      if (principal.expiresAt !== null && principal.expiresAt <= clock().getTime()) return null
      return principal
    },

    async resolveBrand(principal, hint) {
      const list = await brandsOf(principal.tenantId)
      if (principal.brandId) {
        // A pinned key ignores every hint.
        const pinned = list.find((b) => b.id === principal.brandId)
        if (!pinned || !pinned.active) throw badRequest('the brand of this key is not active')
        return pinned
      }
      if (hint !== undefined && hint !== '') {
        const brand = brandByHint(list, hint)
        if (!brand || !brand.active) throw badRequest(`unknown brand: ${hint}`, { brand: hint })
        return brand
      }
      // The default brand, and only it (the spec): with it deactivated, a request without a hint is refused
      // rather than written to whichever other brand is active.
      const fallback = list.find((b) => b.isDefault)
      if (fallback?.active) return fallback
      if (!list.some((b) => b.active)) throw badRequest('the tenant has no active brand')
      throw badRequest("the tenant's default brand is not active: name a brand (x-brand header or brand parameter)")
    },

    brandsOf,
  }
}

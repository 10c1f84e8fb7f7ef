// Platform-owner operations: tenants, brands, API keys and event mappings. Used by the admin API and the CLI.
import { generateApiKey, displayPrefix, hashApiKey } from '../auth/keys.ts'
import type { Bus } from '../db/bus.ts'
import { pgErrorCode, PG_UNIQUE_VIOLATION, type Sql } from '../db/postgres.ts'
import { badRequest, notFound } from '../errors.ts'
import { ALL_CANONICAL_FIELDS } from '../events/canonical.ts'
import * as q from './queries.ts'
import { MAX_GLOB_WILDCARDS, wildcardCount } from '../events/glob.ts'
import type { ApiKey, Brand, CreatedApiKey, EventMapping, Tenant } from './schemas.ts'
import { brandByHint } from '../auth/service.ts'

export interface AdminDeps {
  sql: Sql
  bus: Bus
}


function slugify(name: string): string {
  const slug = name.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 48)
  return slug || 'tenant'
}

async function uniqueOr400<T>(fn: () => Promise<T>, message: string, details: Record<string, unknown>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    if (pgErrorCode(err) === PG_UNIQUE_VIOLATION) throw badRequest(message, { ...details, reason: 'ALREADY_EXISTS' })
    throw err
  }
}

export async function createTenant(deps: AdminDeps, input: { name: string; slug?: string }): Promise<Tenant> {
  if (input.slug) {
    const slug = input.slug
    return uniqueOr400(() => q.atomically(deps.sql, (tx) => q.insertTenant(tx, { name: input.name, slug })), `tenant slug '${slug}' is taken`, { slug })
  }
  // A derived slug that collides gets a short random suffix rather than failing.
  const base = slugify(input.name)
  for (let attempt = 0; ; attempt++) {
    const slug = attempt === 0 ? base : `${base}-${Math.random().toString(36).slice(2, 7)}`
    try {
      // A savepoint per attempt: inside an audited request's transaction a failed insert must not abort it.
      return await q.atomically(deps.sql, (tx) => q.insertTenant(tx, { name: input.name, slug }))
    } catch (err) {
      if (pgErrorCode(err) !== PG_UNIQUE_VIOLATION || attempt >= 5) throw err
    }
  }
}

export const listTenants = (deps: AdminDeps) => q.selectTenants(deps.sql)

export async function createBrand(deps: AdminDeps, input: { tenantId: string; name: string; slug: string }): Promise<Brand> {
  if (!(await q.tenantExists(deps.sql, input.tenantId))) throw notFound('tenant')
  const brand = await uniqueOr400(() => q.atomically(deps.sql, (tx) => q.insertBrand(tx, input)), `brand slug '${input.slug}' is taken in this tenant`, { slug: input.slug })
  await deps.bus.publish('brand', input.tenantId)
  return brand
}

export async function updateBrand(
  deps: AdminDeps,
  input: { brandId: string; name?: string; is_default?: true; active?: boolean },
): Promise<Brand> {
  const brand = await q.updateBrand(deps.sql, input.brandId, { name: input.name, active: input.active, makeDefault: input.is_default })
  if (!brand) throw notFound('brand')
  await deps.bus.publish('brand', brand.tenant_id)
  return brand
}

export async function createApiKey(
  deps: AdminDeps,
  input: { tenantId: string; name?: string; scopes?: string[]; brand?: string; expires_at?: string },
): Promise<CreatedApiKey> {
  if (!(await q.tenantExists(deps.sql, input.tenantId))) throw notFound('tenant')
  let brandId: string | null = null
  if (input.brand) {
    const brands = await deps.sql<{ id: string; slug: string }[]>`select id, slug from brands where tenant_id = ${input.tenantId}`
    const hint = input.brand
    const brand = brandByHint(brands, hint)
    if (!brand) throw badRequest(`unknown brand: ${hint}`, { brand: hint })
    brandId = brand.id
  }
  if (input.expires_at && Date.parse(input.expires_at) <= Date.now()) {
    throw badRequest('expires_at must be in the future', { errors: [{ in: 'body', field: 'expires_at', message: 'must be in the future' }] })
  }
  const key = generateApiKey()
  const row = await q.insertKey(deps.sql, {
    tenantId: input.tenantId,
    brandId,
    name: input.name ?? 'API key',
    keyHash: hashApiKey(key),
    prefix: displayPrefix(key),
    scopes: input.scopes ?? [],
    expiresAt: input.expires_at ?? null,
  })
  const { revoked_at: _revoked, ...shown } = row
  return { ...shown, key }
}

export async function listApiKeys(deps: AdminDeps, tenantId: string): Promise<ApiKey[]> {
  if (!(await q.tenantExists(deps.sql, tenantId))) throw notFound('tenant')
  return q.selectKeys(deps.sql, tenantId)
}

/** Revocation is immediate: every process drops the key from its cache before this returns. */
export async function revokeApiKey(deps: AdminDeps, keyId: string): Promise<{ id: string; revoked_at: string }> {
  const row = await q.revokeKey(deps.sql, keyId)
  if (!row) throw notFound('API key')
  await deps.bus.publish('api_key', row.key_hash)
  return { id: row.id, revoked_at: row.revoked_at }
}

export const EMPTY_MAPPING: Required<EventMapping> = { rules: [], default_action: 'accept' }

export async function getEventMapping(deps: AdminDeps, brandId: string): Promise<Required<EventMapping>> {
  const mapping = await q.selectMapping(deps.sql, brandId)
  if (mapping === undefined) throw notFound('brand')
  return { ...EMPTY_MAPPING, ...(mapping as EventMapping) }
}

export async function setEventMapping(deps: AdminDeps, brandId: string, mapping: EventMapping): Promise<Required<EventMapping>> {
  const errors: { in: 'body'; field: string; message: string }[] = []
  mapping.rules.forEach((rule, i) => {
    if (wildcardCount(rule.match) > MAX_GLOB_WILDCARDS) {
      errors.push({ in: 'body', field: `rules.${i}.match`, message: `has more than ${MAX_GLOB_WILDCARDS} '*' wildcards` })
    }
    for (const field of Object.keys(rule.fields ?? {})) {
      if (!ALL_CANONICAL_FIELDS.includes(field)) errors.push({ in: 'body', field: `rules.${i}.fields.${field}`, message: 'is not a canonical field' })
    }
    if ((rule.action === 'ignore' || rule.action === 'reject') && (rule.type || rule.fields)) {
      errors.push({ in: 'body', field: `rules.${i}`, message: `an '${rule.action}' rule takes no type or fields` })
    }
  })
  if (errors.length) throw badRequest('invalid event mapping', { errors })
  const normalized = { rules: mapping.rules, default_action: mapping.default_action ?? 'accept' }
  if (!(await q.updateMapping(deps.sql, brandId, normalized))) throw notFound('brand')
  await deps.bus.publish('event_mapping', brandId)
  return normalized
}

import Type from 'typebox'
import { ADMIN_ACTOR, listAudit, recordAudit } from '../audit/service.ts'
import { AuditPage, AuditQuery } from '../audit/schemas.ts'
import type { AppContext } from '../context.ts'
import type { Bus, BusTopic } from '../db/bus.ts'
import type { Sql } from '../db/postgres.ts'
import { defineAdminRoute, type RouteDef } from '../http/route.ts'
import { DateTime, Uuid, data } from '../lib/schemas.ts'
import * as q from './queries.ts'
import * as admin from './service.ts'
import { ApiKey, Brand, CreateBrandBody, CreatedApiKey, CreateKeyBody, CreateTenantBody, EventMapping, Tenant, UpdateBrandBody } from './schemas.ts'

const TenantParams = Type.Object({ tenantId: Uuid })
const BrandParams = Type.Object({ brandId: Uuid })
const KeyParams = Type.Object({ keyId: Uuid })
const tags = ['admin']

const routes: RouteDef[] = [
  defineAdminRoute({
    method: 'POST', path: '/admin/tenants', operationId: 'adminCreateTenant', tags,
    summary: 'Create a tenant (it starts with no brand)',
    body: CreateTenantBody, responses: { 201: data(Tenant) },
    handler: async (ctx, req) => ({ data: await admin.createTenant(ctx, req.body) }),
  }),
  defineAdminRoute({
    method: 'GET', path: '/admin/tenants', operationId: 'adminListTenants', tags,
    summary: 'List tenants',
    responses: { 200: data(Type.Array(Tenant)) },
    handler: async (ctx) => ({ data: await admin.listTenants(ctx) }),
  }),
  defineAdminRoute({
    method: 'POST', path: '/admin/tenants/:tenantId/brands', operationId: 'adminCreateBrand', tags,
    summary: "Create a brand; the tenant's first brand is its default",
    params: TenantParams, body: CreateBrandBody, responses: { 201: data(Brand) },
    handler: async (ctx, req) => ({ data: await admin.createBrand(ctx, { ...req.body, tenantId: req.params.tenantId }) }),
  }),
  defineAdminRoute({
    method: 'PATCH', path: '/admin/brands/:brandId', operationId: 'adminUpdateBrand', tags,
    summary: 'Rename, (de)activate, or make a brand the default',
    params: BrandParams, body: UpdateBrandBody, responses: { 200: data(Brand) },
    handler: async (ctx, req) => ({ data: await admin.updateBrand(ctx, { ...req.body, brandId: req.params.brandId }) }),
  }),
  defineAdminRoute({
    method: 'POST', path: '/admin/tenants/:tenantId/keys', operationId: 'adminCreateKey', tags,
    summary: 'Issue an API key (shown once)',
    params: TenantParams, body: CreateKeyBody, responses: { 201: data(CreatedApiKey) },
    handler: async (ctx, req) => ({ data: await admin.createApiKey(ctx, { ...req.body, tenantId: req.params.tenantId }) }),
  }),
  defineAdminRoute({
    method: 'GET', path: '/admin/tenants/:tenantId/keys', operationId: 'adminListKeys', tags,
    summary: "List a tenant's keys (never the key itself)",
    params: TenantParams, responses: { 200: data(Type.Array(ApiKey)) },
    handler: async (ctx, req) => ({ data: await admin.listApiKeys(ctx, req.params.tenantId) }),
  }),
  defineAdminRoute({
    method: 'DELETE', path: '/admin/keys/:keyId', operationId: 'adminRevokeKey', tags,
    summary: 'Revoke a key; it fails with 401 on its next use',
    params: KeyParams, responses: { 200: data(Type.Object({ id: Uuid, revoked_at: DateTime })) },
    handler: async (ctx, req) => ({ data: await admin.revokeApiKey(ctx, req.params.keyId) }),
  }),
  defineAdminRoute({
    method: 'PUT', path: '/admin/brands/:brandId/event-mapping', operationId: 'adminSetEventMapping', tags,
    summary: "Replace a brand's event mapping; effective for the next request",
    params: BrandParams, body: EventMapping, responses: { 200: data(EventMapping) },
    handler: async (ctx, req) => ({ data: await admin.setEventMapping(ctx, req.params.brandId, req.body) }),
  }),
  defineAdminRoute({
    method: 'GET', path: '/admin/brands/:brandId/event-mapping', operationId: 'adminGetEventMapping', tags,
    summary: "A brand's event mapping (empty when none was set)",
    params: BrandParams, responses: { 200: data(EventMapping) },
    handler: async (ctx, req) => ({ data: await admin.getEventMapping(ctx, req.params.brandId) }),
  }),
]

/** What the audit wrapper reads of an admin request. */
interface Req {
  params?: Record<string, string>
  query: unknown
  requestId: string
}
interface AuditSpec {
  /** The state before the change, read in the change's transaction. */
  before?: (tx: Sql, req: Req) => Promise<unknown>
  tenant?: (req: Req, after: unknown, before: unknown) => string | undefined
  target?: (req: Req, after: unknown) => { type: string; id: string } | undefined
}

const idOf = (v: unknown) => (v as { id?: string } | undefined)?.id
const tenantOf = (v: unknown) => (v as { tenant_id?: string } | undefined)?.tenant_id
const AUDIT: Record<string, AuditSpec> = {
  adminCreateTenant: { tenant: (_r, after) => idOf(after), target: (_r, after) => ({ type: 'tenant', id: idOf(after) as string }) },
  adminCreateBrand: { tenant: (r) => r.params?.tenantId, target: (_r, after) => ({ type: 'brand', id: idOf(after) as string }) },
  adminUpdateBrand: {
    before: (tx, r) => q.selectBrand(tx, r.params?.brandId as string),
    tenant: (_r, after) => tenantOf(after),
    target: (r) => ({ type: 'brand', id: r.params?.brandId as string }),
  },
  adminCreateKey: { tenant: (r) => r.params?.tenantId, target: (_r, after) => ({ type: 'api_key', id: idOf(after) as string }) },
  adminListKeys: { tenant: (r) => r.params?.tenantId },
  adminRevokeKey: {
    before: (tx, r) => q.selectKey(tx, r.params?.keyId as string),
    tenant: (_r, _a, before) => tenantOf(before),
    target: (r) => ({ type: 'api_key', id: r.params?.keyId as string }),
  },
  adminSetEventMapping: {
    before: async (tx, r) => (await q.selectBrand(tx, r.params?.brandId as string)) && q.selectMapping(tx, r.params?.brandId as string),
    tenant: () => undefined,
    target: (r) => ({ type: 'event_mapping', id: r.params?.brandId as string }),
  },
  adminGetEventMapping: { target: (r) => ({ type: 'event_mapping', id: r.params?.brandId as string }) },
  adminListAudit: { tenant: (r) => (r.query as { tenant_id?: string }).tenant_id },
}

/**
 * Every admin call writes an audit row in the transaction of its change (reads too: who looked at keys
 * is worth knowing). The handler runs on that transaction; its cache invalidations (bus) are held back
 * until the commit, so no process reloads the old state in between.
 */
function audited(def: RouteDef): RouteDef {
  const spec = AUDIT[def.operationId] ?? {}
  const handler = def.handler as (ctx: AppContext, req: Req) => Promise<{ data?: unknown } & Record<string, unknown>>
  const isRead = def.method === 'GET'
  return {
    ...def,
    handler: async (ctx: AppContext, req: Req) => {
      const published: [BusTopic, string][] = []
      const bus: Bus = { ...ctx.bus, publish: async (topic, payload) => void published.push([topic, payload]) }
      const result = await ctx.sql.begin(async (tx) => {
        const sql = tx as unknown as Sql
        const before = spec.before ? await spec.before(sql, req) : undefined
        const out = await handler({ ...ctx, sql, bus }, req)
        const after = isRead ? undefined : out.data
        let tenantId = spec.tenant?.(req, after, before)
        // A mapping belongs to its brand's tenant.
        if (def.operationId === 'adminSetEventMapping' || def.operationId === 'adminGetEventMapping') tenantId = (await q.selectBrand(sql, req.params?.brandId as string))?.tenant_id
        await recordAudit(sql, {
          ...ADMIN_ACTOR,
          tenantId,
          action: def.operationId,
          target: spec.target?.(req, after),
          before: before ?? undefined,
          after,
          requestId: req.requestId,
        })
        return out
      })
      for (const [topic, payload] of published) await ctx.bus.publish(topic, payload)
      return result
    },
  } as RouteDef
}

const auditRoute = defineAdminRoute({
  method: 'GET', path: '/admin/audit', operationId: 'adminListAudit', tags,
  summary: 'The audit trail, newest first',
  description:
    'One record per admin-API call and per change of settings, keys, mappings and webhooks: actor (admin or ' +
    'an API key id), action, before/after with secrets masked, time, request id. `tenant_id` filters to one ' +
    "tenant; `next_cursor` pages on (null at the end).",
  query: AuditQuery, responses: { 200: AuditPage },
  handler: async (ctx, req) => listAudit(ctx.sql, { tenantId: req.query.tenant_id, cursor: req.query.cursor, limit: req.query.limit }),
})

export const adminRoutes: RouteDef[] = [...routes, auditRoute].map(audited)

import Type from 'typebox'
import { defineAdminRoute, type RouteDef } from '../http/route.ts'
import { DateTime, Uuid, data } from '../lib/schemas.ts'
import * as admin from './service.ts'
import { ApiKey, Brand, CreateBrandBody, CreatedApiKey, CreateKeyBody, CreateTenantBody, EventMapping, Tenant, UpdateBrandBody } from './schemas.ts'

const TenantParams = Type.Object({ tenantId: Uuid })
const BrandParams = Type.Object({ brandId: Uuid })
const KeyParams = Type.Object({ keyId: Uuid })
const tags = ['admin']

export const adminRoutes: RouteDef[] = [
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
    handler: async (ctx, req) => ({ data: await admin.createBrand(ctx, { tenantId: req.params.tenantId, ...req.body }) }),
  }),
  defineAdminRoute({
    method: 'PATCH', path: '/admin/brands/:brandId', operationId: 'adminUpdateBrand', tags,
    summary: 'Rename, (de)activate, or make a brand the default',
    params: BrandParams, body: UpdateBrandBody, responses: { 200: data(Brand) },
    handler: async (ctx, req) => ({ data: await admin.updateBrand(ctx, { brandId: req.params.brandId, ...req.body }) }),
  }),
  defineAdminRoute({
    method: 'POST', path: '/admin/tenants/:tenantId/keys', operationId: 'adminCreateKey', tags,
    summary: 'Issue an API key (shown once)',
    params: TenantParams, body: CreateKeyBody, responses: { 201: data(CreatedApiKey) },
    handler: async (ctx, req) => ({ data: await admin.createApiKey(ctx, { tenantId: req.params.tenantId, ...req.body }) }),
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

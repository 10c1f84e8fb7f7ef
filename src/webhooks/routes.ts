import { actorOf } from '../audit/service.ts'
import Type from 'typebox'
import { defineRoute, reply, type RouteDef } from '../http/route.ts'
import { data, IdParams, Uuid } from '../lib/schemas.ts'
import { visibilityOf } from '../lib/visibility.ts'
import {
  CreateWebhookBody,
  Delivery,
  DeliveryListQuery,
  DeliveryParams,
  UpdateWebhookBody,
  WebhookEndpoint,
  WebhookEndpointUpdated,
  WebhookEndpointWithSecret,
} from './schemas.ts'
import * as webhooks from './service.ts'

const tags = ['webhooks']

// Every route, reads included, needs a full-access key: the spec's "Webhook endpoint management (requires
// the write scope)" covers the whole section (endpoints name where data goes; the log holds the bodies).
export const webhookRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/webhooks', operationId: 'listWebhooks', tags, scope: 'full',
    summary: 'List webhook endpoints, newest first',
    description: 'A brand-pinned key sees only the endpoints of its brand.',
    responses: { 200: data(Type.Array(WebhookEndpoint)) },
    handler: async (ctx, req) => ({ data: await webhooks.listEndpoints(ctx, visibilityOf(req.principal)) }),
  }),
  defineRoute({
    method: 'POST', path: '/webhooks', operationId: 'createWebhook', tags,
    summary: 'Register a webhook endpoint; the signing secret is in this response only',
    description:
      'The URL must pass the URL policy (public https host; see docs/webhooks.md). `brand` (id or slug, or the `x-brand` header or `brand` query) scopes the endpoint to one brand\'s events; omitted, it gets every brand\'s. A brand-pinned key always creates endpoints of its brand.',
    body: CreateWebhookBody, responses: { 201: data(WebhookEndpointWithSecret) }, brandScoped: true,
    handler: async (ctx, req) => {
      // Unlike other collections, no hint means tenant-wide, not the default brand.
      const brandId = req.hasBrandHint() ? (await req.resolveBrand()).id : null
      return { data: await webhooks.createEndpoint(ctx, { tenantId: req.principal.tenantId, brandId, url: req.body.url, events: req.body.events }, { ...actorOf(req), requestId: req.requestId }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/webhooks/:id', operationId: 'getWebhook', tags, scope: 'full',
    summary: 'Get a webhook endpoint',
    params: IdParams, responses: { 200: data(WebhookEndpoint) },
    handler: async (ctx, req) => ({ data: await webhooks.getEndpoint(ctx, { ...visibilityOf(req.principal), id: req.params.id }) }),
  }),
  defineRoute({
    method: 'PATCH', path: '/webhooks/:id', operationId: 'updateWebhook', tags,
    summary: 'Update an endpoint, resume it, or rotate its secret',
    description:
      '`rotate_secret: true` returns the new `secret` once; the old one keeps signing (a second `webhook-signature`) for 24 hours. `active: true` resumes an endpoint deactivated after 5 days of failures, and its pending deliveries are due at once.',
    params: IdParams, body: UpdateWebhookBody, responses: { 200: data(WebhookEndpointUpdated) },
    handler: async (ctx, req) => ({ data: await webhooks.updateEndpoint(ctx, { ...req.body, ...visibilityOf(req.principal), id: req.params.id }, { ...actorOf(req), requestId: req.requestId }) }),
  }),
  defineRoute({
    method: 'DELETE', path: '/webhooks/:id', operationId: 'deleteWebhook', tags,
    summary: 'Delete an endpoint and its delivery log',
    params: IdParams, responses: { 200: data(Type.Object({ id: Uuid })) },
    handler: async (ctx, req) => ({ data: await webhooks.deleteEndpoint(ctx, { ...visibilityOf(req.principal), id: req.params.id }, { ...actorOf(req), requestId: req.requestId }) }),
  }),
  defineRoute({
    method: 'GET', path: '/webhooks/:id/deliveries', operationId: 'listWebhookDeliveries', tags, scope: 'full',
    summary: "An endpoint's deliveries with their attempts, newest first",
    params: IdParams, query: DeliveryListQuery,
    responses: { 200: Type.Object({ data: Type.Array(Delivery), next_cursor: Type.Union([Type.String(), Type.Null()]) }) },
    handler: async (ctx, req) => webhooks.listDeliveries(ctx, { ...req.query, ...visibilityOf(req.principal), id: req.params.id }),
  }),
  defineRoute({
    method: 'POST', path: '/webhooks/:id/ping', operationId: 'pingWebhook', tags,
    summary: 'Send a signed test event (webhook.ping)',
    description: 'Queues a `webhook.ping` delivery with `data: { endpoint_id, brand_id }`, signed, delivered and logged like any other. An inactive endpoint gets no new deliveries: 400 `details.reason: "ENDPOINT_INACTIVE"`.',
    params: IdParams, responses: { 202: data(Delivery) }, errors: [400],
    handler: async (ctx, req) => reply(202, { data: await webhooks.ping(ctx, { ...visibilityOf(req.principal), id: req.params.id }) }),
  }),
  defineRoute({
    method: 'POST', path: '/webhooks/:id/deliveries/:deliveryId/redeliver', operationId: 'redeliverWebhook', tags,
    summary: 'Send a delivery again: a new delivery of the identical body',
    description: 'An inactive endpoint gets no new deliveries: 400 `details.reason: "ENDPOINT_INACTIVE"`.',
    params: DeliveryParams, responses: { 202: data(Delivery) }, errors: [400],
    handler: async (ctx, req) =>
      reply(202, { data: await webhooks.redeliver(ctx, { ...visibilityOf(req.principal), id: req.params.id, deliveryId: req.params.deliveryId }) }),
  }),
]

import { defineRoute, type RouteDef } from '../http/route.ts'
import { IdParams, data } from '../lib/schemas.ts'
import {
  CreateTemplateBody,
  NotificationTemplate,
  SendBody,
  SendResponse,
  TemplateList,
  TemplateListQuery,
  UpdateTemplateBody,
} from './schemas.ts'
import * as notifications from './service.ts'

const tags = ['notifications']

export const notificationRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/notifications/templates', operationId: 'listNotificationTemplates', tags,
    summary: "List the brand's templates, newest first (active ones unless active=false)",
    query: TemplateListQuery, responses: { 200: TemplateList }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return notifications.listTemplates({ sql: ctx.sql, log: req.log }, { tenantId: req.principal.tenantId, brandId: brand.id, ...req.query })
    },
  }),
  defineRoute({
    method: 'POST', path: '/notifications/templates', operationId: 'createNotificationTemplate', tags,
    summary: 'Create a template',
    description: '`locale` defaults to `en`. `variables` is the union of the `{{name}}` placeholders of subject and body and the declared `variables`.',
    body: CreateTemplateBody, responses: { 201: data(NotificationTemplate) }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      const { brand: _hint, ...body } = req.body
      return { data: await notifications.createTemplate({ sql: ctx.sql, log: req.log }, { tenantId: req.principal.tenantId, brandId: brand.id, ...body }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/notifications/templates/:id', operationId: 'getNotificationTemplate', tags,
    summary: 'Get a template (active or not)',
    params: IdParams, responses: { 200: data(NotificationTemplate) },
    handler: async (ctx, req) => ({
      data: await notifications.getTemplate({ sql: ctx.sql, log: req.log }, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, templateId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'PATCH', path: '/notifications/templates/:id', operationId: 'updateNotificationTemplate', tags,
    summary: 'Update a template',
    description: 'Changing `subject`, `body` or `variables` recomputes `variables` from the new subject and body plus the declared names.',
    params: IdParams, body: UpdateTemplateBody, responses: { 200: data(NotificationTemplate) },
    handler: async (ctx, req) => ({
      data: await notifications.updateTemplate({ sql: ctx.sql, log: req.log }, {
        tenantId: req.principal.tenantId,
        brandId: req.principal.brandId,
        templateId: req.params.id,
        changes: req.body,
      }),
    }),
  }),
  defineRoute({
    method: 'DELETE', path: '/notifications/templates/:id', operationId: 'deleteNotificationTemplate', tags,
    summary: 'Deactivate a template (soft delete: active becomes false)',
    params: IdParams, responses: { 200: data(NotificationTemplate) },
    handler: async (ctx, req) => ({
      data: await notifications.deactivateTemplate({ sql: ctx.sql, log: req.log }, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, templateId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'POST', path: '/notifications/send', operationId: 'sendNotification', tags,
    summary: 'Queue a single notification to a player',
    description: '202 with the queued record. 404 when the player or template is not visible to the key. A template must be active and of the requested channel (else 400). Rendering and delivery are asynchronous.',
    body: SendBody, responses: { 202: SendResponse }, errors: [404],
    handler: async (ctx, req) => {
      const queued = await notifications.sendNotification({ sql: ctx.sql, log: req.log }, {
        tenantId: req.principal.tenantId,
        brandId: req.principal.brandId,
        playerId: req.body.player_id,
        channel: req.body.channel,
        templateId: req.body.template_id,
        payload: req.body.payload,
      })
      return { queued: true, notification_id: queued.id, data: queued }
    },
  }),
]

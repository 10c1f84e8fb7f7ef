import Type, { type Static, type TSchema } from 'typebox'
import { actorOf } from '../audit/service.ts'
import type { AppContext } from '../context.ts'
import { notFound } from '../errors.ts'
import { definePublicRoute, defineRoute, reply, type RouteDef } from '../http/route.ts'
import { IdParams, data } from '../lib/schemas.ts'
import { visibilityOf } from '../lib/visibility.ts'
import * as contacts from './contacts.ts'
import * as engagement from './engagement.ts'
import { escapeHtml } from './render.ts'
import * as settings from './settings.ts'
import {
  type Channel,
  InboxItem,
  InboxItemParams,
  InboxList,
  InboxQuery,
  NotificationList,
  NotificationListQuery,
  QueuedNotification,
  TokenParams,
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
      return notifications.listTemplates({ sql: ctx.sql, log: req.log }, { ...req.query, tenantId: req.principal.tenantId, brandId: brand.id })
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
      return { data: await notifications.createTemplate({ sql: ctx.sql, log: req.log }, { ...body, tenantId: req.principal.tenantId, brandId: brand.id }) }
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
    description:
      '202 with the record. 404 when the player or template is not visible to the key. A template must be active and of the requested channel (else 400); ' +
      'without `template_id` the `payload` carries `body` (and `subject`). `class` is `marketing` (default) or `transactional`. The send rules are checked ' +
      'now and again right before sending: a send suppressed at once answers 202 with `queued: false` and `status: suppressed`, `reason` saying why. Delivery is asynchronous.',
    body: SendBody, responses: { 202: SendResponse }, errors: [404],
    handler: async (ctx, req) => {
      const sent = await notifications.sendNotification({ sql: ctx.sql, log: req.log, clock: ctx.clock, delivery: ctx.delivery, metrics: ctx.metrics }, {
        tenantId: req.principal.tenantId,
        brandId: req.principal.brandId,
        playerId: req.body.player_id,
        channel: req.body.channel,
        templateId: req.body.template_id,
        payload: req.body.payload,
        class: req.body.class,
      })
      return { queued: sent.queued, notification_id: sent.notification.id, data: sent.notification }
    },
  }),
]

// --- Delivery: brand settings, contact points, the notification lifecycle, inbox, tracking -----------

const settingsTags = ['delivery settings']
const brandOf = async (req: { resolveBrand(): Promise<{ id: string; tenantId?: string }>; principal: { tenantId: string } }) => {
  const brand = await req.resolveBrand()
  return { tenantId: req.principal.tenantId, brandId: brand.id }
}

/** Who changes settings, for the audit row: the key, the route (its operationId as the action), the request. */
const settingsAudit = (operationId: string, req: Parameters<typeof actorOf>[0] & { requestId: string }): settings.SettingsAudit =>
  ({ ...actorOf(req), action: operationId, requestId: req.requestId })

const channelPut = <B extends TSchema, O extends TSchema>(channel: Channel, body: B, out: O, description: string, put: (ctx: AppContext, brand: { tenantId: string; brandId: string }, body: Static<B>, audit: settings.SettingsAudit) => Promise<unknown>) => {
  const operationId = `put${channel === 'in_app' ? 'InApp' : channel[0]!.toUpperCase() + channel.slice(1)}ChannelSettings`
  return defineRoute({
    method: 'PUT', path: `/settings/channels/${channel}`, operationId, tags: settingsTags,
    summary: `Set the brand's ${channel} channel settings (the whole object)`, description,
    body, responses: { 200: data(out) }, brandScoped: true,
    handler: async (ctx, req) => ({ data: await put(ctx, await brandOf(req), req.body as Static<B>, settingsAudit(operationId, req)) }),
  })
}

const settingsDeps = (ctx: AppContext) => ({ sql: ctx.sql, box: ctx.secretBox, config: ctx.config })

notificationRoutes.push(
  defineRoute({
    method: 'GET', path: '/settings/channels', operationId: 'getChannelSettings', tags: settingsTags,
    summary: "The brand's channel settings (each null until set); secrets masked, the VAPID private key never shown",
    responses: { 200: data(settings.ChannelSettings) }, brandScoped: true,
    handler: async (ctx, req) => ({ data: await settings.getChannelSettings(ctx.sql, (await brandOf(req)).brandId) }),
  }),
  channelPut('email', settings.EmailSettingsBody, settings.EmailSettings, 'The SMTP host passes the outbound URL policy (private addresses refused unless WEBHOOK_ALLOW_PRIVATE). The URL with its password is stored encrypted and read back masked.',
    (ctx, brand, body, audit) => settings.putEmailSettings(settingsDeps(ctx), brand, body, audit)),
  channelPut('telegram', settings.TelegramSettingsBody, settings.TelegramSettings, '`api_base_url` passes the outbound URL policy. The bot token is stored encrypted and read back masked.',
    (ctx, brand, body, audit) => settings.putTelegramSettings(settingsDeps(ctx), brand, body, audit)),
  channelPut('push', settings.PushSettingsBody, settings.PushSettings, 'Both VAPID keys, or neither: then a key pair is generated. The private key is stored encrypted and never shown.',
    (ctx, brand, body, audit) => settings.putPushSettings(settingsDeps(ctx), brand, body, audit)),
  channelPut('in_app', settings.InAppSettingsBody, settings.InAppSettings, 'How long delivered in-app messages stay in the inbox.',
    (ctx, brand, body, audit) => settings.putInAppSettings(settingsDeps(ctx), brand, body, audit)),
  defineRoute({
    method: 'GET', path: '/settings/delivery', operationId: 'getDeliverySettings', tags: settingsTags,
    summary: "The brand's frequency caps, quiet hours and consent policy",
    responses: { 200: data(settings.DeliverySettingsOut) }, brandScoped: true,
    handler: async (ctx, req) => ({ data: await settings.getDeliverySettings(ctx.sql, (await brandOf(req)).brandId) }),
  }),
  defineRoute({
    method: 'PUT', path: '/settings/delivery', operationId: 'putDeliverySettings', tags: settingsTags,
    summary: "Replace the brand's delivery settings (a key left out takes its default)",
    description: 'Caps count marketing messages per calendar day / ISO week in the player\'s time zone (else the quiet hours\' zone, else UTC). A marketing message due inside quiet hours is held and sent when they end.',
    body: settings.DeliverySettingsBody, responses: { 200: data(settings.DeliverySettingsOut) }, brandScoped: true,
    handler: async (ctx, req) => ({ data: await settings.putDeliverySettings(ctx.sql, await brandOf(req), req.body, settingsAudit('putDeliverySettings', req)) }),
  }),

  defineRoute({
    method: 'PUT', path: '/players/:id/telegram', operationId: 'putPlayerTelegram', tags: ['players'],
    summary: "Set the player's Telegram chat id",
    params: IdParams, body: contacts.TelegramBody, responses: { 200: data(contacts.TelegramContact) },
    handler: async (ctx, req) => ({ data: await contacts.putTelegram(ctx, { ...visibilityOf(req.principal), playerId: req.params.id, chatId: req.body.chat_id }) }),
  }),
  defineRoute({
    method: 'DELETE', path: '/players/:id/telegram', operationId: 'deletePlayerTelegram', tags: ['players'],
    summary: "Remove the player's Telegram chat id", params: IdParams, responses: { 204: { description: 'removed', contentType: 'application/json' } },
    handler: async (ctx, req) => {
      await contacts.deleteTelegram(ctx, { ...visibilityOf(req.principal), playerId: req.params.id })
      return reply(204, '')
    },
  }),
  defineRoute({
    method: 'POST', path: '/players/:id/push-subscriptions', operationId: 'addPlayerPushSubscription', tags: ['players'],
    summary: 'Add a browser PushSubscription', description: 'The endpoint passes the outbound URL policy. The same endpoint again updates its keys.',
    params: IdParams, body: contacts.PushSubscriptionBody, responses: { 201: data(contacts.PushSubscriptionOut) },
    handler: async (ctx, req) => ({ data: await contacts.addPushSubscription(ctx, { ...visibilityOf(req.principal), playerId: req.params.id, body: req.body }) }),
  }),
  defineRoute({
    method: 'GET', path: '/players/:id/push-subscriptions', operationId: 'listPlayerPushSubscriptions', tags: ['players'], scope: 'full', // contact points: full access (contract-engines)
    summary: "The player's push subscriptions", params: IdParams, responses: { 200: data(Type.Array(contacts.PushSubscriptionOut)) },
    handler: async (ctx, req) => ({ data: await contacts.listPushSubscriptions(ctx, { ...visibilityOf(req.principal), playerId: req.params.id }) }),
  }),
  defineRoute({
    method: 'DELETE', path: '/players/:id/push-subscriptions/:subscriptionId', operationId: 'deletePlayerPushSubscription', tags: ['players'],
    summary: 'Remove a push subscription', params: contacts.SubscriptionParams, responses: { 204: { description: 'removed', contentType: 'application/json' } },
    handler: async (ctx, req) => {
      await contacts.deletePushSubscription(ctx, { ...visibilityOf(req.principal), playerId: req.params.id, subscriptionId: req.params.subscriptionId })
      return reply(204, '')
    },
  }),

  defineRoute({
    method: 'GET', path: '/notifications', operationId: 'listNotifications', tags,
    summary: "The brand's notifications, newest first", query: NotificationListQuery, responses: { 200: NotificationList }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return engagement.listNotifications(ctx, { ...req.query, tenantId: req.principal.tenantId, brandId: brand.id })
    },
  }),
  defineRoute({
    method: 'GET', path: '/notifications/:id', operationId: 'getNotification', tags,
    summary: 'A notification with its status, reason, error and timestamps', params: IdParams, responses: { 200: data(QueuedNotification) },
    handler: async (ctx, req) => ({ data: await engagement.getNotification(ctx, { ...visibilityOf(req.principal), id: req.params.id }) }),
  }),

  defineRoute({
    method: 'GET', path: '/players/:id/inbox', operationId: 'listPlayerInbox', tags: ['inbox'],
    summary: "The player's in-app messages, newest first", params: IdParams, query: InboxQuery, responses: { 200: InboxList },
    handler: async (ctx, req) => engagement.listInbox(ctx, { ...req.query, ...visibilityOf(req.principal), playerId: req.params.id }),
  }),
  defineRoute({
    method: 'POST', path: '/players/:id/inbox/:notificationId/read', operationId: 'readInboxMessage', tags: ['inbox'],
    summary: 'Mark an inbox message read (the first read counts as the open)', params: InboxItemParams, responses: { 200: data(InboxItem) },
    handler: async (ctx, req) => ({ data: await engagement.markRead(ctx, { ...visibilityOf(req.principal), playerId: req.params.id, notificationId: req.params.notificationId }) }),
  }),
  defineRoute({
    method: 'POST', path: '/players/:id/inbox/token', operationId: 'createInboxToken', tags: ['inbox'],
    summary: 'A 15-minute token for the inbox WebSocket', description: 'A browser opens `GET /api/v1/inbox/ws?token=...` and receives `{ "type": "message", "data": <inbox item> }` for each new message.',
    params: IdParams, responses: { 201: data(Type.Object({ token: Type.String(), expires_at: Type.String({ format: 'date-time' }) })) },
    handler: async (ctx, req) => ({ data: await engagement.inboxToken(ctx, { ...visibilityOf(req.principal), playerId: req.params.id }) }),
  }),

  definePublicRoute({
    method: 'GET', path: '/t/o/:token', operationId: 'trackOpen', tags: ['tracking'], atRoot: true,
    summary: 'Open pixel (a 1×1 GIF); the first open records opened_at and fires message.opened', params: TokenParams,
    responses: { 200: { description: 'a 1×1 transparent GIF', contentType: 'image/gif' } }, errors: [404],
    handler: async (ctx, req) => {
      if (!(await engagement.recordOpen(ctx, req.params.token.replace(/\.gif$/, '')))) throw notFound('tracking token')
      return reply(200, PIXEL, { 'cache-control': 'no-store' }, 'image/gif')
    },
  }),
  definePublicRoute({
    method: 'GET', path: '/t/c/:token', operationId: 'trackClick', tags: ['tracking'], atRoot: true,
    summary: "Redirects to one of the message's own links; the first click records clicked_at and fires message.clicked", params: TokenParams,
    responses: { 302: { description: 'redirect to the link', contentType: 'text/plain' } }, errors: [404],
    handler: async (ctx, req) => {
      const url = await engagement.recordClick(ctx, req.params.token)
      if (!url) throw notFound('tracking token')
      // As a header value: non-ASCII percent-encoded, tabs and newlines dropped (WHATWG URL), so a link
      // such as https://ru.wikipedia.org/wiki/Москва is a valid Location (a raw one is refused by node).
      let location: string
      try {
        location = new URL(url).href
      } catch {
        throw notFound('tracking link')
      }
      return reply(302, '', { location, 'cache-control': 'no-store' }, 'text/plain')
    },
  }),
  definePublicRoute({
    method: 'GET', path: '/t/u/:token', operationId: 'unsubscribePage', tags: ['tracking'], atRoot: true,
    summary: 'A page with a button that unsubscribes (a GET changes nothing: mail scanners prefetch links)', params: TokenParams,
    responses: { 200: { description: 'HTML page', contentType: 'text/html' } }, errors: [404],
    handler: async (ctx, req) => {
      if (!(await engagement.unsubscribeTokenValid(ctx, req.params.token))) throw notFound('unsubscribe token')
      return reply(200, unsubscribePage(req.params.token, false), { 'cache-control': 'no-store' }, 'text/html; charset=utf-8')
    },
  }),
  definePublicRoute({
    method: 'POST', path: '/t/u/:token', operationId: 'unsubscribe', tags: ['tracking'], atRoot: true,
    summary: "RFC 8058 one-click unsubscribe: withdraws the player's email consent, fires email.unsubscribed once", params: TokenParams,
    responses: { 200: { description: 'HTML confirmation', contentType: 'text/html' } }, errors: [404],
    handler: async (ctx, req) => {
      if (!(await engagement.unsubscribe(ctx, req.params.token))) throw notFound('unsubscribe token')
      return reply(200, unsubscribePage(req.params.token, true), { 'cache-control': 'no-store' }, 'text/html; charset=utf-8')
    },
  }),
)

/** The smallest transparent 1×1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64')

function unsubscribePage(token: string, done: boolean): string {
  const body = done
    ? '<h1>You are unsubscribed</h1><p>You will no longer receive marketing email from us.</p>'
    : `<h1>Unsubscribe</h1><p>Stop receiving marketing email from us?</p><form method="post" action="${escapeHtml(encodeURIComponent(token))}"><button type="submit">Unsubscribe</button></form>`
  return `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><meta name="robots" content="noindex"><title>Unsubscribe</title></head><body>${body}</body></html>`
}

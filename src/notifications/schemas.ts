import Type, { type Static } from 'typebox'
import { DateTime, FreeObject, Nullable, OffsetQuery, Uuid } from '../lib/schemas.ts'

/** The four channels of the public API (shared with campaigns). */
export const CHANNELS = ['email', 'telegram', 'push', 'in_app'] as const
export const Channel = Type.Union([Type.Literal('email'), Type.Literal('telegram'), Type.Literal('push'), Type.Literal('in_app')])
export type Channel = Static<typeof Channel>

export const LOCALES = ['en', 'it', 'es'] as const
export const Locale = Type.Union([Type.Literal('en'), Type.Literal('it'), Type.Literal('es')])
export type Locale = Static<typeof Locale>

const Name = Type.String({ minLength: 1, maxLength: 200 })
const Subject = Type.String({ maxLength: 1000 })
const BodyText = Type.String({ minLength: 1, maxLength: 100_000 })
const VariableNames = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  maxItems: 200,
  description: 'Declared variable names; the stored list is these plus every {{name}} placeholder of subject and body',
})

export const NotificationTemplate = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    channel: Channel,
    locale: Locale,
    subject: Nullable(Type.String()),
    body: Type.String(),
    variables: Type.Array(Type.String(), { description: '{{name}} placeholders of subject and body, plus declared names' }),
    active: Type.Boolean(),
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'NotificationTemplate' },
)
export type NotificationTemplate = Static<typeof NotificationTemplate>

export const CreateTemplateBody = Type.Object({
  name: Name,
  channel: Channel,
  body: BodyText,
  locale: Type.Optional(Locale),
  subject: Type.Optional(Nullable(Subject)),
  variables: Type.Optional(VariableNames),
  brand: Type.Optional(Type.String({ minLength: 1, description: 'brand id or slug (ignored for brand-pinned keys)' })),
})
export type CreateTemplateBody = Static<typeof CreateTemplateBody>

export const UpdateTemplateBody = Type.Object({
  name: Type.Optional(Name),
  channel: Type.Optional(Channel),
  locale: Type.Optional(Locale),
  subject: Type.Optional(Nullable(Subject)),
  body: Type.Optional(BodyText),
  variables: Type.Optional(VariableNames),
  active: Type.Optional(Type.Boolean()),
})
export type UpdateTemplateBody = Static<typeof UpdateTemplateBody>

export const TemplateListQuery = Type.Object({
  channel: Type.Optional(Channel),
  active: Type.Boolean({ default: true, description: 'true (default) lists active templates, false inactive ones' }),
  ...OffsetQuery,
})
export type TemplateListQuery = Static<typeof TemplateListQuery>

export const TemplateList = Type.Object({ templates: Type.Array(NotificationTemplate), total: Type.Integer() })

export const MessageClass = Type.Union([Type.Literal('marketing'), Type.Literal('transactional')])

export const NOTIFICATION_STATUSES = ['queued', 'delivered', 'suppressed', 'bounced', 'failed'] as const
export const NotificationStatus = Type.Union(NOTIFICATION_STATUSES.map((s) => Type.Literal(s)))

export const QueuedNotification = Type.Object(
  {
    id: Uuid,
    tenant_id: Uuid,
    player_id: Uuid,
    channel: Channel,
    template_id: Nullable(Uuid),
    payload: FreeObject,
    status: Type.String({ description: '`queued`, `delivered`, `suppressed`, `bounced` or `failed` (contract-engines §3)' }),
    class: MessageClass,
    campaign_id: Nullable(Uuid),
    reason: Nullable(Type.String({ description: 'why it was suppressed' })),
    error: Nullable(Type.String({ description: 'why it failed or bounced' })),
    attempts: Type.Integer(),
    scheduled_at: DateTime,
    sent_at: Nullable(DateTime),
    delivered_at: Nullable(DateTime),
    opened_at: Nullable(DateTime),
    clicked_at: Nullable(DateTime),
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'QueuedNotification' },
)
export type QueuedNotification = Static<typeof QueuedNotification>

export const SendBody = Type.Object({
  player_id: Uuid,
  channel: Channel,
  template_id: Type.Optional(Uuid),
  payload: Type.Optional(FreeObject),
  class: Type.Optional(MessageClass),
})
export type SendBody = Static<typeof SendBody>

export const SendResponse = Type.Object({ queued: Type.Boolean(), notification_id: Uuid, data: QueuedNotification })

export const NotificationListQuery = Type.Object({
  player_id: Type.Optional(Uuid),
  campaign_id: Type.Optional(Uuid),
  status: Type.Optional(NotificationStatus),
  channel: Type.Optional(Channel),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
})
export type NotificationListQuery = Static<typeof NotificationListQuery>

export const NotificationList = Type.Object({ data: Type.Array(QueuedNotification), next_cursor: Nullable(Type.String()) })

export const InboxItem = Type.Object(
  { id: Uuid, subject: Nullable(Type.String()), body: Type.String(), campaign_id: Nullable(Uuid), created_at: DateTime, read_at: Nullable(DateTime) },
  { $id: 'InboxItem' },
)
export const InboxQuery = Type.Object({
  unread: Type.Optional(Type.Boolean({ description: 'only unread messages' })),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
})
export const InboxList = Type.Object({ data: Type.Array(InboxItem), next_cursor: Nullable(Type.String()) })
export const InboxItemParams = Type.Object({ id: Uuid, notificationId: Uuid })
// No length limit here: any token that is not one of ours, long ones included, is a 404 (§3 Tracking).
export const TokenParams = Type.Object({ token: Type.String({ minLength: 1 }) })

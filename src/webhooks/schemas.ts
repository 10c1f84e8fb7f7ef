import Type, { type Static } from 'typebox'
import { DateTime, Nullable, Uuid } from '../lib/schemas.ts'
import { ALL_EVENTS, WEBHOOK_EVENTS } from './catalog.ts'

export const EventName = Type.Union([...WEBHOOK_EVENTS, ALL_EVENTS].map((e) => Type.Literal(e)), {
  description: `an event of the catalog, or "${ALL_EVENTS}" for all of them (new ones included)`,
})

const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'public https URL (see the URL policy in docs/webhooks.md)' })
const Events = Type.Array(EventName, { minItems: 1, maxItems: 100, uniqueItems: true })

export const WebhookEndpoint = Type.Object(
  {
    id: Uuid,
    url: Type.String(),
    events: Type.Array(Type.String()),
    brand_id: Nullable(Uuid),
    active: Type.Boolean(),
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'WebhookEndpoint' },
)
export type WebhookEndpoint = Static<typeof WebhookEndpoint>

export const WebhookEndpointWithSecret = Type.Object(
  {
    ...WebhookEndpoint.properties,
    secret: Type.String({ description: 'whsec_…: shown only in this response' }),
  },
  { $id: 'WebhookEndpointWithSecret' },
)

/** PATCH's answer: the endpoint, plus the new secret once when rotate_secret was true. */
export const WebhookEndpointUpdated = Type.Object(
  {
    ...WebhookEndpoint.properties,
    secret: Type.Optional(Type.String({ description: 'present only after rotate_secret: the new whsec_… secret, shown once' })),
  },
  { $id: 'WebhookEndpointUpdated' },
)

export const CreateWebhookBody = Type.Object({
  url: Url,
  events: Events,
  brand: Type.Optional(Type.String({ minLength: 1, description: 'brand id or slug; omitted = tenant-wide (every brand)' })),
})
export type CreateWebhookBody = Static<typeof CreateWebhookBody>

export const UpdateWebhookBody = Type.Object({
  url: Type.Optional(Url),
  events: Type.Optional(Events),
  active: Type.Optional(Type.Boolean({ description: 'true resumes an endpoint deactivated after 5 days of failures' })),
  rotate_secret: Type.Optional(Type.Boolean({ description: 'true: a new secret, returned once; the old one keeps signing for 24 h' })),
})
export type UpdateWebhookBody = Static<typeof UpdateWebhookBody>

export const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('successful'), Type.Literal('failed')])

export const DeliveryAttempt = Type.Object({
  n: Type.Integer(),
  at: DateTime,
  response_code: Nullable(Type.Integer()),
  duration_ms: Type.Integer(),
  error: Nullable(Type.String()),
  response_body: Nullable(Type.String({ description: 'the first 1 KB of the response body' })),
})

export const Delivery = Type.Object(
  {
    id: Uuid,
    endpoint_id: Uuid,
    event: Type.String(),
    status: DeliveryStatus,
    attempt_count: Type.Integer(),
    next_attempt_at: Nullable(DateTime),
    created_at: DateTime,
    completed_at: Nullable(DateTime),
    redelivery_of: Nullable(Uuid),
    attempts: Type.Array(DeliveryAttempt),
  },
  { $id: 'WebhookDelivery' },
)
export type Delivery = Static<typeof Delivery>

export const DeliveryListQuery = Type.Object({
  status: Type.Optional(DeliveryStatus),
  event: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  cursor: Type.Optional(Type.String({ minLength: 1 })),
})
export type DeliveryListQuery = Static<typeof DeliveryListQuery>

export const DeliveryParams = Type.Object({ id: Uuid, deliveryId: Uuid })

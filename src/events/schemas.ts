// POST /events: request and response shapes. The router compiles these once (precompiled TypeBox checks).
import Type, { type Static } from 'typebox'
import { DateTime, FreeObject } from '../lib/schemas.ts'

export const MAX_BATCH = 100
export const MAX_EVENT_ID = 128

export const IncomingEvent = Type.Object(
  {
    player_id: Type.String({ minLength: 1, maxLength: 256, description: "the operator's player id; the player is upserted by it" }),
    event_type: Type.String({ minLength: 1, maxLength: 128 }),
    event_id: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_EVENT_ID, description: 'idempotency key, deduplicated per brand for at least 7 days' })),
    payload: Type.Optional(FreeObject),
    timestamp: Type.Optional(DateTime),
    session_id: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { $id: 'IncomingEvent' },
)
export type IncomingEvent = Static<typeof IncomingEvent>

export const EventBatch = Type.Object({
  events: Type.Array(IncomingEvent, { minItems: 1, maxItems: MAX_BATCH }),
})

export const IngestBody = Type.Union([EventBatch, IncomingEvent], {
  description: 'a single event, or { events: [event] } with 1 to 100 events',
})
export type IngestBody = Static<typeof IngestBody>

export const IngestResponse = Type.Object(
  {
    received: Type.Integer(),
    stored: Type.Integer(),
    deduped: Type.Integer(),
    rejected: Type.Integer(),
    ignored: Type.Integer(),
    unknown_event_types: Type.Array(Type.String()),
    rejected_event_types: Type.Array(Type.String()),
    status: Type.Literal('queued'),
    timestamp: DateTime,
  },
  { $id: 'IngestResponse' },
)
export type IngestResponse = Static<typeof IngestResponse>

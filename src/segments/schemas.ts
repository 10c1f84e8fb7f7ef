import Type, { type Static } from 'typebox'
import { DateTime, FreeObject, Nullable, Uuid } from '../lib/schemas.ts'

export const SegmentType = Type.Union([Type.Literal('dynamic'), Type.Literal('static')], {
  description: 'dynamic: the brand players matching `rules` now; static: rules.player_ids',
})

export const Segment = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    type: SegmentType,
    rules: FreeObject,
    player_count: Nullable(Type.Integer({ description: 'Members at the last recompute; null until the first one' })),
    last_computed_at: Nullable(DateTime),
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Segment' },
)
export type Segment = Static<typeof Segment>

export const ListSegmentsQuery = Type.Object({ type: Type.Optional(SegmentType) })

export const CreateSegmentBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  type: SegmentType,
  rules: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description:
        'dynamic: { all: [...] } | { any: [...] } | { not: rule } | { field, op, value } ({} = every player of the brand); ' +
        'static: { player_ids: [uuid, ...] }. See docs/segments.md.',
    }),
  ),
  brand: Type.Optional(Type.String({ description: 'Brand id or slug' })),
})
export type CreateSegmentBody = Static<typeof CreateSegmentBody>

export const ExportQuery = Type.Object({
  cursor: Type.Optional(Type.String({ maxLength: 2048, description: 'Opaque; the next_cursor of the previous page. Omit to start.' })),
  // Optional with a default: filled in before the handler runs, and not `required` in OpenAPI.
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 200 })),
  format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')], { default: 'json' })),
})
export type ExportQuery = Static<typeof ExportQuery>

export const ExportRow = Type.Object(
  {
    external_id: Type.String(),
    email: Nullable(Type.String()),
    phone: Nullable(Type.String()),
    name: Nullable(Type.String()),
    consent: Type.Record(Type.String(), Type.Object({ granted: Type.Boolean(), at: Nullable(Type.String()) }), {
      description: 'Per channel, from consent_update events; in CSV encoded as email:1;push:0',
    }),
    country: Nullable(Type.String()),
  },
  { $id: 'SegmentExportRow' },
)
export type ExportRow = Static<typeof ExportRow>

export const ExportResponse = Type.Object({
  segment: Segment,
  data: Type.Array(ExportRow),
  next_cursor: Nullable(Type.String()),
})

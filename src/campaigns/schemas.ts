import Type, { type Static } from 'typebox'
import { DateTime, FreeObject, Nullable, OffsetQuery, Uuid } from '../lib/schemas.ts'
import { Channel } from '../notifications/schemas.ts'

export const CampaignStatus = Type.Union([
  Type.Literal('draft'),
  Type.Literal('scheduled'),
  Type.Literal('running'),
  Type.Literal('paused'),
  Type.Literal('completed'),
  Type.Literal('cancelled'),
])
export const CampaignType = Type.Union([Type.Literal('one_shot'), Type.Literal('recurring'), Type.Literal('triggered'), Type.Literal('journey')])
export type CampaignType = Static<typeof CampaignType>

const Channels = Type.Array(Channel, { minItems: 1, uniqueItems: true })
const Name = Type.String({ minLength: 1, maxLength: 200 })
const Description = Type.String({ maxLength: 5000 })

export const CampaignStats = Type.Object(
  {
    sent: Type.Integer(),
    delivered: Type.Integer(),
    opened: Type.Integer(),
    clicked: Type.Integer(),
    bounced: Type.Integer(),
    unsubscribed: Type.Integer(),
    converted: Type.Integer(),
  },
  { description: 'Counters kept by the execution engine; all zero until it runs the campaign' },
)

export const Campaign = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    description: Nullable(Type.String()),
    status: CampaignStatus,
    type: CampaignType,
    channels: Type.Array(Channel),
    target_segment_id: Nullable(Uuid),
    schedule: FreeObject,
    config: FreeObject,
    stats: CampaignStats,
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Campaign' },
)
export type Campaign = Static<typeof Campaign>

export const CreateCampaignBody = Type.Object({
  name: Name,
  type: CampaignType,
  channels: Channels,
  description: Type.Optional(Nullable(Description)),
  target_segment_id: Type.Optional(Nullable(Uuid)),
  schedule: Type.Optional(FreeObject),
  config: Type.Optional(FreeObject),
  brand: Type.Optional(Type.String({ minLength: 1, description: 'brand id or slug (ignored for brand-pinned keys)' })),
})
export type CreateCampaignBody = Static<typeof CreateCampaignBody>

export const UpdateCampaignBody = Type.Object({
  name: Type.Optional(Name),
  description: Type.Optional(Nullable(Description)),
  status: Type.Optional(CampaignStatus),
  channels: Type.Optional(Channels),
  target_segment_id: Type.Optional(Nullable(Uuid)),
  config: Type.Optional(FreeObject),
  schedule: Type.Optional(FreeObject),
})
export type UpdateCampaignBody = Static<typeof UpdateCampaignBody>

export const CampaignListQuery = Type.Object({ status: Type.Optional(CampaignStatus), ...OffsetQuery })
export type CampaignListQuery = Static<typeof CampaignListQuery>

export const CampaignList = Type.Object({ campaigns: Type.Array(Campaign), total: Type.Integer() })

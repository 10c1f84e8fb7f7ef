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

const counter = (description: string) => Type.Integer({ minimum: 0, description })
export const CampaignStats = Type.Object(
  {
    audience: counter('players selected, the hold-out included'),
    control: counter('players held out (control group)'),
    sent: counter('notifications that left the queue (delivered, bounced or failed after trying)'),
    delivered: counter('notifications the channel accepted'),
    suppressed: counter('notifications the delivery rules stopped (status, consent, caps, cancel, ...)'),
    failed: counter('notifications that failed'),
    opened: counter('notifications opened'),
    clicked: counter('notifications clicked'),
    bounced: counter('notifications bounced'),
    unsubscribed: counter('notifications whose recipient unsubscribed through them'),
    converted: counter('players who converted within the window after a delivered message'),
    control_converted: counter('held-out players who converted within the window'),
  },
  { description: 'Kept by the execution engine (contract-engines §4); current within a few seconds' },
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

export const ParticipantStatus = Type.Union([Type.Literal('active'), Type.Literal('waiting'), Type.Literal('completed'), Type.Literal('exited')])

export const Participant = Type.Object(
  {
    player_id: Uuid,
    step: Nullable(Type.String({ description: 'the step the player is at (or ended at)' })),
    status: ParticipantStatus,
    entered_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'CampaignParticipant' },
)
export type Participant = Static<typeof Participant>

export const ParticipantsQuery = Type.Object({
  status: Type.Optional(ParticipantStatus),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  cursor: Type.Optional(Type.String({ maxLength: 2048 })),
})
export type ParticipantsQuery = Static<typeof ParticipantsQuery>

export const ParticipantList = Type.Object({ data: Type.Array(Participant), next_cursor: Nullable(Type.String()) })

import Type, { type Static } from 'typebox'
import { DateTime, FreeObject, Nullable, PageQuery, Pagination, Uuid } from '../lib/schemas.ts'

export const PlayerStatus = Type.Union(
  [Type.Literal('active'), Type.Literal('suspended'), Type.Literal('self_excluded'), Type.Literal('closed')],
  { $id: 'PlayerStatus' },
)
export const LifecycleStage = Type.Union([
  Type.Literal('new'), Type.Literal('ftd'), Type.Literal('active'), Type.Literal('vip'), Type.Literal('at_risk'), Type.Literal('churned'),
])
export const Language = Type.Union([Type.Literal('en'), Type.Literal('it'), Type.Literal('es')])
const Email = Type.String({ format: 'email', maxLength: 320 })
const Phone = Type.String({ maxLength: 64 })
const ExternalId = Type.String({ minLength: 1, maxLength: 256 })

export const Player = Type.Object(
  {
    id: Uuid,
    external_id: Type.String(),
    email: Nullable(Type.String({ format: 'email' })),
    phone: Nullable(Type.String()),
    status: PlayerStatus,
    metadata: FreeObject,
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Player' },
)
export type Player = Static<typeof Player>

export const ConsentState = Type.Record(
  Type.String(),
  Type.Object({ granted: Type.Boolean(), at: Nullable(Type.String()) }),
  { description: 'Per channel (email, telegram, push, in_app, sms), from consent_update events' },
)

export const PlayerProfile = Type.Object(
  {
    language: Type.String(),
    currency: Type.String(),
    country: Nullable(Type.String()),
    name: Nullable(Type.String()),
    timezone: Nullable(Type.String({ description: 'IANA time zone (canonical field `timezone` of registration / profile_update); caps and quiet hours use it' })),
    lifecycle_stage: LifecycleStage,
    scores: Type.Object({ churn: Type.Integer(), value: Type.Integer(), engagement: Type.Integer() }, { description: '0..100 each, see docs/players.md' }),
    consent: ConsentState,
    event_count: Type.Integer(),
    first_seen_at: Nullable(DateTime),
    last_seen_at: Nullable(DateTime),
    last_login_at: Nullable(DateTime),
    deposit_count: Type.Integer(),
    deposit_total: Type.Number({ description: 'In the profile currency' }),
    first_deposit_at: Nullable(DateTime),
    last_deposit_at: Nullable(DateTime),
    withdrawal_total: Type.Number(),
    bet_total: Type.Number(),
    win_total: Type.Number(),
    ggr: Type.Number({ description: '(bets − bet rollbacks) − (wins − win rollbacks)' }),
  },
  { $id: 'PlayerProfile' },
)
export type PlayerProfile = Static<typeof PlayerProfile>

export const PlayerWithProfile = Type.Object(
  { ...Player.properties, profile: PlayerProfile },
  { $id: 'PlayerWithProfile' },
)
export type PlayerWithProfile = Static<typeof PlayerWithProfile>

export const ListPlayersQuery = Type.Object({
  ...PageQuery,
  search: Type.Optional(Type.String({ maxLength: 256, description: 'Case-insensitive substring of email or external_id' })),
  status: Type.Optional(PlayerStatus),
})
export type ListPlayersQuery = Static<typeof ListPlayersQuery>

export const PlayerList = Type.Object({ data: Type.Array(Player), pagination: Pagination })

export const CreatePlayerBody = Type.Object({
  external_id: ExternalId,
  email: Type.Optional(Nullable(Email)),
  phone: Type.Optional(Nullable(Phone)),
  status: Type.Optional(PlayerStatus),
  metadata: Type.Optional(FreeObject),
  language: Type.Optional(Type.Union(Language.anyOf, { description: 'Default en on creation; a repeat without it keeps the current value' })),
  currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$', description: '3-letter ISO 4217 code (stored upper-case). Default EUR on creation; a repeat without it keeps the current value' })),
  brand: Type.Optional(Type.String({ description: 'Brand id or slug' })),
})
export type CreatePlayerBody = Static<typeof CreatePlayerBody>

export const UpdatePlayerBody = Type.Object({
  status: Type.Optional(PlayerStatus),
  email: Type.Optional(Nullable(Email)),
  phone: Type.Optional(Nullable(Phone)),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Shallow-merged into the current metadata' })),
})
export type UpdatePlayerBody = Static<typeof UpdatePlayerBody>

export const NextBestActionBody = Type.Object(
  {
    player_id: Uuid,
    action: Type.String(),
    priority: Type.Union([Type.Literal('high'), Type.Literal('medium'), Type.Literal('low')]),
    reason: Type.String(),
    channelHint: Type.Union([Type.Literal('personal'), Type.Literal('email'), Type.Literal('push'), Type.Literal('any')]),
  },
  { $id: 'NextBestAction' },
)

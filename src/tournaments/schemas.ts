// Tournament definitions.
import Type, { type Static } from 'typebox'
import { BrandField, INT4_MAX, patchOf } from '../gamification/schemas.ts'
import { DateTime, FreeObject, Nullable, Uuid } from '../lib/schemas.ts'

export const TOURNAMENT_STATUSES = ['draft', 'active', 'ended', 'cancelled'] as const

export const Tournament = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    description: Nullable(Type.String()),
    status: Type.Union(TOURNAMENT_STATUSES.map((v) => Type.Literal(v))),
    game_config: FreeObject,
    prize_pool: FreeObject,
    max_participants: Nullable(Type.Integer()),
    starts_at: Nullable(DateTime),
    ends_at: Nullable(DateTime),
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Tournament' },
)
export type Tournament = Static<typeof Tournament>

export const CreateTournamentBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.Optional(Nullable(Type.String({ maxLength: 5000 }))),
  status: Type.Optional(Type.Union(TOURNAMENT_STATUSES.map((v) => Type.Literal(v)), { default: 'draft' })),
  game_config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  prize_pool: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  max_participants: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: INT4_MAX }))),
  starts_at: Type.Optional(Nullable(DateTime)),
  ends_at: Type.Optional(Nullable(DateTime)),
  brand: Type.Optional(BrandField),
})
export type CreateTournamentBody = Static<typeof CreateTournamentBody>
export const PatchTournamentBody = patchOf(CreateTournamentBody)

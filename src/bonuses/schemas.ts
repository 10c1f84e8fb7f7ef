// Bonus definitions.
import Type, { type Static } from 'typebox'
import { BrandField, INT4_MAX, patchOf } from '../gamification/schemas.ts'
import { DateTime, FreeObject, Nullable, Uuid } from '../lib/schemas.ts'

export const BONUS_TYPES = ['welcome', 'reload', 'cashback', 'free_spins', 'no_deposit', 'custom'] as const
export const BonusType = Type.Union(BONUS_TYPES.map((v) => Type.Literal(v)))

export const Bonus = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    type: BonusType,
    value: Type.Number(),
    value_type: Type.String(),
    wagering_requirement: Type.Number(),
    config: FreeObject,
    expires_in_hours: Nullable(Type.Integer()),
    active: Type.Boolean(),
    created_at: DateTime,
  },
  { $id: 'Bonus' },
)
export type Bonus = Static<typeof Bonus>

export const CreateBonusBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  type: BonusType,
  value: Type.Number({ minimum: 0 }),
  value_type: Type.String({ minLength: 1, maxLength: 64, description: 'free string, e.g. fixed, percent, spins' }),
  wagering_requirement: Type.Optional(Type.Number({ minimum: 0, default: 0 })),
  config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  expires_in_hours: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: INT4_MAX }))),
  active: Type.Optional(Type.Boolean({ default: true })),
  brand: Type.Optional(BrandField),
})
export type CreateBonusBody = Static<typeof CreateBonusBody>
export const PatchBonusBody = patchOf(CreateBonusBody)

// Levels, missions, badges, point currencies and the player gamification profile.
import Type, { type Static, type TObject } from 'typebox'
import { DateTime, FreeObject, Nullable, PageQuery, Pagination, Uuid } from '../lib/schemas.ts'

/** The body's brand hint of a create (id or slug); read by req.resolveBrand(). */
export const BrandField = Type.String({ minLength: 1, description: 'brand id or slug (ignored for brand-pinned keys)' })

/**
 * A patch body from a create body: every field optional, `brand` removed, and no defaults (a patch must
 * not reset fields it does not name).
 */
export function patchOf<T extends TObject>(create: T): TObject {
  const clone = structuredClone(create) as unknown as { required?: string[]; properties: Record<string, Record<string, unknown>> }
  delete clone.required
  delete clone.properties.brand
  for (const property of Object.values(clone.properties)) delete property.default
  return clone as unknown as TObject
}

/** Largest value of a PostgreSQL integer column. */
export const INT4_MAX = 2147483647

const text = (max = 200) => Type.String({ minLength: 1, maxLength: max })

// Levels
export const Level = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    tier: Type.Integer(),
    min_points: Type.Integer(),
    max_points: Nullable(Type.Integer()),
    benefits: FreeObject,
    created_at: DateTime,
  },
  { $id: 'Level' },
)
export type Level = Static<typeof Level>
export const CreateLevelBody = Type.Object({
  name: text(),
  tier: Type.Integer({ minimum: 1, maximum: INT4_MAX }),
  min_points: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  max_points: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
  benefits: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  brand: Type.Optional(BrandField),
})
export type CreateLevelBody = Static<typeof CreateLevelBody>
export const PatchLevelBody = patchOf(CreateLevelBody)
export type PatchLevelBody = Partial<Omit<CreateLevelBody, 'brand'>>

// Missions
export const MISSION_TYPES = ['daily', 'weekly', 'one_time', 'progressive', 'collaborative'] as const
export const MISSION_STATUSES = ['active', 'completed', 'expired', 'cancelled'] as const
export const MissionType = Type.Union(MISSION_TYPES.map((v) => Type.Literal(v)))
export const MissionStatus = Type.Union(MISSION_STATUSES.map((v) => Type.Literal(v)))
export const Mission = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    description: Nullable(Type.String()),
    type: MissionType,
    status: MissionStatus,
    rules: FreeObject,
    rewards: FreeObject,
    max_completions_per_player: Nullable(Type.Integer()),
    starts_at: Nullable(DateTime),
    ends_at: Nullable(DateTime),
    created_at: DateTime,
    updated_at: DateTime,
  },
  { $id: 'Mission' },
)
export type Mission = Static<typeof Mission>
export const CreateMissionBody = Type.Object({
  name: text(),
  type: MissionType,
  description: Type.Optional(Nullable(Type.String({ maxLength: 5000 }))),
  status: Type.Optional(Type.Union(MISSION_STATUSES.map((v) => Type.Literal(v)), { default: 'active' })),
  rules: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  rewards: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  max_completions_per_player: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: INT4_MAX }))),
  starts_at: Type.Optional(Nullable(DateTime)),
  ends_at: Type.Optional(Nullable(DateTime)),
  brand: Type.Optional(BrandField),
})
export type CreateMissionBody = Static<typeof CreateMissionBody>
export const PatchMissionBody = patchOf(CreateMissionBody)
export type PatchMissionBody = Partial<Omit<CreateMissionBody, 'brand'>>
export const MissionListQuery = Type.Object({
  ...PageQuery,
  status: Type.Optional(MissionStatus),
  type: Type.Optional(MissionType),
  brand: Type.Optional(Type.String()),
})
export type MissionListQuery = Static<typeof MissionListQuery>
export const MissionPage = Type.Object({ data: Type.Array(Mission), pagination: Pagination })

// Badges
export const BADGE_RARITIES = ['common', 'rare', 'epic', 'legendary'] as const
export const Badge = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    description: Nullable(Type.String()),
    icon_url: Nullable(Type.String({ format: 'uri' })),
    criteria: FreeObject,
    rarity: Type.Union(BADGE_RARITIES.map((v) => Type.Literal(v))),
    created_at: DateTime,
  },
  { $id: 'Badge' },
)
export type Badge = Static<typeof Badge>
export const CreateBadgeBody = Type.Object({
  name: text(),
  description: Type.Optional(Nullable(Type.String({ maxLength: 5000 }))),
  icon_url: Type.Optional(Nullable(Type.String({ format: 'uri', maxLength: 2048 }))),
  criteria: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
  rarity: Type.Optional(Type.Union(BADGE_RARITIES.map((v) => Type.Literal(v)), { default: 'common' })),
  brand: Type.Optional(BrandField),
})
export type CreateBadgeBody = Static<typeof CreateBadgeBody>
export const PatchBadgeBody = patchOf(CreateBadgeBody)
export type PatchBadgeBody = Partial<Omit<CreateBadgeBody, 'brand'>>

// Point currencies
export const CURRENCY_TYPES = ['real', 'virtual', 'bonus'] as const
export const PointCurrency = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    symbol: Type.String(),
    type: Type.Union(CURRENCY_TYPES.map((v) => Type.Literal(v))),
    created_at: DateTime,
  },
  { $id: 'PointCurrency' },
)
export type PointCurrency = Static<typeof PointCurrency>
export const CreateCurrencyBody = Type.Object({
  name: text(),
  symbol: text(16),
  type: Type.Union(CURRENCY_TYPES.map((v) => Type.Literal(v))),
  brand: Type.Optional(BrandField),
})
export type CreateCurrencyBody = Static<typeof CreateCurrencyBody>
export const PatchCurrencyBody = patchOf(CreateCurrencyBody)
export type PatchCurrencyBody = Partial<Omit<CreateCurrencyBody, 'brand'>>

// Player gamification profile
export const PointBalance = Type.Object({
  currency_id: Uuid,
  name: Type.String(),
  symbol: Type.String(),
  type: Type.String(),
  balance: Type.Number(),
  /** Everything ever credited (spending does not lower it); `lifetime_earned` is the same figure. */
  lifetime: Type.Number(),
  lifetime_earned: Type.Number(),
})
export const ActiveMission = Type.Object({
  mission_id: Uuid,
  name: Type.String(),
  description: Nullable(Type.String()),
  type: MissionType,
  rewards: FreeObject,
  max_completions_per_player: Nullable(Type.Integer()),
  starts_at: Nullable(DateTime),
  ends_at: Nullable(DateTime),
  /** Measured so far in the current period (daily/weekly) or overall; for collaborative, the player's contribution. */
  progress: Type.Number(),
  /** The target of the next stage (progressive) or the mission's target; null without rules. */
  target: Nullable(Type.Number()),
  /** Stages completed so far (progressive; 0 otherwise). */
  stage: Type.Integer(),
  completions: Type.Integer(),
  /** Start of the current period (daily/weekly, in the mission's time zone), else null. */
  period_start: Nullable(DateTime),
  opt_in: Type.Boolean(),
  /** Opt-in missions: whether the player joined (always true for the others). */
  joined: Type.Boolean(),
  /** Collaborative missions: the brand-wide total so far. */
  total: Type.Optional(Type.Number()),
})
export const EarnedBadge = Type.Object({
  badge_id: Uuid,
  name: Type.String(),
  description: Nullable(Type.String()),
  icon_url: Nullable(Type.String()),
  rarity: Type.String(),
  earned_at: DateTime,
})
export const PlayerGamificationProfile = Type.Object(
  {
    player_id: Uuid,
    current_level: Nullable(Level),
    point_balances: Type.Array(PointBalance),
    active_missions: Type.Array(ActiveMission),
    badges_earned: Type.Array(EarnedBadge),
  },
  { $id: 'PlayerGamificationProfile' },
)
export type PlayerGamificationProfile = Static<typeof PlayerGamificationProfile>
export const PlayerParams = Type.Object({ playerId: Uuid })

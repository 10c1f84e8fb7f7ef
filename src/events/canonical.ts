// The canonical event types of the contract and the fields each one carries. Without a mapping, these
// fields are read from `payload` by their own names.
export const CANONICAL_FIELDS = {
  registration: ['country', 'language', 'currency', 'device', 'os', 'browser', 'platform', 'email', 'phone', 'name', 'timezone'],
  login: ['country', 'device', 'os', 'browser', 'platform'],
  logout: ['country', 'device', 'os', 'browser', 'platform'],
  profile_update: ['country', 'language', 'currency', 'email', 'phone', 'name', 'timezone'],
  consent_update: ['channel', 'granted'],
  deposit: ['amount', 'currency', 'method'],
  deposit_failed: ['amount', 'currency', 'method'],
  withdrawal: ['amount', 'currency', 'method'],
  bet: ['amount', 'currency', 'game', 'provider', 'category', 'round_id'],
  win: ['amount', 'currency', 'game', 'provider', 'category', 'round_id'],
  bet_rollback: ['amount', 'currency', 'game', 'provider', 'category', 'round_id'],
  win_rollback: ['amount', 'currency', 'game', 'provider', 'category', 'round_id'],
  status_change: ['status', 'reason'],
  game_start: ['game', 'provider', 'category', 'device', 'platform'],
  bonus_granted: ['bonus_id', 'amount', 'currency'],
  bonus_completed: ['bonus_id', 'amount', 'currency'],
  bonus_forfeited: ['bonus_id', 'amount', 'currency'],
} as const satisfies Record<string, readonly string[]>

export type CanonicalType = keyof typeof CANONICAL_FIELDS

/** Every canonical field name, across all types. */
export const ALL_CANONICAL_FIELDS: readonly string[] = [...new Set(Object.values(CANONICAL_FIELDS).flat())].sort()

export const isCanonicalType = (type: string): type is CanonicalType => Object.hasOwn(CANONICAL_FIELDS, type)

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

/**
 * The currency an amount is in: ISO 4217's three letters, or a crypto ticker (USDT, USDC, DOGE): 2–10
 * letters or digits, upper-cased. Each is its own currency (nothing converts); a player's profile
 * currency stays a three-letter ISO code (the spec's POST /players).
 */
export const CURRENCY_CODE_RE = /^[A-Za-z0-9]{2,10}$/
export const ISO_CURRENCY_RE = /^[A-Za-z]{3}$/

const LEAP_SECOND_RE = /^(.*T\d{2}:\d{2}:)60(?:\.\d+)?((?:Z|[+-]\d{2}:\d{2}))$/i

/**
 * An event's `timestamp` (RFC 3339 date-time) as ms since the epoch, NaN if unreadable. A leap second
 * (`23:59:60Z`, which the format allows and Date.parse does not read) is its second's last millisecond,
 * `23:59:59.999`: the order of events around it stays.
 */
export function parseEventTime(text: string): number {
  const at = Date.parse(text)
  if (!Number.isNaN(at)) return at
  const leap = LEAP_SECOND_RE.exec(text)
  return leap ? Date.parse(`${leap[1]}59.999${leap[2]}`) : Number.NaN
}

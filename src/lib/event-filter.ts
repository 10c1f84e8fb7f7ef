// The event filter of the shared rule language (contract-engines §1): `{ event_type, filters: [cond] }`
// with cond `{ field, op, value }`. Validation on write (naming each bad field) and matching against a
// stored event's canonical fields and payload. Missions, badges, campaign triggers and journeys'
// wait_for_event all use it.

export const EVENT_FILTER_OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'exists'] as const
export type EventFilterOp = (typeof EVENT_FILTER_OPS)[number]

export const CANONICAL_FILTER_FIELDS = [
  'amount', 'currency', 'method', 'game', 'provider', 'category', 'country', 'device', 'os', 'browser',
  'platform', 'channel', 'status', 'bonus_id',
] as const

export interface EventCondition {
  field: string
  op: EventFilterOp
  value?: unknown
}

export interface EventFilter {
  event_type: string
  filters: EventCondition[]
}

export interface FieldError {
  in: 'body'
  field: string
  message: string
}

const PAYLOAD_PATH_RE = /^payload(\.[A-Za-z0-9_-]+)+$/
const MAX_CONDITIONS = 50
const MAX_LIST = 1000

const isScalar = (v: unknown) => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))

/** Checks the conditions list at `at` (e.g. `config.trigger.filters`), appending one error per problem. */
export function checkConditions(list: unknown, at: string, errors: FieldError[]): void {
  if (list === undefined) return
  if (!Array.isArray(list)) {
    errors.push({ in: 'body', field: at, message: 'must be an array of { field, op, value }' })
    return
  }
  if (list.length > MAX_CONDITIONS) errors.push({ in: 'body', field: at, message: `at most ${MAX_CONDITIONS} conditions` })
  list.forEach((c, i) => {
    const here = `${at}.${i}`
    if (!c || typeof c !== 'object' || Array.isArray(c)) {
      errors.push({ in: 'body', field: here, message: 'must be an object { field, op, value }' })
      return
    }
    const { field, op, value } = c as Record<string, unknown>
    if (typeof field !== 'string' || !((CANONICAL_FILTER_FIELDS as readonly string[]).includes(field) || PAYLOAD_PATH_RE.test(field))) {
      errors.push({ in: 'body', field: `${here}.field`, message: `must be a canonical field (${CANONICAL_FILTER_FIELDS.join(', ')}) or payload.<path>` })
    }
    if (typeof op !== 'string' || !(EVENT_FILTER_OPS as readonly string[]).includes(op)) {
      errors.push({ in: 'body', field: `${here}.op`, message: `must be one of ${EVENT_FILTER_OPS.join(', ')}` })
      return
    }
    if (op === 'exists') {
      if (value !== undefined && typeof value !== 'boolean') errors.push({ in: 'body', field: `${here}.value`, message: 'must be true or false (default true)' })
    } else if (op === 'in' || op === 'not_in') {
      if (!Array.isArray(value) || value.length === 0 || value.length > MAX_LIST || !value.every(isScalar)) {
        errors.push({ in: 'body', field: `${here}.value`, message: `must be an array of 1 to ${MAX_LIST} strings, numbers or booleans` })
      }
    } else if (op === 'eq' || op === 'neq') {
      if (!isScalar(value)) errors.push({ in: 'body', field: `${here}.value`, message: 'must be a string, number or boolean' })
    } else if (!(typeof value === 'number' && Number.isFinite(value))) {
      // Ordering: numbers; strings (compared as text, e.g. ISO dates) only on payload paths, since the
      // canonical fields other than amount are names where an order means nothing.
      const onPayload = typeof field === 'string' && field.startsWith('payload.')
      if (!(onPayload && typeof value === 'string')) {
        errors.push({ in: 'body', field: `${here}.value`, message: onPayload ? 'must be a number or a string' : 'must be a number' })
      }
    }
  })
}

/** Checks `{ event_type, filters }` at `at`. */
export function checkEventFilter(filter: unknown, at: string, errors: FieldError[]): void {
  if (!filter || typeof filter !== 'object' || Array.isArray(filter)) {
    errors.push({ in: 'body', field: at, message: 'must be an event filter { event_type, filters }' })
    return
  }
  const f = filter as Record<string, unknown>
  if (typeof f.event_type !== 'string' || f.event_type.length === 0 || f.event_type.length > 200) {
    errors.push({ in: 'body', field: `${at}.event_type`, message: 'is required (a stored event type)' })
  }
  checkConditions(f.filters, `${at}.filters`, errors)
}

/** The event as the filter reads it: its canonical fields and its payload. */
export interface FilterableEvent {
  type: string
  fields: Record<string, unknown>
  payload: Record<string, unknown> | null
}

/** Stored currencies are upper case; a rule may name them in any case. */
const normal = (field: string, v: unknown) => (field === 'currency' && typeof v === 'string' ? v.toUpperCase() : v)

function read(e: FilterableEvent, field: string): unknown {
  if (!field.startsWith('payload.')) return normal(field, e.fields[field])
  let v: unknown = e.payload
  for (const part of field.slice('payload.'.length).split('.')) {
    if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined
    v = (v as Record<string, unknown>)[part]
  }
  return v
}

const toNumber = (v: unknown) => (typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN)

/**
 * Numbers compare as numbers (`amount` arrives as an exact decimal string, the rule's value may be a
 * number), strings with strings; anything else does not compare.
 */
function compare(a: unknown, b: unknown): number | undefined {
  if (a === undefined || a === null) return undefined
  if (typeof a === 'number' || typeof b === 'number') {
    const na = toNumber(a)
    const nb = toNumber(b)
    return Number.isFinite(na) && Number.isFinite(nb) ? na - nb : undefined
  }
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0
  return undefined
}

const equal = (a: unknown, b: unknown) => a === b || compare(a, b) === 0

export function conditionHolds(e: FilterableEvent, c: EventCondition): boolean {
  const v = read(e, c.field)
  const want = normal(c.field, c.value)
  switch (c.op) {
    case 'exists':
      return (v !== undefined && v !== null) === (c.value !== false)
    case 'eq':
      return v !== undefined && v !== null && equal(v, want)
    case 'neq':
      return !(v !== undefined && v !== null && equal(v, want))
    case 'in':
      return v !== undefined && v !== null && (c.value as unknown[]).some((x) => equal(v, normal(c.field, x)))
    case 'not_in':
      return !(v !== undefined && v !== null && (c.value as unknown[]).some((x) => equal(v, normal(c.field, x))))
    default: {
      const d = compare(v, want)
      if (d === undefined) return false
      return c.op === 'gt' ? d > 0 : c.op === 'gte' ? d >= 0 : c.op === 'lt' ? d < 0 : d <= 0
    }
  }
}

/** Whether a validated filter matches the event. */
export function matchesFilter(e: FilterableEvent, f: { event_type: string; filters?: EventCondition[] }): boolean {
  return e.type === f.event_type && (f.filters ?? []).every((c) => conditionHolds(e, c))
}

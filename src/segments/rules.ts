// Segment rules: validation on write, and compilation of dynamic rules to ONE parameterised SQL condition
// over `players p left join player_profiles pp`. Every user value reaches PostgreSQL as a bound parameter
// with an explicit cast; the SQL text comes only from constant fragments (here and in fields.ts).
// docs/segments.md documents the grammar, every field and every operator.
import { badRequest } from '../errors.ts'
import { likeContains } from '../lib/like.ts'
import { OPERATORS, OPS_BY_TYPE, resolveField, type Env, type FieldDef, type Fragment, type Operator, type Sql } from './fields.ts'
import { isUuid } from '../lib/schemas.ts'
import { isCalendarDate } from '../lib/zoned-time.ts'

// ---------------------------------------------------------------------------------------------------------
// Validation

export type Condition = { field: string; op: Operator; value?: unknown }
export type RuleNode = { all: RuleNode[] } | { any: RuleNode[] } | { not: RuleNode } | Condition
/** A dynamic segment's rules: a node, or `{}` for every player of the brand. */
export type DynamicRules = RuleNode | Record<string, never>

export const RULE_LIMITS = { depth: 10, conditions: 200, listValues: 1000, staticPlayers: 10_000 } as const

interface RuleError {
  in: 'body'
  field: string
  message: string
}

const RELATIVE_TIME_RE = /^now(?:([+-])(\d{1,6})([smhdw]))?$/
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const
const ISO_DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/

/**
 * An absolute ISO date(-time), or `now`, `now-30d`, `now+2h` (units s m h d w) against `now`. Undefined
 * unless the result is a real instant in the years 0001 to 9999: PostgreSQL has no year 0, and JavaScript
 * writes other years in a form PostgreSQL does not read.
 */
export function resolveTime(value: string, now: Date): Date | undefined {
  const rel = RELATIVE_TIME_RE.exec(value)
  let d: Date
  if (rel) {
    if (!rel[1]) return now
    const ms = Number(rel[2]) * UNIT_MS[rel[3] as keyof typeof UNIT_MS]
    d = new Date(now.getTime() + (rel[1] === '-' ? -ms : ms))
  } else {
    if (!ISO_DATE_TIME_RE.test(value) || !isCalendarDate(value.slice(0, 10))) return undefined
    d = new Date(value)
  }
  if (Number.isNaN(d.getTime())) return undefined
  const year = d.getUTCFullYear()
  return year >= 1 && year <= 9999 ? d : undefined
}

const isScalar = (v: unknown): v is string | number | boolean =>
  typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))

/** Why `value` is wrong for one element of the field's type, or undefined when it fits. */
function checkScalar(def: FieldDef, op: Operator, value: unknown): string | undefined {
  switch (def.type) {
    case 'string':
      return typeof value === 'string' ? undefined : 'must be a string'
    case 'enum':
      return typeof value === 'string' && def.values?.includes(value) ? undefined : `must be one of ${def.values?.join(', ')}`
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a number'
    case 'datetime':
      return typeof value === 'string' && resolveTime(value, new Date()) ? undefined : 'must be an ISO 8601 date-time or now, now-<n><s|m|h|d|w>'
    case 'boolean':
      return typeof value === 'boolean' ? undefined : 'must be a boolean'
    case 'json':
      if (['gt', 'gte', 'lt', 'lte'].includes(op)) return typeof value === 'number' && Number.isFinite(value) ? undefined : typeof value === 'string' ? undefined : 'must be a number or a string'
      return isScalar(value) ? undefined : 'must be a string, number or boolean'
  }
}

function checkCondition(node: Record<string, unknown>, at: string, errors: RuleError[]): void {
  const extra = Object.keys(node).filter((k) => k !== 'field' && k !== 'op' && k !== 'value')
  for (const k of extra) errors.push({ in: 'body', field: `${at}.${k}`, message: `unknown key '${k}' in a condition` })
  const { field, op, value } = node
  if (typeof field !== 'string') {
    errors.push({ in: 'body', field: `${at}.field`, message: 'is required (a string)' })
    return
  }
  const def = resolveField(field)
  if (!def) {
    errors.push({ in: 'body', field: `${at}.field`, message: `unknown field '${field}'` })
  }
  if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) {
    errors.push({ in: 'body', field: `${at}.op`, message: typeof op === 'string' ? `unknown operator '${op}'` : 'is required (a string)' })
    return
  }
  if (!def) return
  const o = op as Operator
  if (!OPS_BY_TYPE[def.type].includes(o)) {
    errors.push({ in: 'body', field: `${at}.op`, message: `operator '${o}' does not apply to field '${field}' (${def.type}); use ${OPS_BY_TYPE[def.type].join(', ')}` })
    return
  }
  const valueAt = `${at}.value`
  if (o === 'exists') {
    if (value !== undefined && typeof value !== 'boolean') errors.push({ in: 'body', field: valueAt, message: 'must be a boolean (default true)' })
    return
  }
  if (o === 'in' || o === 'not_in') {
    if (!Array.isArray(value) || value.length === 0 || value.length > RULE_LIMITS.listValues) {
      errors.push({ in: 'body', field: valueAt, message: `must be an array of 1 to ${RULE_LIMITS.listValues} values` })
      return
    }
    value.forEach((v, i) => {
      const why = checkScalar(def, o, v)
      if (why) errors.push({ in: 'body', field: `${valueAt}.${i}`, message: why })
    })
    return
  }
  if (value === undefined) {
    errors.push({ in: 'body', field: valueAt, message: 'is required' })
    return
  }
  if (o === 'contains' && value === '') {
    errors.push({ in: 'body', field: valueAt, message: 'must not be empty' })
    return
  }
  const why = checkScalar(def, o, value)
  if (why) errors.push({ in: 'body', field: valueAt, message: why })
}

function checkNode(node: unknown, at: string, depth: number, counter: { n: number }, errors: RuleError[]): void {
  if (!node || typeof node !== 'object' || Array.isArray(node)) {
    errors.push({ in: 'body', field: at, message: 'must be an object: { all }, { any }, { not } or { field, op, value }' })
    return
  }
  if (depth > RULE_LIMITS.depth) {
    errors.push({ in: 'body', field: at, message: `rules nest deeper than ${RULE_LIMITS.depth} levels` })
    return
  }
  const obj = node as Record<string, unknown>
  const keys = Object.keys(obj)
  const group = keys.find((k) => k === 'all' || k === 'any' || k === 'not')
  if (group) {
    if (keys.length !== 1) {
      errors.push({ in: 'body', field: at, message: `a '${group}' node takes no other keys (found ${keys.filter((k) => k !== group).join(', ')})` })
      return
    }
    if (group === 'not') return checkNode(obj.not, `${at}.not`, depth + 1, counter, errors)
    const list = obj[group]
    if (!Array.isArray(list)) {
      errors.push({ in: 'body', field: `${at}.${group}`, message: 'must be an array of rules' })
      return
    }
    list.forEach((child, i) => checkNode(child, `${at}.${group}.${i}`, depth + 1, counter, errors))
    return
  }
  if (!('field' in obj) && !('op' in obj)) {
    errors.push({ in: 'body', field: at, message: `unknown rule key${keys.length === 1 ? '' : 's'} ${keys.map((k) => `'${k}'`).join(', ') || '(none)'}: expected all, any, not or field/op/value` })
    return
  }
  if (++counter.n > RULE_LIMITS.conditions) {
    if (counter.n === RULE_LIMITS.conditions + 1) errors.push({ in: 'body', field: at, message: `more than ${RULE_LIMITS.conditions} conditions` })
    return
  }
  checkCondition(obj, at, errors)
}

function fail(errors: RuleError[]): never {
  const first = errors[0]!
  throw badRequest(`invalid segment rules: ${first.field} ${first.message}`, { errors })
}

/** Validates and normalises a segment's rules for its type; throws 400 naming every problem. */
export function validateRules(type: 'dynamic' | 'static', rules: Record<string, unknown> | undefined): Record<string, unknown> {
  if (type === 'static') {
    const given = rules ?? { player_ids: [] }
    const errors: RuleError[] = []
    for (const k of Object.keys(given)) if (k !== 'player_ids') errors.push({ in: 'body', field: `rules.${k}`, message: `unknown key '${k}': static rules are { player_ids: [uuid, ...] }` })
    const ids = given.player_ids ?? []
    if (!Array.isArray(ids) || ids.length > RULE_LIMITS.staticPlayers) {
      errors.push({ in: 'body', field: 'rules.player_ids', message: `must be an array of at most ${RULE_LIMITS.staticPlayers} player ids` })
    } else {
      ids.forEach((id, i) => {
        if (!isUuid(id)) errors.push({ in: 'body', field: `rules.player_ids.${i}`, message: 'must be a player id (uuid)' })
      })
    }
    if (errors.length) fail(errors)
    return { player_ids: [...new Set((ids as string[]).map((id) => id.toLowerCase()))] }
  }
  const given = rules ?? {}
  if (Object.keys(given).length === 0) return {}
  const errors: RuleError[] = []
  checkNode(given, 'rules', 1, { n: 0 }, errors)
  if (errors.length) fail(errors)
  return given
}


// ---------------------------------------------------------------------------------------------------------
// Compilation (input already validated)


function comparison(sql: Sql, op: 'eq' | 'gt' | 'gte' | 'lt' | 'lte', left: Fragment, right: Fragment): Fragment {
  // The operator text comes from this constant table, never from input.
  switch (op) {
    case 'eq':
      return sql`coalesce(${left} = ${right}, false)`
    case 'gt':
      return sql`coalesce(${left} > ${right}, false)`
    case 'gte':
      return sql`coalesce(${left} >= ${right}, false)`
    case 'lt':
      return sql`coalesce(${left} < ${right}, false)`
    case 'lte':
      return sql`coalesce(${left} <= ${right}, false)`
  }
}

/** A bound parameter with the cast of the field type. */
function param(env: Env, def: FieldDef, v: unknown): Fragment {
  const { sql } = env
  switch (def.type) {
    case 'number':
      return sql`${String(v)}::numeric`
    case 'datetime': {
      // Validated on write against the time of writing; a relative value can only leave the range later.
      const at = resolveTime(v as string, env.now)
      if (!at) throw badRequest(`segment rules hold an unusable date-time '${String(v)}'`, { reason: 'VALUE_REJECTED' })
      return sql`${at.toISOString()}::timestamptz`
    }
    case 'boolean':
      return sql`${v as boolean}::boolean`
    case 'json':
      // sql.json binds a jsonb parameter serialised by the driver (a cast of a text parameter would be
      // serialised twice once the server reports the parameter as jsonb).
      return sql`${sql.json(v as never)}`
    default:
      return sql`${v as string}::text`
  }
}

function listParam(env: Env, def: FieldDef, values: unknown[]): Fragment {
  const { sql } = env
  switch (def.type) {
    case 'number':
      return sql`${values.map(String)}::numeric[]`
    case 'json':
      return sql`array(select jsonb_array_elements(${sql.json(values as never)}))`
    default:
      return sql`${values as string[]}::text[]`
  }
}

function compileCondition(env: Env, c: Condition): Fragment {
  const { sql } = env
  const def = resolveField(c.field)!
  const col = def.column(env)
  switch (c.op) {
    case 'exists':
      // A metadata key set to null has no value either: JSON null is not SQL NULL.
      if (def.type === 'json') return c.value === false ? sql`(${col} is null or jsonb_typeof(${col}) = 'null')` : sql`(jsonb_typeof(${col}) is distinct from 'null' and ${col} is not null)`
      return c.value === false ? sql`(${col} is null)` : sql`(${col} is not null)`
    case 'neq':
      return sql`(${col} is distinct from ${param(env, def, c.value)})`
    case 'in':
      return sql`coalesce(${col} = any(${listParam(env, def, c.value as unknown[])}), false)`
    case 'not_in':
      return sql`(not coalesce(${col} = any(${listParam(env, def, c.value as unknown[])}), false))`
    case 'contains':
      if (def.type === 'json') {
        const v = c.value as string | number | boolean
        const inArray = sql`${col} @> ${sql.json([v] as never)}`
        return typeof v === 'string'
          ? sql`coalesce(case jsonb_typeof(${col}) when 'string' then (${col} #>> '{}') ilike ${likeContains(v)} when 'array' then ${inArray} else false end, false)`
          : sql`coalesce(jsonb_typeof(${col}) = 'array' and ${inArray}, false)`
      }
      return sql`coalesce(${col} ilike ${likeContains(c.value as string)}, false)`
    default: {
      if (def.type === 'json' && c.op !== 'eq') {
        // Ordering on a metadata value compares numbers with numbers and strings with strings only.
        const typed =
          typeof c.value === 'number'
            ? sql`(case when jsonb_typeof(${col}) = 'number' then (${col})::numeric end)`
            : sql`(case when jsonb_typeof(${col}) = 'string' then (${col} #>> '{}') end)`
        const right = typeof c.value === 'number' ? sql`${String(c.value)}::numeric` : sql`${c.value as string}::text`
        return comparison(sql, c.op, typed, right)
      }
      return comparison(sql, c.op, col, param(env, def, c.value))
    }
  }
}

function join(sql: Sql, parts: Fragment[], op: 'and' | 'or'): Fragment {
  return parts.slice(1).reduce((acc, f) => (op === 'and' ? sql`${acc} and ${f}` : sql`${acc} or ${f}`), parts[0]!)
}

function compileNode(env: Env, node: RuleNode): Fragment {
  const { sql } = env
  if ('all' in node) return node.all.length ? sql`(${join(sql, node.all.map((n) => compileNode(env, n)), 'and')})` : sql`true`
  if ('any' in node) return node.any.length ? sql`(${join(sql, node.any.map((n) => compileNode(env, n)), 'or')})` : sql`false`
  if ('not' in node) return sql`(not ${compileNode(env, node.not)})`
  return compileCondition(env, node)
}

/** The WHERE condition of a dynamic segment's validated rules, over `players p` and `player_profiles pp`. */
export function compileRules(sql: Sql, rules: Record<string, unknown>, now: Date): Fragment {
  if (Object.keys(rules).length === 0) return sql`true`
  return compileNode({ sql, now }, rules as RuleNode)
}

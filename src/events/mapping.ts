// The per-brand event mapping of the contract ("Event mapping"): rules tried in order, `*` wildcards,
// map / ignore / reject, a replacement type and derived fields by dot path. Pure functions here, used by
// the front end (to count) and by the ingest worker (to derive fields); the cache lives in mapping-cache.ts.
import type { EventMapping, MappingRule } from '../admin/schemas.ts'
import { CANONICAL_FIELDS, isCanonicalType } from './canonical.ts'
import { compileGlob } from './glob.ts'

/** A brand's mapping as the admin API stores it (its TypeBox schema is in admin/schemas.ts). */
export type MappingConfig = EventMapping

/** What happens to one incoming event type. */
export interface Resolution {
  action: 'store' | 'ignore' | 'reject'
  /** The type stored (the rule's `type`, else the incoming one). */
  type: string
  /** Index of the matching rule, -1 when none matched. */
  rule: number
  /** Stored, not canonical, and matched by no rule: reported in unknown_event_types. */
  unknown: boolean
}

export interface CompiledMapping {
  config: MappingConfig
  resolve(eventType: string): Resolution
}

export function compileMapping(config: MappingConfig): CompiledMapping {
  const matchers = config.rules.map((rule) => (rule.match.includes('*') ? compileGlob(rule.match) : rule.match))
  const defaultAction = config.default_action ?? 'accept'
  // Event types repeat endlessly; remember each answer (bounded, the mapping is replaced on change anyway).
  const memo = new Map<string, Resolution>()
  const compute = (eventType: string): Resolution => {
    for (let i = 0; i < matchers.length; i++) {
      const m = matchers[i] as string | ((text: string) => boolean)
      if (typeof m === 'string' ? m === eventType : m(eventType)) {
        const rule = config.rules[i] as MappingRule
        const action = rule.action ?? 'map'
        if (action === 'ignore') return { action: 'ignore', type: eventType, rule: i, unknown: false }
        if (action === 'reject') return { action: 'reject', type: eventType, rule: i, unknown: false }
        return { action: 'store', type: rule.type ?? eventType, rule: i, unknown: false }
      }
    }
    if (defaultAction === 'ignore') return { action: 'ignore', type: eventType, rule: -1, unknown: false }
    if (defaultAction === 'reject') return { action: 'reject', type: eventType, rule: -1, unknown: false }
    return { action: 'store', type: eventType, rule: -1, unknown: !isCanonicalType(eventType) }
  }
  return {
    config,
    resolve(eventType) {
      let r = memo.get(eventType)
      if (!r) {
        r = compute(eventType)
        if (memo.size > 10_000) memo.clear()
        memo.set(eventType, r)
      }
      return r
    },
  }
}

/** Reads a dot path (`payload.amt`, `payload.items.0.id`) out of the incoming event object. */
export function readPath(obj: unknown, path: string): unknown {
  let cur: unknown = obj
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined
    cur = (cur as Record<string, unknown>)[part]
  }
  return cur
}

/**
 * The canonical fields of a stored event: those of its (final) canonical type read from `payload` by
 * their own names, overridden by the matching rule's `fields` paths. Non-canonical types get only the
 * rule's fields.
 */
export function deriveFields(event: Record<string, unknown>, type: string, rule: MappingRule | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const payload = event.payload as Record<string, unknown> | undefined
  if (payload && isCanonicalType(type)) {
    for (const name of CANONICAL_FIELDS[type]) {
      const v = payload[name]
      if (v !== undefined && v !== null) out[name] = v
    }
  }
  if (rule?.fields) {
    for (const name in rule.fields) {
      const v = readPath(event, rule.fields[name] as string)
      if (v !== undefined && v !== null) out[name] = v
    }
  }
  return out
}

// What a campaign must satisfy (contract-engines §4). Two checks, both answering 400 with
// `details.errors: [{ in, field, message }]`:
// - references (every create and PATCH, and again on start): the target segment, the templates and any
//   bonus must exist in the campaign's tenant (the segment in its brand). Another tenant's id is unknown,
//   exactly like an id that does not exist, so no campaign can read another tenant's segment.
// - runnable (moving to scheduled or running, and any PATCH of a scheduled, running or paused campaign):
//   everything the run needs: schedule, cron, time zone, segment, templates active and matching their
//   channel, trigger, journey steps forming a graph whose references resolve.
import { CronExpressionParser } from 'cron-parser'
import { badRequest } from '../errors.ts'
import { checkConditions, checkEventFilter, type FieldError } from '../lib/event-filter.ts'
import { validateRules } from '../segments/rules.ts'
import { AppError } from '../errors.ts'
import type { Sql } from './queries.ts'
import type { CampaignType } from './schemas.ts'
import { isTimeZone } from '../lib/zoned-time.ts'
import { isUuid } from '../lib/schemas.ts'

export const CHANNELS = ['email', 'telegram', 'push', 'in_app'] as const
export const MAX_STEPS = 100

/** The parts of a campaign the checks read. */
export interface CampaignShape {
  type: CampaignType
  channels: string[]
  target_segment_id: string | null
  schedule: Record<string, unknown>
  config: Record<string, unknown>
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v)
const isInt = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER) => Number.isInteger(v) && (v as number) >= min && (v as number) <= max

export function failIfErrors(errors: FieldError[], what = 'campaign'): void {
  if (!errors.length) return
  const first = errors[0]!
  throw badRequest(`invalid ${what}: ${first.field} ${first.message}`, { errors })
}

// ---------------------------------------------------------------------------------------------------------
// References

interface TemplateRef {
  id: string
  channel: string
  active: boolean
}

/** Template ids the campaign names: config.templates per channel, and each journey send step. */
function templateRefs(c: CampaignShape): { at: string; id: unknown; channel?: unknown }[] {
  const refs: { at: string; id: unknown; channel?: unknown }[] = []
  if (isObject(c.config.templates)) {
    for (const [channel, id] of Object.entries(c.config.templates)) refs.push({ at: `config.templates.${channel}`, id, channel })
  }
  if (Array.isArray(c.config.steps)) {
    c.config.steps.forEach((s, i) => {
      if (isObject(s) && s.type === 'send') refs.push({ at: `config.steps.${i}.template_id`, id: s.template_id, channel: s.channel })
    })
  }
  return refs
}

/** Bonus ids the campaign names (`config.bonus_id`, `config.payload.bonus_id`): a grant offered by the message. */
function bonusRefs(c: CampaignShape): { at: string; id: unknown }[] {
  const refs: { at: string; id: unknown }[] = []
  if (c.config.bonus_id !== undefined) refs.push({ at: 'config.bonus_id', id: c.config.bonus_id })
  if (isObject(c.config.payload) && c.config.payload.bonus_id !== undefined) refs.push({ at: 'config.payload.bonus_id', id: c.config.payload.bonus_id })
  return refs
}

export interface ResolvedRefs {
  templates: Map<string, TemplateRef>
  segmentFound: boolean
}

/**
 * Checks that every referenced segment, template and bonus exists in the campaign's brand: its messages
 * go to that brand's players, a bonus is granted in the player's brand only, and a brand-pinned key must
 * not reach another brand's resources through a campaign. Appends errors; returns what it found for the
 * runnable check.
 */
export async function checkReferences(
  sql: Sql,
  owner: { tenantId: string; brandId: string },
  c: CampaignShape,
  errors: FieldError[],
): Promise<ResolvedRefs> {
  let segmentFound = false
  if (c.target_segment_id) {
    const [seg] = await sql<{ id: string }[]>`
      select id from segments where id = ${c.target_segment_id} and tenant_id = ${owner.tenantId} and brand_id = ${owner.brandId}`
    segmentFound = !!seg
    if (!seg) errors.push({ in: 'body', field: 'target_segment_id', message: 'unknown segment (not a segment of this brand)' })
  }
  const templates = new Map<string, TemplateRef>()
  const tRefs = templateRefs(c)
  for (const r of tRefs) if (!isUuid(r.id)) errors.push({ in: 'body', field: r.at, message: 'must be a template id (uuid)' })
  const tIds = [...new Set(tRefs.map((r) => r.id).filter((id): id is string => isUuid(id)).map((id) => id.toLowerCase()))]
  if (tIds.length) {
    const rows = await sql<TemplateRef[]>`
      select id, channel, active from notification_templates
      where id = any(${tIds}::uuid[]) and tenant_id = ${owner.tenantId} and brand_id = ${owner.brandId}`
    for (const r of rows) templates.set(r.id, r)
    for (const r of tRefs) {
      if (isUuid(r.id) && !templates.has(r.id.toLowerCase())) errors.push({ in: 'body', field: r.at, message: 'unknown template (not a template of this brand)' })
    }
  }
  const bRefs = bonusRefs(c)
  for (const r of bRefs) {
    if (!isUuid(r.id)) {
      errors.push({ in: 'body', field: r.at, message: 'must be a bonus id (uuid)' })
      continue
    }
    const [b] = await sql<{ id: string }[]>`select id from bonuses where id = ${r.id} and tenant_id = ${owner.tenantId} and brand_id = ${owner.brandId}`
    if (!b) errors.push({ in: 'body', field: r.at, message: 'unknown bonus (not a bonus of this brand)' })
  }
  return { templates, segmentFound }
}

// ---------------------------------------------------------------------------------------------------------
// Runnable

function parseInstant(v: unknown): Date | undefined {
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(v)) return undefined
  const d = new Date(v)
  return Number.isNaN(d.getTime()) ? undefined : d
}

/** A 5-field cron expression (minute hour day-of-month month day-of-week). */
export function checkCron(expr: unknown): string | undefined {
  if (typeof expr !== 'string' || expr.trim().split(/\s+/).length !== 5) return 'must be a 5-field cron expression (minute hour day month weekday)'
  try {
    CronExpressionParser.parse(expr, { strict: false })
    return undefined
  } catch (err) {
    return `does not parse: ${(err as Error).message}`
  }
}

function checkTemplateUse(at: string, id: unknown, channel: unknown, refs: ResolvedRefs, errors: FieldError[]): void {
  if (!isUuid(id)) return // reported by checkReferences
  const t = refs.templates.get(id.toLowerCase())
  if (!t) return
  if (!t.active) errors.push({ in: 'body', field: at, message: 'the template is inactive' })
  else if (t.channel !== channel) errors.push({ in: 'body', field: at, message: `the template is for channel '${t.channel}', not '${String(channel)}'` })
}

/** Journey steps: ids unique, types known, every reference resolving, no loop that never waits. */
export function checkSteps(steps: unknown, refs: ResolvedRefs, errors: FieldError[]): void {
  if (!Array.isArray(steps) || steps.length === 0 || steps.length > MAX_STEPS) {
    errors.push({ in: 'body', field: 'config.steps', message: `is required for a journey: an array of 1 to ${MAX_STEPS} steps` })
    return
  }
  const ids = new Set<string>()
  steps.forEach((s, i) => {
    if (isObject(s) && typeof s.id === 'string' && s.id.length > 0 && s.id.length <= 100) {
      if (ids.has(s.id)) errors.push({ in: 'body', field: `config.steps.${i}.id`, message: `duplicate step id '${s.id}'` })
      ids.add(s.id)
    }
  })
  const ref = (at: string, v: unknown, required: boolean) => {
    if (v === undefined || v === null) {
      if (required) errors.push({ in: 'body', field: at, message: 'is required (a step id, or null to end the journey)' })
      return
    }
    if (typeof v !== 'string' || !ids.has(v)) errors.push({ in: 'body', field: at, message: `unknown step '${String(v)}'` })
  }
  const edges = new Map<string, string[]>()
  steps.forEach((s, i) => {
    const at = `config.steps.${i}`
    if (!isObject(s)) {
      errors.push({ in: 'body', field: at, message: 'must be a step object { id, type, ... }' })
      return
    }
    if (typeof s.id !== 'string' || s.id.length === 0 || s.id.length > 100) errors.push({ in: 'body', field: `${at}.id`, message: 'is required (1 to 100 characters)' })
    const id = String(s.id)
    switch (s.type) {
      case 'send':
        if (!(CHANNELS as readonly string[]).includes(s.channel as string)) errors.push({ in: 'body', field: `${at}.channel`, message: `must be one of ${CHANNELS.join(', ')}` })
        if (s.template_id === undefined) errors.push({ in: 'body', field: `${at}.template_id`, message: 'is required' })
        else checkTemplateUse(`${at}.template_id`, s.template_id, s.channel, refs, errors)
        ref(`${at}.next`, s.next, false)
        edges.set(id, typeof s.next === 'string' ? [s.next] : [])
        break
      case 'wait':
        if (!isInt(s.seconds, 1, 366 * 86400)) errors.push({ in: 'body', field: `${at}.seconds`, message: 'must be an integer of 1 to 31622400 seconds' })
        ref(`${at}.next`, s.next, false)
        break // a wait breaks any loop through it
      case 'wait_for_event':
        if (typeof s.event_type !== 'string' || !s.event_type) errors.push({ in: 'body', field: `${at}.event_type`, message: 'is required (a stored event type)' })
        checkConditions(s.filters, `${at}.filters`, errors)
        if (!isInt(s.timeout_seconds, 1, 366 * 86400)) errors.push({ in: 'body', field: `${at}.timeout_seconds`, message: 'must be an integer of 1 to 31622400 seconds' })
        ref(`${at}.on_event`, s.on_event, false)
        ref(`${at}.on_timeout`, s.on_timeout, false)
        break
      case 'branch': {
        if (!isObject(s.condition) || Object.keys(s.condition).length === 0) {
          errors.push({ in: 'body', field: `${at}.condition`, message: 'is required: a segment rule' })
        } else {
          try {
            validateRules('dynamic', s.condition)
          } catch (err) {
            const inner = err instanceof AppError ? ((err.details?.errors as FieldError[] | undefined) ?? []) : []
            for (const e of inner) errors.push({ in: 'body', field: e.field.replace(/^rules/, `${at}.condition`), message: e.message })
          }
        }
        ref(`${at}.then`, s.then, false)
        ref(`${at}.else`, s.else, false)
        edges.set(id, [s.then, s.else].filter((x): x is string => typeof x === 'string'))
        break
      }
      default:
        errors.push({ in: 'body', field: `${at}.type`, message: 'must be one of send, wait, wait_for_event, branch' })
    }
  })
  // A loop made only of sends and branches would send forever without waiting: refuse it.
  const state = new Map<string, 1 | 2>()
  const visit = (id: string, path: string[]): boolean => {
    if (state.get(id) === 2) return false
    if (state.get(id) === 1) {
      errors.push({ in: 'body', field: 'config.steps', message: `steps ${[...path.slice(path.indexOf(id)), id].join(' → ')} loop without a wait` })
      return true
    }
    state.set(id, 1)
    for (const next of edges.get(id) ?? []) if (visit(next, [...path, id])) return true
    state.set(id, 2)
    return false
  }
  for (const id of edges.keys()) if (visit(id, [])) break
}

/**
 * Everything the run needs, for a move to `target` (scheduled or running) at `now`. Appends errors.
 * `refs` comes from checkReferences on the same campaign.
 */
export function checkRunnable(c: CampaignShape, target: 'scheduled' | 'running' | 'paused', now: Date, refs: ResolvedRefs, errors: FieldError[]): void {
  const s = c.schedule
  const startAt = s.start_at === undefined ? undefined : parseInstant(s.start_at)
  if (s.start_at !== undefined && !startAt) errors.push({ in: 'body', field: 'schedule.start_at', message: 'must be an ISO 8601 date-time with a time zone offset' })
  if (target === 'scheduled') {
    if (s.start_at === undefined) errors.push({ in: 'body', field: 'schedule.start_at', message: 'is required to schedule a campaign' })
    else if (startAt && startAt.getTime() <= now.getTime()) errors.push({ in: 'body', field: 'schedule.start_at', message: 'must be in the future' })
  }
  if (s.end_at !== undefined) {
    const endAt = parseInstant(s.end_at)
    if (!endAt) errors.push({ in: 'body', field: 'schedule.end_at', message: 'must be an ISO 8601 date-time with a time zone offset' })
    else if (startAt && endAt.getTime() <= startAt.getTime()) errors.push({ in: 'body', field: 'schedule.end_at', message: 'must be after start_at' })
  }
  if (c.type === 'recurring') {
    const why = checkCron(s.cron)
    if (why) errors.push({ in: 'body', field: 'schedule.cron', message: s.cron === undefined ? 'is required for a recurring campaign' : why })
  }
  if (s.timezone !== undefined && (typeof s.timezone !== 'string' || !isTimeZone(s.timezone))) {
    errors.push({ in: 'body', field: 'schedule.timezone', message: 'must be an IANA time zone name (e.g. Europe/Rome)' })
  }

  const cfg = c.config
  if ((c.type === 'one_shot' || c.type === 'recurring') && !c.target_segment_id) {
    errors.push({ in: 'body', field: 'target_segment_id', message: `is required for a ${c.type} campaign` })
  }
  if (c.type === 'journey' && !c.target_segment_id && cfg.trigger === undefined) {
    errors.push({ in: 'body', field: 'target_segment_id', message: 'a journey needs a target segment or a config.trigger to enter players' })
  }
  if (c.type !== 'journey') {
    if (!isObject(cfg.templates)) {
      errors.push({ in: 'body', field: 'config.templates', message: 'is required: { "<channel>": "<template id>" } for each channel' })
    } else {
      for (const ch of c.channels) {
        if (cfg.templates[ch] === undefined) errors.push({ in: 'body', field: `config.templates.${ch}`, message: `is required (the campaign sends on ${ch})` })
        else checkTemplateUse(`config.templates.${ch}`, cfg.templates[ch], ch, refs, errors)
      }
      for (const ch of Object.keys(cfg.templates)) {
        if (!c.channels.includes(ch)) errors.push({ in: 'body', field: `config.templates.${ch}`, message: `is not a channel of the campaign (${c.channels.join(', ')})` })
      }
    }
  }
  if (cfg.class !== undefined && cfg.class !== 'marketing' && cfg.class !== 'transactional') {
    errors.push({ in: 'body', field: 'config.class', message: 'must be marketing or transactional' })
  }
  if (cfg.payload !== undefined && !isObject(cfg.payload)) errors.push({ in: 'body', field: 'config.payload', message: 'must be an object' })
  if (cfg.control_group_percent !== undefined) {
    const p = cfg.control_group_percent
    if (typeof p !== 'number' || !Number.isFinite(p) || p < 0 || p > 50) errors.push({ in: 'body', field: 'config.control_group_percent', message: 'must be a number from 0 to 50' })
  }
  if (c.type === 'triggered' && cfg.trigger === undefined) errors.push({ in: 'body', field: 'config.trigger', message: 'is required for a triggered campaign' })
  if (cfg.trigger !== undefined) checkEventFilter(cfg.trigger, 'config.trigger', errors)
  if (cfg.delay_seconds !== undefined && !isInt(cfg.delay_seconds, 0, 366 * 86400)) {
    errors.push({ in: 'body', field: 'config.delay_seconds', message: 'must be an integer of 0 to 31622400 seconds' })
  }
  if (cfg.max_per_player !== undefined && cfg.max_per_player !== null && !isInt(cfg.max_per_player, 1)) {
    errors.push({ in: 'body', field: 'config.max_per_player', message: 'must be a positive integer (or null: unlimited)' })
  }
  if (cfg.conversion !== undefined) {
    const conv = cfg.conversion
    if (!isObject(conv)) errors.push({ in: 'body', field: 'config.conversion', message: 'must be { event_type, within_hours }' })
    else {
      if (typeof conv.event_type !== 'string' || !conv.event_type) errors.push({ in: 'body', field: 'config.conversion.event_type', message: 'is required (a stored event type)' })
      if (conv.within_hours !== undefined && !(typeof conv.within_hours === 'number' && conv.within_hours > 0 && conv.within_hours <= 24 * 366)) {
        errors.push({ in: 'body', field: 'config.conversion.within_hours', message: 'must be a number of hours from 0 (exclusive) to 8784' })
      }
    }
  }
  if (c.type === 'journey') checkSteps(cfg.steps, refs, errors)
}

/** Both checks for a campaign about to be `target` (or edited while active); throws the 400. */
export async function assertRunnable(
  sql: Sql,
  owner: { tenantId: string; brandId: string },
  c: CampaignShape,
  target: 'scheduled' | 'running' | 'paused',
  now: Date,
): Promise<void> {
  const errors: FieldError[] = []
  const refs = await checkReferences(sql, owner, c, errors)
  checkRunnable(c, target, now, refs, errors)
  failIfErrors(errors)
}

/** The reference check alone (create, PATCH of a draft). */
export async function assertReferences(sql: Sql, owner: { tenantId: string; brandId: string }, c: CampaignShape): Promise<void> {
  const errors: FieldError[] = []
  await checkReferences(sql, owner, c, errors)
  failIfErrors(errors)
}

// The CPU-heavy half of ingestion, run on the Piscina workers: re-parse the raw request bodies, derive the
// canonical fields, encode ClickHouse rows (RowBinary, see event-rows.ts) and fold each player's events
// into one profile delta. Pure: no I/O, so it is unit-testable and runs the same on any thread.
import Type, { type Static } from 'typebox'
import { IsEmail } from 'typebox/format'
import { emptyStreamColumns, type FilteredInterest, type StreamColumns } from '../engine/event-stream.ts'
import { conditionHolds, type FilterableEvent } from '../lib/event-filter.ts'
import { CURRENCY_CODE_RE, ISO_CURRENCY_RE, parseEventTime } from './canonical.ts'
import { RowBinaryWriter } from './event-rows.ts'
import { isTimeZone } from '../lib/zoned-time.ts'
import { deriveFields, type MappingConfig, compileMapping, type CompiledMapping } from './mapping.ts'

/**
 * A group's input, as the main thread posts it to a worker (workers/protocol.ts checks it there). The
 * byte arrays and the mappings are typed, not inspected: a per-message check must not cost per event.
 */
export const TransformTask = Type.Object({
  /** The raw JSON bodies of the group's requests, back to back. */
  bodies: Type.Unsafe<Uint8Array>({}),
  /** [start, end) of each request's body in `bodies`. */
  bounds: Type.Unsafe<Int32Array>({}),
  /** Per request (a group may hold several tenants' requests). */
  tenantIds: Type.Array(Type.String()),
  brandIds: Type.Array(Type.String()),
  /** Per request: its key into `mappings` (the brand's mapping as it was when the request came in). */
  mappingKeys: Type.Array(Type.String()),
  /** Receive time of each request, ms since epoch. */
  receivedAt: Type.Array(Type.Number()),
  /** One flag per event of the group, in order: 1 = store it (not deduped, ignored or rejected). */
  keep: Type.Unsafe<Uint8Array>({}),
  mappings: Type.Record(Type.String(), Type.Unsafe<MappingConfig>({ type: 'object' })),
  /** First export sequence number of the group; rows take seqBase, seqBase + 1, ... */
  seqBase: Type.Number(),
  /**
   * The event stream's pre-test (src/engine/event-stream.ts): per brand, stored type (or '*') → the
   * consumers interested, comma-separated, or some of them behind filters. Absent when no consumer
   * wants anything.
   */
  streamInterest: Type.Optional(Type.Record(Type.String(), Type.Record(Type.String(), Type.Unsafe<string | FilteredInterest>({})))),
})
export type TransformTask = Static<typeof TransformTask>

/** One entry per player touched by the group, as parallel arrays ready for unnest(). */
export interface PlayerColumns {
  tenant_id: string[]
  brand_id: string[]
  external_id: string[]
  email: (string | null)[]
  phone: (string | null)[]
  language: (string | null)[]
  currency: (string | null)[]
  country: (string | null)[]
  name: (string | null)[]
  /** IANA zone name (canonical `timezone`), checked with Intl. */
  timezone: (string | null)[]
  device: (string | null)[]
  os: (string | null)[]
  browser: (string | null)[]
  platform: (string | null)[]
  /** Times as ms since the epoch: PostgreSQL converts them (cheaper on both sides than ISO text). */
  first_seen: number[]
  last_seen: number[]
  last_login: (number | null)[]
  event_count: number[]
  /** { currency: { deposit_count, deposit_total, ... } } as JSON, or null without money events. */
  money: (string | null)[]
  consent: (string | null)[]
  first_deposit_at: (number | null)[]
  first_deposit_amount: (string | null)[]
  first_deposit_currency: (string | null)[]
  last_deposit_at: (number | null)[]
}

/** status_change events, each player's in event-time order (several per player when a group has them). */
export interface StatusColumns {
  brand_id: string[]
  external_id: string[]
  status: string[]
  reason: (string | null)[]
  /** The event's time, ms since the epoch. */
  at: number[]
}

export interface TransformResult {
  /** RowBinary rows in the column order of EVENT_COLUMNS. */
  rows: Uint8Array
  rowCount: number
  players: PlayerColumns
  statuses: StatusColumns
  /** The group's events some stream consumer is interested in (empty without streamInterest). */
  stream: StreamColumns
}

const CONSENT_CHANNELS = new Set(['email', 'telegram', 'push', 'in_app', 'sms'])
const STATUSES = new Set(['active', 'suspended', 'self_excluded', 'closed'])
const LANG_RE = /^[a-z]{2}(-[A-Za-z]{2})?$/

const MONEY_COLUMN: Record<string, [count: string | null, total: string] | undefined> = {
  deposit: ['deposit_count', 'deposit_total'],
  withdrawal: ['withdrawal_count', 'withdrawal_total'],
  bet: ['bet_count', 'bet_total'],
  win: ['win_count', 'win_total'],
  bet_rollback: [null, 'bet_rollback_total'],
  win_rollback: [null, 'win_rollback_total'],
  bonus_completed: [null, 'bonus_cost'],
}

interface PlayerAcc {
  tenantId: string
  brandId: string
  externalId: string
  email: string | null
  phone: string | null
  language: string | null
  currency: string | null
  country: string | null
  name: string | null
  timezone: string | null
  device: string | null
  os: string | null
  browser: string | null
  platform: string | null
  firstSeen: number
  lastSeen: number
  lastLogin: number | null
  eventCount: number
  /** currency → key → micro-units: exact integers (a number while safe, a bigint beyond ~9e9 major units). */
  money: Record<string, Record<string, Micros>> | null
  consent: Record<string, { granted: boolean; at: string }> | null
  firstDepositAt: number | null
  firstDepositAmount: number | null
  firstDepositCurrency: string | null
  lastDepositAt: number | null
}

const str = (v: unknown, max = 256): string | null => {
  if (v === undefined || v === null) return null
  const s = typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v)
  return s.length > max ? s.slice(0, max) : s
}

/** Canonical fields without a column of their own (clickhouse/0016): kept together in `extra_fields`. */
const EXTRA_FIELDS = ['email', 'phone', 'name', 'timezone', 'reason'] as const

/** The event's EXTRA_FIELDS as derived (mapped), as a JSON object; '' when it has none (most events). */
function extraFields(f: Record<string, unknown>): string {
  let out: Record<string, string> | undefined
  for (const k of EXTRA_FIELDS) {
    const v = str(f[k], k === 'email' ? 320 : 256)
    if (v !== null) (out ??= {})[k] = v
  }
  return out ? JSON.stringify(out) : ''
}

/** Amounts beyond this (in major units) are not summed or stored in `amount` (the raw event keeps them). */
export const MAX_AMOUNT = 1e9

/** Amount → micro-units of the major unit (exact integers); NaN for anything not a finite number in range. */
export function toMicros(v: unknown): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN
  return Number.isFinite(n) && Math.abs(n) <= MAX_AMOUNT ? Math.round(n * 1e6) : Number.NaN
}

const DECIMAL_RE = /^(?=[+-]?\.?\d)([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d{1,4}))?$/

/**
 * The amount in units of 1e-8, ClickHouse's Decimal(38, 8), exactly as written: a string's own digits, a
 * number's shortest decimal form (String(n): the JSON text, up to a double's ~16 significant digits), half
 * away from zero beyond 8 decimals. For an amount toMicros takes (the caller checks). Micro-units serve the
 * profiles and the rules; ClickHouse keeps what a crypto operator's satoshis need (docs/analytics.md).
 */
export function toUnits8(v: unknown): bigint {
  if (typeof v === 'number' && Math.abs(v) < 1e7) {
    // The common case, without text: below 1e7 two decimals of at most 8 places never share a double, so
    // when r × 1e-8 reads back as v it is v's own decimal form.
    const r = Math.round(v * 1e8)
    if (r / 1e8 === v) return BigInt(r)
  }
  const text = typeof v === 'string' ? v.trim() : String(v)
  // A form the pattern does not read (Number also takes hex, '1_0' is refused above) or a very long one
  // (only a double's digits count then): the number's own shortest form.
  const m = (text.length <= 40 ? DECIMAL_RE.exec(text) : null) ?? DECIMAL_RE.exec(String(Number(v)))
  if (!m) return 0n
  const [, sign, int = '', frac = '', exp = '0'] = m
  const digits = `${int}${frac}`.replace(/^0+/, '') || '0'
  // value = digits × 10^(exp − frac.length); in units of 1e-8: × 10^(8 + exp − frac.length)
  const scale = 8 + Number(exp) - frac.length
  let units: bigint
  if (scale >= 0) units = BigInt(digits) * 10n ** BigInt(scale)
  else if (-scale > digits.length) units = 0n
  else {
    const keep = digits.slice(0, digits.length + scale)
    units = BigInt(keep || '0') + (digits.charCodeAt(digits.length + scale) >= 53 /* '5' */ ? 1n : 0n)
  }
  return sign === '-' ? -units : units
}

/** Exact decimal string of an integer count of micro-units. */
/** Micro-units: a number while a safe integer, a bigint once a sum grows past 2^53 (10 deposits of 1e9). */
type Micros = number | bigint

/** a + b exactly (b one amount, a safe integer): a number while the sum stays safe, else a bigint. */
function addMicros(a: Micros | undefined, b: number): Micros {
  if (typeof a === 'bigint') return a + BigInt(b)
  const sum = (a ?? 0) + b
  return Number.isSafeInteger(sum) ? sum : BigInt(a ?? 0) + BigInt(b)
}

export function microsToDecimal(m: Micros): string {
  if (typeof m === 'bigint') {
    const neg = m < 0n
    const abs = neg ? -m : m
    const frac = abs % 1_000_000n
    const s = frac === 0n ? String(abs / 1_000_000n) : `${abs / 1_000_000n}.${String(frac).padStart(6, '0').replace(/0+$/, '')}`
    return neg ? `-${s}` : s
  }
  const neg = m < 0
  const abs = Math.abs(m)
  const int = Math.floor(abs / 1e6)
  const frac = abs - int * 1e6
  const s = frac === 0 ? String(int) : `${int}.${String(frac).padStart(6, '0').replace(/0+$/, '')}`
  return neg ? `-${s}` : s
}

export function transformGroup(task: TransformTask): TransformResult {
  const decoder = new TextDecoder()
  const compiled = new Map<string, CompiledMapping>()
  const mappingOf = (key: string) => {
    let m = compiled.get(key)
    if (!m) {
      m = compileMapping(task.mappings[key] ?? { rules: [] })
      compiled.set(key, m)
    }
    return m
  }
  const players = new Map<string, PlayerAcc>()
  const statuses = new Map<string, { brandId: string; externalId: string; changes: { status: string; reason: string | null; at: number }[] }>()
  const rows = new RowBinaryWriter()
  let rowCount = 0
  let seq = task.seqBase
  let eventIndex = 0
  const stream = emptyStreamColumns()

  for (let r = 0; r < task.brandIds.length; r++) {
    const tenantId = task.tenantIds[r] as string
    const brandId = task.brandIds[r] as string
    const receivedAt = task.receivedAt[r] as number
    const text = decoder.decode(task.bodies.subarray(task.bounds[2 * r], task.bounds[2 * r + 1]))
    const body = JSON.parse(text) as { events?: Record<string, unknown>[] } & Record<string, unknown>
    const events = Array.isArray(body.events) ? body.events : [body]
    const mapping = mappingOf(task.mappingKeys[r] as string)
    const interest = task.streamInterest?.[brandId]
    for (const event of events) {
      if (task.keep[eventIndex++] !== 1) continue
      const sourceType = event.event_type as string
      const res = mapping.resolve(sourceType)
      const rule = res.rule >= 0 ? mapping.config.rules[res.rule] : undefined
      const type = res.type
      const f = deriveFields(event, type, rule)
      const externalId = event.player_id as string
      const at = typeof event.timestamp === 'string' ? parseEventTime(event.timestamp) : receivedAt
      const atMs = Number.isFinite(at) ? at : receivedAt
      const amountMicros = f.amount === undefined ? Number.NaN : toMicros(f.amount)
      const currency = typeof f.currency === 'string' && CURRENCY_CODE_RE.test(f.currency) ? f.currency.toUpperCase() : ''
      const granted = f.granted === true || f.granted === 'true' ? 1 : f.granted === false || f.granted === 'false' ? 0 : null

      // One RowBinary row, in the order of EVENT_COLUMNS.
      rows.uuid(tenantId)
      rows.uuid(brandId)
      rows.string((event.event_id as string | undefined) ?? '')
      rows.string(externalId)
      rows.string(type)
      rows.string(sourceType)
      rows.dateTime64ms(atMs)
      rows.dateTime64ms(receivedAt)
      rows.uint64(seq++)
      rows.string((event.session_id as string | undefined) ?? '')
      rows.decimal38x8(Number.isNaN(amountMicros) ? 0n : toUnits8(f.amount))
      rows.string(currency)
      rows.string(str(f.method) ?? '')
      rows.string(str(f.game) ?? '')
      rows.string(str(f.provider) ?? '')
      rows.string(str(f.category) ?? '')
      rows.string(str(f.round_id) ?? '')
      rows.string(str(f.country, 64) ?? '')
      rows.string(str(f.language, 16) ?? '')
      rows.string(str(f.device) ?? '')
      rows.string(str(f.os) ?? '')
      rows.string(str(f.browser) ?? '')
      rows.string(str(f.platform) ?? '')
      rows.string(str(f.status, 32) ?? '')
      rows.string(str(f.bonus_id) ?? '')
      rows.string(str(f.channel, 32) ?? '')
      rows.nullableUInt8(granted)
      rows.string(JSON.stringify(event))
      rows.string(extraFields(f))
      rowCount++

      // The event stream's cheap test: one lookup unless some consumer's rule could match this type;
      // then the rules' filters, when they have any, on the fields the consumer will see.
      const interested = interest && (interest[type] ?? interest['*'])
      if (interested) {
        const fields: Record<string, unknown> = { ...f }
        if (f.amount !== undefined) {
          if (Number.isNaN(amountMicros)) delete fields.amount
          else fields.amount = microsToDecimal(amountMicros)
        }
        if (f.currency !== undefined) fields.currency = currency || f.currency
        const consumers = typeof interested === 'string' ? interested : consumersFor(interested, { type, fields, payload: (event.payload ?? null) as FilterableEvent['payload'] })
        if (consumers) {
          stream.consumers.push(consumers)
          stream.tenant_id.push(tenantId)
          stream.brand_id.push(brandId)
          stream.external_id.push(externalId)
          stream.event_id.push((event.event_id as string | undefined) ?? null)
          stream.event_type.push(type)
          stream.source_type.push(sourceType)
          stream.event_time.push(atMs)
          stream.received_at.push(receivedAt)
          stream.fields.push(JSON.stringify(fields))
          stream.payload.push(event.payload === undefined ? null : JSON.stringify(event.payload))
        }
      }

      // Fold the event into its player's delta (brand ids are unique across tenants).
      const key = `${brandId}\u0000${externalId}`
      let p = players.get(key)
      if (!p) {
        p = {
          tenantId, brandId, externalId, email: null, phone: null, language: null, currency: null, country: null, name: null, timezone: null,
          device: null, os: null, browser: null, platform: null, firstSeen: atMs, lastSeen: atMs, lastLogin: null,
          eventCount: 0, money: null, consent: null, firstDepositAt: null, firstDepositAmount: null,
          firstDepositCurrency: null, lastDepositAt: null,
        }
        players.set(key, p)
      }
      p.eventCount++
      if (atMs < p.firstSeen) p.firstSeen = atMs
      if (atMs > p.lastSeen) p.lastSeen = atMs
      switch (type) {
        case 'registration':
        case 'profile_update':
          // The format POST /players accepts (email, ≤ 320): anything else is ignored, as a malformed
          // language or timezone is (the raw event keeps it), never stored cut or as a player's address.
          if (typeof f.email === 'string' && f.email.length <= 320 && IsEmail(f.email)) p.email = f.email
          if (f.phone !== undefined) p.phone = str(f.phone, 64)
          if (f.name !== undefined) p.name = str(f.name)
          if (typeof f.language === 'string' && LANG_RE.test(f.language)) p.language = f.language
          if (ISO_CURRENCY_RE.test(currency)) p.currency = currency
          if (f.country !== undefined) p.country = str(f.country, 64)
          // An unknown zone is ignored (kept in the raw event), like a malformed language.
          if (f.timezone !== undefined && isTimeZone(f.timezone)) p.timezone = f.timezone
          if (type === 'registration') setDevice(p, f)
          break
        case 'login':
          if (p.lastLogin === null || atMs > p.lastLogin) p.lastLogin = atMs
          if (f.country !== undefined) p.country = str(f.country, 64)
          setDevice(p, f)
          break
        case 'logout':
        case 'game_start':
          setDevice(p, f)
          break
        case 'consent_update': {
          const channel = typeof f.channel === 'string' ? f.channel : ''
          if (CONSENT_CHANNELS.has(channel) && granted !== null) {
            p.consent ??= {}
            // The later event time wins, as in the profile's update (queries.ts), not the later in the batch.
            const at = new Date(atMs).toISOString()
            const prev = p.consent[channel]
            if (!prev || prev.at <= at) p.consent[channel] = { granted: granted === 1, at }
          }
          break
        }
        case 'status_change': {
          const status = typeof f.status === 'string' ? f.status : ''
          if (!STATUSES.has(status)) break
          let entry = statuses.get(key)
          if (!entry) statuses.set(key, (entry = { brandId, externalId, changes: [] }))
          entry.changes.push({ status, reason: str(f.reason), at: atMs })
          break
        }
        default: {
          const cols = MONEY_COLUMN[type]
          if (!cols) break
          const micros = Number.isNaN(amountMicros) ? 0 : amountMicros
          p.money ??= {}
          const bucket = (p.money[currency] ??= {})
          if (cols[0]) bucket[cols[0]] = ((bucket[cols[0]] as number | undefined) ?? 0) + 1
          bucket[cols[1]] = addMicros(bucket[cols[1]], micros)
          if (type === 'deposit') {
            if (p.firstDepositAt === null || atMs < p.firstDepositAt) {
              p.firstDepositAt = atMs
              p.firstDepositAmount = micros
              p.firstDepositCurrency = currency || null
            }
            if (p.lastDepositAt === null || atMs > p.lastDepositAt) p.lastDepositAt = atMs
          }
        }
      }
    }
  }

  const cols: PlayerColumns = {
    tenant_id: [], brand_id: [], external_id: [], email: [], phone: [], language: [], currency: [], country: [], name: [], timezone: [], device: [],
    os: [], browser: [], platform: [], first_seen: [], last_seen: [], last_login: [], event_count: [], money: [],
    consent: [], first_deposit_at: [], first_deposit_amount: [], first_deposit_currency: [], last_deposit_at: [],
  }
  for (const p of players.values()) {
    cols.tenant_id.push(p.tenantId)
    cols.brand_id.push(p.brandId)
    cols.external_id.push(p.externalId)
    cols.email.push(p.email)
    cols.phone.push(p.phone)
    cols.language.push(p.language)
    cols.currency.push(p.currency)
    cols.country.push(p.country)
    cols.name.push(p.name)
    cols.timezone.push(p.timezone)
    cols.device.push(p.device)
    cols.os.push(p.os)
    cols.browser.push(p.browser)
    cols.platform.push(p.platform)
    cols.first_seen.push(p.firstSeen)
    cols.last_seen.push(p.lastSeen)
    cols.last_login.push(p.lastLogin)
    cols.event_count.push(p.eventCount)
    cols.money.push(p.money ? moneyJson(p.money) : null)
    cols.consent.push(p.consent ? JSON.stringify(p.consent) : null)
    cols.first_deposit_at.push(p.firstDepositAt)
    cols.first_deposit_amount.push(p.firstDepositAmount === null ? null : microsToDecimal(p.firstDepositAmount))
    cols.first_deposit_currency.push(p.firstDepositCurrency)
    cols.last_deposit_at.push(p.lastDepositAt)
  }
  const st: StatusColumns = { brand_id: [], external_id: [], status: [], reason: [], at: [] }
  for (const s of statuses.values()) {
    // Every change of the group, in event-time order (stable: arrival order at equal times), each its own
    // transition and webhooks (applyStatuses), not only the last.
    for (const c of s.changes.sort((a, b) => a.at - b.at)) {
      st.brand_id.push(s.brandId)
      st.external_id.push(s.externalId)
      st.status.push(c.status)
      st.reason.push(c.reason)
      st.at.push(c.at)
    }
  }
  return { rows: rows.finish(), rowCount, players: cols, statuses: st, stream }
}

function setDevice(p: PlayerAcc, f: Record<string, unknown>): void {
  if (f.device !== undefined) p.device = str(f.device)
  if (f.os !== undefined) p.os = str(f.os)
  if (f.browser !== undefined) p.browser = str(f.browser)
  if (f.platform !== undefined) p.platform = str(f.platform)
}

function moneyJson(money: Record<string, Record<string, Micros>>): string {
  const out: Record<string, Record<string, number | string>> = {}
  for (const cur in money) {
    const src = money[cur] as Record<string, Micros>
    const dst: Record<string, number | string> = {}
    for (const k in src) dst[k] = k.endsWith('_count') ? (src[k] as number) : microsToDecimal(src[k] as Micros)
    out[cur] = dst
  }
  return JSON.stringify(out)
}

/**
 * The consumers a filtered interest names for this event, comma-separated ('' for none): always the same
 * order for the same consumers (the interest's), so equal lists dedupe as strings on wake.
 */
function consumersFor(interest: FilteredInterest, e: FilterableEvent): string {
  const names = [...interest.always]
  for (const w of interest.when) if (w.any.some((filters) => filters.every((c) => conditionHolds(e, c)))) names.push(w.consumer)
  return names.join(',')
}

// The fields and operators segment rules may use, each field with its type and its constant SQL fragment
// over `players p left join player_profiles pp`. docs/segments.md documents every entry of this file.
import type { PendingQuery, Row, TransactionSql } from 'postgres'
import type { Sql as Pool } from '../db/postgres.ts'
import { LIFECYCLE, LIFECYCLE_STAGES, PLAYER_STATUSES } from '../players/scoring.ts'

export type Sql = Pool | TransactionSql
export type Fragment = PendingQuery<Row[]>

export const OPERATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'contains', 'exists'] as const
export type Operator = (typeof OPERATORS)[number]

export const CONSENT_CHANNELS = ['email', 'telegram', 'push', 'in_app', 'sms'] as const

export type FieldType = 'string' | 'enum' | 'number' | 'datetime' | 'boolean' | 'json'

export const OPS_BY_TYPE: Record<FieldType, readonly Operator[]> = {
  string: ['eq', 'neq', 'in', 'not_in', 'contains', 'exists'],
  enum: ['eq', 'neq', 'in', 'not_in', 'exists'],
  number: ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'exists'],
  datetime: ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'exists'],
  boolean: ['eq', 'neq', 'exists'],
  json: OPERATORS,
}

export interface Env {
  sql: Sql
  /** Evaluation time: relative dates (`now-30d`) and lifecycle_stage are computed against it. */
  now: Date
}

export interface FieldDef {
  type: FieldType
  description: string
  values?: readonly string[]
  column(env: Env): Fragment
}

// As lastActivityAt (players/scoring.ts): the registration time only when no activity is known.
const activity = (sql: Sql) => sql`coalesce(greatest(pp.last_seen_at, pp.last_login_at, pp.last_deposit_at), p.created_at)`

/** scoring.ts lifecycleStage() in SQL; test/segments/segments.test.ts checks the two agree. */
export function lifecycleStageSql({ sql, now }: Env): Fragment {
  const at = now.toISOString()
  return sql`(case
    when ${activity(sql)} < ${at}::timestamptz - ${LIFECYCLE.churnedAfterDays}::int * interval '1 day' then 'churned'
    when coalesce(pp.deposit_count, 0) <= 0 then 'new'
    when ${activity(sql)} < ${at}::timestamptz - ${LIFECYCLE.atRiskAfterDays}::int * interval '1 day' then 'at_risk'
    when coalesce(pp.deposit_total, 0) >= ${LIFECYCLE.vipDepositTotal}::numeric then 'vip'
    when pp.deposit_count = 1 then 'ftd'
    else 'active'
  end)`
}

/** Every field a condition may name, except the `metadata.<key>` and `consent.<channel>` families. */
export const FIELDS: Record<string, FieldDef> = {
  status: { type: 'enum', values: PLAYER_STATUSES, description: 'player status', column: ({ sql }) => sql`p.status` },
  email: { type: 'string', description: 'player email', column: ({ sql }) => sql`p.email` },
  external_id: { type: 'string', description: "the operator's player id", column: ({ sql }) => sql`p.external_id` },
  phone: { type: 'string', description: 'player phone', column: ({ sql }) => sql`p.phone` },
  created_at: { type: 'datetime', description: 'player creation (registration) time', column: ({ sql }) => sql`p.created_at` },
  updated_at: { type: 'datetime', description: 'last change of the player record', column: ({ sql }) => sql`p.updated_at` },
  country: { type: 'string', description: 'profile country', column: ({ sql }) => sql`pp.country` },
  language: { type: 'string', description: 'profile language', column: ({ sql }) => sql`pp.language` },
  currency: { type: 'string', description: 'profile currency', column: ({ sql }) => sql`pp.currency` },
  name: { type: 'string', description: 'profile name', column: ({ sql }) => sql`pp.name` },
  device: { type: 'string', description: 'last device', column: ({ sql }) => sql`pp.device` },
  os: { type: 'string', description: 'last operating system', column: ({ sql }) => sql`pp.os` },
  browser: { type: 'string', description: 'last browser', column: ({ sql }) => sql`pp.browser` },
  platform: { type: 'string', description: 'last platform', column: ({ sql }) => sql`pp.platform` },
  lifecycle_stage: { type: 'enum', values: LIFECYCLE_STAGES, description: 'lifecycle stage (docs/players.md)', column: lifecycleStageSql },
  event_count: { type: 'number', description: 'events received', column: ({ sql }) => sql`coalesce(pp.event_count, 0)` },
  deposit_count: { type: 'number', description: 'successful deposits', column: ({ sql }) => sql`coalesce(pp.deposit_count, 0)` },
  deposit_total: { type: 'number', description: 'deposit sum, profile currency', column: ({ sql }) => sql`coalesce(pp.deposit_total, 0)` },
  first_deposit_amount: { type: 'number', description: 'first deposit (FTD) amount', column: ({ sql }) => sql`pp.first_deposit_amount` },
  withdrawal_count: { type: 'number', description: 'withdrawals', column: ({ sql }) => sql`coalesce(pp.withdrawal_count, 0)` },
  withdrawal_total: { type: 'number', description: 'withdrawal sum', column: ({ sql }) => sql`coalesce(pp.withdrawal_total, 0)` },
  bet_count: { type: 'number', description: 'bets', column: ({ sql }) => sql`coalesce(pp.bet_count, 0)` },
  bet_total: { type: 'number', description: 'bet sum', column: ({ sql }) => sql`coalesce(pp.bet_total, 0)` },
  win_count: { type: 'number', description: 'wins', column: ({ sql }) => sql`coalesce(pp.win_count, 0)` },
  win_total: { type: 'number', description: 'win sum', column: ({ sql }) => sql`coalesce(pp.win_total, 0)` },
  bonus_cost: { type: 'number', description: 'completed bonus amounts', column: ({ sql }) => sql`coalesce(pp.bonus_cost, 0)` },
  ggr: { type: 'number', description: 'gross gaming revenue', column: ({ sql }) => sql`coalesce(pp.ggr, 0)` },
  first_seen_at: { type: 'datetime', description: 'first event', column: ({ sql }) => sql`pp.first_seen_at` },
  last_seen_at: { type: 'datetime', description: 'latest event', column: ({ sql }) => sql`pp.last_seen_at` },
  last_login_at: { type: 'datetime', description: 'latest login', column: ({ sql }) => sql`pp.last_login_at` },
  first_deposit_at: { type: 'datetime', description: 'first deposit', column: ({ sql }) => sql`pp.first_deposit_at` },
  last_deposit_at: { type: 'datetime', description: 'latest deposit', column: ({ sql }) => sql`pp.last_deposit_at` },
}

const METADATA_KEY_RE = /^[^.\s]{1,128}$/

/** The definition of a field name, including `metadata.<key>[.<key>...]` and `consent.<channel>`. */
export function resolveField(name: string): (FieldDef & { path?: string[] }) | undefined {
  if (Object.hasOwn(FIELDS, name)) return FIELDS[name]
  if (name.startsWith('metadata.')) {
    const path = name.slice('metadata.'.length).split('.')
    if (path.length > 8 || !path.every((k) => METADATA_KEY_RE.test(k))) return undefined
    return { type: 'json', description: 'player metadata value', path, column: ({ sql }) => sql`(p.metadata #> ${path}::text[])` }
  }
  if (name.startsWith('consent.')) {
    const channel = name.slice('consent.'.length)
    if (!(CONSENT_CHANNELS as readonly string[]).includes(channel)) return undefined
    return {
      type: 'boolean',
      description: 'consent granted on the channel',
      column: ({ sql }) =>
        sql`(case when jsonb_typeof(pp.consent -> ${channel}::text -> 'granted') = 'boolean' then (pp.consent -> ${channel}::text -> 'granted')::boolean end)`,
    }
  }
  return undefined
}

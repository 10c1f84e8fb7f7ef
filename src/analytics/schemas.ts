import Type from 'typebox'
import { Nullable } from '../lib/schemas.ts'
import { REPORT_DIMENSIONS, REPORT_METRICS, REVENUE_DIMENSIONS } from './service.ts'

const literals = (xs: readonly string[], description: string) => Type.Union(xs.map((x) => Type.Literal(x)), { description })

const From = Type.String({
  maxLength: 64,
  description: 'ISO 8601 date-time with a zone (2026-05-01T00:00:00Z), or a date (2026-05-01: midnight in tz)',
})
const Tz = Type.String({ maxLength: 64, description: 'IANA time zone (Europe/Rome); default UTC. Days, weeks and hours are in this zone.' })

/** Money per currency, never converted: `{ "EUR": 125.5, "USD": 20 }` (currencies with a non-zero figure). */
export const Money = Type.Record(Type.String(), Type.Number(), { description: 'amount per currency (major units), never converted' })
const Count = Type.Object({ count: Type.Integer(), amount: Money })

export const TimeseriesQuery = Type.Object({ from: Type.Optional(From), tz: Type.Optional(Tz) })
export const RevenueQuery = Type.Object({ dimension: literals(REVENUE_DIMENSIONS, 'what to group revenue by'), from: Type.Optional(From), tz: Type.Optional(Tz) })
export const CohortsQuery = Type.Object({ months: Type.Optional(Type.Integer({ minimum: 1, maximum: 36, default: 12 })) })
export const ReportQuery = Type.Object({
  metric: literals(REPORT_METRICS, 'players, events, deposits (amounts) or wagered (bets − bet rollbacks)'),
  dimension: literals(REPORT_DIMENSIONS, 'day and week are UTC (week = its Monday)'),
  from: Type.Optional(From),
})

export const Summary = Type.Object({
  players: Type.Integer(),
  active: Type.Integer({ description: 'players with an event in the last 30 days' }),
  new_players_30d: Type.Integer(),
  depositors: Type.Integer({ description: 'players with a deposit, all time' }),
  ftd_count: Type.Integer({ description: 'first deposits in the last 30 days' }),
  deposits: Count, withdrawals: Count, bets: Count, wins: Count,
  ggr: Money, ngr: Money, bonus_cost: Money,
  arpu: Money, average_ltv: Money,
  lifecycle_stages: Type.Record(Type.String(), Type.Integer()),
})

export const TimeseriesRow = Type.Object({
  date: Type.String({ description: 'YYYY-MM-DD in tz' }),
  new_players: Type.Integer(), active_players: Type.Integer(), events: Type.Integer(), deposits: Money, ggr: Money,
})

export const RevenueRow = Type.Union([
  Type.Object({
    key: Nullable(Type.String()), players: Type.Integer(), bets: Money, wins: Money, ggr: Money, ngr: Nullable(Money), deposits: Money,
  }),
  Type.Object({ weekday: Type.Integer({ minimum: 1, maximum: 7 }), hour: Type.Integer({ minimum: 0, maximum: 23 }), events: Type.Integer(), ggr: Money }),
  Type.Object({
    bonus_id: Nullable(Type.String()), granted: Type.Integer(), cost: Money, ggr_after: Money,
    roi: Type.Record(Type.String(), Nullable(Type.Number())),
  }),
])

export const Cohorts = Type.Object({
  cohorts: Type.Array(Type.Object({
    month: Type.String({ description: 'YYYY-MM (UTC), the registration month' }),
    size: Type.Integer(),
    retention: Type.Array(Type.Number(), { description: 'retention[k]: share of the cohort with an event in month k' }),
    depositors: Type.Integer(), deposits: Money, ggr: Money,
  })),
})

export const ReportRow = Type.Object({ key: Nullable(Type.String()), value: Type.Union([Type.Integer(), Money]) })

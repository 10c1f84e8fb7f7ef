import Type from 'typebox'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { data } from '../lib/schemas.ts'
import { Cohorts, CohortsQuery, ReportQuery, ReportRow, RevenueQuery, RevenueRow, Summary, TimeseriesQuery, TimeseriesRow } from './schemas.ts'
import * as analytics from './service.ts'
import { parseFrom, parseTz, zoneKnownTo } from './time.ts'

const tags = ['analytics']
const errors = [403]

export const analyticsRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/analytics/summary', operationId: 'getAnalyticsSummary', tags, brandScoped: true, errors,
    summary: "The brand's key figures",
    description: 'All-time money per currency (gross deposits, withdrawals, bets, wins; GGR, NGR, bonus cost), players, activity over the last 30 days, lifecycle stages (docs/analytics.md).',
    responses: { 200: data(Summary) },
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return { data: await analytics.summary(ctx, { tenantId: req.principal.tenantId, brandId: brand.id }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/analytics/timeseries', operationId: 'getAnalyticsTimeseries', tags, brandScoped: true, errors,
    summary: 'One row per day in tz, from the day of `from` to today',
    query: TimeseriesQuery, responses: { 200: data(Type.Array(TimeseriesRow)) },
    handler: async (ctx, req) => {
      const tz = await zoneKnownTo(ctx.ch, parseTz(req.query.tz))
      const from = parseFrom(req.query.from, tz)
      const brand = await req.resolveBrand()
      return { data: await analytics.timeseries(ctx, { tenantId: req.principal.tenantId, brandId: brand.id }, { from, tz }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/analytics/revenue', operationId: 'getAnalyticsRevenue', tags, brandScoped: true, errors,
    summary: 'Revenue by a dimension, the weekday × hour heatmap, or bonus ROI',
    description: 'Player dimensions (country, device, os, browser, platform) key each player by their latest value; game, provider and category key the game events (ngr null, deposits {}). `from` defaults to all time.',
    query: RevenueQuery, responses: { 200: data(Type.Array(RevenueRow)) },
    handler: async (ctx, req) => {
      const tz = await zoneKnownTo(ctx.ch, parseTz(req.query.tz))
      const from = parseFrom(req.query.from, tz)
      const brand = await req.resolveBrand()
      return { data: await analytics.revenue(ctx, { tenantId: req.principal.tenantId, brandId: brand.id }, { dimension: req.query.dimension, from, tz }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/analytics/cohorts', operationId: 'getAnalyticsCohorts', tags, brandScoped: true, errors,
    summary: 'Registration-month cohorts of the last `months` months (UTC), with retention',
    query: CohortsQuery, responses: { 200: data(Cohorts) },
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return { data: await analytics.cohorts(ctx, { tenantId: req.principal.tenantId, brandId: brand.id }, { months: req.query.months ?? 12 }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/reports/run', operationId: 'runReport', tags: ['reports'], brandScoped: true, errors,
    summary: 'An ad-hoc report: one metric by one dimension, rows ordered by key',
    query: ReportQuery, responses: { 200: data(Type.Array(ReportRow)) },
    handler: async (ctx, req) => {
      const from = parseFrom(req.query.from, 'UTC')
      const brand = await req.resolveBrand()
      return { data: await analytics.runReport(ctx, { tenantId: req.principal.tenantId, brandId: brand.id }, { metric: req.query.metric, dimension: req.query.dimension, from }) }
    },
  }),
]

import type { AppContext } from '../context.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { data, pagination } from '../lib/schemas.ts'
import { pageRows } from './crud.ts'
import { visibilityOf } from '../lib/visibility.ts'
import { crudRoutes } from './crud-routes.ts'
import {
  Badge,
  CreateBadgeBody,
  CreateCurrencyBody,
  CreateLevelBody,
  CreateMissionBody,
  Level,
  Mission,
  MissionListQuery,
  MissionPage,
  PatchBadgeBody,
  PatchCurrencyBody,
  PatchLevelBody,
  PatchMissionBody,
  PlayerGamificationProfile,
  PlayerParams,
  PointCurrency,
} from './schemas.ts'
import { badges, currencies, getPlayerProfile, levels, missions } from './service.ts'

const tag = 'gamification'
/** Rule changes: the event stream's interest and the engine's compiled rules are reloaded everywhere. */
export const rulesChanged = async (ctx: AppContext) => {
  await ctx.stream?.interestChanged('*')
}

const listMissions = defineRoute({
  method: 'GET', path: '/gamification/missions', operationId: 'listMissions', tags: [tag], brandScoped: true,
  summary: "List the brand's missions, paged, optionally filtered by status and type",
  query: MissionListQuery, responses: { 200: MissionPage },
  handler: async (ctx, req) => {
    const brand = await req.resolveBrand()
    const { page, limit, status, type } = req.query
    const { rows, total } = await pageRows(ctx.sql, missions, {
      tenantId: req.principal.tenantId, brandId: brand.id, filters: { status, type }, page, limit,
    })
    return { data: rows, pagination: pagination(page, limit, total) }
  },
})

export const gamificationRoutes: RouteDef[] = [
  ...crudRoutes({
    path: '/gamification/levels', tag, singular: 'Level', plural: 'Levels', def: levels, schema: Level,
    createBody: CreateLevelBody, patchBody: PatchLevelBody, listSummary: "List the brand's levels, ordered by tier",
  }),
  ...crudRoutes({
    path: '/gamification/missions', tag, singular: 'Mission', plural: 'Missions', def: missions, schema: Mission,
    createBody: CreateMissionBody, patchBody: PatchMissionBody, list: listMissions, onChange: rulesChanged,
  }),
  ...crudRoutes({
    path: '/gamification/badges', tag, singular: 'Badge', plural: 'Badges', def: badges, schema: Badge,
    createBody: CreateBadgeBody, patchBody: PatchBadgeBody, onChange: rulesChanged,
  }),
  ...crudRoutes({
    path: '/gamification/currencies', tag, singular: 'Currency', plural: 'Currencies', def: currencies, schema: PointCurrency,
    createBody: CreateCurrencyBody, patchBody: PatchCurrencyBody,
  }),
  defineRoute({
    method: 'GET', path: '/gamification/player/:playerId', operationId: 'getPlayerGamificationProfile', tags: [tag],
    summary: "A player's current level, point balances, active missions and earned badges",
    params: PlayerParams, responses: { 200: data(PlayerGamificationProfile) },
    handler: async (ctx, req) => ({
      data: await getPlayerProfile(ctx, { ...visibilityOf(req.principal), playerId: req.params.playerId }),
    }),
  }),
]

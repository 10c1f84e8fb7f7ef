import { defineRoute, type RouteDef } from '../http/route.ts'
import { IdParams, data } from '../lib/schemas.ts'
import {
  CreatePlayerBody,
  ListPlayersQuery,
  NextBestActionBody,
  Player,
  PlayerList,
  PlayerWithProfile,
  UpdatePlayerBody,
} from './schemas.ts'
import * as players from './service.ts'

const tags = ['players']

export const playerRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/players', operationId: 'listPlayers', tags,
    summary: "List the brand's players, newest first",
    description: '`search` is a case-insensitive substring match on email or external_id.',
    query: ListPlayersQuery, responses: { 200: PlayerList }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return players.listPlayers(ctx, { tenantId: req.principal.tenantId, brandId: brand.id, ...req.query })
    },
  }),
  defineRoute({
    method: 'POST', path: '/players', operationId: 'createPlayer', tags,
    summary: 'Create a player, or update it when (brand, external_id) exists',
    description:
      'Idempotent on (brand, external_id): a repeat applies the given fields to the same player (metadata ' +
      'shallow-merged) and still answers 201. language and currency are synced onto the player profile.',
    body: CreatePlayerBody, responses: { 201: data(Player) }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      const { brand: _hint, ...fields } = req.body
      const { player } = await players.createOrUpdatePlayer(ctx, { tenantId: req.principal.tenantId, brandId: brand.id, ...fields })
      return { data: player }
    },
  }),
  defineRoute({
    method: 'GET', path: '/players/:id', operationId: 'getPlayer', tags,
    summary: 'Get a player with its profile',
    params: IdParams, responses: { 200: data(PlayerWithProfile) },
    handler: async (ctx, req) => ({
      data: await players.getPlayer(ctx, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, playerId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'PATCH', path: '/players/:id', operationId: 'updatePlayer', tags,
    summary: 'Update status, email, phone; metadata is shallow-merged',
    params: IdParams, body: UpdatePlayerBody, responses: { 200: data(Player) },
    handler: async (ctx, req) => ({
      data: await players.updatePlayer(ctx, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, playerId: req.params.id, ...req.body }),
    }),
  }),
  defineRoute({
    method: 'GET', path: '/players/:id/next-best-action', operationId: 'getPlayerNextBestAction', tags,
    summary: 'The next best action for a player',
    description:
      'Derived from churn, value and engagement scores and the lifecycle stage (docs/players.md). Never a ' +
      'marketing action for a self-excluded, suspended or closed player.',
    params: IdParams, responses: { 200: data(NextBestActionBody) },
    handler: async (ctx, req) => ({
      data: await players.getNextBestAction(ctx, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, playerId: req.params.id }),
    }),
  }),
]

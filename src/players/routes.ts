import Type from 'typebox'
import { defineRoute, reply, type RouteDef } from '../http/route.ts'
import { DateTime, IdParams, Nullable, Uuid, data } from '../lib/schemas.ts'
import { erasePlayer, exportPlayer, getErasure } from './data-rights.ts'
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
const ErasureJob = Type.Object(
  {
    id: Uuid,
    player_id: Uuid,
    status: Type.Union([Type.Literal('pending'), Type.Literal('in_progress'), Type.Literal('completed')]),
    attempts: Type.Integer(),
    created_at: DateTime,
    completed_at: Nullable(DateTime),
  },
  { $id: 'ErasureJob' },
)


export const playerRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/players', operationId: 'listPlayers', tags,
    summary: "List the brand's players, newest first",
    description: '`search` is a case-insensitive substring match on email or external_id.',
    query: ListPlayersQuery, responses: { 200: PlayerList }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return players.listPlayers(ctx, { ...req.query, tenantId: req.principal.tenantId, brandId: brand.id })
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
      const { player } = await players.createOrUpdatePlayer(ctx, { ...fields, tenantId: req.principal.tenantId, brandId: brand.id })
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
      data: await players.updatePlayer(ctx, { ...req.body, tenantId: req.principal.tenantId, brandId: req.principal.brandId, playerId: req.params.id }),
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
  defineRoute({
    method: 'DELETE', path: '/players/:id', operationId: 'erasePlayer', tags,
    summary: "Erase a player's personal data (GDPR right to erasure)",
    description:
      'Removes the personal data from PostgreSQL at once (player record, profile, consents, notifications, ' +
      'gamification state, contact points, inbox) and queues the ClickHouse part: the player\'s events are ' +
      'pseudonymised (player id replaced by a random token, personal fields stripped from the raw event) so ' +
      'aggregates stay right. Answers 202 with the job; poll `GET /players/{id}/erasure` until `completed`, ' +
      'when `player.erased` fires. Repeating the call answers the same job.',
    params: IdParams, responses: { 202: data(ErasureJob) },
    handler: async (ctx, req) => {
      const job = await erasePlayer(ctx, { principal: req.principal, playerId: req.params.id, requestId: req.requestId })
      return reply(202, { data: job }, { location: `/api/v1/players/${req.params.id}/erasure` })
    },
  }),
  defineRoute({
    method: 'GET', path: '/players/:id/erasure', operationId: 'getPlayerErasure', tags,
    summary: "A player's erasure job",
    params: IdParams, responses: { 200: data(ErasureJob) },
    handler: async (ctx, req) => ({
      data: await getErasure(ctx, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, playerId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'GET', path: '/players/:id/export', operationId: 'exportPlayerData', tags,
    summary: 'Everything held about a player (GDPR access/portability), as streamed JSON',
    description:
      'One JSON document: `player`, `profile` (consents included), `notifications`, `point_balances`, ' +
      '`missions`, `badges`, further sections of other features, then every stored `events` row with its ' +
      'raw event. Streamed: a large history never waits in memory.',
    params: IdParams,
    responses: { 200: { description: 'the export document', contentType: 'application/json', schema: Type.Object({ exported_at: DateTime, player: Type.Unknown(), events: Type.Array(Type.Unknown()) }, { additionalProperties: true }) } },
    handler: async (ctx, req) => {
      const body = await exportPlayer(ctx, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, playerId: req.params.id })
      return reply(200, body, { 'content-disposition': `attachment; filename="player-${req.params.id}.json"` })
    },
  }),
]


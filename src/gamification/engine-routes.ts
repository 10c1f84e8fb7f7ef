// Routes of the gamification engine (contract-engines §5): joining opt-in missions, manual point
// credits/debits and the ledger, bonus grants and a player's grants, the tournament leaderboard.
import Type from 'typebox'
import type { AppContext } from '../context.ts'
import { AppError, badRequest, notFound } from '../errors.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { iso } from '../lib/rows.ts'
import { data, DateTime, IdParams, Nullable, Uuid } from '../lib/schemas.ts'
import { visibilityOf, visibleTo, type Visibility } from '../lib/visibility.ts'
import { findPlayerRef, type PlayerRef } from '../players/service.ts'
import { grantBonus, ledgerOut, lockPlayers, movePoints } from './rewards.ts'

const LedgerEntry = Type.Object({
  id: Uuid, player_id: Uuid, currency_id: Uuid, amount: Type.Number(), balance_after: Type.Number(),
  source: Type.String(), source_id: Nullable(Type.String()), reason: Nullable(Type.String()), created_at: DateTime,
}, { $id: 'PointLedgerEntry' })
const Grant = Type.Object({
  id: Uuid, bonus_id: Uuid, player_id: Uuid, status: Type.String(), expires_at: Nullable(DateTime), created_at: DateTime,
  reason: Nullable(Type.String()), source: Type.String(), refusal_reason: Nullable(Type.String()),
}, { $id: 'BonusGrant' })
const LeaderboardRow = Type.Object({ rank: Type.Integer(), player_id: Uuid, external_id: Type.String(), score: Type.Number() })

async function playerOf(ctx: AppContext, v: Visibility, playerId: string, field = 'player_id'): Promise<PlayerRef> {
  const p = await findPlayerRef(ctx, { ...v, playerId })
  if (!p) {
    if (field === 'path') throw notFound('player')
    throw badRequest('unknown player', { errors: [{ in: 'body', field, message: 'no such player' }] })
  }
  return p
}

const grantOut = (g: { id: string; bonus_id: string; player_id: string; status: string; expires_at: unknown; created_at: unknown; reason: string | null; source: string; refusal_reason: string | null }) => ({
  id: g.id, bonus_id: g.bonus_id, player_id: g.player_id, status: g.status, expires_at: iso(g.expires_at), created_at: iso(g.created_at) as string,
  reason: g.reason, source: g.source, refusal_reason: g.refusal_reason,
})

export const engineRoutes: RouteDef[] = [
  defineRoute({
    method: 'POST', path: '/gamification/missions/:id/join', operationId: 'joinMission', tags: ['gamification'],
    summary: 'Join an opt-in mission: from now on the player\'s events count for it',
    params: IdParams, body: Type.Object({ player_id: Uuid }),
    responses: { 200: data(Type.Object({ mission_id: Uuid, player_id: Uuid, joined_at: DateTime })) },
    handler: async (ctx, req) => {
      const v = visibilityOf(req.principal)
      const [m] = await ctx.sql<{ id: string; brand_id: string; status: string }[]>`
        select id, brand_id, status from gamification_missions where id = ${req.params.id} and ${visibleTo(ctx.sql, v)}`
      if (!m) throw notFound('mission')
      const p = await playerOf(ctx, v, req.body.player_id)
      if (p.brandId !== m.brand_id) throw badRequest('the player is not in the mission\'s brand', { errors: [{ in: 'body', field: 'player_id', message: 'not in the mission\'s brand' }] })
      if (m.status !== 'active') throw badRequest(`the mission is ${m.status}`, { reason: 'mission_not_active' })
      const [row] = await ctx.sql<{ joined_at: Date }[]>`
        insert into player_missions (player_id, mission_id, tenant_id, joined_at) values (${p.id}, ${m.id}, ${p.tenantId}, now())
        on conflict (player_id, mission_id) do update set joined_at = coalesce(player_missions.joined_at, now())
        returning joined_at`
      return { data: { mission_id: m.id, player_id: p.id, joined_at: iso(row?.joined_at) as string } }
    },
  }),
  defineRoute({
    method: 'POST', path: '/gamification/player/:playerId/points', operationId: 'adjustPlayerPoints', tags: ['gamification'],
    summary: 'Credit (amount > 0) or debit (amount < 0) a player\'s points by hand; a debit past the balance is 400',
    params: Type.Object({ playerId: Uuid }),
    body: Type.Object({
      currency_id: Uuid,
      amount: Type.Number({ minimum: -1e12, maximum: 1e12, not: { const: 0 } }),
      reason: Type.Optional(Type.String({ maxLength: 500 })),
    }),
    responses: { 201: data(LedgerEntry) },
    handler: async (ctx, req) => {
      const p = await playerOf(ctx, visibilityOf(req.principal), req.params.playerId, 'path')
      const [cur] = await ctx.sql<{ id: string }[]>`select id from gamification_currencies where id = ${req.body.currency_id} and brand_id = ${p.brandId}`
      if (!cur) throw badRequest('unknown currency', { errors: [{ in: 'body', field: 'currency_id', message: 'no such currency in the player\'s brand' }] })
      if (req.body.amount === 0) throw badRequest('amount must not be 0', { errors: [{ in: 'body', field: 'amount', message: 'must not be 0' }] })
      const entry = await ctx.sql.begin(async (tx) => {
        await lockPlayers(tx, [{ playerId: p.id, tenantId: p.tenantId }])
        return movePoints(tx, {
          playerId: p.id, tenantId: p.tenantId, brandId: p.brandId, currencyId: cur.id, amount: String(req.body.amount), source: 'manual', reason: req.body.reason ?? null,
        })
      })
      return { data: entry }
    },
  }),
  defineRoute({
    method: 'GET', path: '/gamification/player/:playerId/points', operationId: 'listPlayerPoints', tags: ['gamification'],
    summary: 'A player\'s point ledger, newest first',
    params: Type.Object({ playerId: Uuid }),
    query: Type.Object({ currency_id: Type.Optional(Uuid), limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }), offset: Type.Integer({ minimum: 0, default: 0 }) }),
    responses: { 200: data(Type.Array(LedgerEntry)) },
    handler: async (ctx, req) => {
      const p = await playerOf(ctx, visibilityOf(req.principal), req.params.playerId, 'path')
      const rows = await ctx.sql<Record<string, unknown>[]>`
        select * from point_ledger where player_id = ${p.id} ${req.query.currency_id ? ctx.sql`and currency_id = ${req.query.currency_id}` : ctx.sql``}
        order by id desc limit ${req.query.limit} offset ${req.query.offset}`
      return { data: rows.map(ledgerOut) }
    },
  }),
  defineRoute({
    method: 'POST', path: '/bonuses/:id/grant', operationId: 'grantBonus', tags: ['bonuses'],
    summary: 'Grant a bonus to a player (bonus.granted); an inactive bonus or a player who is not active is 400, and recorded',
    params: IdParams, body: Type.Object({ player_id: Uuid, reason: Type.Optional(Type.String({ maxLength: 500 })) }),
    responses: { 201: data(Grant) },
    handler: async (ctx, req) => {
      const v = visibilityOf(req.principal)
      const [b] = await ctx.sql<{ id: string; brand_id: string }[]>`select id, brand_id from bonuses where id = ${req.params.id} and ${visibleTo(ctx.sql, v)}`
      if (!b) throw notFound('bonus')
      const p = await playerOf(ctx, v, req.body.player_id)
      if (p.brandId !== b.brand_id) throw badRequest('the player is not in the bonus\'s brand', { errors: [{ in: 'body', field: 'player_id', message: 'not in the bonus\'s brand' }] })
      const g = await ctx.sql.begin((tx) => grantBonus(tx, { playerId: p.id, tenantId: p.tenantId, brandId: p.brandId, bonusId: b.id, reason: req.body.reason ?? null, source: 'manual' }))
      // Deleted after the lookup above (a DELETE racing the grant): nothing was recorded (docs/errors.md).
      if (g.refusal_reason === 'bonus_not_found') throw new AppError('NOT_FOUND', 'the bonus was deleted meanwhile', { reason: 'DELETED_MEANWHILE' })
      if (g.refusal_reason === 'bonus_inactive') throw badRequest('the bonus is not active', { reason: 'bonus_inactive', grant_id: g.id })
      if (g.refusal_reason === 'player_not_active') throw badRequest('the player is not active', { reason: 'player_not_active', grant_id: g.id })
      return { data: grantOut(g) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/players/:id/bonuses', operationId: 'listPlayerBonuses', tags: ['bonuses'],
    summary: 'A player\'s bonus grants, newest first (status=refused lists the recorded refusals)',
    params: IdParams,
    query: Type.Object({ status: Type.Union([Type.Literal('granted'), Type.Literal('refused'), Type.Literal('all')], { default: 'granted' }) }),
    responses: { 200: data(Type.Array(Grant)) },
    handler: async (ctx, req) => {
      const p = await playerOf(ctx, visibilityOf(req.principal), req.params.id, 'path')
      const rows = await ctx.sql<Parameters<typeof grantOut>[0][]>`
        select * from bonus_grants where player_id = ${p.id} ${req.query.status === 'all' ? ctx.sql`` : ctx.sql`and status = ${req.query.status}`}
        order by created_at desc, id desc limit 1000`
      return { data: rows.map(grantOut) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/tournaments/:id/leaderboard', operationId: 'getTournamentLeaderboard', tags: ['tournaments'],
    summary: 'Ranks by score (equal scores: who reached it first ranks higher); live while active, final once ended',
    params: IdParams,
    query: Type.Object({
      limit: Type.Integer({ minimum: 1, maximum: 100, default: 10 }), offset: Type.Integer({ minimum: 0, default: 0 }), player_id: Type.Optional(Uuid),
    }),
    responses: { 200: Type.Object({ data: Type.Array(LeaderboardRow), total: Type.Integer(), player: Nullable(Type.Object({ rank: Type.Integer(), score: Type.Number() })) }) },
    handler: async (ctx, req) => {
      const [t] = await ctx.sql<{ id: string; status: string }[]>`select id, status from tournaments where id = ${req.params.id} and ${visibleTo(ctx.sql, visibilityOf(req.principal))}`
      if (!t) throw notFound('tournament')
      const { limit, offset, player_id: playerId } = req.query
      const boards = ctx.gamification?.boards
      if (t.status === 'active' && boards) {
        const [rows, total, player] = await Promise.all([boards.top(t.id, offset, limit), boards.total(t.id), playerId ? boards.rankOf(t.id, playerId) : null])
        return { data: rows, total, player }
      }
      // Ended (final ranks), cancelled or draft: from PostgreSQL.
      const ranked = ctx.sql`
        select player_id, external_id, score::float8 as score,
               coalesce(final_rank, row_number() over (order by score desc, reached_at, player_id))::int as rank
        from tournament_participants where tournament_id = ${t.id}`
      const rows = await ctx.sql<{ rank: number; player_id: string; external_id: string; score: number }[]>`
        select * from (${ranked}) r order by rank limit ${limit} offset ${offset}`
      const [count] = await ctx.sql<{ n: number }[]>`select count(*)::int as n from tournament_participants where tournament_id = ${t.id}`
      const [me] = playerId ? await ctx.sql<{ rank: number; score: number }[]>`select rank, score from (${ranked}) r where player_id = ${playerId}` : []
      return {
        data: rows.map((r) => ({ rank: r.rank, player_id: r.player_id, external_id: r.external_id, score: Number(r.score) })),
        total: count?.n ?? 0,
        player: me ? { rank: me.rank, score: Number(me.score) } : null,
      }
    },
  }),
]

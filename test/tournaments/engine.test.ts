// Tournaments driven by ingested events (contract-engines §5): metrics and filters inside the window,
// ties (who reached the score first ranks higher), max_participants, the live leaderboard route (Redis
// sorted sets with REDIS_URL, the in-process board without), rollbacks, the end at ends_at with final
// ranks and prizes exactly once and tournament.ended, cancelled tournaments.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { at, engineHelpers } from '../gamification/engine-helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', GAMIFICATION_TICK_MS: '200' } })
const { create, send, outbox, playerId, sql, settle, state } = engineHelpers(h)

const bet = (player: string, amount: number, extra: Record<string, unknown> = {}, time?: string) => ({
  player_id: player, event_type: 'bet', ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR', game: 'starburst', provider: 'netent', ...extra },
})
const win = (player: string, amount: number, extra: Record<string, unknown> = {}) => ({ player_id: player, event_type: 'win', payload: { amount, currency: 'EUR', game: 'starburst', provider: 'netent', ...extra } })

async function board(tenantKey: string, id: string, query: Record<string, string | number> = {}) {
  const res = await h.request('GET', `/tournaments/${id}/leaderboard`, { key: tenantKey, query })
  if (res.status !== 200) throw new Error(`leaderboard ${res.status} ${res.text}`)
  return res.body
}
const ranks = (b: { data: { external_id: string; score: number }[] }) => b.data.map((r) => [r.external_id, r.score])

t.test('metrics and filters: games, providers, currency, min_bet, window; ties ranked by who reached the score first', async (t) => {
  const tenant = await h.createTenant()
  const now = Date.now()
  const active = (game_config: Record<string, unknown>) =>
    create(tenant, '/tournaments', { name: 'T', status: 'active', game_config, starts_at: at(now - 3600_000), ends_at: at(now + 3600_000) })
  const amount = await active({ metric: 'bet_amount', games: ['starburst'], currency: 'EUR', min_bet: 1 })
  const count = await active({ metric: 'bet_count', providers: ['netent'] })
  const wins = await active({ metric: 'win_amount' })
  const ggr = await active({ metric: 'ggr' })
  await send(tenant, [
    bet('a', 10, {}, at(now - 60_000)),
    bet('b', 4, {}, at(now - 50_000)),
    bet('b', 6, {}, at(now - 40_000)), // b reaches 10 after a: ranks below a
    bet('c', 50, { game: 'other' }),
    bet('c', 0.5),
    bet('c', 30, { currency: 'USD' }),
    bet('d', 99, {}, at(now - 7200_000)), // before starts_at
    win('a', 3),
    win('c', 100, { provider: 'pragmatic' }),
  ])
  const b = await board(tenant.key, amount.id)
  t.same(ranks(b), [['a', 10], ['b', 10]], 'only EUR starburst bets ≥ 1 inside the window; a reached 10 first')
  t.same(b.data.map((r: { rank: number }) => r.rank), [1, 2])
  t.equal(b.total, 2)
  t.same(ranks(await board(tenant.key, count.id)), [['c', 3], ['b', 2], ['a', 1]], 'bet_count of netent bets (c: other game, USD and 0.5 all count here)')
  t.same(ranks(await board(tenant.key, wins.id)), [['c', 100], ['a', 3]])
  const g = await board(tenant.key, ggr.id)
  t.same(Object.fromEntries(ranks(g)), { a: 7, b: 10, c: -19.5 }, 'ggr = bets − wins')
  const pb = await playerId(tenant, 'b')
  const me = await board(tenant.key, amount.id, { player_id: pb, limit: 1, offset: 1 })
  t.same(me.player, { rank: 2, score: 10 })
  t.same(ranks(me), [['b', 10]], 'offset and limit')
  t.equal((await h.request('GET', `/tournaments/${amount.id}/leaderboard`, { key: tenant.key, query: { limit: 101 } })).status, 400)
  const other = await h.createTenant()
  t.equal((await h.request('GET', `/tournaments/${amount.id}/leaderboard`, { key: other.key })).status, 404, 'another tenant: 404')
})

t.test('rollbacks take back a bet\'s score; max_participants admits the first players to score', async (t) => {
  const tenant = await h.createTenant()
  const tr = await create(tenant, '/tournaments', { name: 'Small', status: 'active', max_participants: 2, game_config: { metric: 'bet_amount' } })
  // c scores after a and b have (events of one request may be applied side by side by the stream's
  // loops, in commit order: docs/gamification.md), and is not admitted.
  await send(tenant, [bet('a', 5, { round_id: 'r1' }), bet('b', 7)])
  await send(tenant, [bet('c', 100)])
  await send(tenant, [bet('c', 100), bet('a', 1)])
  t.same(ranks(await board(tenant.key, tr.id)), [['b', 7], ['a', 6]], 'c came third: never admitted')
  await send(tenant, [{ player_id: 'a', event_type: 'bet_rollback', payload: { amount: 5, round_id: 'r1', currency: 'EUR' } }])
  t.same(ranks(await board(tenant.key, tr.id)), [['b', 7], ['a', 1]], 'the rolled back bet no longer scores')
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from tournament_participants where tournament_id = ${tr.id}`
  t.equal(row?.n, 2)

  // A cap set on a running tournament counts the participants it already has.
  const open = await create(tenant, '/tournaments', { name: 'Open', status: 'active', game_config: { metric: 'bet_count' } })
  await send(tenant, [bet('a', 1), bet('b', 1)])
  t.equal((await board(tenant.key, open.id)).total, 2)
  t.equal((await h.request('PATCH', `/tournaments/${open.id}`, { key: tenant.key, body: { max_participants: 3 } })).status, 200)
  await send(tenant, [bet('c', 1)])
  await send(tenant, [bet('d', 1)])
  t.same(ranks(await board(tenant.key, open.id)).map(([p]) => p).sort(), ['a', 'b', 'c'], 'one place was left: c took it, d was not admitted')
})

t.test('a win_rollback takes back exactly what its win added: win_amount and ggr scores, win missions; bet scores untouched', async (t) => {
  const tenant = await h.createTenant()
  const tournament = (metric: string) => create(tenant, '/tournaments', { name: metric, status: 'active', game_config: { metric } })
  const wins = await tournament('win_amount')
  const ggr = await tournament('ggr')
  const bets = await tournament('bet_amount')
  const winSum = await create(tenant, '/gamification/missions', { name: 'Win big', type: 'one_time', rules: { event_type: 'win', measure: 'sum', target: 1000 } })
  const winCount = await create(tenant, '/gamification/missions', { name: 'Win often', type: 'one_time', rules: { event_type: 'win', target: 10 } })
  const winRollback = (player: string, amount: number, round: string) =>
    ({ player_id: player, event_type: 'win_rollback', payload: { amount, currency: 'EUR', game: 'starburst', provider: 'netent', round_id: round } })
  // Amounts with no exact binary form: what is taken back is the win's exact decimal amount.
  await send(tenant, [
    bet('a', 5, { round_id: 'r1' }), win('a', 20.2, { round_id: 'r1' }),
    bet('a', 3, { round_id: 'r2' }), win('a', 10.1, { round_id: 'r2' }),
    bet('b', 1, { round_id: 'r3' }), win('b', 7, { round_id: 'r3' }),
  ])
  t.same(ranks(await board(tenant.key, wins.id)), [['a', 30.3], ['b', 7]])
  t.same(ranks(await board(tenant.key, ggr.id)), [['b', -6], ['a', -22.3]])
  const a = await playerId(tenant, 'a')
  t.same((await state(a, winSum.id))?.value, '30.3')
  t.same((await state(a, winCount.id))?.value, '2')

  await send(tenant, [winRollback('a', 20.2, 'r1')])
  t.same(ranks(await board(tenant.key, wins.id)), [['a', 10.1], ['b', 7]], 'win_amount: −20.2 exactly')
  t.same(ranks(await board(tenant.key, ggr.id)), [['a', -2.1], ['b', -6]], 'ggr: the win no longer counts against the bets (8 − 10.1)')
  t.same(ranks(await board(tenant.key, bets.id)), [['a', 8], ['b', 1]], 'a win_rollback takes nothing from bet scores')
  t.same((await state(a, winSum.id))?.value, '10.1', 'win mission (sum): −20.2 exactly')
  t.same((await state(a, winCount.id))?.value, '1', 'win mission (count): −1')
  const stored = async () => Object.fromEntries((await sql<{ tournament_id: string; external_id: string; score: string }[]>`
    select tournament_id, external_id, score::text from tournament_participants where tournament_id = any(${[wins.id, ggr.id]}::uuid[])`)
    .map((r) => [`${r.tournament_id === wins.id ? 'wins' : 'ggr'}:${r.external_id}`, Number(r.score)]))
  const after = { 'wins:a': 10.1, 'wins:b': 7, 'ggr:a': -2.1, 'ggr:b': -6 }
  t.same(await stored(), after, 'the stored scores, exact')

  // Taken back once: the same rollback again, a rollback of another player's round, one of an unknown round.
  await send(tenant, [winRollback('a', 20.2, 'r1'), winRollback('b', 10.1, 'r2'), winRollback('a', 50, 'nope')])
  t.same(await stored(), after, 'nothing more taken back')
  t.same((await state(a, winSum.id))?.value, '10.1')
  t.same((await state(await playerId(tenant, 'b'), winSum.id))?.value, '7')
})

t.test('a bet_rollback lowers a negative ggr score by the bet, as it lowers a positive one', async (t) => {
  const tenant = await h.createTenant()
  const ggr = await create(tenant, '/tournaments', { name: 'GGR', status: 'active', game_config: { metric: 'ggr' } })
  await send(tenant, [bet('a', 10, { round_id: 'r1' }), win('a', 30, { round_id: 'r1' })])
  t.same(ranks(await board(tenant.key, ggr.id)), [['a', -20]])
  await send(tenant, [{ player_id: 'a', event_type: 'bet_rollback', payload: { amount: 10, currency: 'EUR', round_id: 'r1' } }])
  t.same(ranks(await board(tenant.key, ggr.id)), [['a', -30]], 'ggr = 0 − 30: the rolled back bet no longer counts (GGR is not held at 0)')
})

t.test('a rollback of a round a filtered tournament scored takes it back, whatever the rollback carries', async (t) => {
  const tenant = await h.createTenant()
  const wins = await create(tenant, '/tournaments', { name: 'Starburst wins', status: 'active', game_config: { metric: 'win_amount', games: ['starburst'] } })
  await send(tenant, [win('a', 30, { round_id: 'r1' }), win('a', 5, { round_id: 'r2' })])
  t.same(ranks(await board(tenant.key, wins.id)), [['a', 35]])
  await send(tenant, [{ player_id: 'a', event_type: 'win_rollback', payload: { amount: 30, currency: 'EUR', round_id: 'r1' } }])
  t.same(ranks(await board(tenant.key, wins.id)), [['a', 5]], 'r1 taken back by a rollback that names no game')
})

t.test('at ends_at: ended, final ranks, prizes granted once, tournament.ended; later events change nothing', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const bonus = await create(tenant, '/bonuses', { name: 'Prize', type: 'custom', value: 10, value_type: 'fixed' })
  const tr = await create(tenant, '/tournaments', {
    name: 'Sprint', status: 'active', game_config: { metric: 'bet_amount' }, ends_at: at(Date.now() + 2500),
    prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: bonus.id, points: [{ currency_id: lp.id, amount: 100 }] }, { from_rank: 2, to_rank: 3, points: [{ currency_id: lp.id, amount: 10 }] }] },
  })
  await send(tenant, [bet('a', 30), bet('b', 20), bet('c', 10), bet('d', 5)])
  // Several processes' timers may race at ends_at: concurrent ticks end it once.
  for (let i = 0; i < 60; i++) {
    const [row] = await sql<{ status: string }[]>`select status from tournaments where id = ${tr.id}`
    if (row?.status === 'ended') break
    await new Promise((r) => setTimeout(r, 100))
  }
  await Promise.all([h.app.ctx.gamification!.tick(), h.app.ctx.gamification!.tick(), h.app.ctx.gamification!.tick()])
  const got = await h.request('GET', `/tournaments/${tr.id}`, { key: tenant.key })
  t.equal(got.body.data.status, 'ended')
  const ended = await outbox(tenant, 'tournament.ended')
  t.equal(ended.length, 1, 'tournament.ended once')
  const ids = Object.fromEntries(await Promise.all(['a', 'b', 'c', 'd'].map(async (p) => [p, await playerId(tenant, p)] as const)))
  t.same(ended[0]?.data, {
    tournament_id: tr.id, brand_id: tenant.brand.id,
    winners: [{ rank: 1, player_id: ids.a, score: 30 }, { rank: 2, player_id: ids.b, score: 20 }, { rank: 3, player_id: ids.c, score: 10 }, { rank: 4, player_id: ids.d, score: 5 }],
  })
  const ledger = await sql<{ player_id: string; amount: string }[]>`select player_id, amount from point_ledger where source = 'tournament' and source_id = ${tr.id} order by amount desc, player_id`
  t.same(ledger.map((l) => [l.player_id, l.amount]).sort(), [[ids.a, '100'], [ids.b, '10'], [ids.c, '10']].sort(), 'points prizes once, by rank')
  const grants = await sql<{ player_id: string }[]>`select player_id from bonus_grants where source = 'tournament' and source_id = ${tr.id}`
  t.same(grants.map((g) => g.player_id), [ids.a])
  await send(tenant, [bet('d', 1000)])
  const final = await board(tenant.key, tr.id)
  t.same(ranks(final), [['a', 30], ['b', 20], ['c', 10], ['d', 5]], 'final ranks; nothing scores after the end')
})

t.test('players tied on score and reach time keep their live ranks as final ranks at the end', async (t) => {
  const tenant = await h.createTenant()
  const tr = await create(tenant, '/tournaments', { name: 'Ties', status: 'active', game_config: { metric: 'bet_count' }, ends_at: at(Date.now() + 2500) })
  const same = at(Date.now() - 1000) // one event time for all: equal scores reached at the same instant
  await send(tenant, ['t1', 't2', 't3', 't4', 't5', 't6'].map((p) => bet(p, 1, {}, same)))
  const live = (await board(tenant.key, tr.id)).data.map((r: { rank: number; player_id: string }) => [r.rank, r.player_id])
  t.equal(live.length, 6)
  for (let i = 0; i < 60; i++) {
    const [row] = await sql<{ status: string }[]>`select status from tournaments where id = ${tr.id}`
    if (row?.status === 'ended') break
    await new Promise((r) => setTimeout(r, 100))
  }
  const final = await sql<{ final_rank: number; player_id: string }[]>`
    select final_rank, player_id from tournament_participants where tournament_id = ${tr.id} order by final_rank`
  t.same(final.map((r) => [r.final_rank, r.player_id]), live, 'the final ranks are the ranks the live board showed')
  const ended = (await board(tenant.key, tr.id)).data.map((r: { rank: number; player_id: string }) => [r.rank, r.player_id])
  t.same(ended, live, 'and the board shows them after the end')
})

t.test('cancelled: stops scoring and grants nothing', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const tr = await create(tenant, '/tournaments', {
    name: 'Off', status: 'active', game_config: { metric: 'bet_count' }, ends_at: at(Date.now() + 1500),
    prize_pool: { prizes: [{ from_rank: 1, to_rank: 10, points: [{ currency_id: lp.id, amount: 5 }] }] },
  })
  await send(tenant, [bet('a', 1)])
  t.equal((await h.request('PATCH', `/tournaments/${tr.id}`, { key: tenant.key, body: { status: 'cancelled' } })).status, 200)
  await send(tenant, [bet('a', 1), bet('b', 1)])
  await new Promise((r) => setTimeout(r, 2000))
  await h.app.ctx.gamification!.tick()
  await settle()
  t.same(ranks(await board(tenant.key, tr.id)), [['a', 1]], 'nothing scored after the cancel')
  t.equal((await outbox(tenant, 'tournament.ended')).length, 0)
  const [n] = await sql<{ n: number }[]>`select count(*)::int as n from point_ledger where source_id = ${tr.id}`
  t.equal(n?.n, 0, 'no prizes')
})

t.test('a tournament ended behind the engine\'s cache scores nothing more', async (t) => {
  const tenant = await h.createTenant()
  const tr = await create(tenant, '/tournaments', { name: 'Cached', status: 'active', game_config: { metric: 'bet_count' }, ends_at: at(Date.now() + 3600_000) })
  await send(tenant, [bet('a', 1)])
  await settle()
  // Ended in the database while this process still holds the definitions as active (no bus message: as a
  // process whose cache has not caught up yet sees it).
  await sql`update tournaments set status = 'ended' where id = ${tr.id}`
  await send(tenant, [bet('a', 1), bet('b', 1)])
  await settle()
  const rows = await sql<{ external_id: string; score: string }[]>`select external_id, score::text from tournament_participants where tournament_id = ${tr.id} order by external_id`
  t.same(rows.map((r) => [r.external_id, Number(r.score)]), [['a', 1]], 'the scores it ended with')
})

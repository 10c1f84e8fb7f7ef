// Adversarial checks of tournaments (contract-engines §1 and §5, docs/gamification.md) that engine.test.ts
// and routes.test.ts do not make: exact window bounds, draft tournaments, non-bet events, duplicates,
// brand and tenant isolation, ties reached through a late (out-of-order) event, partial rollbacks
// (count −1, sum −amount), rollbacks of what scored nothing, max_participants under concurrent newcomers,
// the leaderboard's shapes, limits and errors (live and final), prizes only to active players with the
// refusals recorded, the top-10 winners of tournament.ended, prizes whose bonus or currency went away,
// status moves around the end, validation on create.
//
// Ends are driven by an injected clock (the engine's timer reads ctx.clock) and explicit ticks: no sleeping
// until ends_at. Tournaments that must stay active have ends_at ≥ 3 h ahead (or none), beyond the clock's
// jump of 2 h.
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { waitFor } from '../helpers/wait.ts'
import { at, eid, engineHelpers } from '../gamification/engine-helpers.ts'

let clockOffsetMs = 0
const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' }, clock: () => new Date(Date.now() + clockOffsetMs) })
const { create, send, settle, outbox, playerId, sql } = engineHelpers(h)

const HOUR = 3600_000
const JUMP = 2 * HOUR
const bet = (player: string, amount: number, extra: Record<string, unknown> = {}, time?: string) => ({
  player_id: player, event_type: 'bet', ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR', game: 'starburst', provider: 'netent', ...extra },
})
const win = (player: string, amount: number, extra: Record<string, unknown> = {}) =>
  ({ player_id: player, event_type: 'win', payload: { amount, currency: 'EUR', game: 'starburst', provider: 'netent', ...extra } })
const rollback = (type: 'bet_rollback' | 'win_rollback', player: string, amount: number, round: string, time?: string) =>
  ({ player_id: player, event_type: type, ...(time ? { timestamp: time } : {}), payload: { amount, currency: 'EUR', round_id: round } })

async function sendTo(tenant: TestTenant, brand: string, events: Record<string, unknown>[], key = tenant.key) {
  const res = await h.request('POST', '/events', { key, headers: { 'x-brand': brand }, body: { events: events.map((e) => ({ event_id: eid(), ...e })) } })
  if (res.status !== 200) throw new Error(`events: ${res.status} ${res.text}`)
  await settle()
  return res.body
}
type Row = { rank: number; player_id: string; external_id: string; score: number }
async function board(key: string, id: string, query: Record<string, string | number> = {}) {
  const res = await h.request('GET', `/tournaments/${id}/leaderboard`, { key, query })
  if (res.status !== 200) throw new Error(`leaderboard ${res.status} ${res.text}`)
  return res.body as { data: Row[]; total: number; player: { rank: number; score: number } | null }
}
const ranks = (b: { data: Row[] }) => b.data.map((r) => [r.external_id, r.score])
const status = async (id: string) => (await sql<{ status: string }[]>`select status from tournaments where id = ${id}`)[0]?.status

/** Moves the engine's clock past the tournaments' ends_at (2 h ahead), ticks, and waits until they ended. */
async function endByClock(ids: string[]) {
  await settle()
  clockOffsetMs = JUMP
  try {
    await h.app.ctx.gamification!.tick()
    await waitFor('tournaments ended', async () => {
      const rows = await sql<{ status: string }[]>`select status from tournaments where id = any(${ids}::uuid[])`
      return rows.length === ids.length && rows.every((r) => r.status === 'ended')
    }, 5000)
  } finally {
    clockOffsetMs = 0
  }
}
/** Ticks with the clock 2 h ahead (the background timer may tick meanwhile too), then back to now. */
async function tickAhead(times = 1) {
  await settle()
  clockOffsetMs = JUMP
  try {
    for (let i = 0; i < times; i++) await h.app.ctx.gamification!.tick()
  } finally {
    clockOffsetMs = 0
  }
}
const ids = async (tenant: TestTenant, externals: string[]) => Object.fromEntries(await Promise.all(externals.map(async (p) => [p, await playerId(tenant, p)] as const)))
const pad = (i: number) => `p${String(i).padStart(2, '0')}`

t.test('window: events exactly at starts_at and ends_at score, 1 ms outside do not; deposits, failed deposits and wins never score bet_amount; a draft scores nothing', async (t) => {
  const tenant = await h.createTenant()
  const start = Date.now() - HOUR
  const end = Date.now() + 3 * HOUR // an event stamped at ends_at is accepted (up to a day ahead)
  const cfg = { name: 'Window', game_config: { metric: 'bet_amount' }, starts_at: at(start), ends_at: at(end) }
  const tr = await create(tenant, '/tournaments', { ...cfg, status: 'active' })
  const draft = await create(tenant, '/tournaments', { ...cfg, status: 'draft' })
  await send(tenant, [
    bet('a', 1, {}, at(start - 1)), bet('a', 2, {}, at(start)), bet('a', 4, {}, at(end)), bet('a', 8, {}, at(end + 1)),
    { player_id: 'a', event_type: 'deposit', payload: { amount: 100, currency: 'EUR' } },
    { player_id: 'b', event_type: 'deposit', payload: { amount: 100, currency: 'EUR' } },
    { player_id: 'b', event_type: 'deposit_failed', payload: { amount: 500, currency: 'EUR' } },
    win('c', 50),
  ])
  const b = await board(tenant.key, tr.id)
  t.same(ranks(b), [['a', 6]], '§5: event_time in [starts_at, ends_at], both bounds included; only bets score bet_amount')
  t.equal(b.total, 1, 'b (deposits only) and c (a win only) are no participants')
  t.same(await board(tenant.key, draft.id), { data: [], total: 0, player: null }, 'only an active tournament scores')
})

t.test('duplicates and isolation: a re-sent event_id scores once; another brand\'s and another tenant\'s players with the same external id score elsewhere only', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const mine = await create(tenant, '/tournaments', { name: 'Main', status: 'active', game_config: { metric: 'bet_count' } })
  const theirs = await create(tenant, '/tournaments', { name: 'Second', status: 'active', game_config: { metric: 'bet_count' }, brand: second.slug })
  const dup = eid()
  const res = await send(tenant, [{ ...bet('a', 5, { round_id: 'r1' }), event_id: dup }, { ...bet('a', 5, { round_id: 'r1' }), event_id: dup }])
  t.equal(res.deduped, 1)
  await send(tenant, [{ ...bet('a', 5, { round_id: 'r1' }), event_id: dup }, bet('a', 5, { round_id: 'r2' })])
  t.same(ranks(await board(tenant.key, mine.id)), [['a', 2]], 'the duplicate scored once')
  // A duplicated rollback takes back once.
  const rb = eid()
  await send(tenant, [{ ...rollback('bet_rollback', 'a', 5, 'r1'), event_id: rb }])
  await send(tenant, [{ ...rollback('bet_rollback', 'a', 5, 'r1'), event_id: rb }])
  t.same(ranks(await board(tenant.key, mine.id)), [['a', 1]])

  await sendTo(tenant, second.slug, [bet('a', 5), bet('a', 5), bet('z', 1)])
  const other = await h.createTenant()
  await send(other, [bet('a', 5), bet('a', 5), bet('a', 5)])
  t.same(ranks(await board(tenant.key, mine.id)), [['a', 1]], 'the second brand\'s and the other tenant\'s bets did not score here')
  const sb = await board(tenant.key, theirs.id)
  t.same(ranks(sb), [['a', 2], ['z', 1]], 'the second brand\'s tournament scores its own brand\'s players')
  t.equal(sb.data[0]?.player_id, await playerId(tenant, 'a', second.id), 'its a is the second brand\'s player')
  t.equal((await h.request('GET', `/tournaments/${mine.id}/leaderboard`, { key: other.key })).status, 404)
})

t.test('ties: a late (out-of-order) event does not make a score look reached earlier than it was',
  async (t) => {
    const tenant = await h.createTenant()
    const tr = await create(tenant, '/tournaments', { name: 'Ties', status: 'active', game_config: { metric: 'bet_amount' }, starts_at: at(Date.now() - HOUR) })
    const now = Date.now()
    await send(tenant, [bet('a', 5, {}, at(now - 10_000))])
    await send(tenant, [bet('b', 10, {}, at(now - 20_000))])
    // a's second bet was placed before both (it arrives late): a's score is 10 from now−10 s on, b's from now−20 s.
    await send(tenant, [bet('a', 5, {}, at(now - 30_000))])
    t.same(ranks(await board(tenant.key, tr.id)), [['b', 10], ['a', 10]],
      '§5 "Equal scores: who reached it first ranks higher": b reached 10 first (by event time and by arrival alike)')
  })

t.test('partial rollback of a sum metric takes back the rollback\'s amount (§1: sum −amount)',
  async (t) => {
    const tenant = await h.createTenant()
    const tournament = (metric: string) => create(tenant, '/tournaments', { name: metric, status: 'active', game_config: { metric } })
    const bets = await tournament('bet_amount')
    const ggr = await tournament('ggr')
    const wins = await tournament('win_amount')
    await send(tenant, [bet('a', 60, { round_id: 'r1' }), win('a', 30, { round_id: 'r2' })])
    t.same(ranks(await board(tenant.key, bets.id)), [['a', 60]])
    // §1: "a bet_rollback / win_rollback takes back what its bet / win (same round_id) added ... (count −1, sum −amount, never below 0)".
    await send(tenant, [rollback('bet_rollback', 'a', 10, 'r1'), rollback('win_rollback', 'a', 10, 'r2')])
    t.same(ranks(await board(tenant.key, bets.id)), [['a', 50]], 'bet_amount: 60 − 10')
    t.same(ranks(await board(tenant.key, wins.id)), [['a', 20]], 'win_amount: 30 − 10')
    t.same(ranks(await board(tenant.key, ggr.id)), [['a', 30]], 'ggr: (60 − 10) − (30 − 10)')
  })

t.test('a round with two bets: one bet_rollback takes back one of them (§1: count −1)',
  async (t) => {
    const tenant = await h.createTenant()
    const tr = await create(tenant, '/tournaments', { name: 'Count', status: 'active', game_config: { metric: 'bet_count' } })
    await send(tenant, [bet('a', 10, { round_id: 'split' }), bet('a', 20, { round_id: 'split' }), bet('a', 1, { round_id: 'other' })])
    t.same(ranks(await board(tenant.key, tr.id)), [['a', 3]])
    await send(tenant, [rollback('bet_rollback', 'a', 10, 'split')])
    t.same(ranks(await board(tenant.key, tr.id)), [['a', 2]], 'count −1')
    await send(tenant, [rollback('bet_rollback', 'a', 20, 'split')])
    t.same(ranks(await board(tenant.key, tr.id)), [['a', 1]], 'the second rollback takes the second bet')
  })

t.test('rollbacks of bets that scored nothing take nothing, make no participant and take no capped place; filtered bets take no place', async (t) => {
  const tenant = await h.createTenant()
  const start = Date.now() - HOUR
  const tr = await create(tenant, '/tournaments', {
    name: 'Capped', status: 'active', max_participants: 2, starts_at: at(start), game_config: { metric: 'bet_amount', games: ['starburst'] },
  })
  await send(tenant, [
    bet('x', 50, { game: 'other', round_id: 'rx' }), // filtered out
    rollback('bet_rollback', 'y', 5, 'ry'), // a rollback of nothing
    bet('z', 5, { round_id: 'rz' }, at(start - 1)), // before the window
  ])
  t.equal((await board(tenant.key, tr.id)).total, 0, 'nobody scored yet')
  await send(tenant, [rollback('bet_rollback', 'x', 50, 'rx'), rollback('bet_rollback', 'z', 5, 'rz')])
  await send(tenant, [bet('a', 10, { round_id: 'ra' })])
  await send(tenant, [bet('b', 20)])
  t.same(ranks(await board(tenant.key, tr.id)), [['b', 20], ['a', 10]], 'a and b are the first to score: both places are theirs')
  // Rollbacks of rounds that scored nothing here, by a participant: nothing taken back.
  await send(tenant, [rollback('bet_rollback', 'a', 50, 'rx'), rollback('bet_rollback', 'a', 5, 'nope')])
  await send(tenant, [bet('c', 100), bet('x', 100), bet('z', 100)])
  t.same(ranks(await board(tenant.key, tr.id)), [['b', 20], ['a', 10]], 'the 3rd, 4th and 5th players to score are not admitted; a lost nothing')
  const [n] = await sql<{ n: number }[]>`select count(*)::int as n from tournament_participants where tournament_id = ${tr.id}`
  t.equal(n?.n, 2)
})

t.test('max_participants with concurrent newcomers: exactly N admitted, the N+1-th and later never score, the admitted keep scoring', async (t) => {
  const tenant = await h.createTenant()
  const tr = await create(tenant, '/tournaments', { name: 'Rush', status: 'active', max_participants: 3, game_config: { metric: 'bet_count' } })
  const players = Array.from({ length: 12 }, (_, i) => `rush${i}`)
  const results = await Promise.all(players.map((p) => h.request('POST', '/events', { key: tenant.key, body: { events: [{ event_id: eid(), ...bet(p, 1) }] } })))
  t.same(results.map((r) => r.status), players.map(() => 200))
  await settle()
  const first = await board(tenant.key, tr.id)
  t.equal(first.total, 3, 'three admitted')
  t.same(first.data.map((r) => r.score), [1, 1, 1])
  const admitted = first.data.map((r) => r.external_id).sort()
  await send(tenant, players.map((p) => bet(p, 1)))
  const second = await board(tenant.key, tr.id)
  t.equal(second.total, 3, 'nobody else got in')
  t.same(second.data.map((r) => r.external_id).sort(), admitted, 'the same three')
  t.same(second.data.map((r) => r.score), [2, 2, 2], 'and they keep scoring')
  const [n] = await sql<{ n: number }[]>`select count(*)::int as n from tournament_participants where tournament_id = ${tr.id}`
  t.equal(n?.n, 3, 'three participant rows')
})

t.test('leaderboard: default limit 10, offset past the end, one player\'s rank, bad queries 400 in the error shape, keys and brands; the same on the final board', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const tr = await create(tenant, '/tournaments', { name: 'Board', status: 'active', game_config: { metric: 'bet_amount' }, ends_at: at(Date.now() + 30 * 60_000) })
  const draft = await create(tenant, '/tournaments', { name: 'Draft', game_config: { metric: 'bet_amount' } })
  const names = Array.from({ length: 12 }, (_, i) => pad(i + 1))
  await send(tenant, [...names.map((p, i) => bet(p, 10 * (12 - i))), { player_id: 'watcher', event_type: 'login' }])
  const pid = await ids(tenant, [...names, 'watcher'])
  const check = async (label: string) => {
    const top = await board(tenant.key, tr.id)
    t.same(Object.keys(top).sort(), ['data', 'player', 'total'], `${label}: { data, total, player }`)
    t.equal(top.data.length, 10, `${label}: limit defaults to 10`)
    t.same(top.data.map((r) => r.rank), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    t.same(top.data[0], { rank: 1, player_id: pid.p01, external_id: 'p01', score: 120 }, `${label}: a row is { rank, player_id, external_id, score }`)
    t.equal(top.total, 12)
    t.equal(top.player, null, `${label}: no player_id, player null`)
    const rest = await board(tenant.key, tr.id, { offset: 10 })
    t.same(rest.data.map((r) => [r.rank, r.external_id, r.score]), [[11, 'p11', 20], [12, 'p12', 10]], `${label}: offset 10`)
    t.same(await board(tenant.key, tr.id, { offset: 12 }), { data: [], total: 12, player: null }, `${label}: offset past the end`)
    const me = await board(tenant.key, tr.id, { player_id: pid.p12 as string, limit: 1 })
    t.same([me.player, me.data.map((r) => r.external_id)], [{ rank: 12, score: 10 }, ['p01']], `${label}: player_id outside the page`)
    t.equal((await board(tenant.key, tr.id, { player_id: pid.watcher as string })).player, null, `${label}: not a participant: null`)
    t.equal((await board(tenant.key, tr.id, { player_id: '00000000-0000-4000-8000-000000000000' })).player, null)
    t.equal((await board(tenant.key, tr.id, { limit: 100 })).data.length, 12, `${label}: limit 100`)
    // §5: limit 1..100; offsets are not negative.
    for (const query of [{ limit: 0 }, { limit: 'ten' }, { offset: -1 }] as Record<string, string | number>[]) {
      const res = await h.request('GET', `/tournaments/${tr.id}/leaderboard`, { key: tenant.key, query })
      t.equal(res.status, 400, `${label}: ${JSON.stringify(query)} → 400`)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.equal(typeof res.body.error, 'string')
    }
  }
  await check('live')
  t.same(await board(tenant.key, draft.id), { data: [], total: 0, player: null }, 'a draft: an empty board')
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await board(reader.key, tr.id)).total, 12, 'a read key reads the board')
  const ingest = await tenant.createKey({ scopes: ['events:write'] })
  t.equal((await h.request('GET', `/tournaments/${tr.id}/leaderboard`, { key: ingest.key })).status, 403)
  const pinnedMain = await tenant.createKey({ brand: 'main' })
  t.equal((await board(pinnedMain.key, tr.id)).total, 12)
  const pinnedSecond = await tenant.createKey({ brand: second.slug })
  const hidden = await h.request('GET', `/tournaments/${tr.id}/leaderboard`, { key: pinnedSecond.key })
  t.equal(hidden.status, 404, 'a key pinned to another brand: 404')
  t.equal(hidden.body.code, 'NOT_FOUND')
  t.equal((await h.request('GET', '/tournaments/00000000-0000-4000-8000-000000000000/leaderboard', { key: tenant.key })).status, 404)
  t.equal((await h.request('GET', '/tournaments/not-a-uuid/leaderboard', { key: tenant.key })).status, 404)
  t.equal((await h.request('DELETE', `/tournaments/${draft.id}`, { key: tenant.key })).status, 200)
  t.equal((await h.request('GET', `/tournaments/${draft.id}/leaderboard`, { key: tenant.key })).status, 404, 'a deleted tournament: 404')

  await endByClock([tr.id])
  await check('final')
})

t.test('the end: tournament.ended names the top 10 ranks; prizes once and only to active players; refusals recorded; an inactive prize bonus refused', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gift = await create(tenant, '/bonuses', { name: 'Gift', type: 'custom', value: 25, value_type: 'fixed', expires_in_hours: 24 })
  const stale = await create(tenant, '/bonuses', { name: 'Stale', type: 'custom', value: 5, value_type: 'fixed' })
  const tr = await create(tenant, '/tournaments', {
    name: 'Final', status: 'active', game_config: { metric: 'bet_amount' }, ends_at: at(Date.now() + 30 * 60_000),
    prize_pool: { prizes: [
      { from_rank: 1, to_rank: 2, bonus_id: gift.id, points: [{ currency_id: lp.id, amount: 100 }] },
      { from_rank: 3, to_rank: 3, bonus_id: stale.id, points: [{ currency_id: lp.id, amount: 10 }] },
      { from_rank: 4, to_rank: 12, points: [{ currency_id: lp.id, amount: 1 }] },
    ] },
  })
  const names = Array.from({ length: 12 }, (_, i) => pad(i + 1))
  await send(tenant, names.map((p, i) => bet(p, 10 * (12 - i) + 0.5)))
  const pid = await ids(tenant, names)
  // Not active at the end: p01 (self-excluded), p04 (suspended by PATCH), p05 (closed).
  await send(tenant, [
    { player_id: 'p01', event_type: 'status_change', payload: { status: 'self_excluded' } },
    { player_id: 'p05', event_type: 'status_change', payload: { status: 'closed' } },
  ])
  t.equal((await h.request('PATCH', `/players/${pid.p04}`, { key: tenant.key, body: { status: 'suspended' } })).status, 200)
  t.equal((await h.request('PATCH', `/bonuses/${stale.id}`, { key: tenant.key, body: { active: false } })).status, 200)

  await endByClock([tr.id])
  const ended = await outbox(tenant, 'tournament.ended')
  t.equal(ended.length, 1, 'tournament.ended once')
  t.same(ended[0]?.data, {
    tournament_id: tr.id, brand_id: tenant.brand.id,
    winners: names.slice(0, 10).map((p, i) => ({ rank: i + 1, player_id: pid[p], score: 10 * (12 - i) + 0.5 })),
  }, '§2: winners are the top 10 ranks (of 12), with their scores')
  const paid = async () => (await sql<{ player_id: string; amount: string }[]>`
    select player_id, amount::text from point_ledger where source = 'tournament' and source_id = ${tr.id}`).map((r) => [r.player_id, Number(r.amount)]).sort()
  const expected = [[pid.p02, 100], [pid.p03, 10], ...['p06', 'p07', 'p08', 'p09', 'p10', 'p11', 'p12'].map((p) => [pid[p], 1])].sort()
  t.same(await paid(), expected, 'points prizes by rank, none to p01, p04, p05 (not active)')
  const grants = async () => (await sql<{ player_id: string; bonus_id: string; status: string; refusal_reason: string | null; source: string }[]>`
    select player_id, bonus_id, status, refusal_reason, source from bonus_grants where source_id = ${tr.id} order by player_id`)
    .map((g) => [g.player_id, g.bonus_id, g.status, g.refusal_reason, g.source]).sort()
  const expectedGrants = [
    [pid.p01, gift.id, 'refused', 'player_not_active', 'tournament'],
    [pid.p02, gift.id, 'granted', null, 'tournament'],
    [pid.p03, stale.id, 'refused', 'bonus_inactive', 'tournament'],
  ].sort()
  t.same(await grants(), expectedGrants, 'a bonus prize to a player who is not active is refused and recorded; an inactive bonus too')
  const announced = await outbox(tenant, 'bonus.granted')
  t.same(announced.map((e) => [e.data.player_id, e.data.bonus_id]), [[pid.p02, gift.id]], 'bonus.granted only for the grant')
  t.match(announced[0]?.data, { external_id: 'p02', type: 'custom', value: 25, value_type: 'fixed', brand_id: tenant.brand.id })
  const refused = await h.request('GET', `/players/${pid.p01}/bonuses`, { key: tenant.key, query: { status: 'refused' } })
  t.match(refused.body.data, [{ status: 'refused', refusal_reason: 'player_not_active', source: 'tournament', bonus_id: gift.id }])
  t.same((await h.request('GET', `/players/${pid.p01}/bonuses`, { key: tenant.key })).body.data, [], 'nothing granted to p01')

  // Once: more ticks, and p01 active again, change nothing.
  await send(tenant, [{ player_id: 'p01', event_type: 'status_change', payload: { status: 'active' } }, bet('p12', 1000)])
  await tickAhead(3)
  t.same(await paid(), expected, 'no prize twice')
  t.same(await grants(), expectedGrants)
  t.equal((await outbox(tenant, 'tournament.ended')).length, 1)
  t.equal((await outbox(tenant, 'bonus.granted')).length, 1)
  const final = await board(tenant.key, tr.id, { offset: 11 })
  t.same(ranks(final), [['p12', 10.5]], 'a bet after the end does not score')
})

t.test('a prize whose bonus and currency were deleted before the end: the tournament still ends, the rest of the prize is paid', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const gone = await create(tenant, '/gamification/currencies', { name: 'Gone', symbol: 'G', type: 'virtual' })
  const bonus = await create(tenant, '/bonuses', { name: 'Gone too', type: 'custom', value: 1, value_type: 'fixed' })
  const tr = await create(tenant, '/tournaments', {
    name: 'Orphans', status: 'active', game_config: { metric: 'bet_count' }, ends_at: at(Date.now() + 30 * 60_000),
    prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: bonus.id, points: [{ currency_id: gone.id, amount: 9 }, { currency_id: lp.id, amount: 7 }] }] },
  })
  await send(tenant, [bet('a', 1)])
  t.equal((await h.request('DELETE', `/bonuses/${bonus.id}`, { key: tenant.key })).status, 200)
  t.equal((await h.request('DELETE', `/gamification/currencies/${gone.id}`, { key: tenant.key })).status, 200)
  await endByClock([tr.id])
  t.equal((await h.request('GET', `/tournaments/${tr.id}`, { key: tenant.key })).body.data.status, 'ended')
  t.equal((await outbox(tenant, 'tournament.ended')).length, 1)
  const a = await playerId(tenant, 'a')
  const ledger = await sql<{ currency_id: string; amount: string }[]>`select currency_id, amount::text from point_ledger where player_id = ${a}`
  t.same(ledger.map((l) => [l.currency_id, Number(l.amount)]), [[lp.id, 7]], 'the remaining currency paid')
  t.same(await outbox(tenant, 'bonus.granted'), [])
})

t.test('status: cancelled stays cancelled past ends_at, a draft never ends; an empty active tournament ends with no winners; draft → active scores from then on', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const prize = { prizes: [{ from_rank: 1, to_rank: 10, points: [{ currency_id: lp.id, amount: 5 }] }] }
  const soon = at(Date.now() + 30 * 60_000)
  const cancelled = await create(tenant, '/tournaments', { name: 'C', status: 'active', game_config: { metric: 'bet_count' }, prize_pool: prize, ends_at: soon })
  const draft = await create(tenant, '/tournaments', { name: 'D', status: 'draft', game_config: { metric: 'bet_count' }, prize_pool: prize, ends_at: soon })
  const empty = await create(tenant, '/tournaments', { name: 'E', status: 'active', game_config: { metric: 'bet_count', games: ['nobody-plays-this'] }, prize_pool: prize, ends_at: soon })
  const later = await create(tenant, '/tournaments', { name: 'L', status: 'draft', game_config: { metric: 'bet_count' } })
  await send(tenant, [bet('a', 1)])
  t.equal((await h.request('PATCH', `/tournaments/${cancelled.id}`, { key: tenant.key, body: { status: 'cancelled' } })).status, 200)
  const activated = await h.request('PATCH', `/tournaments/${later.id}`, { key: tenant.key, body: { status: 'active' } })
  t.equal(activated.status, 200)
  await send(tenant, [bet('b', 1)])
  t.same(ranks(await board(tenant.key, later.id)), [['b', 1]], 'a\'s bet came while it was a draft; b\'s after it went active')

  await endByClock([empty.id])
  t.equal(await status(cancelled.id), 'cancelled', 'cancelled is not ended at ends_at')
  t.equal(await status(draft.id), 'draft', 'a draft is not ended')
  const endedEvents = await outbox(tenant, 'tournament.ended')
  t.same(endedEvents.map((e) => e.data), [{ tournament_id: empty.id, winners: [], brand_id: tenant.brand.id }], 'only the active one ended (no participants: no winners)')
  t.same(await sql`select 1 from point_ledger where source = 'tournament' and tenant_id = ${tenant.id}`, [], 'cancelled grants nothing')
  t.same(ranks(await board(tenant.key, cancelled.id)), [['a', 1]], 'a cancelled board stays readable')
})

t.test('an ended tournament set active again does not grant its prizes or fire tournament.ended a second time',
  async (t) => {
    const tenant = await h.createTenant()
    const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
    const tr = await create(tenant, '/tournaments', {
      name: 'Once', status: 'active', game_config: { metric: 'bet_count' }, ends_at: at(Date.now() + 30 * 60_000),
      prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, points: [{ currency_id: lp.id, amount: 5 }] }] },
    })
    await send(tenant, [bet('a', 1)])
    await endByClock([tr.id])
    const count = async () => (await sql<{ n: number }[]>`select count(*)::int as n from point_ledger where source_id = ${tr.id}`)[0]?.n
    t.equal(await count(), 1)
    // §5: "at ends_at it becomes ended, its ranks are final, prizes are granted once". docs/gamification.md:
    // ended is final, a move out of it is 400 with details { from, to, allowed: [] }.
    const again = await h.request('PATCH', `/tournaments/${tr.id}`, { key: tenant.key, body: { status: 'active' } })
    t.equal(again.status, 400, 'PATCH back to active is refused')
    t.match(again.body, { code: 'BAD_REQUEST', details: { from: 'ended', to: 'active', allowed: [] } })
    t.equal((await h.request('PATCH', `/tournaments/${tr.id}`, { key: tenant.key, body: { status: 'ended', name: 'Once (final)' } })).status, 200, 'other fields of an ended tournament may change')
    await tickAhead(2)
    t.equal(await count(), 1, 'prizes granted once')
    t.equal((await outbox(tenant, 'tournament.ended')).length, 1, 'tournament.ended once')
  })

t.test('a running tournament changed by PATCH: a later ends_at, a new metric and a lower cap apply to the next events; deleted, it scores no more and the others go on', async (t) => {
  const tenant = await h.createTenant()
  const end = Date.now() + 3 * HOUR
  const tr = await create(tenant, '/tournaments', { name: 'Moving', status: 'active', max_participants: 3, game_config: { metric: 'bet_count', min_bet: 1 }, ends_at: at(end) })
  const other = await create(tenant, '/tournaments', { name: 'Other', status: 'active', game_config: { metric: 'bet_count' } })
  await send(tenant, [bet('a', 1), bet('a', 0.999999), bet('b', 1), bet('a', 5, {}, at(end + 1000))])
  t.same(ranks(await board(tenant.key, tr.id)).sort(), [['a', 1], ['b', 1]], 'a bet of exactly min_bet counts, one below does not; one past ends_at neither')
  let res = await h.request('PATCH', `/tournaments/${tr.id}`, { key: tenant.key, body: { ends_at: at(end + HOUR), max_participants: 2, game_config: { metric: 'bet_amount' } } })
  t.equal(res.status, 200, res.text)
  await send(tenant, [bet('a', 5, {}, at(end + 1000)), bet('b', 0.5), bet('c', 100)])
  t.same(ranks(await board(tenant.key, tr.id)), [['a', 6], ['b', 1.5]], 'the new window and metric apply at once (min_bet gone); the cap of 2 is full: c is not admitted')
  res = await h.request('DELETE', `/tournaments/${tr.id}`, { key: tenant.key })
  t.equal(res.status, 200)
  await send(tenant, [bet('a', 1), bet('d', 1)])
  t.equal((await h.request('GET', `/tournaments/${tr.id}/leaderboard`, { key: tenant.key })).status, 404)
  t.same(ranks(await board(tenant.key, other.id)).sort(), [['a', 5], ['b', 2], ['c', 1], ['d', 1]], 'the other tournament (no window, no min_bet) kept scoring every bet')
})

t.test('create validation: bad game_config, prize_pool and fields are 400 naming the field on POST too; bodies that are no object 400, never 500', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const elsewhere = await create(tenant, '/gamification/currencies', { name: 'LP2', symbol: 'L', type: 'virtual', brand: second.slug })
  const expect400 = async (body: unknown, field: string) => {
    const res = await h.request('POST', '/tournaments', { key: tenant.key, body })
    t.equal(res.status, 400, `${JSON.stringify(body)} → 400 (${res.text.slice(0, 200)})`)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.equal(typeof res.body.error, 'string')
    const fields = ((res.body.details?.errors ?? []) as { field: string }[]).map((e) => e.field)
    t.ok(fields.includes(field), `names ${field} (got ${fields.join(', ')})`)
  }
  await expect400({ name: 'T', game_config: { metric: 'bet_amount', min_bet: 'x' } }, 'game_config.min_bet')
  await expect400({ name: 'T', game_config: { metric: 'turnover' } }, 'game_config.metric')
  await expect400({ name: 'T', game_config: null }, 'game_config')
  await expect400({ name: 'T', prize_pool: null }, 'prize_pool')
  await expect400({ name: 'T', prize_pool: { prizes: [{ from_rank: 1.5, to_rank: 2 }] } }, 'prize_pool.prizes.0.from_rank')
  await expect400({ name: 'T', prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, points: [{ currency_id: elsewhere.id, amount: 5 }] }] } }, 'prize_pool.prizes.0.points.0.currency_id')
  await expect400({ name: '' }, 'name')
  await expect400({ name: 'x'.repeat(201) }, 'name')
  await expect400({ name: 'T', status: null }, 'status')
  await expect400({ name: 'T', max_participants: 2147483648 }, 'max_participants')
  await expect400({ name: 'T', max_participants: '10' }, 'max_participants')
  for (const rawBody of ['{"name": "T",', '[]', 'null', '"T"']) {
    const res = await h.request('POST', '/tournaments', { key: tenant.key, rawBody, headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400, `raw ${rawBody} → 400`)
    t.equal(res.body.code, 'BAD_REQUEST')
  }
  t.same((await h.request('GET', '/tournaments', { key: tenant.key })).body.data, [], 'nothing created')
  const ok = await create(tenant, '/tournaments', { name: 'T' })
  for (const [body, field] of [[{ game_config: null }, 'game_config'], [{ name: null }, 'name'], [{ status: 'ended', max_participants: -1 }, 'max_participants']] as const) {
    const res = await h.request('PATCH', `/tournaments/${ok.id}`, { key: tenant.key, body })
    t.equal(res.status, 400, `PATCH ${JSON.stringify(body)}`)
    t.ok(((res.body.details?.errors ?? []) as { field: string }[]).some((e) => e.field === field), `names ${field}`)
  }
  t.same((await h.request('GET', `/tournaments/${ok.id}`, { key: tenant.key })).body.data, ok, 'unchanged')
})

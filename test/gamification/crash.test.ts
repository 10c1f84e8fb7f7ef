// kill -9 while events stream into missions and a tournament: restart on the same stores, re-send what
// was not acknowledged; every event's progress and score counted exactly once (none lost with the
// process, none twice). With DATABASE_URL a second API process shares the work and survives the kill.
// Then a tournament whose ends_at passes while its server is dead: the next process ends it, with its
// prizes granted exactly once, and a further restart changes nothing. Runs against the stores the
// environment names (embedded otherwise).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import postgres from 'postgres'
import t from 'tap'
import { call, makeTenant, spawnServer, uid, type Child } from '../events/helpers.ts'

const servers = !!process.env.DATABASE_URL

/** A tournament_participants row as the board query returns it. */
interface PgRow { player_id: string; external_id: string; score: number; reached_at: string }

t.test('kill -9 mid-stream: mission progress and tournament scores count every event exactly once', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-gcrash-'))
  const dataDir2 = mkdtempSync(join(tmpdir(), 'respin-gcrash2-'))
  t.teardown(() => {
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(dataDir2, { recursive: true, force: true })
  })
  const env = { DATA_DIR: dataDir, RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'postgres', GAMIFICATION_TICK_MS: '200' }
  let server = await spawnServer(env)
  // A second process on the same PostgreSQL and Redis (its own embedded ClickHouse) shares the stream.
  const second: Child | undefined = servers ? await spawnServer({ ...env, DATA_DIR: dataDir2, ADMIN_KEY: server.adminKey }) : undefined
  t.teardown(() => {
    server.proc.kill('SIGKILL')
    second?.proc.kill('SIGKILL')
  })
  const tenant = await makeTenant(server.origin, server.adminKey)
  const must = async (origin: string, path: string, body: unknown) => {
    const res = await call(origin, 'POST', path, tenant.key, body)
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body.data
  }
  const mission = await must(server.origin, '/gamification/missions', { name: 'Wager', type: 'one_time', rules: { event_type: 'bet', measure: 'sum', target: 1e9 } })
  const counter = await must(server.origin, '/gamification/missions', { name: 'Deposits', type: 'one_time', rules: { event_type: 'deposit', target: 1e9 } })
  const tournament = await must(server.origin, '/tournaments', { name: 'Race', status: 'active', game_config: { metric: 'bet_count' } })
  const players = 100
  // The kill lands after 30 acknowledged batches; the rest (60) are re-sent after the restart.
  const batches = Array.from({ length: 90 }, (_, b) => ({
    events: Array.from({ length: 25 }, (_, i) => ({
      player_id: `p${(b * 25 + i) % players}`,
      event_type: i % 5 === 0 ? 'deposit' : 'bet',
      event_id: uid(`g${b}`),
      payload: { amount: 1.5, currency: 'EUR' },
    })),
  }))
  const acked = new Set<number>()
  let next = 0
  let killed = false
  const origins = () => (second ? [server.origin, second.origin] : [server.origin])
  const worker = async (w: number) => {
    while (next < batches.length) {
      const b = next++
      const origin = killed ? (second?.origin ?? '') : (origins()[w % origins().length] as string)
      if (!origin) return
      try {
        const res = await call(origin, 'POST', '/events', tenant.key, batches[b])
        if (res.status === 200) acked.add(b)
      } catch {
        // connection reset by the kill
      }
    }
  }
  const streaming = Promise.all([0, 1, 2, 3].map(worker))
  while (acked.size < 30) await new Promise((r) => setTimeout(r, 10))
  killed = true
  server.proc.kill('SIGKILL')
  await server.exited
  await streaming
  t.ok(acked.size >= 30 && acked.size < batches.length, `killed after ${acked.size} acknowledged batches${second ? ' (second process kept serving)' : ''}`)

  server = await spawnServer({ ...env, ADMIN_KEY: server.adminKey })
  for (let b = 0; b < batches.length; b++) {
    if (acked.has(b)) continue
    for (let attempt = 0; ; attempt++) {
      const res = await call(server.origin, 'POST', '/events', tenant.key, batches[b])
      if (res.status === 200) break
      if (res.status !== 503 || attempt > 30) throw new Error(`resend failed: ${res.status} ${JSON.stringify(res.body)}`)
      await new Promise((r) => setTimeout(r, 300))
    }
  }
  // The acknowledged ones again: pure duplicates.
  let stored = 0
  for (const b of [...acked].slice(0, 20)) stored += (await call(server.origin, 'POST', '/events', tenant.key, batches[b])).body.stored
  t.equal(stored, 0, 're-sent acknowledged batches store nothing')

  // Wait until the stream is drained, then compare with what was sent.
  const bets = batches.length * 20
  const bettors = new Set(batches.flatMap((b) => b.events.filter((e) => e.event_type === 'bet').map((e) => e.player_id))).size
  const deposits = batches.length * 5
  const totals = async () =>
    queryPostgres<{ wager: string; deps: string; score: string; pending: number; participants: number; board: PgRow[] }>(
      dataDir,
      // board: the participants in rank order (contract-engines §5: score descending, equal scores by who
      // reached them first; the final ranks break a tie of both by player_id, which the contract leaves open).
      `select (select coalesce(sum(value), 0) from player_missions where mission_id = $1) as wager,
              (select json_agg(json_build_object('player_id', player_id, 'external_id', external_id, 'score', score, 'reached_at', reached_at)
                               order by score desc, reached_at, player_id)
                 from tournament_participants where tournament_id = $3) as board,
              (select coalesce(sum(value), 0) from player_missions where mission_id = $2) as deps,
              (select coalesce(sum(score), 0) from tournament_participants where tournament_id = $3) as score,
              (select count(*)::int from tournament_participants where tournament_id = $3) as participants,
              (select count(*)::int from event_stream where tenant_id = $4) as pending`,
      [mission.id, counter.id, tournament.id, tenant.id],
      server,
    )
  // Drained when the live leaderboard (same consumer, same transactions as the missions) holds every bet.
  const lbSum = async () => {
    const lb = await call(server.origin, 'GET', `/tournaments/${tournament.id}/leaderboard?limit=100`, tenant.key)
    return lb.body.data.reduce((a: number, r: { score: number }) => a + r.score, 0) as number
  }
  for (let i = 0; i < 150 && (await lbSum()) < bets; i++) await new Promise((r) => setTimeout(r, 200))
  await new Promise((r) => setTimeout(r, 500))
  // The live leaderboard of the process restarted after the kill (read before totals(), which restarts the
  // embedded server to read its PGlite directory).
  const lb = await call(server.origin, 'GET', `/tournaments/${tournament.id}/leaderboard?limit=100`, tenant.key)
  const got = await totals()
  t.same(
    { wager: Number(got?.wager), deposits: Number(got?.deps), score: Number(got?.score), participants: got?.participants, pending: got?.pending },
    { wager: bets * 1.5, deposits, score: bets, participants: bettors, pending: 0 },
    'every bet and deposit counted once in the missions and the tournament',
  )
  // The restarted process rebuilt the live leaderboard: its rows (rank, player, score) are PostgreSQL's.
  t.equal(lb.body.total, bettors, 'leaderboard holds every participant')
  t.equal(lb.body.data.reduce((a: number, r: { score: number }) => a + r.score, 0), bets, 'leaderboard scores sum to the bets')
  const board: PgRow[] = (typeof got?.board === 'string' ? JSON.parse(got.board) : got?.board) ?? []
  t.equal(board.length, bettors)
  t.ok(new Set(board.map((r) => r.reached_at)).size > 1, 'reach times differ: the order is checked, not only the scores')
  // Each rank holds the player PostgreSQL ranks there, with its score, up to the order of players tied on
  // both score and reach time (the contract orders only by those two): compared per rank as (score, reach
  // time), and as the same players with the same scores.
  const byPlayer = new Map(board.map((r) => [r.player_id, r]))
  const tieKey = (r: PgRow | undefined) => (r ? `${Number(r.score)}@${r.reached_at}` : 'not a participant')
  const rowOf = (r: { player_id: string; external_id: string; score: number | string }) => `${r.player_id}|${r.external_id}|${Number(r.score)}`
  const sameAsPostgres = (rows: { rank: number; player_id: string; external_id: string; score: number }[], which: string) => {
    t.same(rows.map((r) => r.rank), board.map((_, i) => i + 1), `${which}: ranks 1..n`)
    t.same(rows.map((r) => tieKey(byPlayer.get(r.player_id))), board.map(tieKey), `${which}: every rank holds the score and reach time PostgreSQL ranks there`)
    t.same(rows.map(rowOf).sort(), board.map(rowOf).sort(), `${which}: the same players, external ids and scores`)
  }
  sameAsPostgres(lb.body.data, 'after kill -9, restart and re-sends')
  // Embedded, totals() restarted the server with no event since: this board is the start's rebuild alone.
  const rebuilt = await call(server.origin, 'GET', `/tournaments/${tournament.id}/leaderboard?limit=100`, tenant.key)
  sameAsPostgres(rebuilt.body.data, servers ? 'read again' : 'rebuilt at a restart')

  // A tournament whose end passes while its process is dead.
  const lp = await must(server.origin, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const sprint = await must(server.origin, '/tournaments', {
    name: 'Sprint', status: 'active', game_config: { metric: 'bet_amount' }, ends_at: new Date(Date.now() + 4000).toISOString(),
    prize_pool: { prizes: [{ from_rank: 1, to_rank: 3, points: [{ currency_id: lp.id, amount: 10 }] }] },
  })
  second?.proc.kill('SIGKILL')
  const sent = await call(server.origin, 'POST', '/events', tenant.key, { events: ['p1', 'p2', 'p3', 'p4'].map((p, i) => ({ player_id: p, event_type: 'bet', event_id: uid('s'), timestamp: new Date().toISOString(), payload: { amount: 10 + i } })) })
  t.equal(sent.status, 200)
  t.ok(Date.now() < Date.parse(sprint.ends_at), 'the bets came before ends_at')
  server.proc.kill('SIGKILL')
  await server.exited
  await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(sprint.ends_at) - Date.now()) + 200))
  server = await spawnServer({ ...env, ADMIN_KEY: server.adminKey })
  await new Promise((r) => setTimeout(r, 1500))
  server.proc.kill('SIGTERM')
  t.equal(await server.exited, 0, 'clean shutdown')
  server = await spawnServer({ ...env, ADMIN_KEY: server.adminKey })
  await new Promise((r) => setTimeout(r, 1000))
  const end = await queryPostgres<{ status: string; ended: number; prizes: number; ranks: string }>(
    dataDir,
    `select (select status from tournaments where id = $1) as status,
            (select count(*)::int from outbox where event = 'tournament.ended' and data->>'tournament_id' = $1::text) as ended,
            (select count(*)::int from point_ledger where source = 'tournament' and source_id = $1::text) as prizes,
            (select string_agg(external_id || ':' || final_rank, ',' order by final_rank) from tournament_participants where tournament_id = $1) as ranks`,
    [sprint.id],
    server,
  )
  t.same(end, { status: 'ended', ended: 1, prizes: 3, ranks: 'p4:1,p3:2,p2:3,p1:4' }, 'ended once after the restart, three prizes once, final ranks')
  server.proc.kill('SIGTERM')
  await server.exited
})

/** One row from the servers' PostgreSQL: the one DATABASE_URL names, or (embedded) the PGlite directory after stopping `running`. */
async function queryPostgres<T>(dataDir: string, text: string, params: unknown[], running: Child): Promise<T | undefined> {
  if (process.env.DATABASE_URL) {
    const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      return (await sql.unsafe(text, params as never[]))[0] as T | undefined
    } finally {
      await sql.end()
    }
  }
  // Embedded: PGlite allows one process per data directory: stop the server, read, start it again.
  running.proc.kill('SIGTERM')
  await running.exited
  const db = await PGlite.create(join(dataDir, 'postgres'))
  try {
    return (await db.query<T>(text, params)).rows[0]
  } finally {
    await db.close()
    const restarted = await spawnServer({ DATA_DIR: dataDir, RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'postgres', GAMIFICATION_TICK_MS: '200', ADMIN_KEY: running.adminKey })
    Object.assign(running, restarted)
  }
}

// The event stream (src/engine/event-stream.ts) over real ingestion: only interesting events produce rows,
// each acknowledged event is applied once per consumer (duplicates never), a throwing handler retries
// without losing or repeating, and interest changes apply from the next group. The crash half (kill -9
// while events stream) is in test/gamification/crash.test.ts, through the gamification consumer.
import t, { type Test } from 'tap'
import { createEventStream, emptyStreamColumns, type EventStream, type InterestEntry, type StreamColumns, type StreamConsumer, type StreamEvent } from '../../src/engine/event-stream.ts'
import { startHarness } from '../helpers/harness.ts'
import { ev, post } from '../events/helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
const stream = h.app.ctx.stream!
const sql = h.app.ctx.sql
// The consumers' effects: a plain table without a unique key, so a repeat would show as a second row.
await sql`create table if not exists stream_test_effects (consumer text not null, brand_id uuid not null, event_id text, event_type text, player_id uuid, amount text)`

/** A consumer interested in `types` of `brandId`, writing each event it gets into the effects table. */
function testConsumer(name: string, interest: Map<string, InterestEntry[]>, opts: { fail?: (e: StreamEvent) => boolean } = {}): StreamConsumer {
  return {
    name,
    async interest(_sql, brandIds) {
      return new Map(brandIds.filter((b) => interest.has(b)).map((b) => [b, interest.get(b) as InterestEntry[]]))
    },
    async handle(tx, events) {
      for (const e of events) {
        await tx`insert into stream_test_effects values (${name}, ${e.brandId}, ${e.eventId}, ${e.type}, ${e.playerId}, ${(e.fields.amount as string) ?? null})`
        if (opts.fail?.(e)) throw new Error('handler refuses this event')
      }
    },
  }
}

const effects = (name: string, brandId: string) =>
  sql<{ event_id: string; event_type: string; player_id: string | null; amount: string | null }[]>`
    select event_id, event_type, player_id, amount from stream_test_effects where consumer = ${name} and brand_id = ${brandId} order by event_id`

t.test('only interesting types reach a consumer, each acknowledged event once, duplicates never', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant()
  const interest = new Map([[tenant.brand.id, ['bet', 'deposit']]])
  stream.register(testConsumer('t_once', interest))
  t.teardown(() => stream.unregister('t_once'))
  const bets = Array.from({ length: 30 }, (_, i) => ev({ player_id: `p${i % 7}`, event_type: 'bet', payload: { amount: 1.25, currency: 'eur' } }))
  const logins = Array.from({ length: 10 }, () => ev({ event_type: 'login' }))
  const res = await post(h, tenant.key, { events: [...bets, ...logins] })
  t.equal(res.status, 200, res.text)
  t.equal(res.body.stored, 40)
  // Another tenant's bets: its brand has no interest.
  await post(h, other.key, { events: [ev({ event_type: 'bet', payload: { amount: 1 } })] })
  await stream.idle()
  const got = await effects('t_once', tenant.brand.id)
  t.equal(got.length, 30, 'every bet once, no login')
  t.same(new Set(got.map((r) => r.event_id)), new Set(bets.map((b) => b.event_id)))
  t.ok(got.every((r) => r.player_id !== null && r.amount === '1.25'), 'player resolved, exact amount')
  t.same(await effects('t_once', other.brand.id), [], 'brands without interest cost no row')
  const [left] = await sql<{ n: number }[]>`select count(*)::int as n from event_stream where consumer = 't_once'`
  t.equal(left?.n, 0, 'consumed rows are gone')

  // The same events again (a client retry): duplicates, nothing applied.
  const again = await post(h, tenant.key, { events: bets })
  t.equal(again.body.deduped, 30)
  await stream.idle()
  t.equal((await effects('t_once', tenant.brand.id)).length, 30, 'duplicates change nothing')
})

t.test('filtered interest: only events some filter passes become rows; a bare type or another consumer still gets all', async (t) => {
  const tenant = await h.createTenant()
  const big = { type: 'deposit', filters: [{ field: 'amount', op: 'gte' as const, value: 100 }] }
  const vip = { type: 'deposit', filters: [{ field: 'payload.tier', op: 'eq' as const, value: 'vip' }, { field: 'currency', op: 'eq' as const, value: 'eur' }] }
  stream.register(testConsumer('t_filtered', new Map([[tenant.brand.id, [big, vip]]])))
  stream.register(testConsumer('t_all', new Map([[tenant.brand.id, ['deposit']]])))
  stream.register(testConsumer('t_mixed', new Map([[tenant.brand.id, [big, 'deposit']]])))
  t.teardown(async () => {
    for (const n of ['t_filtered', 't_all', 't_mixed']) await stream.unregister(n)
  })
  const deposits = [
    ev({ event_id: 'd-small', event_type: 'deposit', payload: { amount: 20, currency: 'EUR' } }),
    ev({ event_id: 'd-big', event_type: 'deposit', payload: { amount: '100.00', currency: 'EUR' } }),
    ev({ event_id: 'd-vip', event_type: 'deposit', payload: { amount: 5, currency: 'EUR', tier: 'vip' } }),
    ev({ event_id: 'd-vip-usd', event_type: 'deposit', payload: { amount: 5, currency: 'USD', tier: 'vip' } }),
    ev({ event_id: 'd-none', event_type: 'deposit', payload: { currency: 'EUR' } }),
  ]
  t.equal((await post(h, tenant.key, { events: deposits })).status, 200)
  await stream.idle()
  const ids = async (n: string) => (await effects(n, tenant.brand.id)).map((r) => r.event_id)
  t.same(await ids('t_filtered'), ['d-big', 'd-vip'], 'what one of its filters passes (all conditions of it)')
  t.same(await ids('t_all'), ['d-big', 'd-none', 'd-small', 'd-vip', 'd-vip-usd'], 'a bare type: every event')
  t.same(await ids('t_mixed'), ['d-big', 'd-none', 'd-small', 'd-vip', 'd-vip-usd'], 'a bare type beside a filter: every event')
})

t.test('an event reaches every interested consumer, within a second of its 200', async (t) => {
  const tenant = await h.createTenant()
  stream.register(testConsumer('t_a', new Map([[tenant.brand.id, ['*']]])))
  stream.register(testConsumer('t_b', new Map([[tenant.brand.id, ['deposit']]])))
  t.teardown(() => {
    stream.unregister('t_a')
    stream.unregister('t_b')
  })
  const e1 = ev({ event_type: 'deposit', payload: { amount: 10 } })
  const e2 = ev({ event_type: 'login' })
  const sent = Date.now()
  t.equal((await post(h, tenant.key, { events: [e1, e2] })).status, 200)
  const acked = Date.now()
  for (;;) {
    const [a, b] = [await effects('t_a', tenant.brand.id), await effects('t_b', tenant.brand.id)]
    if (a.length === 2 && b.length === 1) break
    if (Date.now() - acked > 1000) t.fail(`not applied within 1 s of the 200: ${a.length}, ${b.length}`)
    if (Date.now() - acked > 5000) return
    await new Promise((r) => setTimeout(r, 10))
  }
  t.pass(`applied ${Date.now() - acked} ms after the 200 (${acked - sent} ms request)`)
  t.same((await effects('t_b', tenant.brand.id)).map((r) => r.event_type), ['deposit'])
})

t.test('a handler that throws: the batch rolls back, the event is retried, applied exactly once', async (t) => {
  const tenant = await h.createTenant()
  let failures = 1
  stream.register(testConsumer('t_retry', new Map([[tenant.brand.id, ['bet']]]), { fail: (e) => e.fields.game === 'bad' && failures-- > 0 }))
  t.teardown(() => stream.unregister('t_retry'))
  const events = [ev({ event_type: 'bet', payload: { amount: 1 } }), ev({ event_type: 'bet', payload: { amount: 2, game: 'bad' } }), ev({ event_type: 'bet', payload: { amount: 3 } })]
  t.equal((await post(h, tenant.key, { events })).status, 200)
  // The first failure backs the event off for a second; wait for it.
  for (let i = 0; i < 100 && (await effects('t_retry', tenant.brand.id)).length < 3; i++) await new Promise((r) => setTimeout(r, 50))
  const got = await effects('t_retry', tenant.brand.id)
  t.same(got.map((r) => r.amount).sort(), ['1', '2', '3'], 'each event applied once, the failed one after its retry')
})

t.test('interest changes apply from the next request, in every process (bus)', async (t) => {
  const tenant = await h.createTenant()
  const interest = new Map<string, string[]>()
  stream.register(testConsumer('t_change', interest))
  t.teardown(() => stream.unregister('t_change'))
  await post(h, tenant.key, { events: [ev({ event_type: 'win', payload: { amount: 5 } })] })
  interest.set(tenant.brand.id, ['win'])
  await stream.interestChanged(tenant.brand.id)
  const counted = ev({ event_type: 'win', payload: { amount: 6 } })
  await post(h, tenant.key, { events: [counted] })
  await stream.idle()
  t.same((await effects('t_change', tenant.brand.id)).map((r) => r.event_id), [counted.event_id], 'only the event after the change')
})

// Several claim loops (lanes) per consumer and process, partitioned by a hash of the player (sql/0120).
// Rows are appended directly (as the ingest transaction does), to streams of our own with a chosen loop
// count, so the harness's stream never claims them.

/** n events per player for `players` players, in per-player order (seq), interleaved as ingestion would. */
function streamRows(tenant: { id: string; brand: { id: string } }, consumer: string, players: string[], perPlayer: number): StreamColumns {
  const cols = emptyStreamColumns()
  for (let seq = 0; seq < perPlayer; seq++) {
    // Each round in another order, so that a player's rows are not a regular stride of ids apart.
    for (const p of [...players].sort(() => Math.random() - 0.5)) {
      cols.consumers.push(consumer)
      cols.tenant_id.push(tenant.id)
      cols.brand_id.push(tenant.brand.id)
      cols.external_id.push(p)
      cols.event_id.push(`${consumer}-${p}-${seq}`)
      cols.event_type.push('bet')
      cols.source_type.push('bet')
      cols.event_time.push(Date.now())
      cols.received_at.push(Date.now())
      cols.fields.push(JSON.stringify({ seq }))
      cols.payload.push(null)
    }
  }
  return cols
}

/** A consumer that records each event with the order it was applied in, and how many batches ran at once. */
function recordingConsumer(name: string, stats: { inFlight: number; maxInFlight: number }): StreamConsumer {
  return {
    name,
    batchSize: 7,
    interest: async () => new Map(),
    async handle(tx, events) {
      stats.maxInFlight = Math.max(stats.maxInFlight, ++stats.inFlight)
      try {
        for (const e of events) {
          await tx`insert into stream_test_applied (consumer, external_id, seq) values (${name}, ${e.externalId}, ${e.fields.seq as number})`
        }
        // A batch that takes a while, so that the lanes' batches overlap (and would reorder a player's
        // events if the lanes did not split by player).
        await tx`select pg_sleep(${Math.random() * 0.02})`
      } finally {
        stats.inFlight--
      }
    },
  }
}
await sql`create table if not exists stream_test_applied (n bigserial primary key, consumer text not null, external_id text not null, seq int not null)`
/** `perLane` players of this brand in each of `lanes` lanes (the hash is the one ingestion writes). */
async function playersPerLane(brandId: string, lanes: number, perLane: number): Promise<string[]> {
  const rows = await sql<{ id: string; lane: number }[]>`
    select 'lane-player-' || i as id, event_stream_part(${brandId}::uuid, 'lane-player-' || i) % ${lanes}::int as lane
    from generate_series(0, 999) i`
  const out: string[] = []
  for (let lane = 0; lane < lanes; lane++) out.push(...rows.filter((r) => r.lane === lane).slice(0, perLane).map((r) => r.id))
  return out
}
const applied = (name: string) =>
  sql<{ external_id: string; seq: number }[]>`select external_id, seq from stream_test_applied where consumer = ${name} order by n`

t.test('four loops: each player\'s events applied in stream order, every event once, lanes in parallel', async (t) => {
  const tenant = await h.createTenant()
  const lanes = createEventStream({ sql, bus: h.app.ctx.bus, log: h.app.ctx.log, loops: 4, pollMs: 50 })
  t.teardown(() => lanes.stop())
  const rows = streamRows(tenant, 't_lanes', await playersPerLane(tenant.brand.id, 4, 3), 25)
  await sql.begin((tx) => lanes.append(tx, rows))
  const parts = await sql<{ lane: number; n: number }[]>`
    select part % 4 as lane, count(*)::int as n from event_stream where consumer = 't_lanes' group by 1 order by 1`
  t.same(parts.map((p) => [p.lane, p.n]), [[0, 75], [1, 75], [2, 75], [3, 75]], 'three players in each lane, as written')
  const stats = { inFlight: 0, maxInFlight: 0 }
  lanes.register(recordingConsumer('t_lanes', stats))
  await lanes.idle()
  const got = await applied('t_lanes')
  t.equal(got.length, 12 * 25, 'every event applied')
  t.equal(new Set(got.map((r) => `${r.external_id}|${r.seq}`)).size, 12 * 25, 'none twice')
  const last = new Map<string, number>()
  let outOfOrder = 0
  for (const r of got) {
    if ((last.get(r.external_id) ?? -1) > r.seq) outOfOrder++
    last.set(r.external_id, r.seq)
  }
  t.equal(outOfOrder, 0, 'each player\'s events in stream order')
  // Embedded PostgreSQL has one connection: its transactions (and so the lanes' batches) take turns.
  if (h.app.ctx.pg.kind === 'postgres') t.ok(stats.maxInFlight > 1, `lanes applied batches at the same time (at most ${stats.maxInFlight})`)
})

/** Two event streams on one database, as two processes would run them, with these loop counts. */
function twoProcesses(t: Test, loopsA: number, loopsB: number) {
  const streams = [loopsA, loopsB].map((loops) => createEventStream({ sql, bus: h.app.ctx.bus, log: h.app.ctx.log, loops, pollMs: 50 }))
  t.teardown(async () => {
    for (const s of streams) await s.stop()
  })
  return streams as [EventStream, EventStream]
}

t.test('two processes with different loop counts share a consumer: every event exactly once', async (t) => {
  const tenant = await h.createTenant()
  const [a, b] = twoProcesses(t, 4, 3)
  const stats = { inFlight: 0, maxInFlight: 0 }
  a.register(recordingConsumer('t_shared', stats))
  b.register(recordingConsumer('t_shared', stats))
  const players = await playersPerLane(tenant.brand.id, 12, 1)
  // Written while both claim: several groups, as several ingest transactions would.
  for (let g = 0; g < 5; g++) {
    const rows = streamRows(tenant, 't_shared', players, 8)
    rows.event_id = rows.event_id.map((id) => `${id}-g${g}`)
    await sql.begin((tx) => a.append(tx, rows))
    a.wake()
    b.wake()
  }
  await Promise.all([a.idle(), b.idle()])
  const [left] = await sql<{ n: number }[]>`select count(*)::int as n from event_stream where consumer = 't_shared'`
  t.equal(left?.n, 0, 'nothing left')
  const got = await applied('t_shared')
  t.equal(got.length, 5 * 12 * 8, 'every event applied exactly once (the table has no unique key: a repeat would be a row more)')
})

t.test('two processes with the same loop count: each player\'s events applied in order across them', async (t) => {
  const tenant = await h.createTenant()
  const [a, b] = twoProcesses(t, 2, 2)
  const name = 't_ordered'
  // Each event must find its player's previous one applied and committed (or earlier in its own batch),
  // as a bet_rollback must find its bet: what a batch of the same lane in another process would break.
  let gaps = 0
  const consumer: StreamConsumer = {
    name,
    batchSize: 5,
    interest: async () => new Map(),
    async handle(tx, events) {
      for (const e of events) {
        const [row] = await tx<{ last: number | null }[]>`select max(seq) as last from stream_test_applied where consumer = ${name} and external_id = ${e.externalId}`
        if ((row?.last ?? -1) !== (e.fields.seq as number) - 1) gaps++
        await tx`insert into stream_test_applied (consumer, external_id, seq) values (${name}, ${e.externalId}, ${e.fields.seq as number})`
      }
      await tx`select pg_sleep(${0.005 + Math.random() * 0.02})`
    },
  }
  const rows = streamRows(tenant, name, await playersPerLane(tenant.brand.id, 2, 2), 40)
  await sql.begin((tx) => a.append(tx, rows))
  a.register(consumer)
  b.register(consumer)
  await Promise.all([a.idle(), b.idle()])
  for (let i = 0; i < 100 && (await sql`select 1 from event_stream where consumer = ${name} limit 1`).length; i++) await new Promise((r) => setTimeout(r, 50))
  t.equal((await applied(name)).length, 4 * 40, 'every event applied once')
  t.equal(gaps, 0, 'no event applied before its player\'s previous one had committed')
})

t.test('the poll: rows another process committed (no wake here) are applied; rows in backoff are left until due', async (t) => {
  const tenant = await h.createTenant()
  const polled = createEventStream({ sql, bus: h.app.ctx.bus, log: h.app.ctx.log, loops: 2, pollMs: 50 })
  t.teardown(() => polled.stop())
  const claims: string[] = []
  const counting = (name: string): StreamConsumer => {
    const inner = recordingConsumer(name, { inFlight: 0, maxInFlight: 0 })
    return { ...inner, handle: (tx, events) => (claims.push(name), inner.handle(tx, events)) }
  }
  polled.register(counting('t_polled'))
  polled.register(counting('t_backoff'))
  await polled.idle()
  const players = await playersPerLane(tenant.brand.id, 2, 2)
  // Committed through another stream object, as another process would: this one is never woken.
  await sql.begin((tx) => stream.append(tx, streamRows(tenant, 't_polled', players, 3)))
  // Rows in backoff (a failed handler's): not due yet.
  await sql.begin((tx) => stream.append(tx, streamRows(tenant, 't_backoff', players, 1)))
  await sql`update event_stream set available_at = now() + interval '1 hour' where consumer = 't_backoff'`
  const until = Date.now() + 10_000
  while ((await applied('t_polled')).length < 12 && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
  t.equal((await applied('t_polled')).length, 12, 'every row applied by the poll alone')
  await new Promise((r) => setTimeout(r, 300))
  t.notOk(claims.includes('t_backoff'), 'nothing of the consumer whose rows are not due was handed to it')
  t.equal((await applied('t_backoff')).length, 0)
  await sql`delete from event_stream where consumer = 't_backoff'`
})

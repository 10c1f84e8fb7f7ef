// The event stream (src/engine/event-stream.ts) over real ingestion: only interesting events produce rows,
// each acknowledged event is applied once per consumer (duplicates never), a throwing handler retries
// without losing or repeating, and interest changes apply from the next group. The crash half (kill -9
// while events stream) is in test/gamification/crash.test.ts, through the gamification consumer.
import t from 'tap'
import type { StreamConsumer, StreamEvent } from '../../src/engine/event-stream.ts'
import { startHarness } from '../helpers/harness.ts'
import { ev, post } from '../events/helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
const stream = h.app.ctx.stream!
const sql = h.app.ctx.sql
// The consumers' effects: a plain table without a unique key, so a repeat would show as a second row.
await sql`create table if not exists stream_test_effects (consumer text not null, brand_id uuid not null, event_id text, event_type text, player_id uuid, amount text)`

/** A consumer interested in `types` of `brandId`, writing each event it gets into the effects table. */
function testConsumer(name: string, interest: Map<string, string[]>, opts: { fail?: (e: StreamEvent) => boolean } = {}): StreamConsumer {
  return {
    name,
    async interest(_sql, brandIds) {
      return new Map(brandIds.filter((b) => interest.has(b)).map((b) => [b, interest.get(b) as string[]]))
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

// Counting and the brand's event mapping, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { ev, post, storedCount, uid } from './helpers.ts'

const h = await startHarness(t, { env: { INGEST_ACK_AFTER: 'clickhouse' } })

t.test('counting', async (t) => {
  // ClickHouse is read right after each 200: the ClickHouse-ack mode (the default spool mode: spool.test.ts).

  t.test('a single event is stored and counted', async (t) => {
    const tenant = await h.createTenant()
    const res = await post(h, tenant.key, ev({ event_type: 'login', payload: { country: 'SE' } }))
    t.equal(res.status, 200, res.text)
    t.same(Object.keys(res.body).sort(), ['deduped', 'ignored', 'received', 'rejected', 'rejected_event_types', 'status', 'stored', 'timestamp', 'unknown_event_types'])
    t.match(res.body, { received: 1, stored: 1, deduped: 0, rejected: 0, ignored: 0, unknown_event_types: [], rejected_event_types: [], status: 'queued' })
    t.ok(!Number.isNaN(Date.parse(res.body.timestamp)))
    t.equal(await storedCount(h, tenant.id), 1)
  })

  t.test('a batch with duplicates inside it and a re-send is deduped by event_id', async (t) => {
    const tenant = await h.createTenant()
    const a = ev({ player_id: 'p1' })
    const b = ev({ player_id: 'p2', event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } })
    const first = await post(h, tenant.key, { events: [a, b, { ...a }, ev({ event_id: undefined })] })
    t.equal(first.status, 200, first.text)
    t.match(first.body, { received: 4, stored: 3, deduped: 1 })
    const again = await post(h, tenant.key, { events: [a, b, ev()] })
    t.match(again.body, { received: 3, stored: 1, deduped: 2 })
    t.equal(await storedCount(h, tenant.id), 4)
    t.equal(await storedCount(h, tenant.id, 'AND event_id = {id:String}', { id: a.event_id }), 1)
  })

  t.test('dedupe is per brand, events without event_id are never deduped', async (t) => {
    const tenant = await h.createTenant()
    const other = await tenant.createBrand('second')
    const e = ev()
    t.match((await post(h, tenant.key, e)).body, { stored: 1 })
    t.match((await post(h, tenant.key, e, { headers: { 'x-brand': other.slug } })).body, { stored: 1, deduped: 0 })
    t.match((await post(h, tenant.key, e, { query: { brand: other.id } })).body, { stored: 0, deduped: 1 })
    const noId = { player_id: 'p9', event_type: 'login' }
    t.match((await post(h, tenant.key, { events: [noId, noId] })).body, { stored: 2, deduped: 0 })
    t.equal(await storedCount(h, tenant.id), 4)
  })

  t.test('the raw event is retained next to canonical columns', async (t) => {
    const tenant = await h.createTenant()
    const e = ev({ event_type: 'bet', session_id: 's-1', payload: { amount: '2.50', currency: 'eur', game: 'book', provider: 'acme', extra: { a: 1 } } })
    await post(h, tenant.key, e)
    const [row] = await h.app.ctx.ch.query<Record<string, unknown>>(
      'SELECT event_type, toString(amount) AS amount, currency, game, provider, session_id, raw, player_id FROM events WHERE tenant_id = {t:UUID}',
      { t: tenant.id },
    )
    t.match(row, { event_type: 'bet', amount: '2.5', currency: 'EUR', game: 'book', provider: 'acme', session_id: 's-1', player_id: 'p1' })
    t.same(JSON.parse(row?.raw as string), e)
  })

  t.test('validation: 0 and 101 events, a 129-character event_id, bad timestamp; nothing stored', async (t) => {
    const tenant = await h.createTenant()
    const empty = await post(h, tenant.key, { events: [] })
    t.equal(empty.status, 400)
    t.equal(empty.body.code, 'BAD_REQUEST')
    t.equal(empty.body.details.errors[0].field, 'events')
    const many = await post(h, tenant.key, { events: Array.from({ length: 101 }, () => ev()) })
    t.equal(many.status, 400)
    t.equal(many.body.details.errors[0].field, 'events')
    const ok100 = await post(h, tenant.key, { events: Array.from({ length: 100 }, () => ev()) })
    t.equal(ok100.status, 200)
    t.equal(ok100.body.stored, 100)
    const events = [ev(), ev(), ev(), ev({ event_id: 'x'.repeat(129) })]
    const long = await post(h, tenant.key, { events })
    t.equal(long.status, 400)
    t.same(long.body.details.errors.map((e: { field: string }) => e.field), ['events.3.event_id'])
    const okLen = await post(h, tenant.key, ev({ event_id: `${uid()}-`.padEnd(128, 'y') }))
    t.equal(okLen.status, 200)
    const missing = await post(h, tenant.key, { events: [ev(), { event_type: 'login' }] })
    t.equal(missing.status, 400)
    t.same(missing.body.details.errors.map((e: { field: string }) => e.field), ['events.1.player_id'])
    const badTs = await post(h, tenant.key, ev({ timestamp: 'yesterday' }))
    t.equal(badTs.status, 400)
    t.same(badTs.body.details.errors.map((e: { field: string }) => e.field), ['timestamp'])
    const badPayload = await post(h, tenant.key, ev({ payload: [1] }))
    t.equal(badPayload.status, 400)
    const malformed = await h.request('POST', '/events', { key: tenant.key, rawBody: '{"events": [', headers: { 'content-type': 'application/json' } })
    t.equal(malformed.status, 400)
    // Text PostgreSQL cannot store: a 400 naming the field (it was a 503 asking for a retry forever).
    const nul = await post(h, tenant.key, { events: [ev(), ev({ player_id: 'p\u0000x' })] })
    t.equal(nul.status, 400)
    t.same(nul.body.details.errors.map((e: { field: string }) => e.field), ['events.1.player_id'])
    const half = await h.request('POST', '/events', { key: tenant.key, rawBody: JSON.stringify(ev({ payload: { note: 'x' } })).replace('"x"', '"cut \\ud83d"'), headers: { 'content-type': 'application/json' } })
    t.equal(half.status, 400)
    t.same(half.body.details.errors.map((e: { field: string }) => e.field), ['payload.note'])
    const pair = await h.request('POST', '/events', { key: tenant.key, rawBody: JSON.stringify(ev({ payload: { note: 'x' } })).replace('"x"', '"ok \\ud83d\\ude00"'), headers: { 'content-type': 'application/json' } })
    t.equal(pair.status, 200, 'a whole surrogate pair (an emoji) is fine')
    t.equal(await storedCount(h, tenant.id), 102)
  })

  t.test('scope: read-only key is 403, ingestion-only key works, api_key query works, no key 401', async (t) => {
    const tenant = await h.createTenant()
    const ro = await tenant.createKey({ scopes: ['read'] })
    const res = await post(h, ro.key, ev())
    t.equal(res.status, 403)
    t.equal(res.body.code, 'FORBIDDEN')
    const wo = await tenant.createKey({ scopes: ['events:write'] })
    t.equal((await post(h, wo.key, ev())).status, 200)
    const viaQuery = await h.request('POST', '/events', { body: ev(), query: { api_key: wo.key } })
    t.equal(viaQuery.status, 200)
    const bearer = await h.request('POST', '/events', { body: ev(), headers: { authorization: `Bearer ${wo.key}` } })
    t.equal(bearer.status, 200)
    t.equal((await h.request('POST', '/events', { body: ev() })).status, 401)
    t.equal(await storedCount(h, tenant.id), 3)
  })

  t.test('tenant isolation: a pinned key ignores the brand hint; another tenant brand hint is refused', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const second = await a.createBrand('second')
    const pinned = await a.createKey({ brand: second.slug })
    const e = ev()
    t.equal((await post(h, pinned.key, e, { headers: { 'x-brand': a.brand.slug } })).status, 200)
    const rows = await h.app.ctx.ch.query<{ brand_id: string }>('SELECT brand_id FROM events WHERE tenant_id = {t:UUID}', { t: a.id })
    t.same(rows.map((r) => r.brand_id), [second.id])
    const foreign = await post(h, a.key, ev(), { headers: { 'x-brand': b.brand.id } })
    t.equal(foreign.status, 400)
    // Same event_id in another tenant is not a duplicate.
    t.match((await post(h, b.key, e)).body, { stored: 1, deduped: 0 })
    t.equal(await storedCount(h, b.id), 1)
    t.equal(await storedCount(h, a.id), 1)
  })

  t.test('timestamps outside 2000-01-01 .. now + 1 day are refused; absurd amounts are kept raw only', async (t) => {
    const tenant = await h.createTenant()
    const old = await post(h, tenant.key, { events: [ev(), ev({ timestamp: '1999-12-31T23:59:59Z' })] })
    t.equal(old.status, 400)
    t.same(old.body.details.errors.map((e: { field: string }) => e.field), ['events.1.timestamp'])
    const future = await post(h, tenant.key, ev({ timestamp: new Date(Date.now() + 3 * 86400_000).toISOString() }))
    t.equal(future.status, 400)
    const offset = await post(h, tenant.key, ev({ timestamp: '2026-01-01T10:00:00+02:00' }))
    t.equal(offset.status, 200)
    const huge = await post(h, tenant.key, ev({ event_type: 'deposit', payload: { amount: 1e40, currency: 'EUR' } }))
    t.equal(huge.status, 200, huge.text)
    const rows = await h.app.ctx.ch.query<{ a: string; raw: string; t: string }>(
      'SELECT toString(amount) AS a, raw, toString(event_time) AS t FROM events WHERE tenant_id = {t:UUID} ORDER BY seq',
      { t: tenant.id },
    )
    t.equal(rows[0]?.t, '2026-01-01 08:00:00.000', 'stored in UTC')
    t.equal(rows[1]?.a, '0')
    t.equal(JSON.parse(rows[1]?.raw as string).payload.amount, 1e40)
  })
})

t.test('mapping', async (t) => {
  // ClickHouse is read right after each 200: the ClickHouse-ack mode.

  const MAPPING = {
    rules: [
      { match: 'dep_ok', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.cur', method: 'payload.via.name' } },
      { match: 'heartbeat', action: 'ignore' },
      { match: 'test_*', action: 'reject' },
      { match: 'casino_*', type: 'game_start' },
    ],
    default_action: 'accept',
  }

  t.test('map, ignore, reject and unknown types are counted as the contract says', async (t) => {
    const tenant = await h.createTenant()
    t.equal((await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, MAPPING)).status, 200)
    const res = await post(h, tenant.key, {
      events: [
        ev({ event_type: 'dep_ok', payload: { amt: '25.5', cur: 'usd', via: { name: 'card' } } }),
        ev({ event_type: 'heartbeat' }),
        ev({ event_type: 'test_ping' }),
        ev({ event_type: 'test_pong' }),
        ev({ event_type: 'casino_slots', payload: { game: 'g1', provider: 'p' } }),
        ev({ event_type: 'weird_thing' }),
        ev({ event_type: 'weird_thing' }),
        ev({ event_type: 'login' }),
      ],
    })
    t.equal(res.status, 200, res.text)
    t.match(res.body, { received: 8, stored: 5, deduped: 0, rejected: 2, ignored: 1 })
    t.same(res.body.unknown_event_types, ['weird_thing'])
    t.same(res.body.rejected_event_types.sort(), ['test_ping', 'test_pong'])
    const rows = await h.app.ctx.ch.query<Record<string, string>>(
      "SELECT event_type, source_type, toString(amount) AS amount, currency, method, game, raw FROM events WHERE tenant_id = {t:UUID} ORDER BY seq",
      { t: tenant.id },
    )
    t.same(rows.map((r) => [r.event_type, r.source_type]), [
      ['deposit', 'dep_ok'], ['game_start', 'casino_slots'], ['weird_thing', 'weird_thing'], ['weird_thing', 'weird_thing'], ['login', 'login'],
    ])
    t.match(rows[0], { amount: '25.5', currency: 'USD', method: 'card' })
    t.equal(JSON.parse(rows[0]?.raw as string).payload.amt, '25.5', 'raw event kept as sent')
    t.equal(rows[1]?.game, 'g1')
  })

  t.test('default_action reject/ignore applies to unmatched types; a change is effective on the next request', async (t) => {
    const tenant = await h.createTenant()
    const first = await post(h, tenant.key, { events: [ev({ event_type: 'foo' }), ev({ event_type: 'login' })] })
    t.match(first.body, { stored: 2, unknown_event_types: ['foo'] })
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'foo', type: 'login' }], default_action: 'reject' })
    const second = await post(h, tenant.key, { events: [ev({ event_type: 'foo' }), ev({ event_type: 'bar' }), ev({ event_type: 'login' })] })
    t.match(second.body, { stored: 1, rejected: 2, unknown_event_types: [], rejected_event_types: ['bar', 'login'] })
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [], default_action: 'ignore' })
    const third = await post(h, tenant.key, ev({ event_type: 'login' }))
    t.match(third.body, { received: 1, stored: 0, ignored: 1 })
    t.equal(await storedCount(h, tenant.id), 3)
  })

  t.test('mapping is per brand', async (t) => {
    const tenant = await h.createTenant()
    const other = await tenant.createBrand('other')
    await h.admin('PUT', `/brands/${other.id}/event-mapping`, { rules: [{ match: '*', action: 'ignore' }] })
    t.match((await post(h, tenant.key, ev())).body, { stored: 1 })
    t.match((await post(h, tenant.key, ev(), { headers: { 'x-brand': other.slug } })).body, { stored: 0, ignored: 1 })
  })

  t.test('a rejected or ignored event does not claim its event_id', async (t) => {
    const tenant = await h.createTenant()
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'login', action: 'reject' }] })
    const e = ev({ event_type: 'login' })
    t.match((await post(h, tenant.key, e)).body, { rejected: 1 })
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [] })
    t.match((await post(h, tenant.key, e)).body, { stored: 1, deduped: 0 })
  })
})

import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { ev, post, storedCount } from './helpers.ts'

// ClickHouse is read right after each 200: the ClickHouse-ack mode.
const h = await startHarness(t, { env: { INGEST_ACK_AFTER: 'clickhouse' } })

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

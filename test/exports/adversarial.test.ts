// Adversarial export checks (interface spec "Export" and "Limits"; contract.md "Resources", "Canonical
// events"; contract-engines.md §6; docs/analytics.md "Exports"): limit edges, cursors reused across
// limits, datasets, brands and keys, brand-pinned keys against brand hints, read and ingestion-only keys,
// which event types the transactions dataset holds (mapped types included), exact amounts in rows,
// players in creation order across separate requests, and a players cursor whose last row was erased.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { pollUntil } from '../helpers/wait.ts'
import { exportClient, type Page, type Row } from './helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_FLUSH_INTERVAL_MS: '50' } })

const { page, drain, ingest } = exportClient(h)
const ids = (rows: Row[]) => rows.map((r) => r.event_id)
let n = 0
const ev = (player_id: string, event_type: string, payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
  ({ event_id: `xa-${++n}`, player_id, event_type, timestamp: '2026-11-02T10:00:00Z', payload, ...extra })

t.test('limit edges: 1, 1000 (max) over 1001 rows, 0 and 1001 refused; players across requests in creation order', async (t) => {
  const tn = await h.createTenant()
  // 1001 logins of 1001 players in 11 requests (≤ 100 events each): three one after the other, then eight at once.
  const all = Array.from({ length: 1001 }, (_, i) => ev(`lp${String(i).padStart(4, '0')}`, 'login'))
  const batches = Array.from({ length: 11 }, (_, b) => all.slice(b * 100, b * 100 + 100))
  for (const b of batches.slice(0, 3)) await ingest(tn.key, b)
  await Promise.all(batches.slice(3).map((b) => ingest(tn.key, b)))
  await pollUntil(() => drain(tn.key, 'events', { limit: 1000 }), (r) => r.rows.length === 1001)
  const full = await drain(tn.key, 'events', { limit: 1000 }) // all visible now: the pages are full
  t.same(full.sizes, [1000, 1, 0], 'a page of 1000, then 1, then an empty page with a null cursor')
  t.same(ids(full.rows).slice(0, 300), ids(all).slice(0, 300), 'the sequential requests in insertion order')
  t.same([...ids(full.rows)].sort(), ids(all).sort(), 'every row once')
  const batchOf = (ext: unknown) => Math.floor(Number(String(ext).slice(2)) / 100)
  for (let b = 3; b < 11; b++) {
    const inBatch = full.rows.filter((r) => batchOf(r.player_id) === b).map((r) => r.event_id)
    t.same(inBatch, ids(batches[b] as Row[]), `request ${b}: its events in order`)
  }
  const first = await page(tn.key, 'events', { limit: 1 })
  t.same([first.data.length, first.data[0]?.event_id], [1, all[0]?.event_id])
  t.ok(first.next_cursor, 'a cursor after one row')
  for (const limit of ['0', '1001', '-1', '1.5', 'ten']) {
    for (const dataset of ['events', 'transactions', 'players']) {
      const res = await h.request('GET', `/export/${dataset}`, { key: tn.key, query: { limit } })
      t.equal(res.status, 400, `${dataset} limit=${limit}`)
      t.match(JSON.stringify(res.body.details), 'limit', 'names limit')
    }
  }
  // Players: 1000 then 1, and each request's players after the previous request's (creation order).
  await pollUntil(() => drain(tn.key, 'players', { limit: 1000 }), (r) => r.rows.length === 1001)
  const players = await drain(tn.key, 'players', { limit: 1000 })
  t.same(players.sizes, [1000, 1, 0])
  const order = players.rows.map((r) => Math.min(batchOf(r.external_id), 3)) // the concurrent requests as one
  t.same(order, [...order].sort((a, b) => a - b), 'players of an earlier request come first')
  t.equal(new Set(players.rows.map((r) => r.external_id)).size, 1001, 'each player once')
})

t.test('cursors reused across limits, datasets, brands, keys and tenants', async (t) => {
  const tn = await h.createTenant()
  const b2 = await tn.createBrand('second')
  const pinned2 = await tn.createKey({ brand: b2.id, scopes: ['read'] })
  const events = Array.from({ length: 12 }, (_, i) => ev(`cp${i % 3}`, i % 2 ? 'bet' : 'login', i % 2 ? { amount: i, currency: 'EUR' } : {}))
  await ingest(tn.key, events, { 'x-brand': b2.slug })
  const full = await pollUntil(() => drain(tn.key, 'events', { limit: 5, headers: { 'x-brand': b2.slug } }), (r) => r.rows.length === 12)
  t.same(ids(full.rows), ids(events))

  // A cursor taken at limit 2 continues at limit 7 and at limit 1000: the rows after it, once each.
  const p1 = await page(tn.key, 'events', { limit: 2 }, { 'x-brand': b2.slug })
  const c2 = p1.next_cursor as string
  t.same(ids((await page(tn.key, 'events', { limit: 7, cursor: c2 }, { 'x-brand': b2.slug })).data), ids(events.slice(2, 9)))
  t.same(ids((await page(tn.key, 'events', { limit: 1000, cursor: c2 }, { 'x-brand': b2.slug })).data), ids(events.slice(2)))
  // The same cursor used twice gives the same page (nothing consumed).
  const again = await page(tn.key, 'events', { limit: 3, cursor: c2 }, { 'x-brand': b2.slug })
  t.same(ids(again.data), ids(events.slice(2, 5)))
  t.same(ids((await page(tn.key, 'events', { limit: 3, cursor: c2 }, { 'x-brand': b2.slug })).data), ids(events.slice(2, 5)))

  // The brand is the resolved brand: a pinned key of that brand (with or without another hint) and the
  // `brand` query hint take the cursor; the tenant's default brand does not.
  t.same(ids((await page(pinned2.key, 'events', { limit: 3, cursor: c2 })).data), ids(events.slice(2, 5)), 'pinned key, no hint')
  t.same(ids((await page(pinned2.key, 'events', { limit: 3, cursor: c2 }, { 'x-brand': tn.brand.slug })).data), ids(events.slice(2, 5)), 'pinned key, another hint')
  t.same(ids((await page(tn.key, 'events', { limit: 3, cursor: c2, brand: b2.slug })).data), ids(events.slice(2, 5)), 'brand query hint')
  t.same(ids((await page(tn.key, 'events', { limit: 3, cursor: c2, brand: b2.id })).data), ids(events.slice(2, 5)), 'brand hint by id')
  const refused = async (key: string, dataset: string, cursor: string, headers: Record<string, string> = {}, what = '') => {
    const res = await h.request('GET', `/export/${dataset}`, { key, query: { cursor }, headers })
    t.equal(res.status, 400, what)
    t.match(res.body, { code: 'BAD_REQUEST', details: { errors: [{ field: 'cursor' }] } }, what)
  }
  await refused(tn.key, 'events', c2, {}, 'the default brand')
  // Datasets: a transactions cursor and a players cursor are not events cursors, and the other way round.
  const tx = await page(pinned2.key, 'transactions', { limit: 1 })
  const pl = await pollUntil(() => page(pinned2.key, 'players', { limit: 1 }), (p) => p.data.length === 1)
  await refused(pinned2.key, 'events', tx.next_cursor as string, {}, 'transactions cursor on events')
  await refused(pinned2.key, 'events', pl.next_cursor as string, {}, 'players cursor on events')
  await refused(pinned2.key, 'transactions', pl.next_cursor as string, {}, 'players cursor on transactions')
  await refused(pinned2.key, 'players', tx.next_cursor as string, {}, 'transactions cursor on players')
  // Another tenant, even with a brand of the same slug.
  const stranger = await h.createTenant({ brand: 'second' })
  await refused(stranger.key, 'events', c2, {}, 'another tenant')
  // A cursor is not a brand hint: with the default brand's key and a cursor of brand 2, nothing of brand 2 leaks.
  const res = await h.request('GET', '/export/transactions', { key: tn.key, query: { cursor: tx.next_cursor as string } })
  t.equal(res.status, 400)
})

t.test('brand-pinned keys ignore hints; read keys export; ingestion-only keys get 403', async (t) => {
  const tn = await h.createTenant()
  const b2 = await tn.createBrand('b2')
  await ingest(tn.key, [ev('main-1', 'deposit', { amount: 1, currency: 'EUR' })])
  await ingest(tn.key, [ev('b2-1', 'deposit', { amount: 2, currency: 'EUR' })], { 'x-brand': b2.slug })
  const pinned = await tn.createKey({ brand: b2.id })
  const reader = await tn.createKey({ scopes: ['read'] })
  const writer = await tn.createKey({ scopes: ['events:write'] })
  const pinnedWriter = await tn.createKey({ scopes: ['events:write'], brand: b2.id })
  await pollUntil(() => page(tn.key, 'events', {}, { 'x-brand': b2.slug }), (p) => p.data.length === 1)
  await pollUntil(() => page(tn.key, 'events'), (p) => p.data.length === 1)
  for (const dataset of ['players', 'events', 'transactions']) {
    const field = dataset === 'players' ? 'external_id' : 'player_id'
    const of = (p: Page) => p.data.map((r) => r[field])
    t.same(of(await page(pinned.key, dataset)), ['b2-1'], `${dataset}: pinned key`)
    t.same(of(await page(pinned.key, dataset, {}, { 'x-brand': tn.brand.slug })), ['b2-1'], `${dataset}: pinned key, x-brand of another brand`)
    t.same(of(await page(pinned.key, dataset, { brand: tn.brand.slug })), ['b2-1'], `${dataset}: pinned key, brand query of another brand`)
    t.same(of(await page(reader.key, dataset)), ['main-1'], `${dataset}: read key, default brand`)
    t.same(of(await page(reader.key, dataset, {}, { 'x-brand': b2.slug })), ['b2-1'], `${dataset}: read key, x-brand`)
    for (const [k, what] of [[writer.key, 'events:write key'], [pinnedWriter.key, 'pinned events:write key']] as const) {
      const r = await h.request('GET', `/export/${dataset}`, { key: k })
      t.equal(r.status, 403, `${dataset}: ${what}`)
      t.equal(r.body.code, 'FORBIDDEN')
    }
    const unknown = await h.request('GET', `/export/${dataset}`, { key: tn.key, headers: { 'x-brand': 'no-such-brand' } })
    t.equal(unknown.status, 400, `${dataset}: unknown brand hint`)
    t.equal((await h.request('GET', `/export/${dataset}`)).status, 401, `${dataset}: no key`)
  }
})

t.test('transactions hold exactly the monetary types (stored type, mapped ones included), with exact amounts', async (t) => {
  const tn = await h.createTenant()
  const mapping = {
    rules: [
      { match: 'dep_ok', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.cur' } },
      { match: 'cashier_*', type: 'cashier_note' },
    ],
  }
  t.equal((await h.admin('PUT', `/brands/${tn.brand.id}/event-mapping`, mapping)).status, 200)
  const G = { game: 'g', provider: 'p', category: 'c', round_id: 'r1' }
  const money = [
    ev('tp', 'deposit', { amount: 0.1, currency: 'eur', method: 'card' }),
    ev('tp', 'withdrawal', { amount: 999999999.99, currency: 'EUR', method: 'bank' }),
    ev('tp', 'bet', { amount: 2.5, currency: 'EUR', ...G }),
    ev('tp', 'win', { amount: 4, currency: 'EUR', ...G }),
    ev('tp', 'bet_rollback', { amount: 2.5, currency: 'EUR', ...G }),
    ev('tp', 'win_rollback', { amount: 4, currency: 'EUR', ...G }),
    ev('tp', 'bonus_granted', { bonus_id: 'B1', amount: 10, currency: 'EUR' }),
    ev('tp', 'bonus_completed', { bonus_id: 'B1', amount: 10, currency: 'EUR' }),
    ev('tp', 'bonus_forfeited', { bonus_id: 'B2', amount: 3, currency: 'EUR' }),
    ev('tp', 'dep_ok', { amt: '12.34', cur: 'USD' }), // stored as a deposit
  ]
  const other = [
    ev('tp', 'deposit_failed', { amount: 50, currency: 'EUR' }),
    ev('tp', 'login', { country: 'IT' }),
    ev('tp', 'game_start', { game: 'g' }),
    ev('tp', 'registration', { currency: 'EUR' }),
    ev('tp', 'cashier_deposit', { amount: 7, currency: 'EUR' }), // mapped to a non-monetary stored type
    ev('tp', 'status_change', { status: 'active' }),
    ev('tp', 'consent_update', { channel: 'email', granted: true }),
    ev('tp', 'custom_thing', { amount: 1, currency: 'EUR' }),
  ]
  // Interleaved, so a wrong filter cannot hide behind the order.
  const sent = money.flatMap((m, i) => (other[i] ? [m, other[i]] : [m]))
  await ingest(tn.key, sent)
  const events = await pollUntil(() => drain(tn.key, 'events', { limit: 4 }), (r) => r.rows.length === sent.length)
  t.same(ids(events.rows), ids(sent))
  const tx = await drain(tn.key, 'transactions', { limit: 3 })
  t.same(ids(tx.rows), ids(money), 'the nine monetary types, deposit_failed and the rest left out')
  const byId = new Map(tx.rows.map((r) => [r.event_id, r]))
  t.match(byId.get(money[0]?.event_id), { event_type: 'deposit', amount: 0.1, currency: 'EUR', method: 'card', payload: { amount: 0.1, currency: 'eur', method: 'card' } })
  t.match(byId.get(money[1]?.event_id), { event_type: 'withdrawal', amount: 999999999.99, method: 'bank' })
  t.match(byId.get(money[5]?.event_id), { event_type: 'win_rollback', amount: 4, game: 'g', provider: 'p', category: 'c', round_id: 'r1' })
  t.match(byId.get(money[8]?.event_id), { event_type: 'bonus_forfeited', bonus_id: 'B2', amount: 3, currency: 'EUR' })
  t.match(byId.get(money[9]?.event_id), { event_type: 'deposit', source_type: 'dep_ok', amount: 12.34, currency: 'USD', payload: { amt: '12.34', cur: 'USD' } })
  const ev2 = new Map(events.rows.map((r) => [r.event_id, r]))
  t.match(ev2.get(other[0]?.event_id), { event_type: 'deposit_failed', amount: 50, currency: 'EUR' })
  t.match(ev2.get(other[1]?.event_id), { event_type: 'login', amount: null, currency: null, country: 'IT' })
  t.match(ev2.get(other[4]?.event_id), { event_type: 'cashier_note', source_type: 'cashier_deposit', amount: null })
  t.match(ev2.get(other[6]?.event_id), { event_type: 'consent_update', channel: 'email', granted: true, amount: null })
})

t.test('transactions: a page is never empty while monetary rows remain behind many other rows', async (t) => {
  const tn = await h.createTenant()
  const d1 = ev('sp', 'deposit', { amount: 1, currency: 'EUR' })
  await ingest(tn.key, [d1])
  const first = await pollUntil(() => page(tn.key, 'transactions', { limit: 1 }), (p) => p.data.length === 1)
  for (let i = 0; i < 4; i++) await ingest(tn.key, Array.from({ length: 100 }, () => ev('sp', 'login')))
  const d2 = ev('sp', 'withdrawal', { amount: 2, currency: 'EUR' })
  await ingest(tn.key, [d2])
  await pollUntil(() => page(tn.key, 'events', { limit: 1000 }), (p) => p.data.length === 402)
  const next = await page(tn.key, 'transactions', { limit: 1, cursor: first.next_cursor as string })
  t.same(ids(next.data), [d2.event_id], 'the next monetary row, past 400 logins')
  const after = await page(tn.key, 'transactions', { limit: 1, cursor: next.next_cursor as string })
  t.same(after, { data: [], next_cursor: null })
})

t.test('amounts in rows are exact: 8 decimals as sent', async (t) => {
  const tn = await h.createTenant()
  const e = ev('btc', 'deposit', { amount: 0.12345678, currency: 'BTC' })
  await ingest(tn.key, [e])
  const p = await pollUntil(() => page(tn.key, 'transactions'), (x) => x.data.length === 1)
  t.match(p.data[0], { currency: 'BTC', payload: { amount: 0.12345678 } })
  t.equal(p.data[0]?.amount, 0.12345678, 'the amount as its exact decimal')
})

t.test('players: a cursor whose last row was erased continues; the erased player is gone', async (t) => {
  const tn = await h.createTenant()
  const made: { id: string; external_id: string }[] = []
  for (const x of ['pa', 'pb', 'pc']) made.push((await h.request('POST', '/players', { key: tn.key, body: { external_id: x, email: `${x}@example.com` } })).body.data)
  const first = await pollUntil(() => page(tn.key, 'players', { limit: 2 }), (p) => p.data.length === 2)
  t.same(first.data.map((r) => r.external_id), ['pa', 'pb'])
  t.equal((await h.request('DELETE', `/players/${made[1]?.id}`, { key: tn.key })).status, 202)
  const rest = await page(tn.key, 'players', { limit: 2, cursor: first.next_cursor as string })
  t.same(rest.data.map((r) => r.external_id), ['pc'], 'the rows after the erased one')
  const all = await drain(tn.key, 'players', { limit: 10 })
  t.same(all.rows.map((r) => r.external_id), ['pa', 'pc'])
  t.notOk(JSON.stringify(all.rows).includes('pb@example.com'), 'nothing of the erased player')
  await h.request('POST', '/players', { key: tn.key, body: { external_id: 'pd' } })
  const later = await pollUntil(() => drain(tn.key, 'players', { limit: 10, cursor: rest.next_cursor as string }), (r) => r.rows.length > 0)
  t.same(later.rows.map((r) => r.external_id), ['pd'], 'incremental: only the player added since')
})

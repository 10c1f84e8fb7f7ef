// Exports and their adversarial checks, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { createSpool } from '../../src/events/spool.ts'
import { startHarness } from '../helpers/harness.ts'
import { pollUntil, sleep } from '../helpers/wait.ts'
import { exportClient, type Page, type Row } from './helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_FLUSH_INTERVAL_MS: '50' } })

// GET /export/{dataset}: rows and their fields, keyset pages in insertion (creation) order, incremental
// sync from the last cursor, signed cursors bound to tenant, brand and dataset, and a full export while
// events stream in and two flushers (as two API processes would) move them to ClickHouse concurrently.
t.test('export', async (t) => {
  const ctx = h.app.ctx

  const api = exportClient(h)
  const { page, ingest } = api
  /** The shared drain, checking every page: at most `limit` rows, and a null cursor only on a page without rows. */
  async function drain(key: string, dataset: string, opts: { limit: number; cursor?: string; headers?: Record<string, string> }) {
    const r = await api.drain(key, dataset, opts)
    for (const size of r.sizes) t.ok(size <= opts.limit)
    t.equal(r.sizes.at(-1), 0, 'next_cursor is null only on a page without rows')
    return r
  }

  const tenant = await h.createTenant()
  const key = tenant.key

  t.test('events and transactions: fields, insertion order, pages, incremental sync', async (t) => {
    await ingest(key, [
      { event_id: 'x1', player_id: 'ep1', event_type: 'registration', timestamp: '2026-03-01T10:00:00.123Z', session_id: 's1', payload: { country: 'IT', currency: 'EUR', extra: { a: 1 } } },
      { event_id: 'x2', player_id: 'ep1', event_type: 'deposit', timestamp: '2026-03-01T10:05:00Z', payload: { amount: 100.1, currency: 'EUR', method: 'card' } },
      { player_id: 'ep2', event_type: 'custom_thing', timestamp: '2026-03-01T09:00:00Z', payload: { k: 'v' } },
    ])
    await ingest(key, [
      { event_id: 'x4', player_id: 'ep2', event_type: 'bet', timestamp: '2026-02-01T10:00:00Z', payload: { amount: 2.5, currency: 'USD', game: 'g', provider: 'p', category: 'c', round_id: 'r' } },
      { event_id: 'x5', player_id: 'ep2', event_type: 'consent_update', payload: { channel: 'email', granted: false } },
    ])
    const all = await pollUntil(() => drain(key, 'events', { limit: 2 }), (r) => r.rows.length === 5)
    t.equal(all.rows.length, 5)
    t.same(all.rows.map((r) => r.event_id), ['x1', 'x2', null, 'x4', 'x5'], 'insertion order, whatever the event times')
    const [reg, dep, custom, bet, consent] = all.rows as Record<string, unknown>[]
    t.match(reg, {
      event_id: 'x1', player_id: 'ep1', event_type: 'registration', source_type: 'registration', event_time: '2026-03-01T10:00:00.123Z',
      session_id: 's1', amount: null, currency: 'EUR', country: 'IT', payload: { country: 'IT', currency: 'EUR', extra: { a: 1 } },
    })
    t.match(reg?.received_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    t.same(dep, {
      event_id: 'x2', player_id: 'ep1', event_type: 'deposit', source_type: 'deposit', event_time: '2026-03-01T10:05:00.000Z', received_at: dep?.received_at,
      session_id: null, amount: 100.1, currency: 'EUR', method: 'card', game: null, provider: null, category: null, round_id: null, country: null,
      language: null, device: null, os: null, browser: null, platform: null, status: null, bonus_id: null, channel: null, granted: null,
      email: null, phone: null, name: null, timezone: null, reason: null,
      payload: { amount: 100.1, currency: 'EUR', method: 'card' },
    })
    t.match(custom, { event_type: 'custom_thing', payload: { k: 'v' } })
    t.match(bet, { amount: 2.5, currency: 'USD', game: 'g', provider: 'p', category: 'c', round_id: 'r' })
    t.match(consent, { channel: 'email', granted: false })

    const tx = await drain(key, 'transactions', { limit: 1 })
    t.same(tx.rows.map((r) => r.event_id), ['x2', 'x4'], 'transactions: the monetary events only')

    // Continuing from the last cursor yields only what was added since.
    t.same((await page(key, 'events', { cursor: all.cursor as string })).data, [])
    await ingest(key, [{ event_id: 'x6', player_id: 'ep3', event_type: 'withdrawal', payload: { amount: 7, currency: 'EUR' } }])
    const more = await pollUntil(() => drain(key, 'events', { limit: 200, cursor: all.cursor }), (r) => r.rows.length === 1)
    t.same(more.rows.map((r) => r.event_id), ['x6'])
    const moreTx = await drain(key, 'transactions', { limit: 200, cursor: tx.cursor })
    t.same(moreTx.rows.map((r) => r.event_id), ['x6'])
    // A page of `limit` rows; the default limit is 200.
    t.equal((await page(key, 'events', { limit: 3 })).data.length, 3)
    t.equal((await page(key, 'events')).data.length, 6)
  })

  t.test('text fields and payloads come back exactly as sent, in JSON as JSON.stringify writes it', async (t) => {
    const other = await h.createTenant()
    const odd = 'Book of "Ra" / \\ 😀 é\ttab\nline \u0001'
    const payload = { game: odd, note: 'a/b', nested: { list: [1, 'x"y', null, true] }, unicode: '✓' }
    await ingest(other.key, [{ event_id: 'esc/1', player_id: 'p/"1"', event_type: 'bet', session_id: 'tab\there', payload: { amount: 1, currency: 'EUR', ...payload } }])
    const res = await pollUntil(() => h.request('GET', '/export/events', { key: other.key }), (r) => r.body.data.length === 1)
    t.same(res.body.data[0], {
      ...res.body.data[0], event_id: 'esc/1', player_id: 'p/"1"', session_id: 'tab\there', game: odd,
      payload: { amount: 1, currency: 'EUR', ...payload },
    })
    const row = /\{"data":\[(.*)\],"next_cursor"/s.exec(res.text)?.[1] ?? ''
    t.ok(row.includes('"event_id":"esc/1"'), `'/' is not escaped: ${row.slice(0, 60)}`)
    t.notOk(/[\t\n]/.test(row), 'no raw tab or newline inside the row')
  })

  t.test('a brand whose rows are far apart in the sink: no page comes back empty while rows remain', async (t) => {
    const sparse = await h.createTenant()
    const busy = await h.createTenant()
    await ingest(sparse.key, [{ event_id: 'far-1', player_id: 'f1', event_type: 'login' }])
    await pollUntil(() => drain(sparse.key, 'events', { limit: 1 }), (r) => r.rows.length === 1)
    // Hundreds of other rows in between, in their own flushes.
    for (let i = 0; i < 6; i++) await ingest(busy.key, Array.from({ length: 100 }, (_, k) => ({ player_id: `b${k}`, event_type: 'login' })))
    await pollUntil(() => drain(busy.key, 'events', { limit: 1000 }), (r) => r.rows.length === 600)
    await ingest(sparse.key, [{ event_id: 'far-2', player_id: 'f1', event_type: 'login' }])
    const all = await pollUntil(() => drain(sparse.key, 'events', { limit: 1 }), (r) => r.rows.length === 2)
    t.same(all.rows.map((r) => r.event_id), ['far-1', 'far-2'])
  })

  t.test('players: creation order, record and profile, incremental', async (t) => {
    const t2 = await h.createTenant()
    for (const id of ['a', 'b', 'c']) await h.request('POST', '/players', { key: t2.key, body: { external_id: id, email: `${id}@example.com`, currency: 'USD' } })
    await ingest(t2.key, [{ event_id: 'd1', player_id: 'd', event_type: 'deposit', payload: { amount: 5, currency: 'USD' } }])
    const all = await pollUntil(() => drain(t2.key, 'players', { limit: 2 }), (r) => r.rows.length === 4)
    t.same(all.rows.map((r) => r.external_id), ['a', 'b', 'c', 'd'])
    t.match(all.rows[0], { external_id: 'a', email: 'a@example.com', status: 'active', metadata: {}, profile: { currency: 'USD', language: 'en' } })
    t.match(all.rows[3], { external_id: 'd', profile: { event_count: 1, currency: 'EUR', totals_by_currency: { USD: { deposit_count: 1 } } } })
    t.notOk('tenant_id' in (all.rows[0]?.profile as object), 'no internal ids in the profile')
    const a = (await h.request('GET', `/players/${all.rows[0]?.id}`, { key: t2.key })).body.data
    t.same([all.rows[0]?.created_at, all.rows[0]?.updated_at], [a.created_at, a.updated_at], 'times as the player record gives them')
    // The profile's times too: UTC with milliseconds and `Z`, as GET /players/{id} gives them (they came in
    // row_to_json's session-zone form, `2026-11-28T03:11:24.27+00:00`).
    const d = (await h.request('GET', `/players/${all.rows[3]?.id}`, { key: t2.key })).body.data
    const dProfile = all.rows[3]?.profile as Record<string, unknown>
    for (const f of ['first_seen_at', 'last_seen_at', 'first_deposit_at', 'last_deposit_at']) {
      t.match(dProfile[f], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, `profile.${f} in the API's form`)
      t.equal(dProfile[f], d.profile[f], `profile.${f} as GET /players/{id} gives it`)
    }
    t.equal(dProfile.last_login_at, null)
    t.match(dProfile.updated_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    t.same(Object.keys(all.rows[0] as object), ['id', 'external_id', 'email', 'phone', 'status', 'metadata', 'created_at', 'updated_at', 'profile'])
    await h.request('POST', '/players', { key: t2.key, body: { external_id: 'e' } })
    // A page reads players created before the oldest transaction then running (playersPage): another
    // process's transaction may hold 'e' back for a moment, never skip it.
    const later = await pollUntil(() => drain(t2.key, 'players', { limit: 10, cursor: all.cursor }), (r) => r.rows.length > 0)
    t.same(later.rows.map((r) => r.external_id), ['e'])
  })

  t.test('cursors: signed, and bound to tenant, brand and dataset', async (t) => {
    const first = await page(key, 'events', { limit: 1 })
    const cursor = first.next_cursor as string
    t.ok(cursor)
    const refused = async (k: string, dataset: string, c: string, headers: Record<string, string> = {}, what = '') => {
      const res = await h.request('GET', `/export/${dataset}`, { key: k, query: { cursor: c }, headers })
      t.equal(res.status, 400, what)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.match(res.body.details, { errors: [{ field: 'cursor' }] })
    }
    const [body, sig] = cursor.split('.') as [string, string]
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString())
    const forged = Buffer.from(JSON.stringify({ ...payload, s: '0' })).toString('base64url')
    await refused(key, 'events', `${forged}.${sig}`, {}, 'altered position')
    await refused(key, 'events', `${body}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`, {}, 'altered signature')
    await refused(key, 'events', 'not-a-cursor', {}, 'garbage')
    await refused(key, 'transactions', cursor, {}, 'another dataset')
    await refused(key, 'players', cursor, {}, 'another dataset')
    const other = await tenant.createBrand('second')
    await refused(key, 'events', cursor, { 'x-brand': other.slug }, 'another brand')
    const stranger = await h.createTenant()
    await refused(stranger.key, 'events', cursor, {}, 'another tenant')
    const segmentCursor = Buffer.from(JSON.stringify({ s: 'x', t: 'y', i: 'z' })).toString('base64url')
    await refused(key, 'events', `${segmentCursor}.${sig}`, {}, 'foreign payload')
    for (const limit of ['0', '1001', 'abc', '-1']) t.equal((await h.request('GET', '/export/events', { key, query: { limit } })).status, 400, `limit ${limit}`)
    t.equal((await h.request('GET', '/export/everything', { key })).status, 400, 'unknown dataset')
    // The other brand's export is its own (empty) stream.
    t.same(await page(key, 'events', {}, { 'x-brand': other.slug }), { data: [], next_cursor: null })
  })

  t.test('an acknowledged event is exported within 2 s', async (t) => {
    const t3 = await h.createTenant()
    await ingest(t3.key, [{ event_id: 'w0', player_id: 'w', event_type: 'login' }])
    const start = await pollUntil(() => drain(t3.key, 'events', { limit: 100 }), (r) => r.rows.length === 1)
    for (let i = 1; i <= 3; i++) {
      await ingest(t3.key, [{ event_id: `w${i}`, player_id: 'w', event_type: 'login' }])
      const acked = Date.now()
      // One page per poll (not drain's two requests), so the figure is the export's lag, not the client's.
      const got = await pollUntil(() => page(t3.key, 'events', { cursor: start.cursor as string, limit: 100 }), (p) => p.data.length === i, 2000)
      t.equal(got.data.length, i, `event ${i} exported`)
      t.ok(Date.now() - acked < 2000, `within 2 s (${Date.now() - acked} ms)`)
    }
  })

  t.test('a full export while events stream in, moved by two flushers at once: every row exactly once', async (t) => {
    const t4 = await h.createTenant()
    // A second flusher on the same PostgreSQL and ClickHouse, racing the app's own (as another process would).
    const second = createSpool({ sql: ctx.sql, ch: ctx.ch, log: ctx.log, intervalMs: 10, maxBacklog: 1_000_000 })
    second.start()
    t.teardown(() => second.stop())
    const total = 1500
    // Every 5th event a login: in `events`, not in `transactions`.
    const isLogin = (i: number) => i % 5 === 4
    const event = (i: number) =>
      isLogin(i)
        ? { event_id: `s${i}`, player_id: `sp${i % 37}`, event_type: 'login', payload: { country: 'IT' } }
        : { event_id: `s${i}`, player_id: `sp${i % 37}`, event_type: 'bet', payload: { amount: 1, currency: 'EUR' } }
    const expected = {
      events: new Set(Array.from({ length: total }, (_, i) => `s${i}`)),
      transactions: new Set(Array.from({ length: total }, (_, i) => i).filter((i) => !isLogin(i)).map((i) => `s${i}`)),
    }
    let sent = 0
    const producer = (async () => {
      while (sent < total) {
        const n = Math.min(50, total - sent)
        const events = Array.from({ length: n }, (_, i) => event(sent + i))
        await Promise.all([ingest(t4.key, events.slice(0, 25)), ingest(t4.key, events.slice(25))])
        sent += n
        await sleep(5)
      }
    })()
    // Both datasets scanned at once while the events stream in, each from its own cursor.
    const scan = async (dataset: 'events' | 'transactions') => {
      const seen = new Map<string, number>()
      let cursor: string | undefined
      const deadline = Date.now() + 30_000
      while (Date.now() < deadline) {
        const p = await page(t4.key, dataset, { limit: 97, ...(cursor ? { cursor } : {}) })
        for (const r of p.data) seen.set(r.event_id as string, (seen.get(r.event_id as string) ?? 0) + 1)
        if (p.next_cursor) cursor = p.next_cursor
        if (sent === total && seen.size >= expected[dataset].size) break
        if (!p.data.length) await sleep(20)
      }
      return { seen, cursor }
    }
    const [events, transactions] = await Promise.all([scan('events'), scan('transactions')])
    await producer
    for (const [dataset, { seen, cursor }] of [['events', events], ['transactions', transactions]] as const) {
      t.same([...expected[dataset]].filter((id) => !seen.has(id)), [], `${dataset}: no row missing`)
      t.same([...seen.keys()].filter((id) => !expected[dataset].has(id)), [], `${dataset}: no row of another kind`)
      t.same([...seen.values()].filter((n) => n !== 1), [], `${dataset}: none twice`)
      t.same((await page(t4.key, dataset, { cursor: cursor as string })).data, [], `${dataset}: nothing left after the last cursor`)
    }
  })
})

// Adversarial export checks (interface spec "Export" and "Limits"; contract.md "Resources", "Canonical
// events"; contract-engines.md §6; docs/analytics.md "Exports"): limit edges, cursors reused across
// limits, datasets, brands and keys, brand-pinned keys against brand hints, read and ingestion-only keys,
// which event types the transactions dataset holds (mapped types included), exact amounts in rows,
// players in creation order across separate requests, and a players cursor whose last row was erased.
t.test('adversarial', async (t) => {
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
})

// Every analytics and report route against the golden dataset (golden.ts), figure by figure, computed by
// hand; the brand and tenant scoping; the `read` scope. Runs on the default INGEST_ACK_AFTER=postgres.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { GOLDEN_EVENTS, GOLDEN_NOW } from './golden.ts'

const h = await startHarness(t, { clock: () => GOLDEN_NOW, env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
const tenant = await h.createTenant()
const key = tenant.key
const get = async (path: string, query: Record<string, string | number> = {}, k = key) => {
  const res = await h.request('GET', path, { key: k, query })
  if (res.status !== 200) throw new Error(`${path} ${JSON.stringify(query)}: ${res.status} ${res.text}`)
  return res.body.data
}

// The dataset, plus noise in a second brand and a second tenant that must never show.
const other = await tenant.createBrand('other')
const stranger = await h.createTenant()
const ingest = async (k: string, events: unknown[], brand?: string) => {
  const res = await h.request('POST', '/events', { key: k, body: { events }, headers: brand ? { 'x-brand': brand } : {} })
  if (res.status !== 200) throw new Error(res.text)
}
await ingest(key, GOLDEN_EVENTS)
const noise = GOLDEN_EVENTS.map((e) => ({ ...e, event_id: `x-${e.event_id}` }))
await ingest(key, noise, other.slug)
await ingest(stranger.key, noise)
const p4 = (await h.request('POST', '/players', { key, body: { external_id: 'p4', currency: 'EUR' } })).body.data
await h.request('PATCH', `/players/${p4.id}`, { key, body: { status: 'closed' } })
const p3 = (await h.request('GET', '/players', { key, query: { search: 'p3' } })).body.data[0]
await h.request('PATCH', `/players/${p3.id}`, { key, body: { status: 'suspended' } })

// Acknowledged events reach ClickHouse within the flush interval (docs/analytics.md: within 2 s), the
// other brand's in a flush of their own: wait for both.
const started = Date.now()
for (;;) {
  const s = await get('/analytics/summary')
  const o = (await h.request('GET', '/analytics/summary', { key, headers: { 'x-brand': other.slug } })).body.data
  if (s.bets.count === 4 && s.active === 4 && o.bets.count === 4) break
  if (Date.now() - started > 5000) throw new Error('events not visible after 5 s')
  await new Promise((r) => setTimeout(r, 100))
}

t.test('summary', async (t) => {
  t.same(await get('/analytics/summary'), {
    players: 5,
    active: 4, // p1, p2, p3, p5 have events since 2026-03-11T12:00Z
    new_players_30d: 3, // p5 (2026-03-29); p3 (no registration event: created when its first event arrived) and p4 (no events: created_at), both "today"
    depositors: 2, // p1, p2; failed deposits never count
    ftd_count: 1, // p2's first deposit 2026-03-15; p1's was in February
    deposits: { count: 3, amount: { EUR: 100.1, USD: 75.25 } },
    withdrawals: { count: 1, amount: { USD: 30 } },
    bets: { count: 4, amount: { EUR: 60, USD: 40 } },
    wins: { count: 3, amount: { EUR: 17.5, USD: 60 } },
    ggr: { EUR: 34.5, USD: -20 }, // EUR (60 − 10) − (17.5 − 2); USD 40 − 60
    ngr: { EUR: 24.5, USD: -25 },
    bonus_cost: { EUR: 10, USD: 5 },
    arpu: { EUR: 6.125, USD: -6.25 }, // NGR / 4 active
    average_ltv: { EUR: 12.25, USD: -12.5 }, // NGR / 2 depositors
    lifecycle_stages: { new: 3, ftd: 1, active: 1, vip: 0, at_risk: 0, churned: 0 },
  })
})

t.test('timeseries in Europe/Rome across midnight and the DST day', async (t) => {
  const rows = await get('/analytics/timeseries', { from: '2026-03-27', tz: 'Europe/Rome' })
  t.equal(rows.length, 15, '2026-03-27 .. 2026-04-10, both included')
  const zero = { new_players: 0, active_players: 0, events: 0, deposits: {}, ggr: {} }
  const expected: Record<string, object> = {
    '2026-03-28': { ...zero, active_players: 1, events: 1, ggr: { EUR: 20 } }, // bet at 23:30 CET
    '2026-03-29': { ...zero, active_players: 1, events: 3, ggr: { EUR: -5.5 } }, // win 00:10 CET, bet + rollback 12:00 CEST
    '2026-03-30': { ...zero, new_players: 1, active_players: 2, events: 5, ggr: { EUR: 20 } }, // p5 at 00:30 CEST; 30 − 12 + 2
    '2026-04-01': { ...zero, active_players: 1, events: 1 },
    '2026-04-02': { ...zero, active_players: 1, events: 3, deposits: { USD: 25.25 }, ggr: { USD: -20 } },
    '2026-04-03': { ...zero, active_players: 1, events: 2 },
    '2026-04-04': { ...zero, active_players: 1, events: 1 },
    '2026-04-05': { ...zero, active_players: 1, events: 2 }, // the failed deposit is no deposit
  }
  for (const row of rows) t.same(row, { date: row.date, ...(expected[row.date] ?? zero) }, row.date)
  t.same(rows.map((r: { date: string }) => r.date).slice(0, 3), ['2026-03-27', '2026-03-28', '2026-03-29'])
  // The same days in UTC: the 00:10 CET win falls on the 28th, p5's registration on the 29th.
  const utc = await get('/analytics/timeseries', { from: '2026-03-28T00:00:00Z' })
  t.same(utc.slice(0, 3).map((r: { events: number; new_players: number }) => [r.events, r.new_players]), [[2, 0], [3, 1], [4, 0]])
  // Default `from`: 30 days before now.
  t.equal((await get('/analytics/timeseries')).length, 31)
})

t.test('revenue by player dimensions', async (t) => {
  t.same(await get('/analytics/revenue', { dimension: 'country' }), [
    { key: 'DE', players: 1, bets: {}, wins: {}, ggr: {}, ngr: {}, deposits: {} },
    { key: 'IT', players: 2, bets: { EUR: 60 }, wins: { EUR: 17.5 }, ggr: { EUR: 34.5 }, ngr: { EUR: 24.5 }, deposits: { EUR: 100.1 } },
    { key: 'US', players: 1, bets: { USD: 40 }, wins: { USD: 60 }, ggr: { USD: -20 }, ngr: { USD: -25 }, deposits: { USD: 75.25 } },
  ])
  const keys = async (dimension: string) => (await get('/analytics/revenue', { dimension })).map((r: { key: string; players: number }) => [r.key, r.players])
  t.same(await keys('device'), [['desktop', 1], ['mobile', 2], ['tablet', 1]])
  t.same(await keys('os'), [['android', 1], ['ios', 1], ['windows', 1], [null, 1]])
  t.same(await keys('browser'), [['chrome', 2], ['safari', 1], [null, 1]])
  t.same(await keys('platform'), [['app', 1], ['web', 2], [null, 1]])
  // from: p1's and p2's play since April 2 only.
  t.same(await get('/analytics/revenue', { dimension: 'device', from: '2026-04-02T00:00:00Z' }), [
    { key: 'desktop', players: 1, bets: { USD: 40 }, wins: { USD: 60 }, ggr: { USD: -20 }, ngr: { USD: -25 }, deposits: { USD: 25.25 } },
    { key: 'mobile', players: 1, bets: {}, wins: {}, ggr: {}, ngr: {}, deposits: {} },
  ])
})

t.test('revenue by game, provider, category', async (t) => {
  const row = (key: string, bets: object, wins: object, ggr: object) => ({ key, players: 1, bets, wins, ggr, ngr: null, deposits: {} })
  t.same(await get('/analytics/revenue', { dimension: 'game' }), [
    row('blackjack', { USD: 40 }, { USD: 60 }, { USD: -20 }),
    row('book', { EUR: 30 }, { EUR: 12 }, { EUR: 20 }),
    row('starburst', { EUR: 30 }, { EUR: 5.5 }, { EUR: 14.5 }), // 30 − 10 rolled back − 5.5
  ])
  t.same(await get('/analytics/revenue', { dimension: 'provider' }), [
    row('evolution', { USD: 40 }, { USD: 60 }, { USD: -20 }),
    row('netent', { EUR: 30 }, { EUR: 5.5 }, { EUR: 14.5 }),
    row('playngo', { EUR: 30 }, { EUR: 12 }, { EUR: 20 }),
  ])
  t.same(await get('/analytics/revenue', { dimension: 'category' }), [
    row('live', { USD: 40 }, { USD: 60 }, { USD: -20 }),
    row('slots', { EUR: 60 }, { EUR: 17.5 }, { EUR: 34.5 }),
  ])
})

t.test('heatmap in Europe/Rome', async (t) => {
  const rows = await get('/analytics/revenue', { dimension: 'heatmap', tz: 'Europe/Rome' })
  t.equal(rows.length, 168)
  const nonEmpty = rows.filter((r: { events: number }) => r.events > 0)
  t.same(nonEmpty, [
    { weekday: 1, hour: 0, events: 1, ggr: {} }, // p5's registration, Mon 00:30 CEST
    { weekday: 1, hour: 10, events: 1, ggr: {} },
    { weekday: 1, hour: 11, events: 3, ggr: { EUR: 20 } },
    { weekday: 2, hour: 11, events: 2, ggr: {} },
    { weekday: 3, hour: 10, events: 2, ggr: {} },
    { weekday: 4, hour: 13, events: 1, ggr: {} },
    { weekday: 4, hour: 14, events: 1, ggr: {} },
    { weekday: 4, hour: 15, events: 2, ggr: { USD: -20 } },
    { weekday: 5, hour: 11, events: 1, ggr: {} },
    { weekday: 5, hour: 12, events: 1, ggr: {} },
    { weekday: 6, hour: 12, events: 1, ggr: {} },
    { weekday: 6, hour: 23, events: 1, ggr: { EUR: 20 } },
    { weekday: 7, hour: 0, events: 1, ggr: { EUR: -5.5 } },
    { weekday: 7, hour: 12, events: 4, ggr: {} }, // bet + rollback at 12:00 CEST (10:00Z), p3's login and failed deposit
    { weekday: 7, hour: 13, events: 1, ggr: {} },
  ])
  // `from` inside a 15-minute bucket: the bet at 10:00:00Z is out, its rollback at 10:01Z in.
  const since = await get('/analytics/revenue', { dimension: 'heatmap', tz: 'Europe/Rome', from: '2026-03-29T10:00:30Z' })
  t.same(since.find((r: { weekday: number; hour: number }) => r.weekday === 7 && r.hour === 12), { weekday: 7, hour: 12, events: 3, ggr: { EUR: -10 } })
  t.equal(since.reduce((n: number, r: { events: number }) => n + r.events, 0), 15)
  // In UTC the same events sit an hour or two earlier.
  const utc = await get('/analytics/revenue', { dimension: 'heatmap' })
  t.same(utc.find((r: { weekday: number; hour: number }) => r.weekday === 7 && r.hour === 10), { weekday: 7, hour: 10, events: 4, ggr: {} })
})

t.test('bonus ROI', async (t) => {
  t.same(await get('/analytics/revenue', { dimension: 'bonus_roi' }), [
    { bonus_id: 'B1', granted: 1, cost: { EUR: 10 }, ggr_after: { EUR: 20 }, roi: { EUR: 1 } }, // p1 after 03-30 08:00: 30 − 12 + 2
    { bonus_id: 'B2', granted: 1, cost: { USD: 5 }, ggr_after: {}, roi: { USD: -1 } },
  ])
  // Since April 1 (UTC midnight): B1's completion is in, its grant is not.
  t.same(await get('/analytics/revenue', { dimension: 'bonus_roi', from: '2026-04-01' }), [
    { bonus_id: 'B1', granted: 0, cost: { EUR: 10 }, ggr_after: {}, roi: { EUR: -1 } },
    { bonus_id: 'B2', granted: 1, cost: { USD: 5 }, ggr_after: {}, roi: { USD: -1 } },
  ])
})

t.test('cohorts and retention', async (t) => {
  t.same(await get('/analytics/cohorts', { months: 3 }), {
    cohorts: [
      { month: '2026-02', size: 1, retention: [1, 1, 1], depositors: 1, deposits: { EUR: 100.1 }, ggr: { EUR: 34.5 } },
      { month: '2026-03', size: 2, retention: [1, 0.5], depositors: 1, deposits: { USD: 75.25 }, ggr: { USD: -20 } }, // p2, p5
      { month: '2026-04', size: 0, retention: [0], depositors: 0, deposits: {}, ggr: {} },
    ],
  })
  const year = await get('/analytics/cohorts')
  t.equal(year.cohorts.length, 12)
  t.equal(year.cohorts[0].month, '2025-05')
  t.equal((await get('/analytics/cohorts', { months: 36 })).cohorts.length, 36)
})

t.test('reports', async (t) => {
  const run = (metric: string, dimension: string, from?: string) => get('/reports/run', { metric, dimension, ...(from ? { from } : {}) })
  t.same(await run('events', 'event_type'), [
    { key: 'bet', value: 4 }, { key: 'bet_rollback', value: 1 }, { key: 'bonus_completed', value: 2 }, { key: 'bonus_granted', value: 2 },
    { key: 'deposit', value: 3 }, { key: 'deposit_failed', value: 2 }, { key: 'login', value: 1 }, { key: 'registration', value: 3 },
    { key: 'win', value: 3 }, { key: 'win_rollback', value: 1 }, { key: 'withdrawal', value: 1 },
  ])
  t.same(await run('events', 'event_type', '2026-03-29T10:00:30Z'), [
    { key: 'bet', value: 2 }, { key: 'bet_rollback', value: 1 }, { key: 'bonus_completed', value: 2 }, { key: 'bonus_granted', value: 2 },
    { key: 'deposit', value: 1 }, { key: 'deposit_failed', value: 1 }, { key: 'login', value: 1 }, { key: 'registration', value: 1 },
    { key: 'win', value: 2 }, { key: 'win_rollback', value: 1 }, { key: 'withdrawal', value: 1 },
  ])
  t.same(await run('deposits', 'day'), [
    { key: '2026-02-10', value: { EUR: 100.1 } }, { key: '2026-03-15', value: { USD: 50 } }, { key: '2026-04-02', value: { USD: 25.25 } },
  ])
  t.same(await run('wagered', 'week'), [
    { key: '2026-03-23', value: { EUR: 20 } }, // 20 + 10 − 10 rolled back
    { key: '2026-03-30', value: { EUR: 30, USD: 40 } },
  ])
  t.same(await run('players', 'day', '2026-03-28'), [
    { key: '2026-03-28', value: 1 }, { key: '2026-03-29', value: 2 }, { key: '2026-03-30', value: 1 }, { key: '2026-04-01', value: 1 },
    { key: '2026-04-02', value: 1 }, { key: '2026-04-03', value: 1 }, { key: '2026-04-04', value: 1 }, { key: '2026-04-05', value: 1 },
  ])
  t.same(await run('events', 'week', '2026-03-30'), [{ key: '2026-03-30', value: 13 }]) // from Monday 00:00 UTC: p1 5, p2 6, p3 2
  t.same(await run('players', 'country'), [{ key: 'DE', value: 1 }, { key: 'IT', value: 2 }, { key: 'US', value: 1 }])
  t.same(await run('deposits', 'country'), [{ key: 'IT', value: { EUR: 100.1 } }, { key: 'US', value: { USD: 75.25 } }])
  t.same(await run('events', 'country'), [{ key: 'DE', value: 1 }, { key: 'IT', value: 14 }, { key: 'US', value: 8 }])
  t.same(await run('players', 'status'), [{ key: 'active', value: 3 }, { key: 'closed', value: 1 }, { key: 'suspended', value: 1 }])
  t.same(await run('events', 'status'), [{ key: 'active', value: 21 }, { key: 'suspended', value: 2 }])
  t.same(await run('wagered', 'status'), [{ key: 'active', value: { EUR: 50, USD: 40 } }])
  t.same(await run('events', 'game'), [{ key: 'blackjack', value: 2 }, { key: 'book', value: 3 }, { key: 'starburst', value: 4 }, { key: null, value: 14 }])
  t.same(await run('wagered', 'game'), [{ key: 'blackjack', value: { USD: 40 } }, { key: 'book', value: { EUR: 30 } }, { key: 'starburst', value: { EUR: 20 } }])
  t.same(await run('players', 'event_type', '2026-04-01'), [
    { key: 'bet', value: 1 }, { key: 'bonus_completed', value: 2 }, { key: 'bonus_granted', value: 1 }, { key: 'deposit', value: 1 },
    { key: 'deposit_failed', value: 1 }, { key: 'login', value: 1 }, { key: 'win', value: 1 }, { key: 'withdrawal', value: 1 },
  ])
  t.same(await run('deposits', 'event_type'), [{ key: 'deposit', value: { EUR: 100.1, USD: 75.25 } }])

  // The other nine pairs. Rows whose money is zero in every currency are left out, as above (deposits by
  // day lists only days with deposits, wagered by status no `suspended`).
  t.same(await run('events', 'day'), [
    { key: '2026-02-10', value: 2 }, // p1 registration, deposit
    { key: '2026-02-11', value: 1 }, // p1 failed deposit
    { key: '2026-03-05', value: 1 }, // p2 registration
    { key: '2026-03-15', value: 1 }, // p2 deposit
    { key: '2026-03-28', value: 2 }, // p1 bet 22:30Z, win 23:10Z
    { key: '2026-03-29', value: 3 }, // p1 bet + rollback 10:00Z, p5 registration 22:30Z
    { key: '2026-03-30', value: 4 }, // p1 grant, bet, win, win rollback
    { key: '2026-04-01', value: 1 }, // p1 bonus completed
    { key: '2026-04-02', value: 3 }, // p2 deposit, bet, win
    { key: '2026-04-03', value: 2 }, // p2 withdrawal, grant
    { key: '2026-04-04', value: 1 }, // p2 bonus completed
    { key: '2026-04-05', value: 2 }, // p3 login, failed deposit
  ]) // 23 in all
  t.same(await run('deposits', 'week'), [
    { key: '2026-02-09', value: { EUR: 100.1 } }, // p1 Tue 02-10
    { key: '2026-03-09', value: { USD: 50 } }, // p2 Sun 03-15 (its week began Mon 03-09)
    { key: '2026-03-30', value: { USD: 25.25 } }, // p2 Thu 04-02; the failed deposits (EUR 50, 20) never count
  ])
  t.same(await run('deposits', 'status'), [{ key: 'active', value: { EUR: 100.1, USD: 75.25 } }]) // p1 100.1; p2 50 + 25.25; p3 (suspended) only a failed one
  t.same(await run('deposits', 'game'), [{ key: null, value: { EUR: 100.1, USD: 75.25 } }]) // deposits carry no game
  t.same(await run('wagered', 'day'), [
    { key: '2026-03-28', value: { EUR: 20 } }, // p1 bet 20
    // 2026-03-29: bet 10 − 10 rolled back = 0, no row
    { key: '2026-03-30', value: { EUR: 30 } }, // p1 bet 30 (book)
    { key: '2026-04-02', value: { USD: 40 } }, // p2 bet 40 (blackjack)
  ])
  t.same(await run('wagered', 'country'), [
    { key: 'IT', value: { EUR: 50 } }, // p1: 20 + 10 + 30 − 10 rolled back; p3 (IT) no bets
    { key: 'US', value: { USD: 40 } }, // p2: 40; p5 (DE) no bets, no row
  ])
  t.same(await run('wagered', 'event_type'), [
    { key: 'bet', value: { EUR: 60, USD: 40 } }, // EUR 20 + 10 + 30; USD 40
    { key: 'bet_rollback', value: { EUR: -10 } }, // subtracted under its own type: the rows sum to EUR 50, USD 40
  ])
  t.same(await run('players', 'week'), [
    { key: '2026-02-09', value: 1 }, // p1 (02-10, 02-11)
    { key: '2026-03-02', value: 1 }, // p2 registration Thu 03-05
    { key: '2026-03-09', value: 1 }, // p2 deposit Sun 03-15
    { key: '2026-03-23', value: 2 }, // p1 (03-28, 03-29), p5 (Sun 03-29 22:30Z)
    { key: '2026-03-30', value: 3 }, // p1, p2, p3 (p1 several times: distinct)
  ])
  t.same(await run('players', 'game'), [
    { key: 'blackjack', value: 1 }, { key: 'book', value: 1 }, { key: 'starburst', value: 1 }, // p2; p1; p1
    { key: null, value: 4 }, // p1, p2, p3, p5 all have events without a game
  ])
  // The same since `from` (read from events rather than the all-time rollup): p1's starburst play is before it.
  t.same(await run('players', 'game', '2026-03-30'), [
    { key: 'blackjack', value: 1 }, { key: 'book', value: 1 },
    { key: null, value: 3 }, // p1 (grant, completion), p2, p3
  ])
})

t.test('brand hint and scopes', async (t) => {
  // The other brand holds the same events for its own players: its own figures, never mixed.
  const res = await h.request('GET', '/analytics/summary', { key, headers: { 'x-brand': other.slug } })
  t.equal(res.status, 200)
  t.same([res.body.data.players, res.body.data.bets.count, res.body.data.ggr], [4, 4, { EUR: 34.5, USD: -20 }])
  const pinned = await tenant.createKey({ brand: other.id, scopes: ['read'] })
  const pinnedRes = await h.request('GET', '/analytics/summary', { key: pinned.key, headers: { 'x-brand': tenant.brand.slug } })
  t.equal(pinnedRes.body.data.players, 4, 'a brand-pinned key reads its own brand whatever the hint')
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await get('/analytics/summary', {}, reader.key)).players, 5)
  const ingestOnly = await tenant.createKey({ scopes: ['events:write'] })
  for (const path of ['/analytics/summary', '/analytics/timeseries', '/analytics/revenue?dimension=country', '/analytics/cohorts', '/reports/run?metric=events&dimension=day', '/export/events']) {
    const r = await h.request('GET', path, { key: ingestOnly.key })
    t.equal(r.status, 403, path)
    t.equal(r.body.code, 'FORBIDDEN')
  }
  t.equal((await h.request('GET', '/analytics/summary')).status, 401)
})

t.test('validation', async (t) => {
  const bad = async (path: string, query: Record<string, string>, field: string) => {
    const r = await h.request('GET', path, { key, query })
    t.equal(r.status, 400, `${path} ${JSON.stringify(query)}`)
    t.equal(r.body.code, 'BAD_REQUEST')
    t.match(JSON.stringify(r.body.details), field, `names ${field}`)
  }
  await bad('/analytics/revenue', {}, 'dimension')
  await bad('/analytics/revenue', { dimension: 'planet' }, 'dimension')
  await bad('/analytics/revenue', { dimension: 'country', tz: 'Mars/Olympus' }, 'tz')
  await bad('/analytics/revenue', { dimension: 'heatmap', from: 'yesterday' }, 'from')
  for (const months of ['0', '37', 'abc', '1.5', '-1']) await bad('/analytics/cohorts', { months }, 'months')
  for (const tz of ['Mars/Olympus', '+02:00', 'Europe/', '', 'x'.repeat(70)]) await bad('/analytics/timeseries', { tz }, 'tz')
  for (const from of ['2026-13-01', '2026-02-30', 'abc', '2026-03-01T25:00:00Z', '2026-03-01T10:00:00', '1969-12-31T00:00:00Z', '1900-01-01']) await bad('/analytics/timeseries', { from }, 'from')
  await bad('/reports/run', { dimension: 'day' }, 'metric')
  await bad('/reports/run', { metric: 'events' }, 'dimension')
  await bad('/reports/run', { metric: 'revenue', dimension: 'day' }, 'metric')
  await bad('/reports/run', { metric: 'events', dimension: 'month' }, 'dimension')
  await bad('/reports/run', { metric: 'events', dimension: 'day', from: '2026-02-29' }, 'from')
  // Accepted edges.
  for (const months of ['1', '36']) t.equal((await h.request('GET', '/analytics/cohorts', { key, query: { months } })).status, 200)
  for (const tz of ['UTC', 'Asia/Kathmandu', 'America/St_Johns', 'Etc/GMT+5']) t.equal((await h.request('GET', '/analytics/timeseries', { key, query: { tz } })).status, 200, tz)
  // Names Intl takes in another spelling (any case, some aliases) are read as their canonical zone:
  // ClickHouse knows only the exact names, and these were a 500.
  for (const tz of ['utc', 'europe/rome', 'IST']) {
    const res = await h.request('GET', '/analytics/revenue', { key, query: { dimension: 'heatmap', tz } })
    t.equal(res.status, 200, `tz=${tz}`)
  }
  const rome = await h.request('GET', '/analytics/timeseries', { key, query: { tz: 'europe/rome', from: '2026-03-27' } })
  t.same(rome.body, (await h.request('GET', '/analytics/timeseries', { key, query: { tz: 'Europe/Rome', from: '2026-03-27' } })).body, 'europe/rome is Europe/Rome')
  t.equal((await h.request('GET', '/analytics/timeseries', { key, query: { from: '2026-04-09T10:00:00+05:45' } })).status, 200)
})

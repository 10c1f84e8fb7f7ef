// Adversarial analytics and reports checks (contract-engines.md §6, contract.md "Canonical events",
// docs/analytics.md): late events and rollbacks days later, `from` exactly at an event / with an offset and
// fractional seconds, DST days in several zones, late registrations in cohorts, FTD after failed deposits,
// currency casing and exact money, bonus ROI and ARPU rounding, reports by status across an erasure.
// Every expected figure is computed by hand from the events each test sends. Each test has its own tenant.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const NOW = new Date('2026-11-10T12:00:00Z') // "now" of the analytics routes; 30 days back: 2026-10-11T12:00Z
// Acknowledged once in ClickHouse (rollups are filled by the same insert): reads right after the 200 are exact.
const h = await startHarness(t, { clock: () => NOW, env: { RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'clickhouse' } })

let n = 0
const ev = (player_id: string, event_type: string, timestamp: string, payload: Record<string, unknown> = {}) =>
  ({ event_id: `adv-${++n}`, player_id, event_type, timestamp, payload })

async function tenant() {
  const tn = await h.createTenant()
  const ingest = async (events: unknown[]) => {
    const res = await h.request('POST', '/events', { key: tn.key, body: { events } })
    if (res.status !== 200 || res.body.stored !== events.length) throw new Error(`ingest: ${res.status} ${res.text}`)
  }
  const get = async (path: string, query: Record<string, string | number> = {}) => {
    const res = await h.request('GET', path, { key: tn.key, query })
    if (res.status !== 200) throw new Error(`${path} ${JSON.stringify(query)}: ${res.status} ${res.text}`)
    return res.body.data
  }
  return { ...tn, ingest, get }
}

type Row = { date: string; events: number; ggr: Record<string, number>; new_players: number; active_players: number; deposits: Record<string, number> }
const byDate = (rows: Row[]) => Object.fromEntries(rows.map((r) => [r.date, r]))
type Cell = { weekday: number; hour: number; events: number; ggr: Record<string, number> }
const nonEmpty = (cells: Cell[]) => cells.filter((c) => c.events > 0)

t.test('late events and rollbacks days later land in their own periods', async (t) => {
  const a = await tenant()
  const G1 = { game: 'g1', provider: 'p1', category: 'slots' }
  await a.ingest([
    ev('L1', 'registration', '2026-10-01T10:00:00Z', { country: 'IT', currency: 'EUR' }),
    ev('L1', 'bet', '2026-10-05T10:00:00Z', { amount: 100, currency: 'EUR', ...G1, round_id: 'r1' }),
  ])
  // Read everything once, so any bucket or cache of these periods has been read before the late events.
  t.same((await a.get('/analytics/summary')).ggr, { EUR: 100 })
  t.same(await a.get('/reports/run', { metric: 'wagered', dimension: 'day' }), [{ key: '2026-10-05', value: { EUR: 100 } }])
  await a.get('/analytics/timeseries', { from: '2026-10-01' })
  await a.get('/analytics/revenue', { dimension: 'game' })

  await a.ingest([
    ev('L1', 'win', '2026-10-05T10:05:00Z', { amount: 30, currency: 'EUR', ...G1, round_id: 'r1' }), // same 15-minute bucket as the bet
    ev('L1', 'bet', '2026-10-03T08:00:00Z', { amount: 40, currency: 'EUR', game: 'g2', provider: 'p1', category: 'slots', round_id: 'r0' }),
    ev('L1', 'bet_rollback', '2026-10-08T09:00:00Z', { amount: 100, currency: 'EUR', ...G1, round_id: 'r1' }), // 3 days later
    ev('L1', 'win_rollback', '2026-10-09T09:00:00Z', { amount: 30, currency: 'EUR', ...G1, round_id: 'r1' }),
  ])
  const s = await a.get('/analytics/summary')
  t.same(s.bets, { count: 2, amount: { EUR: 140 } }, 'gross bets')
  t.same(s.wins, { count: 1, amount: { EUR: 30 } }, 'gross wins')
  t.same(s.ggr, { EUR: 40 }, '(140 − 100) − (30 − 30)')
  t.same(s.ngr, { EUR: 40 })

  const days = byDate(await a.get('/analytics/timeseries', { from: '2026-10-03' }))
  t.same([days['2026-10-03']?.events, days['2026-10-03']?.ggr], [1, { EUR: 40 }])
  t.same([days['2026-10-05']?.events, days['2026-10-05']?.ggr], [2, { EUR: 70 }], 'bet 100 − win 30')
  t.same([days['2026-10-08']?.events, days['2026-10-08']?.ggr], [1, { EUR: -100 }], 'the bet rollback on its own day')
  t.same([days['2026-10-09']?.events, days['2026-10-09']?.ggr], [1, { EUR: 30 }], 'the win rollback on its own day')

  t.same(await a.get('/reports/run', { metric: 'wagered', dimension: 'day' }), [
    { key: '2026-10-03', value: { EUR: 40 } }, { key: '2026-10-05', value: { EUR: 100 } }, { key: '2026-10-08', value: { EUR: -100 } },
  ])
  t.same(await a.get('/reports/run', { metric: 'events', dimension: 'day' }), [
    { key: '2026-10-01', value: 1 }, { key: '2026-10-03', value: 1 }, { key: '2026-10-05', value: 2 }, { key: '2026-10-08', value: 1 }, { key: '2026-10-09', value: 1 },
  ])
  t.same(await a.get('/reports/run', { metric: 'wagered', dimension: 'game' }), [{ key: 'g2', value: { EUR: 40 } }], 'g1: 100 − 100 rolled back')
  t.same(await a.get('/analytics/revenue', { dimension: 'game' }), [
    { key: 'g1', players: 1, bets: { EUR: 100 }, wins: { EUR: 30 }, ggr: {}, ngr: null, deposits: {} },
    { key: 'g2', players: 1, bets: { EUR: 40 }, wins: {}, ggr: { EUR: 40 }, ngr: null, deposits: {} },
  ])
  t.same(await a.get('/analytics/revenue', { dimension: 'country' }), [
    { key: 'IT', players: 1, bets: { EUR: 140 }, wins: { EUR: 30 }, ggr: { EUR: 40 }, ngr: { EUR: 40 }, deposits: {} },
  ])
  t.same((await a.get('/analytics/cohorts', { months: 2 })).cohorts, [
    { month: '2026-10', size: 1, retention: [1, 0], depositors: 0, deposits: {}, ggr: { EUR: 40 } },
    { month: '2026-11', size: 0, retention: [0], depositors: 0, deposits: {}, ggr: {} },
  ])
})

t.test('from: exactly at an event, other offsets, fractional seconds', async (t) => {
  const a = await tenant()
  const G = { game: 'g', provider: 'p', category: 'c' }
  await a.ingest([
    ev('F', 'login', '2026-11-02T10:00:00.000Z', { country: 'MT' }),
    ev('F', 'bet', '2026-11-02T10:07:30.249Z', { amount: 7, currency: 'EUR', ...G }),
    ev('F', 'bet', '2026-11-02T10:07:30.250Z', { amount: 5, currency: 'EUR', ...G }),
    ev('F', 'win', '2026-11-02T10:07:30.251Z', { amount: 1, currency: 'EUR', ...G }),
  ])
  const types = async (from: string) =>
    (await a.get('/reports/run', { metric: 'events', dimension: 'event_type', from })).map((r: { key: string; value: number }) => `${r.key}:${r.value}`)
  t.same(await types('2026-11-02T10:00:00Z'), ['bet:2', 'login:1', 'win:1'], 'an event exactly at from is in')
  t.same(await types('2026-11-02T10:00:00.001Z'), ['bet:2', 'win:1'], '1 ms later it is out')
  t.same(await types('2026-11-02T15:37:30.250+05:30'), ['bet:1', 'win:1'], '+05:30: the .250 bet is in, the .249 one out')
  t.same(await types('2026-11-02T05:07:30.25-05:00'), ['bet:1', 'win:1'], '-05:00, two fractional digits')
  t.same(await types('2026-11-02 10:07:30.251Z'), ['win:1'], 'a space for T')
  // Sub-millisecond fractions are accepted (time.ts takes up to 9 digits): an event at .250 is before a `from` of .2501.
  t.same(await types('2026-11-02T10:07:30.250999Z'), ['win:1'], 'the .251 win is after .250999, the .250 bet before it')
  t.same(await types('2026-11-02T10:07:30.2501+00:00'), ['win:1'], 'the bet at .250 is before .2501')

  const from = '2026-11-02T15:37:30.250+05:30'
  const cell = (await a.get('/analytics/revenue', { dimension: 'heatmap', from })).filter((c: Cell) => c.events > 0)
  t.same(cell, [{ weekday: 1, hour: 10, events: 2, ggr: { EUR: 4 } }], 'Monday 10h UTC: bet 5 − win 1')
  t.same(await a.get('/analytics/revenue', { dimension: 'game', from }), [
    { key: 'g', players: 1, bets: { EUR: 5 }, wins: { EUR: 1 }, ggr: { EUR: 4 }, ngr: null, deposits: {} },
  ])
  t.same(await a.get('/analytics/revenue', { dimension: 'country', from }), [
    { key: 'MT', players: 1, bets: { EUR: 5 }, wins: { EUR: 1 }, ggr: { EUR: 4 }, ngr: { EUR: 4 }, deposits: {} },
  ])
  t.same(await a.get('/reports/run', { metric: 'wagered', dimension: 'day', from }), [{ key: '2026-11-02', value: { EUR: 5 } }])
  t.same(await a.get('/reports/run', { metric: 'players', dimension: 'day', from }), [{ key: '2026-11-02', value: 1 }])
  t.same(await a.get('/reports/run', { metric: 'wagered', dimension: 'game', from }), [{ key: 'g', value: { EUR: 5 } }])
  // Timeseries: whole days from the day of `from` in tz.
  const utc = await a.get('/analytics/timeseries', { from })
  t.equal(utc[0].date, '2026-11-02')
  t.equal(utc.length, 9, '2026-11-02 .. 2026-11-10')
  t.same(utc[0], { date: '2026-11-02', new_players: 0, active_players: 1, events: 4, deposits: {}, ggr: { EUR: 11 } }, 'the whole day: 7 + 5 − 1')
  const kolkata = await a.get('/analytics/timeseries', { from, tz: 'Asia/Kolkata' })
  t.same([kolkata[0].date, kolkata[0].events], ['2026-11-02', 4])
  // A `from` late on the evening of Nov 1 in New York is Nov 2 in UTC: the rows start at the day in tz.
  const ny = await a.get('/analytics/timeseries', { from: '2026-11-01T23:30:00-05:00', tz: 'America/New_York' })
  t.same([ny[0].date, ny[1].date, ny[1].events], ['2026-11-01', '2026-11-02', 4])
})

t.test('DST days: 25-hour Europe/Rome and New York days, Santiago midnight change, Kathmandu +05:45', async (t) => {
  const bet = (p: string, at: string, amount: number) => ev(p, 'bet', at, { amount, currency: 'EUR', game: 'g' })
  // Europe/Rome, 2026-10-25: CEST → CET at 01:00Z; 02:00–03:00 happens twice.
  const rome = await tenant()
  await rome.ingest([
    bet('D', '2026-10-24T21:59:59Z', 1), // Sat 24 23:59:59 CEST
    bet('D', '2026-10-24T22:00:00Z', 2), // Sun 25 00:00 CEST
    bet('D', '2026-10-25T00:30:00Z', 4), // Sun 02:30 CEST
    bet('D', '2026-10-25T01:30:00Z', 8), // Sun 02:30 CET
    bet('D', '2026-10-25T22:59:00Z', 16), // Sun 23:59 CET
    bet('D', '2026-10-25T23:00:00Z', 32), // Mon 26 00:00 CET
  ])
  const rd = byDate(await rome.get('/analytics/timeseries', { from: '2026-10-24', tz: 'Europe/Rome' }))
  t.same(['2026-10-24', '2026-10-25', '2026-10-26'].map((d) => [rd[d]?.events, rd[d]?.ggr]), [[1, { EUR: 1 }], [4, { EUR: 30 }], [1, { EUR: 32 }]], 'Rome days')
  const ud = byDate(await rome.get('/analytics/timeseries', { from: '2026-10-24' }))
  t.same(['2026-10-24', '2026-10-25'].map((d) => [ud[d]?.events, ud[d]?.ggr]), [[2, { EUR: 3 }], [4, { EUR: 60 }]], 'UTC days')
  t.same(nonEmpty(await rome.get('/analytics/revenue', { dimension: 'heatmap', tz: 'Europe/Rome' })), [
    { weekday: 1, hour: 0, events: 1, ggr: { EUR: 32 } },
    { weekday: 6, hour: 23, events: 1, ggr: { EUR: 1 } },
    { weekday: 7, hour: 0, events: 1, ggr: { EUR: 2 } },
    { weekday: 7, hour: 2, events: 2, ggr: { EUR: 12 } }, // both 02:30s
    { weekday: 7, hour: 23, events: 1, ggr: { EUR: 16 } },
  ])

  // America/New_York, 2026-11-01: EDT → EST at 06:00Z; 01:00–02:00 happens twice.
  const ny = await tenant()
  await ny.ingest([
    bet('N', '2026-11-01T03:59:00Z', 32), // Sat 31 23:59 EDT
    bet('N', '2026-11-01T04:00:00Z', 1), // Sun 00:00 EDT
    bet('N', '2026-11-01T05:30:00Z', 2), // Sun 01:30 EDT
    bet('N', '2026-11-01T06:30:00Z', 4), // Sun 01:30 EST
    bet('N', '2026-11-02T04:59:00Z', 8), // Sun 23:59 EST
    bet('N', '2026-11-02T05:00:00Z', 16), // Mon 2 00:00 EST
  ])
  const nyRows = await ny.get('/analytics/timeseries', { from: '2026-11-01', tz: 'America/New_York' })
  t.equal(nyRows.length, 10, '2026-11-01 .. 2026-11-10 (07:00 EST on the 10th)')
  t.same(nyRows.slice(0, 2).map((r: Row) => [r.date, r.events, r.ggr]), [['2026-11-01', 4, { EUR: 15 }], ['2026-11-02', 1, { EUR: 16 }]])
  t.same(nonEmpty(await ny.get('/analytics/revenue', { dimension: 'heatmap', tz: 'America/New_York' })), [
    { weekday: 1, hour: 0, events: 1, ggr: { EUR: 16 } },
    { weekday: 6, hour: 23, events: 1, ggr: { EUR: 32 } },
    { weekday: 7, hour: 0, events: 1, ggr: { EUR: 1 } },
    { weekday: 7, hour: 1, events: 2, ggr: { EUR: 6 } },
    { weekday: 7, hour: 23, events: 1, ggr: { EUR: 8 } },
  ])

  // America/Santiago, 2026-09-06: −04 → −03 at local midnight, so the day begins at 01:00 (04:00Z).
  const scl = await tenant()
  await scl.ingest([bet('S', '2026-09-06T03:59:00Z', 1), bet('S', '2026-09-06T04:10:00Z', 2)])
  const sd = await scl.get('/analytics/timeseries', { from: '2026-09-06', tz: 'America/Santiago' })
  t.same([sd[0].date, sd[0].events, sd[0].ggr], ['2026-09-06', 1, { EUR: 2 }], 'the day that starts at 01:00')
  const sd5 = byDate(await scl.get('/analytics/timeseries', { from: '2026-09-05', tz: 'America/Santiago' }))
  t.same([sd5['2026-09-05']?.events, sd5['2026-09-06']?.events], [1, 1])
  t.same(nonEmpty(await scl.get('/analytics/revenue', { dimension: 'heatmap', tz: 'America/Santiago' })), [
    { weekday: 6, hour: 23, events: 1, ggr: { EUR: 1 } },
    { weekday: 7, hour: 1, events: 1, ggr: { EUR: 2 } },
  ])
  t.same(nonEmpty(await scl.get('/analytics/revenue', { dimension: 'heatmap', tz: 'America/Santiago', from: '2026-09-06' })), [
    { weekday: 7, hour: 1, events: 1, ggr: { EUR: 2 } },
  ], 'from a date: its first instant in tz')

  // Asia/Kathmandu, +05:45: days start at 18:15Z.
  const ktm = await tenant()
  await ktm.ingest([bet('K', '2026-11-01T18:14:59Z', 1), bet('K', '2026-11-01T18:15:00Z', 2)])
  const kd = byDate(await ktm.get('/analytics/timeseries', { from: '2026-11-01', tz: 'Asia/Kathmandu' }))
  t.same([kd['2026-11-01']?.ggr, kd['2026-11-02']?.ggr], [{ EUR: 1 }, { EUR: 2 }])
  t.same(nonEmpty(await ktm.get('/analytics/revenue', { dimension: 'heatmap', tz: 'Asia/Kathmandu' })), [
    { weekday: 1, hour: 0, events: 1, ggr: { EUR: 2 } },
    { weekday: 7, hour: 23, events: 1, ggr: { EUR: 1 } },
  ])
})

t.test('timeseries from the earliest accepted date still runs to today', async (t) => {
  const a = await tenant()
  await a.ingest([ev('T1', 'login', '2026-11-09T10:00:00Z')])
  // `from` before 1970 is a 400 (docs/analytics.md), so 1970-01-01 is accepted: one row per day to today.
  const rows = await a.get('/analytics/timeseries', { from: '1970-01-01' })
  const days = (Date.UTC(2026, 10, 10) - Date.UTC(1970, 0, 1)) / 86_400_000 + 1 // 1970-01-01 .. 2026-11-10, both included
  t.equal(rows[0]?.date, '1970-01-01')
  t.equal(rows.length, days, 'every day')
  t.equal(rows.at(-1)?.date, '2026-11-10', 'the last row is today')
  t.same(rows.find((r: Row) => r.date === '2026-11-09')?.events, 1, "yesterday's login")
})

t.test('cohorts and new players when the registration arrives after the first activity', async (t) => {
  const a = await tenant()
  // C1 plays in September; its registration (dated August) arrives afterwards.
  await a.ingest([ev('C1', 'bet', '2026-09-15T10:00:00Z', { amount: 10, currency: 'EUR', game: 'g' })])
  await a.ingest([ev('C1', 'registration', '2026-08-20T10:00:00Z', { country: 'IT' })])
  // C2 plays on Sep 28 and registers on Oct 5.
  await a.ingest([
    ev('C2', 'bet', '2026-09-28T10:00:00Z', { amount: 5, currency: 'EUR', game: 'g' }),
    ev('C2', 'registration', '2026-10-05T10:00:00Z', { country: 'DE' }),
  ])
  // C3 registers in November.
  await a.ingest([ev('C3', 'registration', '2026-11-03T10:00:00Z'), ev('C3', 'login', '2026-11-04T10:00:00Z')])
  t.same((await a.get('/analytics/cohorts', { months: 4 })).cohorts, [
    { month: '2026-08', size: 1, retention: [1, 1, 0, 0], depositors: 0, deposits: {}, ggr: { EUR: 10 } },
    { month: '2026-09', size: 0, retention: [0, 0, 0], depositors: 0, deposits: {}, ggr: {} },
    { month: '2026-10', size: 1, retention: [1, 0], depositors: 0, deposits: {}, ggr: { EUR: 5 } }, // the September bet is all-time money
    { month: '2026-11', size: 1, retention: [1], depositors: 0, deposits: {}, ggr: {} },
  ])
  const days = byDate(await a.get('/analytics/timeseries', { from: '2026-08-01' }))
  const newOn = Object.values(days).filter((r) => r.new_players > 0).map((r) => [r.date, r.new_players])
  t.same(newOn, [['2026-08-20', 1], ['2026-10-05', 1], ['2026-11-03', 1]], 'new players on their registration days')
  const s = await a.get('/analytics/summary')
  t.same([s.players, s.new_players_30d, s.active], [3, 1, 1], 'C3 registered and active in the last 30 days')
})

t.test('FTD: failed deposits first, and a late earlier deposit', async (t) => {
  const a = await tenant()
  await a.ingest([
    ev('F1', 'deposit_failed', '2026-11-01T10:00:00Z', { amount: 50, currency: 'EUR' }),
    ev('F1', 'deposit', '2026-11-03T10:00:00Z', { amount: 20, currency: 'EUR' }),
    ev('F2', 'deposit', '2026-09-01T10:00:00Z', { amount: 10, currency: 'EUR' }),
    ev('F2', 'deposit_failed', '2026-11-02T10:00:00Z', { amount: 15, currency: 'EUR' }),
    ev('F3', 'deposit_failed', '2026-11-04T10:00:00Z', { amount: 70, currency: 'EUR' }),
    ev('F5', 'deposit', '2026-11-05T10:00:00Z', { amount: 1, currency: 'EUR' }),
  ])
  let s = await a.get('/analytics/summary')
  t.same([s.depositors, s.ftd_count], [3, 2], 'F1 (after its failed one) and F5 converted in the last 30 days; F2 before')
  await a.ingest([ev('F5', 'deposit', '2026-09-02T10:00:00Z', { amount: 2, currency: 'EUR' })]) // F5's real first deposit, late
  s = await a.get('/analytics/summary')
  t.same([s.depositors, s.ftd_count], [3, 1], "F5's first deposit is now September")
  t.same(s.deposits, { count: 4, amount: { EUR: 33 } }, 'failed deposits never count')
  t.same(await a.get('/reports/run', { metric: 'deposits', dimension: 'day' }), [
    { key: '2026-09-01', value: { EUR: 10 } }, { key: '2026-09-02', value: { EUR: 2 } }, { key: '2026-11-03', value: { EUR: 20 } }, { key: '2026-11-05', value: { EUR: 1 } },
  ])
  const days = byDate(await a.get('/analytics/timeseries', { from: '2026-11-01' }))
  t.same(['2026-11-01', '2026-11-02', '2026-11-03', '2026-11-04'].map((d) => days[d]?.deposits), [{}, {}, { EUR: 20 }, {}])
})

t.test('currencies in any case, exact and very large amounts', async (t) => {
  const a = await tenant()
  await a.ingest([
    ev('M1', 'deposit', '2026-11-03T10:00:00Z', { amount: 0.1, currency: 'eur' }),
    ev('M1', 'deposit', '2026-11-03T10:01:00Z', { amount: 0.2, currency: 'Eur' }),
    ev('M1', 'deposit', '2026-11-03T10:02:00Z', { amount: 999999999.99, currency: 'EUR' }),
    ev('M1', 'deposit', '2026-11-03T10:03:00Z', { amount: 1e9, currency: 'usd' }),
    ev('M1', 'bet', '2026-11-03T11:00:00Z', { amount: '12.34', currency: 'usd', game: 'g' }),
    ev('M1', 'win', '2026-11-03T11:01:00Z', { amount: 0.01, currency: 'USD', game: 'g' }),
  ])
  const s = await a.get('/analytics/summary')
  t.same(s.deposits, { count: 4, amount: { EUR: 1000000000.29, USD: 1000000000 } }, 'eur, Eur and EUR are one currency; 0.1 + 0.2 exact')
  t.same(s.ggr, { USD: 12.33 })
  t.same(await a.get('/reports/run', { metric: 'deposits', dimension: 'country' }), [{ key: null, value: { EUR: 1000000000.29, USD: 1000000000 } }])
  t.same(await a.get('/reports/run', { metric: 'wagered', dimension: 'game' }), [{ key: 'g', value: { USD: 12.34 } }])
})

t.test('amounts with 8 decimals are exact (Decimal(38, 8))', async (t) => {
  const a = await tenant()
  await a.ingest([
    ev('B1', 'deposit', '2026-11-03T10:00:00Z', { amount: 0.12345678, currency: 'BTC' }),
    ev('B1', 'deposit', '2026-11-03T10:01:00Z', { amount: 0.00000001, currency: 'BTC' }),
    ev('B1', 'deposit', '2026-11-03T10:02:00Z', { amount: 0.00000001, currency: 'BTC' }),
  ])
  t.same((await a.get('/analytics/summary')).deposits, { count: 3, amount: { BTC: 0.1234568 } }, '0.12345678 + 2 × 0.00000001')
  t.same(await a.get('/reports/run', { metric: 'deposits', dimension: 'day' }), [{ key: '2026-11-03', value: { BTC: 0.1234568 } }], 'reports')
})

t.test('bonus ROI per currency, rounded at 1e-6 half away from zero; ARPU at 1e-8', async (t) => {
  const a = await tenant()
  await a.ingest([
    // B1: cost 2, GGR after 3.000001: roi 0.5000005 → 0.500001
    ev('R1', 'bonus_granted', '2026-11-01T10:00:00Z', { bonus_id: 'B1', amount: 2, currency: 'EUR' }),
    ev('R1', 'bet', '2026-11-01T11:00:00Z', { amount: 3.000001, currency: 'EUR', game: 'g' }),
    ev('R1', 'bonus_completed', '2026-11-02T10:00:00Z', { bonus_id: 'B1', amount: 2, currency: 'EUR' }),
    // B2: cost 2, GGR after 1.999999: roi −0.0000005 → −0.000001
    ev('R2', 'bonus_granted', '2026-11-01T10:00:00Z', { bonus_id: 'B2', amount: 2, currency: 'EUR' }),
    ev('R2', 'bet', '2026-11-01T11:00:00Z', { amount: 1.999999, currency: 'EUR', game: 'g' }),
    ev('R2', 'bonus_completed', '2026-11-02T10:00:00Z', { bonus_id: 'B2', amount: 2, currency: 'EUR' }),
    // B3: cost in EUR, play in USD; a bet at the very instant of the grant is not "after" it.
    ev('R3', 'bonus_granted', '2026-11-01T10:00:00Z', { bonus_id: 'B3', amount: 1, currency: 'EUR' }),
    ev('R3', 'bet', '2026-11-01T10:00:00Z', { amount: 100, currency: 'USD', game: 'g' }),
    ev('R3', 'bet', '2026-11-01T10:00:00.001Z', { amount: 5, currency: 'USD', game: 'g' }),
    ev('R3', 'bonus_completed', '2026-11-02T10:00:00Z', { bonus_id: 'B3', amount: 1, currency: 'EUR' }),
  ])
  const roi = await a.get('/analytics/revenue', { dimension: 'bonus_roi' })
  t.same(roi[2], { bonus_id: 'B3', granted: 1, cost: { EUR: 1 }, ggr_after: { USD: 5 }, roi: { EUR: -1, USD: null } })
  t.same(roi[0], { bonus_id: 'B1', granted: 1, cost: { EUR: 2 }, ggr_after: { EUR: 3.000001 }, roi: { EUR: 0.500001 } }, 'B1')
  t.same(roi[1], { bonus_id: 'B2', granted: 1, cost: { EUR: 2 }, ggr_after: { EUR: 1.999999 }, roi: { EUR: -0.000001 } }, 'B2')

  // ARPU: NGR per active player, half away from zero at 1e-8: 0.000001 / 8 = 0.000000125 → 0.00000013.
  const b = await tenant()
  await b.ingest([
    ev('A0', 'bet', '2026-11-05T10:00:00Z', { amount: 0.000001, currency: 'EUR', game: 'g' }),
    ev('A0', 'win', '2026-11-05T10:00:01Z', { amount: 0.000001, currency: 'USD', game: 'g' }),
    ...Array.from({ length: 7 }, (_, i) => ev(`A${i + 1}`, 'login', '2026-11-05T10:00:00Z')),
  ])
  const s = await b.get('/analytics/summary')
  t.same([s.active, s.ngr, s.arpu, s.average_ltv], [8, { EUR: 0.000001, USD: -0.000001 }, { EUR: 0.00000013, USD: -0.00000013 }, {}])
})

t.test('reports by status count an erased player\'s events under erased, never under another status', async (t) => {
  const a = await tenant()
  await a.ingest([
    ev('S1', 'login', '2026-11-03T10:00:00Z', { country: 'IT' }),
    ev('S1', 'deposit', '2026-11-03T10:01:00Z', { amount: 10, currency: 'EUR' }),
    ev('S1', 'bet', '2026-11-03T10:02:00Z', { amount: 4, currency: 'EUR', game: 'g' }),
    ev('S2', 'login', '2026-11-03T11:00:00Z', { country: 'IT' }),
    ev('S2', 'bet', '2026-11-03T11:01:00Z', { amount: 1, currency: 'EUR', game: 'g' }),
  ])
  const s1 = (await h.request('GET', '/players', { key: a.key, query: { search: 'S1' } })).body.data[0]
  t.equal((await h.request('PATCH', `/players/${s1.id}`, { key: a.key, body: { status: 'suspended' } })).status, 200)
  const report = (metric: string) => a.get('/reports/run', { metric, dimension: 'status' })
  t.same(await report('events'), [{ key: 'active', value: 2 }, { key: 'suspended', value: 3 }])
  t.same(await report('wagered'), [{ key: 'active', value: { EUR: 1 } }, { key: 'suspended', value: { EUR: 4 } }])
  t.same(await report('players'), [{ key: 'active', value: 1 }, { key: 'suspended', value: 1 }])

  // The erasure deletes the player row at once (its events are pseudonymised in the background): the
  // figures below are read right after the 202, as a dashboard would.
  t.equal((await h.request('DELETE', `/players/${s1.id}`, { key: a.key })).status, 202)
  t.same(await report('players'), [{ key: 'active', value: 1 }], 'the erased player is no longer a player')
  // docs/analytics.md: an erased player's status goes with it; its events count under `erased`, never
  // under another player's status (they used to fall to 'active').
  const byStatus = [{ key: 'active', value: 2 }, { key: 'erased', value: 3 }]
  t.same(await report('events'), byStatus, 'events by status: the erased player\'s under erased')
  t.same(await report('wagered'), [{ key: 'active', value: { EUR: 1 } }, { key: 'erased', value: { EUR: 4 } }], 'wagered by status likewise')
  // And once the background job has pseudonymised them (the token).
  for (let i = 0; i < 200; i++) {
    const [job] = await h.app.ctx.sql<{ state: string }[]>`select state from player_erasures where player_id = ${s1.id}`
    if (job?.state === 'done') break
    await new Promise((r) => setTimeout(r, 100))
  }
  t.equal((await h.app.ctx.sql<{ state: string }[]>`select state from player_erasures where player_id = ${s1.id}`)[0]?.state, 'done')
  t.same(await report('events'), byStatus, 'after the job too')
  const s = await a.get('/analytics/summary')
  t.same([s.deposits, s.bets, s.depositors], [{ count: 1, amount: { EUR: 10 } }, { count: 2, amount: { EUR: 5 } }, 1])
})

// Conformance of the gamification, bonus, tournament, analytics and export routes to the documents,
// statement by statement, where the area tests (test/gamification, bonuses, tournaments, analytics,
// exports) do not pin them down already: timestamp form, brand hints in create bodies, non-finite numbers
// in validated rule objects, the §1 filter ops and canonical fields, one_time's single completion, how a
// tournament may become `ended`, resource ids, documented object shapes, the timeseries' default window,
// the cohorts' months, the export's default limit and its event rows' canonical fields.
// Documents: spec = /work/shared/spec/interface-spec.md, contract = docs/contract.md, engines =
// docs/contract-engines.md (all in /work/shared), and the project's docs/gamification.md, docs/analytics.md.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { pollUntil } from '../helpers/wait.ts'
import { localDate } from '../../src/lib/zoned-time.ts'
import { engineHelpers } from '../gamification/engine-helpers.ts'
import { exportClient } from '../exports/helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_FLUSH_INTERVAL_MS: '50' } })
const { create, send, settle, playerId, profile, outbox, sql } = engineHelpers(h)
const { page, ingest } = exportClient(h)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const UTC_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const json = { 'content-type': 'application/json' }
const sorted = (o: object) => Object.keys(o).sort()
const fieldsOf = (body: { details?: { errors?: { field: string }[] } }) => (body.details?.errors ?? []).map((e) => e.field)

t.test('timestamps: any RFC 3339 offset in, UTC with milliseconds out, on every definition resource', async (t) => {
  // spec Conventions 4 ("Timestamps are ISO 8601 date-time strings"); docs/gamification.md: "accepted as
  // RFC 3339 date-times with an offset ... and returned in UTC with milliseconds (2026-04-01T00:00:00.000Z)".
  const tenant = await h.createTenant()
  const window = { starts_at: '2026-01-08T00:00:00+02:00', ends_at: '2026-01-09T10:30:00.5-05:30' }
  const want = { starts_at: '2026-01-07T22:00:00.000Z', ends_at: '2026-01-09T16:00:00.500Z' }
  const mission = await h.request('POST', '/gamification/missions', { key: tenant.key, body: { name: 'M', type: 'daily', ...window } })
  const tournament = await h.request('POST', '/tournaments', { key: tenant.key, body: { name: 'T', ...window } })
  for (const [label, res] of [['mission', mission], ['tournament', tournament]] as const) {
    t.equal(res.status, 201, `${label}: ${res.text}`)
    t.same([res.body.data.starts_at, res.body.data.ends_at], [want.starts_at, want.ends_at], `${label}: window in UTC with ms`)
    t.match(res.body.data.updated_at, UTC_MS)
  }
  const patched = await h.request('PATCH', `/tournaments/${tournament.body.data.id}`, { key: tenant.key, body: { ends_at: '2026-01-10T01:02:03+01:00' } })
  t.equal(patched.body.data.ends_at, '2026-01-10T00:02:03.000Z', 'a patched time too')
  const others = [
    ['/gamification/levels', { name: 'L', tier: 1, min_points: 0 }],
    ['/gamification/badges', { name: 'B' }],
    ['/gamification/currencies', { name: 'C', symbol: 'C', type: 'virtual' }],
    ['/bonuses', { name: 'Bo', type: 'custom', value: 1, value_type: 'fixed' }],
  ] as const
  for (const [path, body] of others) {
    const res = await h.request('POST', path, { key: tenant.key, body })
    t.equal(res.status, 201, path)
    t.match(res.body.data.created_at, UTC_MS, `${path}: created_at`)
    t.match(res.body.data.id, UUID, `${path}: id is a UUID`)
  }
})

t.test('create bodies: an unknown `brand` hint is 400 BAD_REQUEST on every definition resource, and nothing is created', async (t) => {
  // spec Authentication 4 ("On create endpoints a brand body field (id or slug) carries the same hint") and
  // Errors ("400 ... unknown brand hint"). The area tests check unknown hints on the lists only.
  const tenant = await h.createTenant()
  const stranger = await h.createTenant()
  const bodies = [
    ['/gamification/levels', { name: 'L', tier: 1, min_points: 0 }],
    ['/gamification/missions', { name: 'M', type: 'daily' }],
    ['/gamification/badges', { name: 'B' }],
    ['/gamification/currencies', { name: 'C', symbol: 'C', type: 'virtual' }],
    ['/bonuses', { name: 'Bo', type: 'custom', value: 1, value_type: 'fixed' }],
    ['/tournaments', { name: 'T' }],
  ] as const
  for (const [path, body] of bodies) {
    for (const brand of ['no-such-brand', stranger.brand.id, '00000000-0000-4000-8000-000000000000']) {
      const res = await h.request('POST', path, { key: tenant.key, body: { ...body, brand } })
      t.equal(res.status, 400, `${path} brand=${brand}`)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.equal(typeof res.body.error, 'string')
    }
    const list = await h.request('GET', path, { key: tenant.key })
    t.same(list.body.data, [], `${path}: nothing created`)
    t.same((await h.request('GET', path, { key: stranger.key })).body.data, [], `${path}: nothing created in the other tenant either`)
  }
})

t.test('non-finite numbers (1e400 in the JSON text) inside validated rule objects are refused, naming the field', async (t) => {
  // engines §1: "Invalid rules are refused with 400 when written (create/PATCH), naming the field".
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const cases: [string, string, string][] = [
    ['/gamification/missions', `{"name":"M","type":"one_time","rules":{"event_type":"bet","target":1,"filters":[{"field":"amount","op":"gt","value":1e400}]}}`, 'rules.filters.0.value'],
    ['/gamification/missions', `{"name":"M","type":"one_time","rules":{"event_type":"bet","target":1},"rewards":{"points":[{"currency_id":"${lp.id}","amount":1e400}]}}`, 'rewards.points.0.amount'],
    ['/tournaments', `{"name":"T","prize_pool":{"prizes":[{"from_rank":1,"to_rank":1,"points":[{"currency_id":"${lp.id}","amount":1e400}]}]}}`, 'prize_pool.prizes.0.points.0.amount'],
  ]
  for (const [path, rawBody, field] of cases) {
    const res = await h.request('POST', path, { key: tenant.key, rawBody, headers: json })
    t.equal(res.status, 400, `${field}: ${res.text.slice(0, 200)}`)
    t.ok(fieldsOf(res.body).includes(field), `names ${field}`)
  }
})

t.test('tournament game_config.min_bet of 1e400 is refused like any invalid min_bet', async (t) => {
  // engines §1 (invalid rules are 400 naming the field) and §5 (`min_bet` a number); docs/gamification.md
  // "`min_bet` (≥ 0)". JSON.parse reads 1e400 as Infinity, which PostgreSQL's jsonb stores as null: the
  // tournament then reads back `min_bet: null`, and every later PATCH of it (its name even) is a 400.
  const tenant = await h.createTenant()
  const created = await h.request('POST', '/tournaments', { key: tenant.key, rawBody: '{"name":"T","game_config":{"metric":"bet_amount","min_bet":1e400}}', headers: json })
  t.equal(created.status, 400, created.text.slice(0, 300))
  t.ok(fieldsOf(created.body).includes('game_config.min_bet'), 'names game_config.min_bet')
  t.same((await h.request('GET', '/tournaments', { key: tenant.key })).body.data, [], 'nothing stored')
  const ok = await create(tenant, '/tournaments', { name: 'T2', game_config: { metric: 'bet_amount', min_bet: 1 } })
  const patched = await h.request('PATCH', `/tournaments/${ok.id}`, { key: tenant.key, rawBody: '{"game_config":{"metric":"bet_amount","min_bet":1e400}}', headers: json })
  t.equal(patched.status, 400, 'PATCH too')
  t.same((await h.request('GET', `/tournaments/${ok.id}`, { key: tenant.key })).body.data.game_config, { metric: 'bet_amount', min_bet: 1 }, 'unchanged')
})

t.test('§1 filters: `exists` defaults to true, `exists: false` keeps events without the field, and every canonical field filters', async (t) => {
  // engines §1: "`exists` takes value: true | false, default true" and F "a canonical field (amount, currency,
  // method, game, provider, category, country, device, os, browser, platform, channel, status, bonus_id)".
  const tenant = await h.createTenant()
  const cases: [string, string, unknown, Record<string, unknown>, Record<string, unknown>][] = [
    // [type, field, value, a matching payload, a payload with another value]
    ['deposit', 'method', 'card', { amount: 5, currency: 'EUR', method: 'card' }, { amount: 5, currency: 'EUR', method: 'iban' }],
    ['login', 'country', 'IT', { country: 'IT' }, { country: 'DE' }],
    ['login', 'device', 'mobile', { device: 'mobile' }, { device: 'desktop' }],
    ['login', 'os', 'ios', { os: 'ios' }, { os: 'android' }],
    ['login', 'browser', 'safari', { browser: 'safari' }, { browser: 'firefox' }],
    ['login', 'platform', 'web', { platform: 'web' }, { platform: 'app' }],
    ['consent_update', 'channel', 'email', { channel: 'email', granted: true }, { channel: 'push', granted: true }],
    ['status_change', 'status', 'active', { status: 'active' }, { status: 'closed' }],
    ['bonus_granted', 'bonus_id', 'b1', { bonus_id: 'b1', amount: 1, currency: 'EUR' }, { bonus_id: 'b2', amount: 1, currency: 'EUR' }],
    ['bet', 'provider', 'netent', { amount: 1, currency: 'EUR', provider: 'netent' }, { amount: 1, currency: 'EUR', provider: 'pragmatic' }],
    ['win', 'category', 'slots', { amount: 1, currency: 'EUR', category: 'slots' }, { amount: 1, currency: 'EUR', category: 'live' }],
  ]
  const byName = new Map<string, string>()
  for (const [type, field, value] of cases) {
    const m = await create(tenant, '/gamification/missions', { name: `${type}.${field}`, type: 'one_time', rules: { event_type: type, target: 100, filters: [{ field, op: 'eq', value }] } })
    byName.set(m.id, `${type}.${field}`)
  }
  await create(tenant, '/gamification/missions', { name: 'exists', type: 'one_time', rules: { event_type: 'game_start', target: 100, filters: [{ field: 'game', op: 'exists' }] } })
  await create(tenant, '/gamification/missions', { name: 'absent', type: 'one_time', rules: { event_type: 'game_start', target: 100, filters: [{ field: 'payload.promo', op: 'exists', value: false }] } })
  // p1 sends, for each field, an event with another value and one with the value: each mission must count
  // exactly one of its two events. The status_change to `closed` goes last (progress counts for any
  // player; only rewards need an active one, and there are none here).
  const events = cases.flatMap(([type, , , yes, no]) => [{ player_id: 'p1', event_type: type, payload: no }, { player_id: 'p1', event_type: type, payload: yes }])
  events.push(
    { player_id: 'p1', event_type: 'game_start', payload: { game: 'starburst' } },
    { player_id: 'p1', event_type: 'game_start', payload: { game: 'starburst', promo: 'x' } },
    { player_id: 'p1', event_type: 'game_start', payload: { provider: 'netent' } },
  )
  const closing = events.findIndex((e) => e.event_type === 'status_change' && e.payload.status === 'closed')
  events.push(...events.splice(closing, 1))
  await send(tenant, events)
  const progress = Object.fromEntries(((await profile(tenant, 'p1')).active_missions as { mission_id: string; name: string; progress: number }[]).map((m) => [m.name, m.progress]))
  for (const name of byName.values()) t.equal(progress[name], 1, `${name}: the matching event counts, the other does not`)
  t.equal(progress.exists, 2, '`exists` without a value: the two game_starts with a game')
  t.equal(progress.absent, 2, '`exists: false`: the two game_starts without payload.promo')
})

t.test('one_time completes once, whatever max_completions_per_player allows', async (t) => {
  // engines §5: "`one_time` | completes once"; max_completions_per_player only caps (it does not add
  // completions to a type that has one).
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const m = await create(tenant, '/gamification/missions', {
    name: 'Once', type: 'one_time', max_completions_per_player: 3, rules: { event_type: 'login', target: 1 }, rewards: { points: [{ currency_id: lp.id, amount: 10 }] },
  })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }, { player_id: 'p1', event_type: 'login' }])
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const p = await profile(tenant, 'p1')
  t.same(p.active_missions, [], 'completed: no longer active for the player')
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 1, 'one mission_completed')
  t.match(p.point_balances, [{ currency_id: lp.id, balance: 10 }], 'rewarded once')
  const [row] = await sql<{ completions: number }[]>`select completions from player_missions where mission_id = ${m.id}`
  t.equal(row?.completions, 1)
})

t.test('a tournament set `ended` by PATCH is either refused or really ended: final ranks, prizes once, tournament.ended',
  async (t) => {
    // engines §5: "at ends_at it becomes ended, its ranks are final, prizes are granted once and
    // tournament.ended fires"; docs/gamification.md: "ended is final (its ranks are final and its prizes
    // granted once)". A PATCH to `ended` (status moves are free otherwise) must not make an ended tournament
    // whose prizes are never granted: either refuse it (400, as a move out of ended is) or end it then.
    const tenant = await h.createTenant()
    const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
    const tr = await create(tenant, '/tournaments', {
      name: 'Race', status: 'active', game_config: { metric: 'bet_count' },
      prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, points: [{ currency_id: lp.id, amount: 5 }] }] },
    })
    const bet = (p: string) => ({ player_id: p, event_type: 'bet', payload: { amount: 1, currency: 'EUR' } })
    await send(tenant, [bet('p1'), bet('p1'), bet('p2')])
    const res = await h.request('PATCH', `/tournaments/${tr.id}`, { key: tenant.key, body: { status: 'ended' } })
    await h.app.ctx.gamification!.tick()
    await settle()
    if (res.status === 400) {
      t.equal(res.body.code, 'BAD_REQUEST')
      t.equal((await h.request('GET', `/tournaments/${tr.id}`, { key: tenant.key })).body.data.status, 'active', 'refused: still active')
      return
    }
    t.equal(res.status, 200)
    const ended = await outbox(tenant, 'tournament.ended')
    t.equal(ended.length, 1, 'tournament.ended fired')
    t.match(ended[0]?.data, { tournament_id: tr.id, winners: [{ rank: 1, player_id: await playerId(tenant, 'p1'), score: 2 }, { rank: 2, score: 1 }] })
    t.match((await profile(tenant, 'p1')).point_balances, [{ currency_id: lp.id, balance: 5 }], 'the prize was granted')
    const ranks = await sql<{ final_rank: number | null }[]>`select final_rank from tournament_participants where tournament_id = ${tr.id} order by final_rank`
    t.same(ranks.map((r) => r.final_rank), [1, 2], 'final ranks written')
  })

t.test('a point ledger entry, a resource returned as { data }, has a UUID id', async (t) => {
  // spec Conventions 4: "Every id of a resource is a UUID string". engines §5: POST .../points "→ 201 with
  // the ledger entry". (A global sequence also tells every tenant how many entries all tenants made.)
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const pid = await playerId(tenant, 'p1')
  const res = await h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id: lp.id, amount: 3 } })
  t.equal(res.status, 201, res.text)
  t.match(res.body.data.id, UUID, `id ${JSON.stringify(res.body.data.id)}`)
  const listed = await h.request('GET', `/gamification/player/${pid}/points`, { key: tenant.key })
  t.same(listed.body.data.map((e: { id: string }) => e.id), [res.body.data.id])
})

t.test('the profile and a bonus grant carry every field engines §5 lists',
  async (t) => {
    // engines §5: current_level `{ id, name, tier, min_points, max_points }`; point_balances `[{ currency_id,
    // name, symbol, balance, lifetime }]`; active_missions `[{ mission_id, name, type, progress, target, stage,
    // completions, period_start }]`; badges_earned `[{ badge_id, name, rarity, earned_at }]`; a grant
    // `{ id, bonus_id, player_id, status: "granted", expires_at, created_at }`. docs/gamification.md adds a few
    // (benefits, lifetime_earned, a mission's description and window, a grant's source...): additions a client
    // may ignore, so each object is checked to hold the contract's fields, not only them.
    const tenant = await h.createTenant()
    await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0 })
    await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
    await create(tenant, '/gamification/missions', { name: 'Daily', type: 'daily', rules: { event_type: 'login', target: 5 } })
    await create(tenant, '/gamification/badges', { name: 'Hello', criteria: { event_type: 'login', target: 1 } })
    const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'custom', value: 1, value_type: 'fixed' })
    await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
    const p = await profile(tenant, 'p1')
    t.same(['id', 'max_points', 'min_points', 'name', 'tier'].filter((k) => !(k in (p.current_level ?? {}))), [], 'current_level')
    t.same(['balance', 'currency_id', 'lifetime', 'name', 'symbol'].filter((k) => !(k in (p.point_balances[0] ?? {}))), [], 'point_balances[]')
    t.same(['completions', 'mission_id', 'name', 'period_start', 'progress', 'stage', 'target', 'type'].filter((k) => !(k in (p.active_missions[0] ?? {}))), [], 'active_missions[]')
    t.same(['badge_id', 'earned_at', 'name', 'rarity'].filter((k) => !(k in (p.badges_earned[0] ?? {}))), [], 'badges_earned[]')
    const grant = await h.request('POST', `/bonuses/${bonus.id}/grant`, { key: tenant.key, body: { player_id: p.player_id } })
    t.equal(grant.status, 201)
    t.same(['bonus_id', 'created_at', 'expires_at', 'id', 'player_id', 'status'].filter((k) => !(k in (grant.body.data))), [], 'grant')
  })

t.test('timeseries: without `from`, one row per day from the day 30 days ago to today in tz, both included', async (t) => {
  // spec: `from` "default 30 days ago", `tz` "default UTC"; engines §6: "one row per day in tz from the day of
  // `from` to today, both included: { date, new_players, active_players, events, deposits (amount), ggr }".
  const tenant = await h.createTenant()
  for (const tz of [undefined, 'Pacific/Kiritimati', 'Pacific/Pago_Pago']) {
    const before = Date.now()
    const res = await h.request('GET', '/analytics/timeseries', { key: tenant.key, query: tz ? { tz } : {} })
    const after = Date.now()
    t.equal(res.status, 200, `${tz ?? 'UTC'}: 200`)
    const rows = res.body.data as { date: string }[]
    const zone = tz ?? 'UTC'
    // The request's "now" lies between before and after; a day boundary in between is allowed for.
    const firsts = [localDate(new Date(before - 30 * 86_400_000), zone), localDate(new Date(after - 30 * 86_400_000), zone)]
    const lasts = [localDate(new Date(before), zone), localDate(new Date(after), zone)]
    t.ok(firsts.includes(rows[0]?.date as string), `${zone}: first row ${rows[0]?.date} is the day 30 days ago (${firsts[0]})`)
    t.ok(lasts.includes(rows.at(-1)?.date as string), `${zone}: last row ${rows.at(-1)?.date} is today (${lasts[0]})`)
    t.equal(rows.length, 31, `${zone}: 31 days`)
    for (let i = 1; i < rows.length; i++) {
      const gap = Date.parse(`${rows[i]?.date}T00:00:00Z`) - Date.parse(`${rows[i - 1]?.date}T00:00:00Z`)
      if (gap !== 86_400_000) t.fail(`${zone}: ${rows[i - 1]?.date} → ${rows[i]?.date} is not the next day`)
    }
    t.same(sorted(rows[0] ?? {}), ['active_players', 'date', 'deposits', 'events', 'ggr', 'new_players'], `${zone}: row fields`)
  }
})

t.test('cohorts: `months` calendar months ending with the current one (default 12), in order, each with its retention so far', async (t) => {
  // spec: `months` (integer 1 to 36, default 12); engines §6: `{ cohorts: [{ month: "2026-05", size,
  // retention: [m0, m1, ...], depositors, deposits, ggr }] }`, cohort = registration month.
  const tenant = await h.createTenant()
  await ingest(tenant.key, [{ player_id: 'c1', event_type: 'registration', payload: { country: 'IT' } }])
  const thisMonth = new Date().toISOString().slice(0, 7)
  for (const months of [undefined, 1, 36]) {
    const res = await h.request('GET', '/analytics/cohorts', { key: tenant.key, query: months ? { months } : {} })
    t.equal(res.status, 200)
    t.same(Object.keys(res.body.data), ['cohorts'])
    const cohorts = res.body.data.cohorts as { month: string; retention: number[] }[]
    const n = months ?? 12
    t.equal(cohorts.length, n, `months=${months}: ${n} cohorts`)
    t.equal(cohorts.at(-1)?.month, thisMonth, 'the last is the current month')
    for (const [i, c] of cohorts.entries()) {
      const d = new Date(`${thisMonth}-01T00:00:00Z`)
      d.setUTCMonth(d.getUTCMonth() - (n - 1 - i))
      if (c.month !== d.toISOString().slice(0, 7)) t.fail(`months=${months}: cohort ${i} is ${c.month}, not ${d.toISOString().slice(0, 7)}`)
      if (c.retention.length !== n - i) t.fail(`months=${months}: ${c.month} has ${c.retention.length} retention months, not ${n - i} (up to now)`)
    }
    t.same(sorted(cohorts[0] ?? {}), ['depositors', 'deposits', 'ggr', 'month', 'retention', 'size'])
  }
  const mine = await pollUntil(async () => (await h.request('GET', '/analytics/cohorts', { key: tenant.key, query: { months: 1 } })).body.data.cohorts[0], (c) => c?.size === 1)
  t.match(mine, { month: thisMonth, size: 1, retention: [1], depositors: 0, deposits: {}, ggr: {} }, 'the registration this month: one player, active this month')
})

t.test('export: the default limit is 200 (spec Limits: "Export limit 1 to 1000, default 200")', async (t) => {
  const tenant = await h.createTenant()
  const batch = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ player_id: `x${from + i}`, event_type: 'login' }))
  await ingest(tenant.key, batch(0, 100))
  await ingest(tenant.key, batch(100, 100))
  await ingest(tenant.key, batch(200, 1))
  for (const dataset of ['players', 'events']) {
    const first = await pollUntil(() => page(tenant.key, dataset), (p) => p.data.length === 200 && p.next_cursor !== null)
    t.equal(first.data.length, 200, `${dataset}: a first page of 200 rows`)
    t.type(first.next_cursor, 'string')
    const rest = await pollUntil(() => page(tenant.key, dataset, { cursor: first.next_cursor as string }), (p) => p.data.length === 1)
    t.equal(rest.data.length, 1, `${dataset}: then the 201st`)
  }
})

t.test('export: an event row carries the canonical fields of its type (contract.md "Canonical events")',
  async (t) => {
    // engines §6: `events` rows `{ event_id, player_id, event_type, source_type, event_time, received_at,
    // session_id, <canonical fields>, payload }`; contract.md: registration's canonical fields include
    // `email`, `phone`, `name`; status_change's are `status`, `reason`. With a mapping (contract.md "Event
    // mapping"), a derived field exists nowhere else in the row: the payload is as sent.
    const tenant = await h.createTenant()
    const mapping = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, {
      rules: [{ match: 'signup', type: 'registration', fields: { email: 'payload.mail', name: 'payload.full_name', phone: 'payload.tel', country: 'payload.cc' } }],
    })
    t.equal(mapping.status, 200, mapping.text)
    await ingest(tenant.key, [
      { event_id: 'r1', player_id: 'e1', event_type: 'signup', payload: { mail: 'ann@example.com', full_name: 'Ann Example', tel: '+39 333 1234567', cc: 'IT' } },
      { event_id: 's1', player_id: 'e1', event_type: 'status_change', payload: { status: 'active', reason: 'kyc passed' } },
    ])
    const rows = (await pollUntil(() => page(tenant.key, 'events'), (p) => p.data.length === 2)).data
    t.equal(rows.length, 2)
    t.match(rows[0], { event_id: 'r1', event_type: 'registration', source_type: 'signup', country: 'IT' }, 'the mapped type and a derived field with a column')
    t.match(rows[0], { email: 'ann@example.com', name: 'Ann Example', phone: '+39 333 1234567' }, 'registration: email, name, phone')
    t.match(rows[1], { event_id: 's1', status: 'active', reason: 'kyc passed' }, 'status_change: status and reason')
  })

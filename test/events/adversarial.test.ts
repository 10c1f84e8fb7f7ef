// Ingestion, adversarial: the batch endpoint's edges and the canonical events', under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { post, uid } from './helpers.ts'

const h = await startHarness(t)

// Adversarial checks of what the spec, the contract and docs/ingestion.md promise about POST /events.
t.test('adversarial', async (t) => {
  const sql = h.app.ctx.sql

  const at = (min: number) => new Date(Date.UTC(2026, 0, 1, 12, min)).toISOString()
  const e = (player: string, type: string, min: number, payload: Record<string, unknown> = {}, over: Record<string, unknown> = {}) => ({
    player_id: player, event_type: type, event_id: uid(), timestamp: at(min), payload, ...over,
  })

  async function profile(tenantId: string, externalId: string) {
    const [row] = await sql<Record<string, any>[]>`
    select pl.id, pl.email, pl.phone, pl.status, pl.brand_id, pp.* from players pl join player_profiles pp on pp.player_id = pl.id
    where pl.tenant_id = ${tenantId} and pl.external_id = ${externalId}`
    return row
  }
  const outbox = (tenantId: string, event: string) =>
    sql<{ event: string; data: any }[]>`select event, data from outbox where tenant_id = ${tenantId} and event = ${event} order by id`

  async function playersOf(tenant: TestTenant) {
    const res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 100 } })
    return res.body.data as { id: string; external_id: string; status: string }[]
  }

  t.test('one invalid event refuses the whole batch: no event stored, no player created', async (t) => {
    const tenant = await h.createTenant()
    const res = await post(h, tenant.key, {
      events: [e('good1', 'deposit', 1, { amount: 10 }), e('good2', 'login', 2), e('bad', 'login', 3, {}, { timestamp: '2026-13-45T00:00:00Z' })],
    })
    t.equal(res.status, 400, res.text)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.same(res.body.details.errors.map((x: { field: string }) => x.field), ['events.2.timestamp'])
    t.same(await playersOf(tenant), [], 'no player upserted from a refused batch')
    const wrongType = await post(h, tenant.key, { events: [e('good1', 'login', 1), { player_id: 'p', event_type: 42 }] })
    t.equal(wrongType.status, 400)
    t.same(wrongType.body.details.errors.map((x: { field: string }) => x.field), ['events.1.event_type'])
    const numId = await post(h, tenant.key, { events: [{ player_id: 12345, event_type: 'login' }] })
    t.equal(numId.status, 400, 'player_id must be a string')
    t.same(await playersOf(tenant), [])
  })

  t.test('timestamps: 2000-01-01 exactly and now + 23h are accepted; offsets are honoured in the profile', async (t) => {
    const tenant = await h.createTenant()
    const lo = await post(h, tenant.key, e('ts', 'login', 0, {}, { timestamp: '2000-01-01T00:00:00Z' }))
    t.equal(lo.status, 200, lo.text)
    const soon = new Date(Date.now() + 23 * 3600_000).toISOString()
    const hi = await post(h, tenant.key, e('ts2', 'login', 0, {}, { timestamp: soon }))
    t.equal(hi.status, 200, hi.text)
    const off = await post(h, tenant.key, e('ts3', 'login', 0, {}, { timestamp: '2026-01-01T10:00:00+02:00' }))
    t.equal(off.status, 200)
    const p3 = await profile(tenant.id, 'ts3')
    t.equal(new Date(p3?.last_login_at).toISOString(), '2026-01-01T08:00:00.000Z', 'offset converted to UTC')
    const p1 = await profile(tenant.id, 'ts')
    t.equal(new Date(p1?.first_seen_at).toISOString(), '2000-01-01T00:00:00.000Z')
    const offOld = await post(h, tenant.key, e('ts4', 'login', 0, {}, { timestamp: '2000-01-01T00:30:00+01:00' }))
    t.equal(offOld.status, 400, '1999-12-31T23:30Z (written with an offset) is before the lower bound')
  })

  t.test('last activity: events arriving out of order keep first_seen min and last_seen/last_login max', async (t) => {
    const tenant = await h.createTenant()
    await post(h, tenant.key, { events: [e('o', 'login', 30), e('o', 'deposit', 31, { amount: 5 })] })
    const late = await post(h, tenant.key, { events: [e('o', 'login', 10), e('o', 'deposit', 11, { amount: 7 })] })
    t.equal(late.status, 200)
    const p = await profile(tenant.id, 'o')
    t.equal(new Date(p?.first_seen_at).toISOString(), at(10))
    t.equal(new Date(p?.last_seen_at).toISOString(), at(31))
    t.equal(new Date(p?.last_login_at).toISOString(), at(30), 'an older login does not move last_login_at back')
    t.equal(new Date(p?.last_deposit_at).toISOString(), at(31), 'an older deposit does not move last_deposit_at back')
    t.equal(Number(p?.deposit_count), 2)
    t.equal(Number(p?.deposit_total), 12)
  })

  t.test('duplicate event_id inside one batch: first occurrence wins, the profile counts it once', async (t) => {
    const tenant = await h.createTenant()
    const id = uid()
    const res = await post(h, tenant.key, {
      events: [
        e('d', 'deposit', 1, { amount: 10, currency: 'EUR' }, { event_id: id }),
        e('d', 'deposit', 2, { amount: 99, currency: 'EUR' }, { event_id: id }),
        e('d2', 'deposit', 3, { amount: 50, currency: 'EUR' }, { event_id: id }),
      ],
    })
    t.match(res.body, { received: 3, stored: 1, deduped: 2 })
    const p = await profile(tenant.id, 'd')
    t.equal(Number(p?.deposit_count), 1)
    t.equal(Number(p?.deposit_total), 10, 'the first occurrence is the one kept')
    t.notOk(await profile(tenant.id, 'd2'), 'a duplicate creates no player')
    // A duplicate across batches in another brand of the same tenant is not a duplicate.
    const other = await tenant.createBrand('other')
    const again = await post(h, tenant.key, e('d', 'deposit', 4, { amount: 1 }, { event_id: id }), { headers: { 'x-brand': other.slug } })
    t.match(again.body, { stored: 1, deduped: 0 })
  })

  t.test('currency: profile currency vs other currencies, lower-case codes, no currency', async (t) => {
    const tenant = await h.createTenant()
    const res = await post(h, tenant.key, {
      events: [
        e('c', 'registration', 0, { currency: 'GBP' }),
        e('c', 'deposit', 1, { amount: 10, currency: 'GBP' }),
        e('c', 'deposit', 2, { amount: 5 }),
        e('c', 'deposit', 3, { amount: 20, currency: 'usd' }),
        e('c', 'deposit', 4, { amount: 2.5, currency: 'USD' }),
        e('c', 'withdrawal', 5, { amount: 1, currency: 'USD' }),
      ],
    })
    t.equal(res.status, 200, res.text)
    const p = await profile(tenant.id, 'c')
    t.equal(p?.currency, 'GBP')
    t.equal(Number(p?.deposit_total), 15, 'GBP plus the currency-less deposit')
    t.equal(Number(p?.deposit_count), 4, 'counts take every currency: 2 GBP (one without currency) and 2 USD')
    t.same(Object.keys(p?.totals_by_currency ?? {}), ['USD'], 'usd and USD are one currency')
    t.equal(Number(p?.totals_by_currency?.USD?.deposit_total), 22.5)
    t.equal(Number(p?.totals_by_currency?.USD?.deposit_count), 2)
    t.equal(Number(p?.totals_by_currency?.USD?.withdrawal_total), 1)
    const viaApi = await h.request('GET', `/players/${p?.id}`, { key: tenant.key })
    t.equal(viaApi.body.data.profile.deposit_total, 15)
  })

  t.test('FTD: one player.converted for the first deposit; failed deposits and rollbacks never convert', async (t) => {
    const tenant = await h.createTenant()
    await post(h, tenant.key, { events: [e('f', 'deposit_failed', 1, { amount: 9 }), e('f', 'bet_rollback', 2, { amount: 3 })] })
    t.same(await outbox(tenant.id, 'player.converted'), [])
    const p0 = await profile(tenant.id, 'f')
    t.equal(Number(p0?.deposit_count), 0)
    t.equal(p0?.first_deposit_at, null)
    await post(h, tenant.key, { events: [e('f', 'deposit', 5, { amount: 40, currency: 'EUR' }), e('f', 'deposit', 6, { amount: 60, currency: 'EUR' })] })
    await post(h, tenant.key, { events: [e('f', 'deposit', 7, { amount: 1 })] })
    const conv = await outbox(tenant.id, 'player.converted')
    t.equal(conv.length, 1, 'exactly one conversion')
    t.match(conv[0]?.data, { external_id: 'f', conversion: 'first_deposit', amount: 40, currency: 'EUR' })
    const p = await profile(tenant.id, 'f')
    t.equal(Number(p?.first_deposit_amount), 40)
    t.equal(new Date(p?.first_deposit_at).toISOString(), at(5))
  })

  t.test('FTD inside one batch whose deposits are not in time order: the earliest deposit is the first', async (t) => {
    const tenant = await h.createTenant()
    await post(h, tenant.key, { events: [e('g', 'deposit', 9, { amount: 90 }), e('g', 'deposit', 3, { amount: 30 })] })
    const p = await profile(tenant.id, 'g')
    t.equal(new Date(p?.first_deposit_at).toISOString(), at(3))
    t.equal(new Date(p?.last_deposit_at).toISOString(), at(9))
    t.equal(Number(p?.first_deposit_amount), 30, 'first_deposit_amount is the amount of the earliest deposit')
    const [conv] = await outbox(tenant.id, 'player.converted')
    t.equal(conv?.data.amount, 30)
  })

  t.test('status_change: sets the status, fires only on a real change, refuses values outside the enum', async (t) => {
    const tenant = await h.createTenant()
    await post(h, tenant.key, e('s', 'status_change', 1, { status: 'suspended', reason: 'kyc' }))
    await post(h, tenant.key, e('s', 'status_change', 2, { status: 'suspended', reason: 'again' }))
    let changed = await outbox(tenant.id, 'player.status_changed')
    t.equal(changed.length, 1)
    t.match(changed[0]?.data, { external_id: 's', status: 'suspended', previous_status: 'active', reason: 'kyc' })
    const bad = await post(h, tenant.key, e('s', 'status_change', 3, { status: 'banned' }))
    t.ok(bad.status === 200 || bad.status === 400, bad.text)
    const p = await profile(tenant.id, 's')
    t.equal(p?.status, 'suspended', 'a status outside active/suspended/self_excluded/closed is never written')
    const list = await h.request('GET', '/players', { key: tenant.key, query: { status: 'suspended' } })
    t.equal(list.body.pagination.total, 1)
    changed = await outbox(tenant.id, 'player.status_changed')
    t.equal(changed.length, 1)
  })

  t.test('consent_update per channel; later state wins; unknown channels are not recorded', async (t) => {
    const tenant = await h.createTenant()
    await post(h, tenant.key, {
      events: [
        e('k', 'consent_update', 1, { channel: 'email', granted: true }),
        e('k', 'consent_update', 2, { channel: 'push', granted: true }),
        e('k', 'consent_update', 3, { channel: 'email', granted: false }),
        e('k', 'consent_update', 4, { channel: 'fax', granted: true }),
      ],
    })
    const p = await profile(tenant.id, 'k')
    t.equal(p?.consent?.email?.granted, false, 'the later email consent wins within a batch')
    t.equal(new Date(p?.consent?.email?.at).toISOString(), at(3))
    t.equal(p?.consent?.push?.granted, true)
    t.notOk(p?.consent?.fax, 'channel fax is not one of email, telegram, push, in_app, sms')
    // An older consent event arriving later does not overwrite a newer state.
    await post(h, tenant.key, e('k', 'consent_update', 0, { channel: 'push', granted: false }))
    const q = await profile(tenant.id, 'k')
    t.equal(q?.consent?.push?.granted, true, 'an older consent_update arriving late does not win')
    t.equal(new Date(q?.consent?.push?.at).toISOString(), at(2), 'consent.at never moves back')
    // Within one batch sent out of time order, the newest event time wins too.
    await post(h, tenant.key, { events: [e('k2', 'consent_update', 9, { channel: 'sms', granted: false }), e('k2', 'consent_update', 8, { channel: 'sms', granted: true })] })
    const r = await profile(tenant.id, 'k2')
    t.equal(r?.consent?.sms?.granted, false, 'the newest consent_update of a batch wins, whatever its place in the batch')
  })

  t.test('registration fields reach the player and profile; a later profile_update overrides', async (t) => {
    const tenant = await h.createTenant()
    await post(h, tenant.key, e('r', 'registration', 1, { email: 'R@Example.com', phone: '+391', country: 'IT', language: 'it', currency: 'eur', name: 'Rita' }))
    await post(h, tenant.key, e('r', 'profile_update', 2, { email: 'r2@example.com', country: 'ES' }))
    const p = await profile(tenant.id, 'r')
    t.match(p, { email: 'r2@example.com', phone: '+391', country: 'ES', language: 'it', name: 'Rita' })
    t.equal(p?.currency, 'EUR', 'currency codes are stored upper-case')
    const viaApi = await h.request('GET', `/players/${p?.id}`, { key: tenant.key })
    t.match(viaApi.body.data, { external_id: 'r', email: 'r2@example.com', profile: { country: 'ES', language: 'it', currency: 'EUR' } })
  })

  t.test('mapping: nested field paths, renames to canonical types feed the profile; reporting lists', async (t) => {
    const tenant = await h.createTenant()
    const mapping = {
      rules: [
        { match: 'txn.deposit.ok', type: 'deposit', fields: { amount: 'payload.money.value', currency: 'payload.money.ccy' } },
        { match: 'custom_*', type: 'vendor_thing' },
        { match: 'noise*', action: 'ignore' },
        { match: 'qa_*', action: 'reject' },
      ],
    }
    t.equal((await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, mapping)).status, 200)
    const res = await post(h, tenant.key, {
      events: [
        e('m', 'txn.deposit.ok', 1, { money: { value: '12.50', ccy: 'EUR' } }),
        e('m', 'txn.deposit.ok', 2, { money: { value: 7.5 } }),
        e('m', 'custom_a', 3),
        e('m', 'custom_b', 4),
        e('m', 'noise', 5),
        e('m', 'noisey', 6),
        e('m', 'qa_1', 7),
        e('m', 'qa_1', 8),
        e('m', 'qa_2', 9),
        e('m', 'mystery', 10),
        e('m', 'mystery', 11),
        e('m', 'deposit', 12, { amount: 1 }),
      ],
    })
    t.equal(res.status, 200, res.text)
    t.match(res.body, { received: 12, stored: 7, deduped: 0, rejected: 3, ignored: 2, status: 'queued' })
    t.equal(res.body.received, res.body.stored + res.body.deduped + res.body.rejected + res.body.ignored)
    t.same([...res.body.unknown_event_types].sort(), ['mystery'], 'types mapped by a rule are not unknown, even when not canonical')
    t.same([...res.body.rejected_event_types].sort(), ['qa_1', 'qa_2'], 'distinct original types')
    const p = await profile(tenant.id, 'm')
    t.equal(Number(p?.deposit_count), 3)
    t.equal(Number(p?.deposit_total), 21)
    t.equal(Number(p?.event_count), 7, 'ignored and rejected events do not count as activity')
  })

  t.test('mapping fields override payload names', async (t) => {
    const tenant = await h.createTenant()
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, {
      rules: [{ match: 'dep', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.nowhere.ccy' } }],
    })
    await post(h, tenant.key, e('x', 'registration', 0, { currency: 'EUR' }))
    const res = await post(h, tenant.key, e('x', 'dep', 1, { amt: 3, amount: 999, currency: 'USD' }))
    t.equal(res.status, 200)
    const p = await profile(tenant.id, 'x')
    t.equal(Number(p?.totals_by_currency?.USD?.deposit_total), 3, 'the rule path wins over payload.amount')
    t.equal(Number(p?.deposit_total), 0)
  })

  t.test('player lookup: the same external id in two brands is two players; by-id sees both, search one', async (t) => {
    const tenant = await h.createTenant()
    const other = await tenant.createBrand('b2')
    await post(h, tenant.key, e('same', 'login', 1))
    await post(h, tenant.key, e('same', 'login', 2), { query: { brand: other.slug } })
    const a = await h.request('GET', '/players', { key: tenant.key, query: { search: 'same' } })
    const b = await h.request('GET', '/players', { key: tenant.key, query: { search: 'same', brand: other.slug } })
    t.equal(a.body.pagination.total, 1)
    t.equal(b.body.pagination.total, 1)
    t.not(a.body.data[0].id, b.body.data[0].id)
    const pinned = await tenant.createKey({ brand: other.slug })
    t.equal((await h.request('GET', `/players/${a.body.data[0].id}`, { key: pinned.key })).status, 404)
    t.equal((await h.request('GET', `/players/${b.body.data[0].id}`, { key: tenant.key })).status, 200)
    // POST /players with the same external id upserts the player ingestion created.
    const up = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'same', email: 's@example.com' } })
    t.equal(up.status, 201)
    t.equal(up.body.data.id, a.body.data[0].id)
    const created = await outbox(tenant.id, 'player.created')
    t.equal(created.length, 2, 'player.created for ingestion-created players, once each')
  })

  t.test('event_id length is counted in characters; impossible calendar timestamps are refused', async (t) => {
    const tenant = await h.createTenant()
    const emojiId = `${'\u{1F600}'.repeat(100)}`
    const emoji = await post(h, tenant.key, e('u', 'login', 1, {}, { event_id: emojiId }))
    t.equal(emoji.status, 200, `an event_id of 100 characters (200 UTF-16 units) is within 128 characters: ${emoji.text}`)
    const dup = await post(h, tenant.key, e('u', 'login', 2, {}, { event_id: emojiId }))
    t.match(dup.body, { deduped: 1 })
    const over = await post(h, tenant.key, e('u', 'login', 3, {}, { event_id: '\u{1F600}'.repeat(129) }))
    t.equal(over.status, 400, '129 characters')
    const feb30 = await post(h, tenant.key, e('u', 'login', 4, {}, { timestamp: '2026-02-30T10:00:00Z' }))
    t.equal(feb30.status, 400, `2026-02-30 is no date: ${feb30.text}`)
    const hour25 = await post(h, tenant.key, e('u', 'login', 4, {}, { timestamp: '2026-01-01T25:00:00Z' }))
    t.equal(hour25.status, 400)
  })
})

// Adversarial checks of ingestion against the contract's canonical events (docs/contract.md "Canonical
// events", "Event mapping"), the spec's POST /events and Limits, and docs/ingestion.md: what each canonical
// type leaves in the profile (PostgreSQL) and in ClickHouse (read back through /export and /analytics),
// and whether the two agree, per currency, exactly.
t.test('adversarial-canonical', async (t) => {
  const sql = h.app.ctx.sql

  // Recent event times (summary's "active" and FTD windows are 30 days; the accepted future is 1 day).
  const BASE = Date.now() - 3 * 3600_000
  const at = (min: number) => new Date(BASE + min * 60_000).toISOString()
  const e = (player: string, type: string, min: number, payload?: Record<string, unknown>, over: Record<string, unknown> = {}) => ({
    player_id: player, event_type: type, event_id: uid(), timestamp: at(min), ...(payload ? { payload } : {}), ...over,
  })

  async function ok(tenant: TestTenant, body: unknown, opts: { headers?: Record<string, string> } = {}) {
    const res = await post(h, tenant.key, body, opts)
    if (res.status !== 200) throw new Error(`POST /events answered ${res.status}: ${res.text}`)
    return res.body
  }

  /** The profile row as PostgreSQL holds it, money as exact numeric text. */
  async function profile(tenantId: string, externalId: string) {
    const [row] = await sql<Record<string, any>[]>`
    select pl.id, pl.status, pl.email, pp.currency, pp.event_count::int as event_count, pp.deposit_count::int as deposit_count, pp.deposit_total::text as deposit_total,
      pp.withdrawal_count::int as withdrawal_count, pp.withdrawal_total::text as withdrawal_total, pp.bet_count::int as bet_count, pp.bet_total::text as bet_total,
      pp.win_count::int as win_count, pp.win_total::text as win_total, pp.bet_rollback_total::text as bet_rollback_total,
      pp.win_rollback_total::text as win_rollback_total, pp.bonus_cost::text as bonus_cost, pp.ggr::text as ggr,
      pp.totals_by_currency, pp.first_deposit_at, pp.first_deposit_amount::text as first_deposit_amount, pp.consent
    from players pl join player_profiles pp on pp.player_id = pl.id
    where pl.tenant_id = ${tenantId} and pl.external_id = ${externalId}`
    return row
  }
  const outbox = (tenantId: string, event: string) =>
    sql<{ data: any }[]>`select data from outbox where tenant_id = ${tenantId} and event = ${event} order by id`

  /** Moves everything acknowledged into ClickHouse (the default mode acknowledges after PostgreSQL). */
  const flush = () => h.app.ctx.ingest?.spool?.flush('all')

  async function summary(tenant: TestTenant) {
    await flush()
    const res = await h.request('GET', '/analytics/summary', { key: tenant.key })
    if (res.status !== 200) throw new Error(res.text)
    return res.body.data
  }

  async function exportAll(tenant: TestTenant, dataset: 'events' | 'transactions') {
    await flush()
    const rows: Record<string, any>[] = []
    let cursor: string | undefined
    for (;;) {
      const res = await h.request('GET', `/export/${dataset}`, { key: tenant.key, query: { limit: 1000, ...(cursor ? { cursor } : {}) } })
      if (res.status !== 200) throw new Error(res.text)
      if (!res.body.data.length) return rows
      rows.push(...res.body.data)
      cursor = res.body.next_cursor
    }
  }

  /** Exact decimal arithmetic for the expectations (units of 1e-8). */
  const U = 100_000_000n
  function units(s: string): bigint {
    const m = /^(-?)(\d+)(?:\.(\d{0,8}))?$/.exec(s)
    if (!m) throw new Error(`not a decimal: ${s}`)
    const v = BigInt(m[2] as string) * U + BigInt(((m[3] ?? '') + '00000000').slice(0, 8))
    return m[1] ? -v : v
  }
  const dec = (u: bigint) => {
    const neg = u < 0n
    const a = neg ? -u : u
    const frac = (a % U).toString().padStart(8, '0').replace(/0+$/, '')
    return `${neg ? '-' : ''}${a / U}${frac ? `.${frac}` : ''}`
  }
  /** A numeric's text normalised (PostgreSQL writes trailing zeros: 150.000000 → 150). */
  const norm = (s: string | number | null | undefined) => (s == null ? s : dec(units(typeof s === 'number' ? s.toFixed(8) : s)))

  t.test('every canonical type with every canonical field: the export row carries each one, nothing of another type', async (t) => {
    const tenant = await h.createTenant()
    const full: [string, Record<string, unknown>][] = [
      ['registration', { country: 'IT', language: 'it', currency: 'EUR', device: 'mobile', os: 'android', browser: 'chrome', platform: 'web', email: 'x@example.com', phone: '+390000', name: 'X' }],
      ['login', { country: 'ES', device: 'desktop', os: 'linux', browser: 'firefox', platform: 'app' }],
      ['logout', { country: 'FR', device: 'tablet', os: 'ios', browser: 'safari', platform: 'web' }],
      ['profile_update', { country: 'DE', language: 'de', currency: 'EUR', email: 'y@example.com', phone: '+49', name: 'Y' }],
      ['consent_update', { channel: 'telegram', granted: true }],
      ['deposit', { amount: '10.5', currency: 'EUR', method: 'card' }],
      ['deposit_failed', { amount: 3, currency: 'EUR', method: 'sepa' }],
      ['withdrawal', { amount: 2, currency: 'EUR', method: 'wire' }],
      ['bet', { amount: 1.25, currency: 'EUR', game: 'g1', provider: 'p1', category: 'slots', round_id: 'r1' }],
      ['win', { amount: 4, currency: 'EUR', game: 'g1', provider: 'p1', category: 'slots', round_id: 'r1' }],
      ['bet_rollback', { amount: 0.25, currency: 'EUR', game: 'g1', provider: 'p1', category: 'slots', round_id: 'r1' }],
      ['win_rollback', { amount: 1, currency: 'EUR', game: 'g1', provider: 'p1', category: 'slots', round_id: 'r1' }],
      ['status_change', { status: 'suspended', reason: 'kyc' }],
      ['game_start', { game: 'g2', provider: 'p2', category: 'live', device: 'mobile', platform: 'app' }],
      ['bonus_granted', { bonus_id: 'b1', amount: 5, currency: 'EUR' }],
      ['bonus_completed', { bonus_id: 'b1', amount: 2, currency: 'EUR' }],
      ['bonus_forfeited', { bonus_id: 'b2', amount: 3, currency: 'EUR' }],
    ]
    // Every event also carries a field of another type (`game` on a deposit, `amount` on a login, ...):
    // "canonical fields are read from payload by their own names" — the type's own names only.
    const foreign = { game: 'not-mine', amount: 999, status: 'closed', channel: 'sms', method: 'nope' }
    const events = full.map(([type, fields], i) => e('all', type, i, { ...foreign, ...fields }))
    const res = await ok(tenant, { events })
    t.match(res, { received: events.length, stored: events.length, deduped: 0, rejected: 0, ignored: 0, unknown_event_types: [], rejected_event_types: [] })
    const rows = await exportAll(tenant, 'events')
    t.equal(rows.length, events.length)
    const COLS = ['method', 'game', 'provider', 'category', 'round_id', 'country', 'language', 'device', 'os', 'browser', 'platform', 'status', 'bonus_id', 'channel']
    for (const [i, [type, fields]] of full.entries()) {
      const row = rows.find((r) => r.event_id === events[i]?.event_id) as Record<string, any>
      t.ok(row, `${type} exported`)
      t.equal(row.event_type, type)
      t.equal(row.source_type, type)
      t.equal(row.event_time, events[i]?.timestamp, `${type}: event time`)
      for (const c of COLS) t.equal(row[c], c in fields ? fields[c] : null, `${type}.${c}`)
      const money = 'amount' in fields
      t.equal(norm(row.amount), money ? norm(String(fields.amount)) : null, `${type}.amount`)
      t.equal(row.currency, 'currency' in fields ? 'EUR' : null, `${type}.currency`)
      t.equal(row.granted, type === 'consent_update' ? true : null, `${type}.granted`)
      t.same(row.payload, events[i]?.payload, `${type}: payload as sent`)
    }
    // The transactions dataset: exactly the contract's monetary types (not deposit_failed).
    const tx = await exportAll(tenant, 'transactions')
    t.same(tx.map((r) => r.event_type).sort(), ['bet', 'bet_rollback', 'bonus_completed', 'bonus_forfeited', 'bonus_granted', 'deposit', 'win', 'win_rollback', 'withdrawal'])
    // The profile took each type's own fields: the login's `status: closed` / `channel: sms` changed nothing.
    const p = await profile(tenant.id, 'all')
    t.equal(p?.status, 'suspended')
    t.same(Object.keys(p?.consent ?? {}), ['telegram'])
    t.equal(p?.deposit_count, 1)
    t.equal(norm(p?.deposit_total), '10.5', 'the login\'s amount 999 is not a deposit')
  })

  t.test('counting: received = stored + deduped + rejected + ignored with duplicates mixed into mapping outcomes', async (t) => {
    const tenant = await h.createTenant()
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, {
      rules: [{ match: 'qa_*', action: 'reject' }, { match: 'hb', action: 'ignore' }],
    })
    const dupOfRejected = uid()
    const dupOfIgnored = uid()
    const dupUnknown = uid()
    const single = e('c', 'login', 0)
    // The same event first alone (single-event body), then inside a batch.
    t.match(await ok(tenant, single), { received: 1, stored: 1 })
    const res = await ok(tenant, {
      events: [
        e('c', 'qa_x', 1, {}, { event_id: dupOfRejected }),
        e('c', 'deposit', 2, { amount: 5, currency: 'EUR' }, { event_id: dupOfRejected }), // a rejected event claims no id
        e('c', 'hb', 3, {}, { event_id: dupOfIgnored }),
        e('c', 'login', 4, {}, { event_id: dupOfIgnored }),
        e('c', 'mystery', 5, {}, { event_id: dupUnknown }),
        e('c', 'mystery', 6, {}, { event_id: dupUnknown }), // deduped, still one stored mystery
        single,
      ],
    })
    t.match(res, { received: 7, stored: 3, deduped: 2, rejected: 1, ignored: 1 })
    t.equal(res.received, res.stored + res.deduped + res.rejected + res.ignored)
    t.same(res.unknown_event_types, ['mystery'])
    t.same(res.rejected_event_types, ['qa_x'])
    // A batch whose only unknown event is a duplicate stores no unknown type: none is listed ("stored types").
    const again = await ok(tenant, { events: [e('c', 'mystery', 7, {}, { event_id: dupUnknown }), e('c', 'login', 8)] })
    t.match(again, { received: 2, stored: 1, deduped: 1, unknown_event_types: [] })
    const p = await profile(tenant.id, 'c')
    t.equal(p?.event_count, 5, 'login, deposit, login, mystery, login')
    t.equal(p?.deposit_count, 1)
    const rows = await exportAll(tenant, 'events')
    t.equal(rows.length, 5, 'ClickHouse holds what was stored, once each')
    t.equal(new Set(rows.map((r) => r.event_id)).size, 5)
  })

  t.test('money in several currencies: profile, summary and transactions agree exactly, per currency (GGR, NGR, rollbacks, bonuses)', async (t) => {
    const tenant = await h.createTenant()
    const evs = [
      e('m', 'registration', 0, { currency: 'EUR' }),
      e('m', 'deposit', 1, { amount: '100.123456', currency: 'EUR' }),
      e('m', 'deposit', 2, { amount: 0.1, currency: 'eur' }),
      e('m', 'deposit', 3, { amount: '40', currency: 'USD' }),
      e('m', 'deposit_failed', 4, { amount: 1000, currency: 'EUR' }),
      e('m', 'withdrawal', 5, { amount: '20.5', currency: 'EUR' }),
      e('m', 'bet', 6, { amount: '10.000001', currency: 'EUR' }),
      e('m', 'bet', 7, { amount: '3', currency: 'USD' }),
      e('m', 'win', 8, { amount: 7.5, currency: 'EUR' }),
      e('m', 'win', 9, { amount: 1, currency: 'USD' }),
      e('m', 'bet_rollback', 10, { amount: '2', currency: 'EUR' }),
      e('m', 'win_rollback', 11, { amount: '0.5', currency: 'EUR' }),
      e('m', 'bet_rollback', 12, { amount: '1', currency: 'USD' }),
      e('m', 'bonus_granted', 13, { amount: 50, currency: 'EUR', bonus_id: 'b' }),
      e('m', 'bonus_completed', 14, { amount: '1.25', currency: 'EUR', bonus_id: 'b' }),
      e('m', 'bonus_forfeited', 15, { amount: 9, currency: 'EUR', bonus_id: 'b' }),
      e('m', 'bonus_completed', 16, { amount: '0.5', currency: 'USD', bonus_id: 'b' }),
    ]
    await ok(tenant, { events: evs })
    const p = await profile(tenant.id, 'm')
    // EUR: bets 10.000001 − rb 2 = 8.000001; wins 7.5 − rb 0.5 = 7 → GGR 1.000001; NGR = GGR − 1.25
    t.equal(norm(p?.deposit_total), '100.223456')
    t.equal(p?.deposit_count, 3, 'counts take every currency; the failed deposit is none')
    t.equal(norm(p?.withdrawal_total), '20.5')
    t.equal(norm(p?.ggr), '1.000001')
    t.equal(norm(p?.bonus_cost), '1.25', 'bonus cost = bonus_completed only (not granted, not forfeited)')
    t.equal(norm(String(p?.totals_by_currency?.USD?.deposit_total)), '40')
    const s = await summary(tenant)
    t.same(s.deposits, { count: 3, amount: { EUR: 100.223456, USD: 40 } })
    t.same(s.withdrawals, { count: 1, amount: { EUR: 20.5 } })
    t.same(s.ggr, { EUR: 1.000001, USD: 1 }, 'USD: (3 − 1) − 1')
    t.same(s.bonus_cost, { EUR: 1.25, USD: 0.5 })
    t.same(s.ngr, { EUR: -0.249999, USD: 0.5 })
    t.equal(s.depositors, 1)
    t.equal(s.ftd_count, 1)
    const tx = await exportAll(tenant, 'transactions')
    const sum = (type: string, cur: string) => dec(tx.filter((r) => r.event_type === type && r.currency === cur).reduce((a, r) => a + units(norm(r.amount) as string), 0n))
    t.equal(sum('deposit', 'EUR'), norm(p?.deposit_total), 'the export\'s EUR deposits are the profile\'s')
    t.equal(sum('deposit', 'USD'), '40')
    t.equal(tx.length, evs.length - 2, 'all but registration and deposit_failed')
    t.equal(tx.find((r) => r.event_type === 'deposit' && r.currency === 'EUR' && r.payload.currency === 'eur')?.amount, 0.1, 'a lower-case currency is stored upper-case')
  })

  t.test('amount spellings: strings, exponents, signs, 8 decimals, non-numbers, the ±1e9 bound, in profile and ClickHouse', async (t) => {
    const tenant = await h.createTenant()
    // [amount as sent, what ClickHouse keeps (1e-8), what the profile adds (1e-6)]
    const cases: [unknown, string, string][] = [
      ['1e3', '1000', '1000'],
      [1.5e-7, '0.00000015', '0'],
      ['  7 ', '7', '7'],
      ['+2.25', '2.25', '2.25'],
      ['0.12345678', '0.12345678', '0.123457'],
      [1e9, '1000000000', '1000000000'],
      ['-1000000000', '-1000000000', '-1000000000'],
      ['1000000000.01', '0', '0'], // beyond ±1e9: amount 0, out of the sums (docs/ingestion.md)
      ['abc', '0', '0'],
      [true, '0', '0'],
      [{ v: 1 }, '0', '0'],
      ['', '0', '0'],
    ]
    const events = cases.map(([amount], i) => e('a', 'deposit', i, { amount, currency: 'EUR' }))
    await ok(tenant, { events })
    const rows = await exportAll(tenant, 'transactions')
    t.equal(rows.length, cases.length)
    for (const [i, [amount, ch]] of cases.entries()) {
      const row = rows.find((r) => r.event_id === events[i]?.event_id)
      t.equal(norm(row?.amount), ch, `ClickHouse amount of ${JSON.stringify(amount)}`)
      t.same(row?.payload.amount, amount, 'the raw amount is kept as sent')
    }
    const chTotal = cases.reduce((a, [, ch]) => a + units(ch), 0n)
    const pTotal = cases.reduce((a, [, , pr]) => a + units(pr), 0n)
    const p = await profile(tenant.id, 'a')
    t.equal(norm(p?.deposit_total), dec(pTotal), 'profile: the 1e-6 sums')
    const s = await summary(tenant)
    t.equal(s.deposits.amount.EUR, Number(dec(chTotal)), 'summary: the 1e-8 sums')
    // The two differ only by the profile's rounding at the sixth decimal.
    t.ok(units(norm(p?.deposit_total) as string) - chTotal < 1000n && chTotal - units(norm(p?.deposit_total) as string) < 1000n)
  })

  t.test('a batch of large deposits: the profile sum is exact and equals ClickHouse\'s', async (t) => {
    const tenant = await h.createTenant()
    // 11 deposits within the ±1e9 bound, one request (one group): 10,999,999,989.000011 EUR in all.
    const events = Array.from({ length: 11 }, (_, i) => e('big', 'deposit', i, { amount: '999999999.000001', currency: 'EUR' }))
    await ok(tenant, { events })
    const expected = dec(units('999999999.000001') * 11n)
    const p = await profile(tenant.id, 'big')
    t.equal(norm(p?.deposit_total), expected, 'docs/ingestion.md: "amounts are summed exactly"')
    await flush()
    const [ch] = await h.app.ctx.ch.query<{ s: string }>("SELECT toString(sum(amount)) AS s FROM events WHERE tenant_id = {t:UUID} AND event_type = 'deposit'", { t: tenant.id })
    t.equal(norm(ch?.s), expected, 'ClickHouse sums it exactly')
    t.equal(norm(p?.deposit_total), norm(ch?.s), 'profile and ClickHouse agree')
  })

  t.test('a currency that is not three letters (USDT) is not counted as the profile currency', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, { events: [e('u', 'registration', 0, { currency: 'EUR' }), e('u', 'deposit', 1, { amount: 100, currency: 'USDT' }), e('u', 'deposit', 2, { amount: 5, currency: 'EUR' })] })
    const p = await profile(tenant.id, 'u')
    // contract.md: "Amounts are summed per currency; nothing converts between currencies".
    t.equal(norm(p?.deposit_total), '5', 'only the EUR deposit is EUR')
    const row = (await exportAll(tenant, 'transactions')).find((r) => r.amount === 100)
    t.not(row?.currency, null, 'the export does not lose the deposit\'s currency')
  })

  t.test('a deposit without currency counts in the profile currency in the profile, and under XXX in analytics: never dropped', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, { events: [e('n', 'registration', 0, { currency: 'EUR' }), e('n', 'deposit', 1, { amount: 30 }), e('n', 'deposit', 2, { amount: 12, currency: 'EUR' }), e('n', 'bet', 3, { amount: 4 })] })
    const p = await profile(tenant.id, 'n')
    t.equal(norm(p?.deposit_total), '42', 'docs/ingestion.md: "events without a currency count as profile currency"')
    t.equal(norm(p?.ggr), '4')
    const s = await summary(tenant)
    t.equal(s.deposits.count, 2)
    // docs/analytics.md: ClickHouse does not know the player's currency per event; an amount without one is
    // reported under ISO 4217's XXX ("no currency").
    t.same(s.deposits.amount, { EUR: 12, XXX: 30 }, 'the summary loses none of the 2 deposits\' money')
    t.same(s.ggr, { XXX: 4 })
  })

  t.test('profile_update changing the currency does not relabel the totals already summed in the old one', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, { events: [e('cc', 'registration', 0, { currency: 'EUR' }), e('cc', 'deposit', 1, { amount: 100, currency: 'EUR' })] })
    await ok(tenant, { events: [e('cc', 'profile_update', 2, { currency: 'USD' }), e('cc', 'deposit', 3, { amount: 50, currency: 'USD' })] })
    const p = await profile(tenant.id, 'cc')
    t.equal(p?.currency, 'USD')
    // docs/ingestion.md: "Money columns hold the profile currency ... Nothing is converted."
    t.equal(norm(p?.deposit_total), '50', 'deposit_total is USD now: 100 EUR are not 100 USD')
    t.equal(norm(String(p?.totals_by_currency?.EUR?.deposit_total ?? '0')), '100', 'the EUR total is kept as EUR')
    t.equal(p?.deposit_count, 2)
  })

  t.test('status_change: each status and back, one by one; outbox and GET /players?status follow', async (t) => {
    const tenant = await h.createTenant()
    const path = ['suspended', 'active', 'self_excluded', 'active', 'closed', 'active']
    for (const [i, status] of path.entries()) await ok(tenant, e('s', 'status_change', i, { status, reason: `r${i}` }))
    const changed = await outbox(tenant.id, 'player.status_changed')
    t.same(changed.map((c) => [c.data.previous_status, c.data.status, c.data.reason]), path.map((s, i) => [i ? path[i - 1] : 'active', s, `r${i}`]))
    const p = await profile(tenant.id, 's')
    t.equal(p?.status, 'active')
    // Values outside the enum, or in another case, change nothing.
    await ok(tenant, { events: [e('s', 'status_change', 10, { status: 'Suspended' }), e('s', 'status_change', 11, { status: 'banned' }), e('s', 'status_change', 12, {})] })
    t.equal((await profile(tenant.id, 's'))?.status, 'active')
    t.equal((await outbox(tenant.id, 'player.status_changed')).length, path.length)
    // A status_change for a player not seen before creates it and applies the status.
    await ok(tenant, e('fresh', 'status_change', 0, { status: 'self_excluded' }))
    const list = await h.request('GET', '/players', { key: tenant.key, query: { status: 'self_excluded' } })
    t.same(list.body.data.map((x: { external_id: string }) => x.external_id), ['fresh'])
    const last = (await outbox(tenant.id, 'player.status_changed')).at(-1)
    t.match(last?.data, { external_id: 'fresh', status: 'self_excluded', previous_status: 'active' })
  })

  t.test('status_change across batches: a late, older lift never undoes a newer restriction; a late restriction always applies', async (t) => {
    // Responsible gaming (docs/ingestion.md): a change to active counts only when it is not older than the
    // player's last applied change; a change to any other status always counts.
    const tenant = await h.createTenant()
    await ok(tenant, e('late', 'status_change', 10, { status: 'self_excluded', reason: 'rg' }))
    await ok(tenant, e('late', 'status_change', 5, { status: 'active', reason: 'an old retry' }))
    t.equal((await profile(tenant.id, 'late'))?.status, 'self_excluded', 'the older active is ignored')
    await ok(tenant, e('late', 'status_change', 20, { status: 'active', reason: 'lifted' }))
    t.equal((await profile(tenant.id, 'late'))?.status, 'active', 'a newer active lifts it')
    await ok(tenant, e('late', 'status_change', 15, { status: 'suspended', reason: 'late report' }))
    t.equal((await profile(tenant.id, 'late'))?.status, 'suspended', 'a late restriction applies even though older')
    const changed = await outbox(tenant.id, 'player.status_changed')
    t.same(changed.map((c) => [c.data.previous_status, c.data.status]), [['active', 'self_excluded'], ['self_excluded', 'active'], ['active', 'suspended']])
    // A status set through the API is as of now: an event-stamped older lift does not undo it.
    const id = (await profile(tenant.id, 'late'))!.id
    t.equal((await h.request('PATCH', `/players/${id}`, { key: tenant.key, body: { status: 'self_excluded' } })).status, 200)
    await ok(tenant, e('late', 'status_change', 30, { status: 'active', reason: 'stamped before the PATCH' }))
    t.equal((await profile(tenant.id, 'late'))?.status, 'self_excluded', 'the API change stands')
  })

  t.test('POST /players with another currency moves the totals, it does not relabel them', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, { events: [e('pc', 'registration', 0, { currency: 'EUR' }), e('pc', 'deposit', 1, { amount: 100, currency: 'EUR' }), e('pc', 'deposit', 2, { amount: 7, currency: 'USD' })] })
    t.equal((await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'pc', currency: 'USD' } })).status, 201)
    const p = await profile(tenant.id, 'pc')
    t.equal(p?.currency, 'USD')
    t.equal(norm(p?.deposit_total), '7', 'the USD deposit, out of totals_by_currency')
    t.equal(norm(String(p?.totals_by_currency?.EUR?.deposit_total ?? '0')), '100', 'the EUR total kept as EUR')
    t.equal(p?.totals_by_currency?.EUR?.deposit_count, 1, 'with its own count')
    t.notOk(p?.totals_by_currency?.USD, 'the profile currency is not in totals_by_currency')
    t.equal(p?.deposit_count, 2, 'counts take every currency')
  })

  t.test('status_change: several in one batch each fire player.status_changed', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, e('sb', 'login', 0))
    // contract.md: status_change "sets the player's status and fires player.status_changed".
    await ok(tenant, { events: [e('sb', 'status_change', 1, { status: 'self_excluded', reason: 'rg' }), e('sb', 'status_change', 2, { status: 'active', reason: 'lifted' })] })
    const changed = await outbox(tenant.id, 'player.status_changed')
    t.same(changed.map((c) => [c.data.previous_status, c.data.status]), [['active', 'self_excluded'], ['self_excluded', 'active']])
  })

  t.test('consent_update per channel: every channel, string booleans, missing or malformed values are not recorded', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, {
      events: [
        e('k', 'consent_update', 1, { channel: 'email', granted: true }),
        e('k', 'consent_update', 2, { channel: 'telegram', granted: 'false' }),
        e('k', 'consent_update', 3, { channel: 'push', granted: false }),
        e('k', 'consent_update', 4, { channel: 'in_app', granted: true }),
        e('k', 'consent_update', 5, { channel: 'sms', granted: true }),
        e('k', 'consent_update', 6, { channel: 'sms' }), // no granted: not a consent state
        e('k', 'consent_update', 7, { channel: 'push', granted: null }),
        e('k', 'consent_update', 8, { channel: 'Email', granted: false }),
        e('k', 'consent_update', 9, { granted: false }),
      ],
    })
    const p = await profile(tenant.id, 'k')
    t.same(Object.keys(p?.consent ?? {}).sort(), ['email', 'in_app', 'push', 'sms', 'telegram'])
    t.same(Object.fromEntries(Object.entries(p?.consent ?? {}).map(([c, v]: [string, any]) => [c, v.granted])), { email: true, telegram: false, push: false, in_app: true, sms: true })
    t.equal(new Date(p?.consent?.sms?.at).toISOString(), at(5), 'the event without granted did not move sms')
    t.equal(p?.event_count, 9, 'every consent event is still an event')
    const viaApi = await h.request('GET', `/players/${p?.id}`, { key: tenant.key })
    t.equal(viaApi.body.data.profile.consent.telegram.granted, false)
    const rows = await exportAll(tenant, 'events')
    t.same(rows.map((r) => r.granted), [true, false, false, true, true, null, null, false, false], 'granted as read; "false" is false')
  })

  t.test('timestamps: offsets, lower-case t/z, sub-millisecond digits, DST gaps; no zone is refused; one bad event refuses the batch', async (t) => {
    const tenant = await h.createTenant()
    const day = new Date(BASE).toISOString().slice(0, 10)
    const sent = [
      [`${day}T05:30:00+05:30`, `${day}T00:00:00.000Z`],
      [`${day}t01:02:03z`, `${day}T01:02:03.000Z`],
      [`${day}T01:02:03.123456789Z`, `${day}T01:02:03.123Z`],
      [`${day}T01:02:03-00:00`, `${day}T01:02:03.000Z`],
      ['2026-03-29T02:30:00+01:00', '2026-03-29T01:30:00.000Z'], // a wall time Europe/Rome skips; the offset decides
      ['2025-10-26T02:30:00+02:00', '2025-10-26T00:30:00.000Z'], // the repeated hour, first pass
      ['2025-10-26T02:30:00+01:00', '2025-10-26T01:30:00.000Z'], // second pass
    ]
    const events = sent.map(([ts]) => e('ts', 'login', 0, {}, { timestamp: ts }))
    await ok(tenant, { events })
    const rows = await exportAll(tenant, 'events')
    for (const [i, [ts, utc]] of sent.entries()) t.equal(rows.find((r) => r.event_id === events[i]?.event_id)?.event_time, utc, String(ts))
    const p = await sql<{ first: Date; last: Date }[]>`select first_seen_at as first, last_login_at as last from player_profiles pp join players pl on pl.id = pp.player_id where pl.tenant_id = ${tenant.id}`
    t.equal(p[0]?.first.toISOString(), '2025-10-26T00:30:00.000Z')
    // RFC 3339 date-time needs a zone: a local time is ambiguous and refused, naming the field; the batch stores nothing.
    const local = await post(h, tenant.key, { events: [e('ts2', 'deposit', 0, { amount: 1 }), e('ts2', 'login', 1, {}, { timestamp: `${day}T10:00:00` })] })
    t.equal(local.status, 400)
    t.match(local.body, { error: String, code: 'BAD_REQUEST' })
    t.same(local.body.details.errors.map((x: { field: string }) => x.field), ['events.1.timestamp'])
    t.equal(await profile(tenant.id, 'ts2'), undefined, 'nothing of the refused batch')
    // Several bad events: each named.
    const many = await post(h, tenant.key, { events: [e('x', 'login', 0, {}, { timestamp: 'nope' }), e('x', 'login', 1), e('x', 'login', 2, {}, { event_id: '' })] })
    t.equal(many.status, 400)
    t.same(many.body.details.errors.map((x: { field: string }) => x.field).sort(), ['events.0.timestamp', 'events.2.event_id'])
  })

  t.test('a leap second (RFC 3339 23:59:60Z) is a valid date-time, not a refused batch', async (t) => {
    const tenant = await h.createTenant()
    // JSON Schema's date-time is RFC 3339 §5.6, whose time-second is 00-60 (a leap second, e.g. 2016-12-31).
    const res = await post(h, tenant.key, { events: [e('leap', 'deposit', 0, { amount: 5, currency: 'EUR' }), e('leap', 'login', 1, {}, { timestamp: '2016-12-31T23:59:60Z' })] })
    t.equal(res.status, 200, res.text)
    const rows = await exportAll(tenant, 'events')
    const row = rows.find((r) => r.event_type === 'login')
    t.ok(row && row.event_time >= '2016-12-31T23:59:59' && row.event_time <= '2017-01-01T00:00:00.000Z', `stored at the leap second, not at the receive time: ${row?.event_time}`)
  })

  t.test('mapping to canonical types: a renamed status_change, registration and consent act like the canonical events', async (t) => {
    const tenant = await h.createTenant()
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, {
      rules: [
        { match: 'kyc.block', type: 'status_change', fields: { status: 'payload.state', reason: 'payload.why' } },
        { match: 'signup', type: 'registration', fields: { email: 'payload.user.mail', currency: 'payload.user.ccy', country: 'payload.geo.0' } },
        { match: 'optin', type: 'consent_update', fields: { channel: 'payload.ch', granted: 'payload.on' } },
        { match: 'txn', type: 'deposit', fields: { amount: 'payload.money.value', currency: 'payload.money.ccy', method: 'session_id' } },
        { match: 'deposit', type: 'legacy_deposit' }, // a canonical type mapped away is no deposit any more
      ],
    })
    const res = await ok(tenant, {
      events: [
        e('mp', 'signup', 0, { user: { mail: 'mp@example.com', ccy: 'gbp' }, geo: ['PT', 'x'] }),
        e('mp', 'txn', 1, { money: { value: '12.345', ccy: 'GBP' } }, { session_id: 'apple_pay' }),
        e('mp', 'deposit', 2, { amount: 1000, currency: 'GBP' }),
        e('mp', 'optin', 3, { ch: 'push', on: false }),
        e('mp', 'kyc.block', 4, { state: 'suspended', why: 'docs' }),
      ],
    })
    t.match(res, { received: 5, stored: 5, unknown_event_types: [] })
    const p = await profile(tenant.id, 'mp')
    t.match(p, { email: 'mp@example.com', currency: 'GBP', status: 'suspended', deposit_count: 1 })
    t.equal(norm(p?.deposit_total), '12.345')
    t.equal(p?.consent?.push?.granted, false)
    const viaApi = await h.request('GET', `/players/${p?.id}`, { key: tenant.key })
    t.match(viaApi.body.data.profile, { country: 'PT', currency: 'GBP' })
    t.match((await outbox(tenant.id, 'player.status_changed'))[0]?.data, { status: 'suspended', previous_status: 'active', reason: 'docs' })
    t.match((await outbox(tenant.id, 'player.converted'))[0]?.data, { amount: 12.345, currency: 'GBP' })
    const tx = await exportAll(tenant, 'transactions')
    t.same(tx.map((r) => [r.event_type, r.source_type, r.amount, r.currency, r.method]), [['deposit', 'txn', 12.345, 'GBP', 'apple_pay']], 'legacy_deposit is no monetary type')
    const s = await summary(tenant)
    t.same(s.deposits, { count: 1, amount: { GBP: 12.345 } })
  })

  t.test('FTD: the first deposit in another currency converts once; the profile keeps its currency', async (t) => {
    const tenant = await h.createTenant()
    await ok(tenant, { events: [e('f', 'registration', 0, { currency: 'EUR' }), e('f', 'deposit_failed', 1, { amount: 70, currency: 'EUR' }), e('f', 'deposit', 2, { amount: 20, currency: 'USD' })] })
    await ok(tenant, e('f', 'deposit', 3, { amount: 30, currency: 'EUR' }))
    const conv = await outbox(tenant.id, 'player.converted')
    t.equal(conv.length, 1)
    t.match(conv[0]?.data, { external_id: 'f', conversion: 'first_deposit', amount: 20, currency: 'USD' })
    const p = await profile(tenant.id, 'f')
    t.equal(p?.deposit_count, 2)
    t.equal(norm(p?.deposit_total), '30', 'the USD deposit is not summed as EUR')
    t.equal(new Date(p?.first_deposit_at).toISOString(), at(2))
    const s = await summary(tenant)
    t.equal(s.depositors, 1)
    t.equal(s.ftd_count, 1)
  })

  t.test('tenant and brand isolation of the same event ids and external ids, with money', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const a2 = await a.createBrand('second')
    const batch = [e('same', 'deposit', 0, { amount: 10, currency: 'EUR' }), e('same', 'bet', 1, { amount: 4, currency: 'EUR' })]
    t.match(await ok(a, { events: batch }), { stored: 2 })
    t.match(await ok(a, { events: batch }, { headers: { 'x-brand': a2.slug } }), { stored: 2, deduped: 0 })
    t.match(await ok(b, { events: batch }), { stored: 2, deduped: 0 })
    t.match(await ok(a, { events: batch }), { stored: 0, deduped: 2 })
    const sa = await summary(a)
    t.same(sa.deposits, { count: 1, amount: { EUR: 10 } })
    t.same(sa.ggr, { EUR: 4 })
    const sb = await summary(b)
    t.same(sb.deposits, { count: 1, amount: { EUR: 10 } })
    const sa2 = await h.request('GET', '/analytics/summary', { key: a.key, headers: { 'x-brand': a2.slug } })
    t.same(sa2.body.data.deposits, { count: 1, amount: { EUR: 10 } })
    t.equal((await exportAll(a, 'transactions')).length, 2)
  })

  t.test('registration / profile_update email: the player\'s email stays an email (spec: "string (email) or null")', async (t) => {
    const tenant = await h.createTenant()
    const res = await ok(tenant, { events: [e('em', 'registration', 0, { email: 'not an email', currency: 'EUR' }), e('em2', 'profile_update', 0, { email: '@@' })] })
    t.match(res, { stored: 2 })
    for (const id of ['em', 'em2']) {
      const p = await profile(tenant.id, id)
      const player = await h.request('GET', `/players/${p?.id}`, { key: tenant.key })
      t.equal(player.status, 200)
      const email = player.body.data.email
      t.ok(email === null || /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email), `GET /players/{id} email is an email or null: ${JSON.stringify(email)}`)
    }
    // What the API itself refuses for the same field:
    const api = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'em3', email: 'not an email' } })
    t.equal(api.status, 400)
  })

  t.test('wrong shapes of an event are 400s in the error shape, never 500; nothing stored', async (t) => {
    const tenant = await h.createTenant()
    const bodies: unknown[] = [
      { player_id: 'w', event_type: 'login', payload: null },
      { player_id: 'w', event_type: 'login', payload: 'x' },
      { player_id: 'w', event_type: 'login', timestamp: 1767261600000 },
      { player_id: 'w', event_type: 'login', session_id: 5 },
      { player_id: 'w', event_type: 'login', event_id: 7 },
      { player_id: '', event_type: 'login' },
      { player_id: 'w', event_type: '' },
      { events: [{ player_id: 'w', event_type: 'login' }], player_id: 'w' },
      { events: {} },
      [{ player_id: 'w', event_type: 'login' }],
      'login',
      null,
    ]
    for (const body of bodies) {
      const res = await h.request('POST', '/events', { key: tenant.key, rawBody: JSON.stringify(body), headers: { 'content-type': 'application/json' } })
      if (res.status === 200) {
        // The only acceptable 200: the batch form read as a batch (extra top-level field ignored).
        t.match(body, { events: Array }, `accepted: ${JSON.stringify(body)}`)
        continue
      }
      t.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status}`)
      t.match(res.body, { error: String, code: 'BAD_REQUEST' })
    }
    const p = await profile(tenant.id, 'w')
    t.equal(p?.event_count, 1, 'only the one accepted batch event is stored')
  })
})

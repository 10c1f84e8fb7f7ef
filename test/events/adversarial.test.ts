// Adversarial checks of what the spec, the contract and docs/ingestion.md promise about POST /events.
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { post, uid } from './helpers.ts'

const h = await startHarness(t)
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

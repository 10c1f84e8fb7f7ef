// Bonus grants (contract-engines §5): what a grant answers and announces, every refusal (inactive bonus,
// a player suspended, closed or self-excluded) answered 400 and recorded, a player active again granted
// again, bonuses named as mission rewards refused and recorded when inactive, scopes and visibility,
// and the extremes a bonus may be created with.
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { engineHelpers } from '../gamification/engine-helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
const { create, send, outbox, playerId, sql } = engineHelpers(h)

const grant = (tenant: TestTenant, bonusId: string, body: Record<string, unknown>, key = tenant.key) =>
  h.request('POST', `/bonuses/${bonusId}/grant`, { key, body })
const list = async (tenant: TestTenant, pid: string, status?: string) =>
  (await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key, query: status ? { status } : {} })).body.data as Record<string, unknown>[]

t.test('a bonus without expiry: expires_at null in the grant and in bonus.granted; exact value and wagering', async (t) => {
  const tenant = await h.createTenant()
  const bonus = await create(tenant, '/bonuses', { name: 'Spins', type: 'free_spins', value: 12.345678901, value_type: 'spins', wagering_requirement: 35.5 })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const pid = await playerId(tenant, 'p1')
  const res = await grant(tenant, bonus.id, { player_id: pid })
  t.equal(res.status, 201, res.text)
  t.match(res.body.data, { bonus_id: bonus.id, player_id: pid, status: 'granted', expires_at: null, reason: null, source: 'manual', refusal_reason: null })
  t.ok(Math.abs(Date.parse(res.body.data.created_at) - Date.now()) < 60_000)
  const [event] = await outbox(tenant, 'bonus.granted')
  t.same(event?.data, {
    grant_id: res.body.data.id, bonus_id: bonus.id, player_id: pid, external_id: 'p1', type: 'free_spins', value: 12.345678901,
    value_type: 'spins', wagering_requirement: 35.5, expires_at: null, brand_id: tenant.brand.id,
  })
  const again = await grant(tenant, bonus.id, { player_id: pid, reason: 'second' })
  t.equal(again.status, 201, 'granting twice is two grants')
  t.not(again.body.data.id, res.body.data.id)
  t.same((await list(tenant, pid)).map((g) => g.reason), ['second', null], 'newest first')
  t.equal((await outbox(tenant, 'bonus.granted')).length, 2)
})

t.test('expires_in_hours at its documented maximum (2147483647) still grants: 201 with an expiry', async (t) => {
  const tenant = await h.createTenant()
  const created = await h.request('POST', '/bonuses', { key: tenant.key, body: { name: 'Forever', type: 'custom', value: 1, value_type: 'fixed', expires_in_hours: 2147483647 } })
  t.equal(created.status, 201, created.text)
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const pid = await playerId(tenant, 'p1')
  const res = await grant(tenant, created.body.data.id, { player_id: pid })
  t.equal(res.status, 201, res.text)
  t.ok(Date.parse(res.body.data.expires_at) > Date.now() + 100 * 365 * 86_400_000, `far future: ${res.body.data?.expires_at}`)
  // ~245,000 years ahead is past what an RFC 3339 date-time can write: the latest one it can (docs/gamification.md).
  t.equal(res.body.data.expires_at, '9999-12-31T23:59:59.999Z')
  const listed = await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key })
  t.equal(listed.status, 200, listed.text)
  t.equal(listed.body.data[0]?.expires_at, '9999-12-31T23:59:59.999Z', 'the list shows the stored expiry')
})

t.test('every status but active is refused (400 player_not_active, recorded); active again, granted again', async (t) => {
  const tenant = await h.createTenant()
  const bonus = await create(tenant, '/bonuses', { name: 'Reload', type: 'reload', value: 50, value_type: 'percent', expires_in_hours: 24 })
  for (const status of ['suspended', 'self_excluded', 'closed']) {
    await send(tenant, [{ player_id: status, event_type: 'status_change', payload: { status } }])
    const pid = await playerId(tenant, status)
    const res = await grant(tenant, bonus.id, { player_id: pid, reason: 'try' })
    t.equal(res.status, 400, `${status}: ${res.text}`)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.equal(res.body.details?.reason, 'player_not_active')
    t.same(await list(tenant, pid), [], 'nothing granted')
    const refused = await list(tenant, pid, 'refused')
    t.match(refused, [{ status: 'refused', refusal_reason: 'player_not_active', source: 'manual', reason: 'try', expires_at: null }], 'the refusal recorded')
    t.equal(refused[0]?.id, res.body.details?.grant_id, 'the 400 names the recorded refusal')
  }
  t.same(await outbox(tenant, 'bonus.granted'), [], 'no bonus.granted for a refusal')
  await send(tenant, [{ player_id: 'suspended', event_type: 'status_change', payload: { status: 'active' } }])
  const pid = await playerId(tenant, 'suspended')
  const ok = await grant(tenant, bonus.id, { player_id: pid })
  t.equal(ok.status, 201, ok.text)
  t.same((await list(tenant, pid, 'all')).map((g) => g.status), ['granted', 'refused'], 'status=all: both, newest first')
})

t.test('a bonus named as a mission reward and deactivated later: refused as bonus_inactive, recorded; reactivated, granted', async (t) => {
  const tenant = await h.createTenant()
  const bonus = await create(tenant, '/bonuses', { name: 'Daily gift', type: 'custom', value: 5, value_type: 'fixed', expires_in_hours: 2 })
  const m = await create(tenant, '/gamification/missions', { name: 'Daily deposit', type: 'daily', rules: { event_type: 'deposit', target: 1 }, rewards: { bonus_ids: [bonus.id] } })
  t.equal((await h.request('PATCH', `/bonuses/${bonus.id}`, { key: tenant.key, body: { active: false } })).status, 200)
  const day = 86_400_000
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', timestamp: new Date(Date.now() - day).toISOString(), payload: { amount: 10, currency: 'EUR' } }])
  const pid = await playerId(tenant, 'p1')
  t.match(await list(tenant, pid, 'refused'), [{ status: 'refused', refusal_reason: 'bonus_inactive', source: 'mission', bonus_id: bonus.id }])
  t.same(await outbox(tenant, 'bonus.granted'), [])
  t.equal((await outbox(tenant, 'gamification.mission_completed')).length, 1, 'the mission completed all the same')
  t.equal((await h.request('PATCH', `/bonuses/${bonus.id}`, { key: tenant.key, body: { active: true } })).status, 200)
  await send(tenant, [{ player_id: 'p1', event_type: 'deposit', payload: { amount: 10, currency: 'EUR' } }])
  const granted = await list(tenant, pid)
  t.match(granted, [{ status: 'granted', source: 'mission', bonus_id: bonus.id }])
  t.ok(Math.abs(Date.parse(granted[0]?.expires_at as string) - Date.now() - 2 * 3600_000) < 60_000, 'expires_in_hours applied to a reward grant')
  const [event] = await outbox(tenant, 'bonus.granted')
  t.match(event?.data, { grant_id: granted[0]?.id, bonus_id: bonus.id, player_id: pid, external_id: 'p1', type: 'custom', value: 5, brand_id: tenant.brand.id })
  const [row] = await sql<{ source_id: string }[]>`select source_id from bonus_grants where id = ${granted[0]?.id as string}`
  t.equal(row?.source_id, m.id, 'the grant names its mission')
})

t.test('grant route: unknown or malformed player 400, another tenant 404, read-only and ingest keys 403, pinned key of another brand 404', async (t) => {
  const tenant = await h.createTenant()
  await tenant.createBrand('second')
  const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'welcome', value: 100, value_type: 'percent' })
  await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
  const pid = await playerId(tenant, 'p1')
  const unknown = await grant(tenant, bonus.id, { player_id: '00000000-0000-4000-8000-000000000000' })
  t.equal(unknown.status, 400)
  t.equal(unknown.body.details?.errors?.[0]?.field, 'player_id')
  const malformed = await grant(tenant, bonus.id, { player_id: 'p1' })
  t.equal(malformed.status, 400)
  t.equal((await grant(tenant, bonus.id, {})).status, 400, 'player_id required')
  const other = await h.createTenant()
  t.equal((await grant(other, bonus.id, { player_id: pid })).status, 404)
  t.equal((await grant(tenant, '00000000-0000-4000-8000-000000000000', { player_id: pid })).status, 404, 'unknown bonus')
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await grant(tenant, bonus.id, { player_id: pid }, reader.key)).status, 403)
  const ingest = await tenant.createKey({ scopes: ['events:write'] })
  t.equal((await grant(tenant, bonus.id, { player_id: pid }, ingest.key)).status, 403)
  t.equal((await h.request('GET', `/players/${pid}/bonuses`, { key: reader.key })).status, 200, 'a read key lists grants')
  const pinned = await tenant.createKey({ brand: 'second' })
  t.equal((await grant(tenant, bonus.id, { player_id: pid }, pinned.key)).status, 404)
  t.equal((await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key, query: { status: 'nope' } })).status, 400)
  t.same(await sql`select 1 from bonus_grants where player_id = ${pid}`, [], 'nothing recorded by any of these')
  t.same(await outbox(tenant, 'bonus.granted'), [])
})

// Bonuses: grants, the adversarial checks and the routes, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU). The routes ingest nothing, so
// the ingestion rate limit the others turn off changes nothing for them.
import t, { type Test } from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { engineHelpers } from '../gamification/engine-helpers.ts'
import { expect400, sharedResourceTests } from '../gamification/shared.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })

// Bonus grants (contract-engines §5): what a grant answers and announces, every refusal (inactive bonus,
// a player suspended, closed or self-excluded) answered 400 and recorded, a player active again granted
// again, bonuses named as mission rewards refused and recorded when inactive, scopes and visibility,
// and the extremes a bonus may be created with.
t.test('grants', async (t) => {
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
})

// Adversarial checks of POST /bonuses/{id}/grant (contract-engines §5 "Bonus grants", docs/gamification.md)
// that grants.test.ts does not make: an inactive bonus through the route itself, players of another tenant
// or brand, malformed bodies and ids (400 in the spec's error shape, never 500), a player suspended by
// PATCH, expiry and the outbox row's brand, concurrent grants each announced once.
t.test('adversarial', async (t) => {
  const { create, send, outbox, playerId, sql } = engineHelpers(h)

  const grant = (tenant: TestTenant, bonusId: string, body: unknown, key = tenant.key) => h.request('POST', `/bonuses/${bonusId}/grant`, { key, body })
  const recorded = async (pid: string) => sql<{ status: string; refusal_reason: string | null }[]>`select status, refusal_reason from bonus_grants where player_id = ${pid}`
  /** The spec's error body: `{ error: string, code?: string, details?: object }`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  function isError(t: Test, res: { status: number; body: any; text: string }, status: number, label: string) {
    t.equal(res.status, status, `${label}: ${status} (${res.text.slice(0, 160)})`)
    t.equal(typeof res.body?.error, 'string', `${label}: error is a string`)
    t.equal(res.body?.code, status === 400 ? 'BAD_REQUEST' : 'NOT_FOUND', `${label}: code`)
  }

  t.test('the grant route with an inactive bonus: 400 bonus_inactive, the refusal recorded, no bonus.granted; active again, granted', async (t) => {
    const tenant = await h.createTenant()
    const bonus = await create(tenant, '/bonuses', { name: 'Off', type: 'reload', value: 10, value_type: 'fixed', active: false })
    await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
    const pid = await playerId(tenant, 'p1')
    const res = await grant(tenant, bonus.id, { player_id: pid, reason: 'try' })
    isError(t, res, 400, 'inactive bonus')
    t.equal(res.body.details?.reason, 'bonus_inactive', '§5: "An inactive bonus is 400"')
    const refused = (await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key, query: { status: 'refused' } })).body.data
    t.match(refused, [{ id: res.body.details?.grant_id, status: 'refused', refusal_reason: 'bonus_inactive', source: 'manual', reason: 'try', expires_at: null }])
    t.same((await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key })).body.data, [], 'nothing granted')
    t.same(await outbox(tenant, 'bonus.granted'), [])
    t.equal((await h.request('PATCH', `/bonuses/${bonus.id}`, { key: tenant.key, body: { active: true } })).status, 200)
    const ok = await grant(tenant, bonus.id, { player_id: pid })
    t.equal(ok.status, 201, ok.text)
    t.equal((await outbox(tenant, 'bonus.granted')).length, 1)
  })

  t.test('players of another tenant or another brand are never granted: answered like an unknown player or 400 naming player_id, nothing recorded', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const bonus = await create(tenant, '/bonuses', { name: 'Main', type: 'custom', value: 1, value_type: 'fixed' })
    const other = await h.createTenant()
    await send(other, [{ player_id: 'p1', event_type: 'login' }])
    const foreign = await playerId(other, 'p1')
    const unknown = await grant(tenant, bonus.id, { player_id: '00000000-0000-4000-8000-000000000000' })
    const res = await grant(tenant, bonus.id, { player_id: foreign })
    t.not(res.status, 201, 'another tenant\'s player: not granted')
    t.ok([400, 404].includes(res.status), `400 or 404: ${res.status}`)
    t.same([res.status, res.body.code], [unknown.status, unknown.body.code], 'indistinguishable from a player that does not exist (nothing leaks across tenants)')
    t.same(await recorded(foreign), [], 'nothing recorded for the foreign player')

    // Same tenant, the second brand's player, the main brand's bonus (tenant-wide key, no hint).
    const hinted = await h.request('POST', '/events', { key: tenant.key, headers: { 'x-brand': second.slug }, body: { player_id: 'p1', event_type: 'login' } })
    t.equal(hinted.status, 200)
    await h.app.ctx.stream!.idle()
    const theirs = await playerId(tenant, 'p1', second.id)
    const cross = await grant(tenant, bonus.id, { player_id: theirs })
    t.ok([400, 404].includes(cross.status), `a player of another brand: ${cross.status}`)
    if (cross.status === 400) t.ok((cross.body.details?.errors ?? []).some((e: { field: string }) => e.field === 'player_id'), 'names player_id')
    t.same(await recorded(theirs), [])
    // A key pinned to the second brand grants the second brand's bonus to its player.
    const pinned = await tenant.createKey({ brand: second.slug })
    const theirBonus = await create(tenant, '/bonuses', { name: 'Second', type: 'custom', value: 1, value_type: 'fixed', brand: second.slug })
    const ok = await grant(tenant, theirBonus.id, { player_id: theirs }, pinned.key)
    t.equal(ok.status, 201, ok.text)
    t.equal((await grant(tenant, bonus.id, { player_id: theirs }, pinned.key)).status, 404, 'the pinned key does not see the main brand\'s bonus')
    const [row] = await sql<{ brand_id: string }[]>`select brand_id from outbox where tenant_id = ${tenant.id} and event = 'bonus.granted'`
    t.equal(row?.brand_id, second.id, 'the bonus.granted outbox row is the second brand\'s (a brand-scoped endpoint gets only its brand\'s events)')
    t.same((await outbox(tenant, 'bonus.granted')).map((e) => e.data.brand_id), [second.id])
    t.same(await outbox(other, 'bonus.granted'), [])
  })

  t.test('malformed bodies and ids: 400 BAD_REQUEST (404 for the path id) in the spec\'s error shape, never 500; nothing recorded', async (t) => {
    const tenant = await h.createTenant()
    const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'custom', value: 1, value_type: 'fixed' })
    await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
    const pid = await playerId(tenant, 'p1')
    const bodies: [string, unknown][] = [
      ['player_id a number', { player_id: 42 }], ['player_id null', { player_id: null }], ['player_id an array', { player_id: [pid] }],
      ['reason a number', { player_id: pid, reason: 42 }],
      ['an empty object', {}], ['an array', [{ player_id: pid }]], ['a string', pid],
    ]
    for (const [label, body] of bodies) isError(t, await grant(tenant, bonus.id, body), 400, label)
    for (const rawBody of ['{"player_id":', 'null', '']) {
      const res = await h.request('POST', `/bonuses/${bonus.id}/grant`, { key: tenant.key, rawBody, headers: { 'content-type': 'application/json' } })
      isError(t, res, 400, `raw ${JSON.stringify(rawBody)}`)
    }
    const noBody = await h.request('POST', `/bonuses/${bonus.id}/grant`, { key: tenant.key })
    isError(t, noBody, 400, 'no body at all')
    isError(t, await grant(tenant, 'not-a-uuid', { player_id: pid }), 404, 'a bonus id that is no uuid')
    const gone = await create(tenant, '/bonuses', { name: 'Gone', type: 'custom', value: 1, value_type: 'fixed' })
    t.equal((await h.request('DELETE', `/bonuses/${gone.id}`, { key: tenant.key })).status, 200)
    isError(t, await grant(tenant, gone.id, { player_id: pid }), 404, 'a deleted bonus')
    t.same(await recorded(pid), [], 'nothing recorded by any of these')
    t.same(await outbox(tenant, 'bonus.granted'), [])
    // Unknown fields are ignored (docs/gamification.md, like elsewhere in the API).
    const extra = await grant(tenant, bonus.id, { player_id: pid, reason: 'ok', amount: 1e9, status: 'refused' })
    t.equal(extra.status, 201, extra.text)
    t.equal(extra.body.data.status, 'granted')
  })

  t.test('a player suspended by PATCH /players is refused (player_not_active, recorded); another tenant\'s player\'s grants are 404', async (t) => {
    const tenant = await h.createTenant()
    const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'cashback', value: 5, value_type: 'percent' })
    const created = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'p1' } })
    t.equal(created.status, 201)
    const pid = created.body.data.id as string
    t.equal((await h.request('PATCH', `/players/${pid}`, { key: tenant.key, body: { status: 'suspended' } })).status, 200)
    const res = await grant(tenant, bonus.id, { player_id: pid })
    isError(t, res, 400, 'suspended player')
    t.equal(res.body.details?.reason, 'player_not_active')
    t.same((await recorded(pid)).map((r) => [r.status, r.refusal_reason]), [['refused', 'player_not_active']])
    // A player created with a status other than active is refused too.
    const closed = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'p2', status: 'closed' } })
    t.equal(closed.status, 201)
    t.equal((await grant(tenant, bonus.id, { player_id: closed.body.data.id })).body.details?.reason, 'player_not_active')
    t.same(await outbox(tenant, 'bonus.granted'), [])
    const other = await h.createTenant()
    const listed = await h.request('GET', `/players/${pid}/bonuses`, { key: other.key })
    isError(t, listed, 404, 'another tenant lists the player\'s grants')
  })

  t.test('expires_at = created_at + expires_in_hours in the grant, the list and bonus.granted; concurrent grants are distinct and each announced once', async (t) => {
    const tenant = await h.createTenant()
    const bonus = await create(tenant, '/bonuses', { name: 'Week', type: 'welcome', value: 100, value_type: 'percent', wagering_requirement: 35, expires_in_hours: 168 })
    await send(tenant, [{ player_id: 'p1', event_type: 'login' }])
    const pid = await playerId(tenant, 'p1')
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => grant(tenant, bonus.id, { player_id: pid, reason: `r${i}` })))
    t.same(results.map((r) => r.status), [201, 201, 201, 201, 201, 201])
    const grants = results.map((r) => r.body.data)
    t.equal(new Set(grants.map((g) => g.id)).size, 6, 'six distinct grants')
    for (const g of grants) {
      t.ok(Math.abs(Date.parse(g.expires_at) - Date.parse(g.created_at) - 168 * 3600_000) <= 1000, `expires_at = created_at + 168 h (${g.created_at} → ${g.expires_at})`)
    }
    const listed = (await h.request('GET', `/players/${pid}/bonuses`, { key: tenant.key })).body.data as { id: string; expires_at: string }[]
    t.same(listed.map((g) => g.id).sort(), grants.map((g) => g.id).sort())
    const events = await outbox(tenant, 'bonus.granted')
    t.same(events.map((e) => e.data.grant_id).sort(), grants.map((g) => g.id).sort(), 'one bonus.granted per grant')
    const byId = new Map(grants.map((g) => [g.id, g]))
    for (const e of events) {
      t.match(e.data, { bonus_id: bonus.id, player_id: pid, external_id: 'p1', type: 'welcome', value: 100, value_type: 'percent', wagering_requirement: 35, brand_id: tenant.brand.id })
      t.equal(e.data.expires_at, byId.get(e.data.grant_id)?.expires_at, 'the webhook\'s expires_at is the grant\'s')
    }
  })
})

t.test('routes', async (t) => {
  const path = '/bonuses'

  sharedResourceTests(t, h, {
    path,
    create: { name: 'Welcome 100%', type: 'welcome', value: 100, value_type: 'percent', wagering_requirement: 35, config: { max: 200 }, expires_in_hours: 168 },
    patch: { active: false, value: 150.5, wagering_requirement: 0, expires_in_hours: null, config: {} },
  })

  t.test('a bonus is created with the spec fields and defaults: wagering 0, active true, numbers as numbers', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Cashback', type: 'cashback', value: 10.25, value_type: 'percent' } })
    t.equal(res.status, 201)
    const b = res.body.data
    t.same(Object.keys(b).sort(), ['active', 'config', 'created_at', 'expires_in_hours', 'id', 'name', 'type', 'value', 'value_type', 'wagering_requirement'])
    t.same([b.value, b.wagering_requirement, b.active, b.expires_in_hours, b.config, b.value_type], [10.25, 0, true, null, {}, 'percent'])
    t.equal(typeof b.value, 'number')
    t.equal(typeof b.wagering_requirement, 'number')
    const listed = await h.request('GET', path, { key: tenant.key })
    t.same(listed.body, { data: [b] })
    const zero = await h.request('POST', path, { key: tenant.key, body: { name: 'Spins', type: 'free_spins', value: 0, value_type: 'spins', active: false } })
    t.equal(zero.status, 201)
    t.same([zero.body.data.value, zero.body.data.active], [0, false])
    const patched = await h.request('PATCH', `${path}/${b.id}`, { key: tenant.key, body: { name: 'Cashback 2' } })
    t.same([patched.body.data.active, patched.body.data.wagering_requirement], [true, 0], 'a patch does not reset defaults')
    for (const type of ['welcome', 'reload', 'cashback', 'free_spins', 'no_deposit', 'custom']) {
      t.equal((await h.request('POST', path, { key: tenant.key, body: { name: type, type, value: 1, value_type: 'fixed' } })).status, 201, type)
    }
  })

  t.test('bonus validation: required fields, type enum, value ≥ 0, wagering ≥ 0, expires_in_hours integer ≥ 1', async (t) => {
    const tenant = await h.createTenant()
    const ok = { name: 'B', type: 'reload', value: 50, value_type: 'fixed' }
    for (const field of ['name', 'type', 'value', 'value_type']) {
      const { [field as keyof typeof ok]: _, ...body } = ok
      await expect400(t, h, tenant.key, 'POST', path, body, field)
    }
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, type: 'loyalty' }, 'type')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, value: -1 }, 'value')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, value: '50' }, 'value')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, wagering_requirement: -0.5 }, 'wagering_requirement')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, expires_in_hours: 0 }, 'expires_in_hours')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, expires_in_hours: 1.5 }, 'expires_in_hours')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, active: 'yes' }, 'active')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, config: 'x' }, 'config')
    const created = await h.request('POST', path, { key: tenant.key, body: ok })
    const item = `${path}/${created.body.data.id}`
    await expect400(t, h, tenant.key, 'PATCH', item, { value: -5 }, 'value')
    await expect400(t, h, tenant.key, 'PATCH', item, { type: 'x' }, 'type')
    await expect400(t, h, tenant.key, 'PATCH', item, { expires_in_hours: 0 }, 'expires_in_hours')
    t.same((await h.request('GET', item, { key: tenant.key })).body.data, created.body.data)
  })
})

// Adversarial checks of POST /bonuses/{id}/grant (contract-engines §5 "Bonus grants", docs/gamification.md)
// that grants.test.ts does not make: an inactive bonus through the route itself, players of another tenant
// or brand, malformed bodies and ids (400 in the spec's error shape, never 500), a player suspended by
// PATCH, expiry and the outbox row's brand, concurrent grants each announced once.
import t, { type Test } from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { engineHelpers } from '../gamification/engine-helpers.ts'

const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0' } })
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

// Adversarial checks of docs/players.md and the spec's Players section.
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t)
const sql = h.app.ctx.sql

async function createPlayer(tenant: TestTenant, body: Record<string, unknown>) {
  const res = await h.request('POST', '/players', { key: tenant.key, body })
  if (res.status !== 201) throw new Error(`create player: ${res.status} ${res.text}`)
  return res.body.data as { id: string; external_id: string; updated_at: string; metadata: any }
}
const outbox = (tenantId: string) =>
  sql<{ event: string; data: any }[]>`select event, data from outbox where tenant_id = ${tenantId} order by id`

t.test('metadata merge: one level deep, nested objects replaced whole, null kept, absent keys kept', async (t) => {
  const tenant = await h.createTenant()
  const p = await createPlayer(tenant, { external_id: 'm', metadata: { a: { x: 1, y: 2 }, b: [1, 2], c: 'keep', d: 5 } })
  const res = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { metadata: { a: { z: 3 }, b: [], d: null } } })
  t.equal(res.status, 200, res.text)
  t.same(res.body.data.metadata, { a: { z: 3 }, b: [], c: 'keep', d: null })
  const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
  t.same(got.body.data.metadata, { a: { z: 3 }, b: [], c: 'keep', d: null }, 'the merge is stored')
  // A repeated POST merges the same way.
  const again = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'm', metadata: { e: true } } })
  t.equal(again.status, 201)
  t.equal(again.body.data.id, p.id)
  t.same(again.body.data.metadata, { a: { z: 3 }, b: [], c: 'keep', d: null, e: true })
})

t.test('a write that changes nothing emits nothing and keeps updated_at', async (t) => {
  const tenant = await h.createTenant()
  const p = await createPlayer(tenant, { external_id: 'n', email: 'n@x.io', phone: '1', metadata: { k: 1 } })
  await new Promise((r) => setTimeout(r, 20))
  const same = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { email: 'n@x.io', phone: '1', status: 'active', metadata: { k: 1 } } })
  t.equal(same.status, 200)
  t.equal(same.body.data.updated_at, p.updated_at, 'updated_at untouched')
  const empty = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { metadata: {} } })
  t.equal(empty.status, 200)
  t.equal(empty.body.data.updated_at, p.updated_at)
  const repeat = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'n', email: 'n@x.io' } })
  t.equal(repeat.status, 201)
  t.equal(repeat.body.data.updated_at, p.updated_at)
  t.same((await outbox(tenant.id)).map((e) => e.event), ['player.created'])
  // A real change: only the changed field is named.
  const real = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { phone: '2', email: 'n@x.io' } })
  t.ok(Date.parse(real.body.data.updated_at) > Date.parse(p.updated_at))
  const events = await outbox(tenant.id)
  t.same(events.map((e) => e.event), ['player.created', 'player.updated'])
  t.same(events[1]?.data.changed, ['phone'])
})

t.test('PATCH validation: wrong types are 400 and change nothing; external_id is not patchable', async (t) => {
  const tenant = await h.createTenant()
  const p = await createPlayer(tenant, { external_id: 'v', email: 'v@x.io', metadata: { k: 1 } })
  for (const body of [{ metadata: null }, { metadata: 'x' }, { status: null }, { email: 42 }, { phone: 5 }, { status: 'ACTIVE' }, { email: 'v@x.io', status: 'nope' }]) {
    const bad = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body })
    t.equal(bad.status, 400, `${JSON.stringify(body)} → 400`)
    t.equal(bad.body.code, 'BAD_REQUEST')
  }
  const bodyless = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, rawBody: '[1]', headers: { 'content-type': 'application/json' } })
  t.equal(bodyless.status, 400, 'an array body is 400')
  const ext = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { external_id: 'hijack' } })
  t.ok(ext.status === 200 || ext.status === 400)
  const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
  t.match(got.body.data, { external_id: 'v', email: 'v@x.io', status: 'active', metadata: { k: 1 } })
})

t.test('POST /players: currency upper-cased; a repeat never resets the profile learnt from events', async (t) => {
  const tenant = await h.createTenant()
  const p = await createPlayer(tenant, { external_id: 'cur', currency: 'usd', language: 'es' })
  let got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
  t.match(got.body.data.profile, { currency: 'USD', language: 'es' })
  const ev = await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'cur', event_type: 'profile_update', payload: { language: 'it', country: 'IT' } } })
  t.equal(ev.status, 200)
  await createPlayer(tenant, { external_id: 'cur', phone: '9' })
  got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
  t.match(got.body.data.profile, { currency: 'USD', language: 'it', country: 'IT' }, 'language kept when not given')
  t.equal(got.body.data.phone, '9')
})

t.test('GET /players: search treats _ literally; ties in created_at page without loss or repeat', async (t) => {
  const tenant = await h.createTenant()
  await createPlayer(tenant, { external_id: 'a_b' })
  await createPlayer(tenant, { external_id: 'axb' })
  const s = await h.request('GET', '/players', { key: tenant.key, query: { search: 'a_b' } })
  t.same(s.body.data.map((p: { external_id: string }) => p.external_id), ['a_b'])
  // 30 players created by one ingestion batch share one transaction's created_at.
  const events = Array.from({ length: 30 }, (_, i) => ({ player_id: `tie-${i}`, event_type: 'login' }))
  t.equal((await h.request('POST', '/events', { key: tenant.key, body: { events } })).status, 200)
  const seen: string[] = []
  for (let page = 1; page <= 5; page++) {
    const res = await h.request('GET', '/players', { key: tenant.key, query: { limit: 7, page, search: 'tie-' } })
    t.equal(res.body.pagination.total, 30)
    t.equal(res.body.pagination.pages, 5)
    seen.push(...res.body.data.map((p: { external_id: string }) => p.external_id))
  }
  t.equal(seen.length, 30)
  t.equal(new Set(seen).size, 30, 'every player exactly once over the pages')
})

t.test('status: PATCH then a status_change event to the same status fires no second status_changed', async (t) => {
  const tenant = await h.createTenant()
  const p = await createPlayer(tenant, { external_id: 'st' })
  const patched = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status: 'closed' } })
  t.equal(patched.body.data.status, 'closed')
  await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'st', event_type: 'status_change', payload: { status: 'closed' } } })
  await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'st', event_type: 'status_change', payload: { status: 'active', reason: 'reopened' } } })
  const changes = (await outbox(tenant.id)).filter((e) => e.event === 'player.status_changed')
  t.same(changes.map((c) => [c.data.previous_status, c.data.status]), [['active', 'closed'], ['closed', 'active']])
  const got = await h.request('GET', `/players/${p.id}`, { key: tenant.key })
  t.equal(got.body.data.status, 'active')
})

import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { expect400, sharedResourceTests } from './shared.ts'

const h = await startHarness(t)
const path = '/gamification/missions'

sharedResourceTests(t, h, {
  path,
  create: { name: 'Deposit 3 times', type: 'weekly', rules: { event_type: 'deposit', target: 3, timezone: 'Europe/Berlin' }, rewards: { badge_ids: [] } },
  patch: { status: 'cancelled', description: 'no longer offered', max_completions_per_player: 2, ends_at: '2030-01-01T00:00:00.000Z' },
})

t.test('a mission is created with the spec fields and defaults: status active, empty rules/rewards, nulls', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Daily login', type: 'daily' } })
  t.equal(res.status, 201)
  const m = res.body.data
  t.same(Object.keys(m).sort(), [
    'created_at', 'description', 'ends_at', 'id', 'max_completions_per_player', 'name', 'rewards', 'rules', 'starts_at', 'status', 'type', 'updated_at',
  ])
  t.same([m.status, m.description, m.max_completions_per_player, m.starts_at, m.ends_at], ['active', null, null, null, null])
  t.same([m.rules, m.rewards], [{}, {}])
  t.ok(!Number.isNaN(Date.parse(m.updated_at)))

  const full = await h.request('POST', path, {
    key: tenant.key,
    body: {
      name: 'Spin week', type: 'progressive', status: 'expired', description: 'd', rules: { event_type: 'spin', stages: [{ target: 10 }, { target: 20 }] }, rewards: {},
      max_completions_per_player: 1, starts_at: '2026-01-01T00:00:00Z', ends_at: '2026-01-08T00:00:00+02:00',
    },
  })
  t.equal(full.status, 201)
  t.equal(full.body.data.status, 'expired')
  t.equal(full.body.data.max_completions_per_player, 1)
  t.equal(Date.parse(full.body.data.starts_at), Date.parse('2026-01-01T00:00:00Z'))
  t.equal(Date.parse(full.body.data.ends_at), Date.parse('2026-01-08T00:00:00+02:00'))
})

t.test('create and patch validation: enums, max_completions ≥ 1, date-times, ends after starts', async (t) => {
  const tenant = await h.createTenant()
  const ok = { name: 'M', type: 'daily' }
  await expect400(t, h, tenant.key, 'POST', path, { type: 'daily' }, 'name')
  await expect400(t, h, tenant.key, 'POST', path, { name: 'M' }, 'type')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, type: 'monthly' }, 'type')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, status: 'paused' }, 'status')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, max_completions_per_player: 0 }, 'max_completions_per_player')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, max_completions_per_player: 1.5 }, 'max_completions_per_player')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, starts_at: 'tomorrow' }, 'starts_at')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, ends_at: '2026-01-01' }, 'ends_at')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, rules: 'x' }, 'rules')
  // Stages belong to progressive missions; on another type they were walked unchecked (a 500).
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, rules: { event_type: 'bet', target: 1, stages: [{ rewards: { points: [null] } }] } }, 'rules.stages')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, rules: { event_type: 'bet', target: 1, stages: [{ rewards: { points: [{ amount: 1 }] } }] } }, 'rules.stages')
  await expect400(t, h, tenant.key, 'POST', path, { ...ok, starts_at: '2026-02-01T00:00:00Z', ends_at: '2026-01-01T00:00:00Z' }, 'ends_at')
  const nulls = await h.request('POST', path, { key: tenant.key, body: { ...ok, max_completions_per_player: null, starts_at: null, description: null } })
  t.equal(nulls.status, 201)

  const created = await h.request('POST', path, { key: tenant.key, body: { ...ok, starts_at: '2026-01-10T00:00:00Z' } })
  const item = `${path}/${created.body.data.id}`
  await expect400(t, h, tenant.key, 'PATCH', item, { ends_at: '2026-01-09T00:00:00Z' }, 'ends_at')
  await expect400(t, h, tenant.key, 'PATCH', item, { type: 'hourly' }, 'type')
  await expect400(t, h, tenant.key, 'PATCH', item, { max_completions_per_player: 0 }, 'max_completions_per_player')
  const later = await h.request('PATCH', item, { key: tenant.key, body: { ends_at: '2026-01-20T00:00:00Z' } })
  t.equal(later.status, 200)
  t.equal(later.body.data.type, 'daily', 'fields not named are kept')
  t.equal(later.body.data.status, 'active', 'a patch does not reset status to its default')
  t.ok(Date.parse(later.body.data.updated_at) >= Date.parse(created.body.data.updated_at))
})

t.test('missions are paged: defaults page 1 / limit 20, pages, empty pages past the end, limit 1..100', async (t) => {
  const tenant = await h.createTenant()
  for (let i = 0; i < 23; i++) {
    const res = await h.request('POST', path, { key: tenant.key, body: { name: `M${i}`, type: i % 2 ? 'daily' : 'weekly' } })
    t.equal(res.status, 201)
  }
  const first = await h.request('GET', path, { key: tenant.key })
  t.equal(first.status, 200)
  t.same(Object.keys(first.body).sort(), ['data', 'pagination'])
  t.same(first.body.pagination, { page: 1, limit: 20, total: 23, pages: 2 })
  t.equal(first.body.data.length, 20)
  const second = await h.request('GET', path, { key: tenant.key, query: { page: 2 } })
  t.same(second.body.pagination, { page: 2, limit: 20, total: 23, pages: 2 })
  t.equal(second.body.data.length, 3)
  const all = [...first.body.data, ...second.body.data].map((m: { id: string }) => m.id)
  t.equal(new Set(all).size, 23, 'pages do not overlap')
  const past = await h.request('GET', path, { key: tenant.key, query: { page: 3 } })
  t.same(past.body, { data: [], pagination: { page: 3, limit: 20, total: 23, pages: 2 } })
  const small = await h.request('GET', path, { key: tenant.key, query: { limit: 5, page: 5 } })
  t.same(small.body.pagination, { page: 5, limit: 5, total: 23, pages: 5 })
  t.equal(small.body.data.length, 3)
  t.equal((await h.request('GET', path, { key: tenant.key, query: { limit: 100 } })).body.data.length, 23)
  for (const query of [{ limit: 101 }, { limit: 0 }, { page: 0 }, { limit: 'x' }, { page: -1 }] as Record<string, string | number>[]) {
    const res = await h.request('GET', path, { key: tenant.key, query })
    t.equal(res.status, 400, JSON.stringify(query))
    t.equal(res.body.code, 'BAD_REQUEST')
  }
  const empty = await h.request('GET', path, { key: (await h.createTenant()).key })
  t.same(empty.body, { data: [], pagination: { page: 1, limit: 20, total: 0, pages: 0 } })
})

t.test('missions are filtered by status and type', async (t) => {
  const tenant = await h.createTenant()
  const make = async (name: string, type: string, status?: string) =>
    (await h.request('POST', path, { key: tenant.key, body: { name, type, ...(status ? { status } : {}) } })).body.data.id as string
  const a = await make('a', 'daily')
  const b = await make('b', 'daily', 'completed')
  const c = await make('c', 'one_time')
  const d = await make('d', 'collaborative', 'cancelled')
  const ids = async (query: Record<string, string>) => {
    const res = await h.request('GET', path, { key: tenant.key, query })
    t.equal(res.status, 200)
    t.equal(res.body.pagination.total, res.body.data.length)
    return res.body.data.map((m: { id: string }) => m.id).sort()
  }
  t.same(await ids({ type: 'daily' }), [a, b].sort())
  t.same(await ids({ status: 'active' }), [a, c].sort())
  t.same(await ids({ status: 'completed', type: 'daily' }), [b])
  t.same(await ids({ status: 'cancelled' }), [d])
  t.same(await ids({ type: 'weekly' }), [])
  t.equal((await h.request('GET', path, { key: tenant.key, query: { status: 'paused' } })).status, 400)
  t.equal((await h.request('GET', path, { key: tenant.key, query: { type: 'monthly' } })).status, 400)
})

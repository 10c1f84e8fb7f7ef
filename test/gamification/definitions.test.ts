// The gamification definitions' routes (currencies, levels, badges, missions) and the player's gamification
// profile, and their OpenAPI document, under one harness: a test file of its own costs a process and a harness start (~4 s of CPU).
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { expect400, sharedResourceTests } from './shared.ts'
import { Validator } from '@seriousme/openapi-schema-validator'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'

const h = await startHarness(t)

t.test('currencies', async (t) => {
  const path = '/gamification/currencies'

  sharedResourceTests(t, h, {
    path,
    create: { name: 'Loyalty points', symbol: 'LP', type: 'virtual' },
    patch: { name: 'Respin points', symbol: 'RP' },
  })

  t.test('a currency is created with exactly the spec fields', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Euro', symbol: '€', type: 'real' } })
    t.equal(res.status, 201)
    t.same(Object.keys(res.body.data).sort(), ['created_at', 'id', 'name', 'symbol', 'type'])
    t.same([res.body.data.name, res.body.data.symbol, res.body.data.type], ['Euro', '€', 'real'])
    const bonus = await h.request('PATCH', `${path}/${res.body.data.id}`, { key: tenant.key, body: { type: 'bonus' } })
    t.equal(bonus.body.data.type, 'bonus')
  })

  t.test('currency validation: name, symbol and type required; type enum', async (t) => {
    const tenant = await h.createTenant()
    await expect400(t, h, tenant.key, 'POST', path, { symbol: 'X', type: 'virtual' }, 'name')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'X', type: 'virtual' }, 'symbol')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'X', symbol: 'X' }, 'type')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'X', symbol: 'X', type: 'crypto' }, 'type')
    const created = await h.request('POST', path, { key: tenant.key, body: { name: 'X', symbol: 'X', type: 'virtual' } })
    await expect400(t, h, tenant.key, 'PATCH', `${path}/${created.body.data.id}`, { type: 'points' }, 'type')
  })
})

t.test('levels', async (t) => {
  const path = '/gamification/levels'

  sharedResourceTests(t, h, {
    path,
    create: { name: 'Bronze', tier: 1, min_points: 0, max_points: 999, benefits: { cashback: 0.05 } },
    patch: { name: 'Bronze+', benefits: { cashback: 0.06, perks: ['chat'] }, max_points: null },
  })

  t.test('a level is created with exactly the spec fields; benefits defaults to {} and max_points to null', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', path, { key: tenant.key, body: { name: 'Gold', tier: 3, min_points: 5000 } })
    t.equal(res.status, 201)
    t.same(Object.keys(res.body.data).sort(), ['benefits', 'created_at', 'id', 'max_points', 'min_points', 'name', 'tier'])
    t.same(res.body.data.benefits, {})
    t.equal(res.body.data.max_points, null)
    t.equal(res.body.data.tier, 3)
    t.equal(res.body.data.min_points, 5000)
  })

  t.test('levels are listed by tier, whatever the creation order', async (t) => {
    const tenant = await h.createTenant()
    for (const [name, tier, min] of [['Gold', 3, 5000], ['Bronze', 1, 0], ['Platinum', 4, 20000], ['Silver', 2, 1000]] as const) {
      t.equal((await h.request('POST', path, { key: tenant.key, body: { name, tier, min_points: min } })).status, 201)
    }
    const res = await h.request('GET', path, { key: tenant.key })
    t.equal(res.status, 200)
    t.same(res.body.data.map((l: { name: string }) => l.name), ['Bronze', 'Silver', 'Gold', 'Platinum'])
    t.same(Object.keys(res.body).sort(), ['data'])
  })

  t.test('create validation: required fields, tier ≥ 1, min_points ≥ 0, integers, max_points ≥ 0 and ≥ min_points', async (t) => {
    const tenant = await h.createTenant()
    const ok = { name: 'L', tier: 1, min_points: 0 }
    await expect400(t, h, tenant.key, 'POST', path, { tier: 1, min_points: 0 }, 'name')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'L', min_points: 0 }, 'tier')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'L', tier: 1 }, 'min_points')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, tier: 0 }, 'tier')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, tier: 1.5 }, 'tier')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, tier: '1' }, 'tier')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, min_points: -1 }, 'min_points')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, max_points: -1 }, 'max_points')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, min_points: 100, max_points: 99 }, 'max_points')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, benefits: [] }, 'benefits')
    await expect400(t, h, tenant.key, 'POST', path, { ...ok, name: '' }, 'name')
    const equal = await h.request('POST', path, { key: tenant.key, body: { ...ok, min_points: 100, max_points: 100 } })
    t.equal(equal.status, 201, 'max_points equal to min_points is allowed')
    const malformed = await h.request('POST', path, { key: tenant.key, rawBody: '{"name":', headers: { 'content-type': 'application/json' } })
    t.equal(malformed.status, 400)
    t.same((await h.request('GET', path, { key: tenant.key })).body.data.length, 1, 'nothing invalid was stored')
  })

  t.test('patch validation checks max_points against the stored min_points (and the other way round)', async (t) => {
    const tenant = await h.createTenant()
    const created = await h.request('POST', path, { key: tenant.key, body: { name: 'Silver', tier: 2, min_points: 1000, max_points: 4999 } })
    const item = `${path}/${created.body.data.id}`
    await expect400(t, h, tenant.key, 'PATCH', item, { max_points: 999 }, 'max_points')
    await expect400(t, h, tenant.key, 'PATCH', item, { min_points: 5000 }, 'max_points')
    await expect400(t, h, tenant.key, 'PATCH', item, { min_points: 10, max_points: 9 }, 'max_points')
    await expect400(t, h, tenant.key, 'PATCH', item, { tier: 0 }, 'tier')
    await expect400(t, h, tenant.key, 'PATCH', item, { min_points: -1 }, 'min_points')
    await expect400(t, h, tenant.key, 'PATCH', item, { name: null }, 'name')
    const unchanged = await h.request('GET', item, { key: tenant.key })
    t.same(unchanged.body.data, created.body.data, 'failed patches change nothing')

    const raise = await h.request('PATCH', item, { key: tenant.key, body: { min_points: 6000, max_points: null } })
    t.equal(raise.status, 200)
    t.equal(raise.body.data.min_points, 6000)
    t.equal(raise.body.data.max_points, null)
    const both = await h.request('PATCH', item, { key: tenant.key, body: { min_points: 100, max_points: 200, tier: 7 } })
    t.equal(both.status, 200)
    t.same([both.body.data.min_points, both.body.data.max_points, both.body.data.tier, both.body.data.name], [100, 200, 7, 'Silver'])
  })
})

t.test('badges', async (t) => {
  const path = '/gamification/badges'

  sharedResourceTests(t, h, {
    path,
    create: { name: 'High roller', description: 'Bet 1000 in a day', icon_url: 'https://cdn.example.com/b/hr.png', criteria: { event_type: 'bet', measure: 'sum', target: 1000 }, rarity: 'epic' },
    patch: { rarity: 'legendary', icon_url: null, criteria: { event_type: 'bet', measure: 'sum', target: 5000 } },
  })

  t.test('a badge is created with the spec fields; rarity defaults to common', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', path, { key: tenant.key, body: { name: 'First deposit' } })
    t.equal(res.status, 201)
    t.same(Object.keys(res.body.data).sort(), ['created_at', 'criteria', 'description', 'icon_url', 'id', 'name', 'rarity'])
    t.same([res.body.data.rarity, res.body.data.description, res.body.data.icon_url, res.body.data.criteria], ['common', null, null, {}])
    const patched = await h.request('PATCH', `${path}/${res.body.data.id}`, { key: tenant.key, body: { name: 'First deposit!' } })
    t.equal(patched.body.data.rarity, 'common')
    const rare = await h.request('PATCH', `${path}/${res.body.data.id}`, { key: tenant.key, body: { rarity: 'rare' } })
    t.equal(rare.body.data.rarity, 'rare')
    t.equal(rare.body.data.name, 'First deposit!')
  })

  t.test('badge validation: name required, rarity enum, icon_url must be a URI', async (t) => {
    const tenant = await h.createTenant()
    await expect400(t, h, tenant.key, 'POST', path, {}, 'name')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'B', rarity: 'mythic' }, 'rarity')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'B', icon_url: 'not a url' }, 'icon_url')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'B', icon_url: 'icon.png' }, 'icon_url')
    await expect400(t, h, tenant.key, 'POST', path, { name: 'B', criteria: [1] }, 'criteria')
    const created = await h.request('POST', path, { key: tenant.key, body: { name: 'B' } })
    await expect400(t, h, tenant.key, 'PATCH', `${path}/${created.body.data.id}`, { icon_url: 'nope' }, 'icon_url')
    await expect400(t, h, tenant.key, 'PATCH', `${path}/${created.body.data.id}`, { rarity: 'COMMON' }, 'rarity')
  })

  t.test('criteria are validated on PATCH too: 400 naming the field, the stored badge unchanged', async (t) => {
    const tenant = await h.createTenant()
    const created = await h.request('POST', path, { key: tenant.key, body: { name: 'Bettor', rarity: 'rare', criteria: { event_type: 'bet', measure: 'sum', target: 100, filters: [{ field: 'game', op: 'eq', value: 'starburst' }] } } })
    t.equal(created.status, 201, created.text)
    const item = `${path}/${created.body.data.id}`
    const refused = async (body: Record<string, unknown>, field: string) => {
      await expect400(t, h, tenant.key, 'PATCH', item, body, field)
      t.same((await h.request('GET', item, { key: tenant.key })).body.data, created.body.data, `unchanged after the refused ${JSON.stringify(body)}`)
    }
    await refused({ criteria: { event_type: 'bet' } }, 'criteria.target')
    await refused({ criteria: { event_type: 'bet', target: 0 } }, 'criteria.target')
    await refused({ criteria: { target: 5 } }, 'criteria.event_type')
    await refused({ criteria: { event_type: 'bet', target: 5, measure: 'avg' } }, 'criteria.measure')
    await refused({ criteria: { event_type: 'bet', target: 5, filters: [{ field: 'colour', op: 'eq', value: 1 }] } }, 'criteria.filters.0.field')
    await refused({ criteria: { event_type: 'bet', target: 5, filters: [{ field: 'amount', op: 'like', value: 1 }] } }, 'criteria.filters.0.op')
    await refused({ criteria: { missions_completed: 0 } }, 'criteria.missions_completed')
    await refused({ criteria: { level_tier: 1.5 } }, 'criteria.level_tier')
    await refused({ criteria: [1] }, 'criteria')
    // A refused field refuses the whole patch: the valid fields beside it are not written either.
    await refused({ name: 'Renamed', rarity: 'legendary', criteria: { event_type: 'bet', measure: 'sum' } }, 'criteria.target')
    // The same shapes, valid, are accepted.
    const ok = await h.request('PATCH', item, { key: tenant.key, body: { criteria: { missions_completed: 2 } } })
    t.equal(ok.status, 200, ok.text)
    t.same(ok.body.data.criteria, { missions_completed: 2 })
  })
})

t.test('missions', async (t) => {
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
})

t.test('player-profile', async (t) => {
  const sql = h.app.ctx.sql

  // The players API lives in another feature: insert the row directly.
  async function makePlayer(tenant: TestTenant, brandId = tenant.brand.id): Promise<string> {
    const [row] = await sql<{ id: string }[]>`
    insert into players (tenant_id, brand_id, external_id) values (${tenant.id}, ${brandId}, ${`ext-${Math.random()}`})
    returning id`
    return row!.id
  }

  const post = async (tenant: TestTenant, path: string, body: Record<string, unknown>) => {
    const res = await h.request('POST', path, { key: tenant.key, body })
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`)
    return res.body.data
  }

  t.test('a fresh player in a bare brand: no level, nothing held, nothing active, no badges', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const res = await h.request('GET', `/gamification/player/${playerId}`, { key: tenant.key })
    t.equal(res.status, 200)
    t.same(res.body, {
      data: { player_id: playerId, current_level: null, point_balances: [], active_missions: [], badges_earned: [] },
    })
  })

  t.test('the profile: level from lifetime points in the virtual currencies, balances, missions, badges', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const url = `/gamification/player/${playerId}`
    const get = async () => {
      const res = await h.request('GET', url, { key: tenant.key })
      t.equal(res.status, 200)
      return res.body.data
    }

    const bronze = await post(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 0, max_points: 999 })
    const silver = await post(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 1000 })
    const euro = await post(tenant, '/gamification/currencies', { name: 'Euro', symbol: 'EUR', type: 'real' })
    const lp = await post(tenant, '/gamification/currencies', { name: 'Loyalty', symbol: 'LP', type: 'virtual' })
    const coins = await post(tenant, '/gamification/currencies', { name: 'Coins', symbol: 'C', type: 'virtual' })
    const daily = await post(tenant, '/gamification/missions', { name: 'Daily', type: 'daily', rules: { event_type: 'login', target: 2 }, rewards: { points: [{ currency_id: lp.id, amount: 10 }] } })
    const once = await post(tenant, '/gamification/missions', { name: 'Once', type: 'one_time', max_completions_per_player: 1, rules: { event_type: 'login', target: 1 } })
    await post(tenant, '/gamification/missions', { name: 'Cancelled', type: 'daily', status: 'cancelled' })
    await post(tenant, '/gamification/missions', { name: 'Over', type: 'daily', starts_at: '2020-01-01T00:00:00Z', ends_at: '2020-02-01T00:00:00Z' })
    await post(tenant, '/gamification/missions', { name: 'Future', type: 'daily', starts_at: '2999-01-01T00:00:00Z' })
    const badge = await post(tenant, '/gamification/badges', { name: 'Welcome', rarity: 'rare', icon_url: 'https://x.example/w.png' })

    let p = await get()
    t.same(p.current_level, bronze, 'zero points reach the level whose min_points is 0')
    t.same(
      p.point_balances.map((b: { currency_id: string; balance: number; lifetime_earned: number }) => [b.currency_id, b.balance, b.lifetime_earned]),
      [[euro.id, 0, 0], [lp.id, 0, 0], [coins.id, 0, 0]],
      'one zero balance per brand currency',
    )
    t.same(p.point_balances[1], { currency_id: lp.id, name: 'Loyalty', symbol: 'LP', type: 'virtual', balance: 0, lifetime: 0, lifetime_earned: 0 })
    t.same(p.active_missions.map((m: { mission_id: string }) => m.mission_id), [daily.id, once.id])
    t.same(p.active_missions[0], {
      mission_id: daily.id, name: 'Daily', description: null, type: 'daily', rewards: { points: [{ currency_id: lp.id, amount: 10 }] },
      max_completions_per_player: null, starts_at: null, ends_at: null, progress: 0, target: 2, stage: 0, completions: 0,
      period_start: `${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`, opt_in: false, joined: true,
    })
    t.same(p.badges_earned, [])

    // State as the engine writes it: points in real (or bonus) currencies do not count toward the level,
    // lifetime points of every virtual currency do.
    await sql`insert into player_point_balances (player_id, currency_id, tenant_id, balance, lifetime_earned)
            values (${playerId}, ${euro.id}, ${tenant.id}, 5000, 5000), (${playerId}, ${coins.id}, ${tenant.id}, 0, 600)`
    p = await get()
    t.equal(p.current_level.id, bronze.id)
    await sql`insert into player_point_balances (player_id, currency_id, tenant_id, balance, lifetime_earned)
            values (${playerId}, ${lp.id}, ${tenant.id}, 200.5, 400.5)`
    const today = new Date(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`)
    await sql`insert into player_missions (player_id, mission_id, tenant_id, value, period_start, completions)
            values (${playerId}, ${once.id}, ${tenant.id}, 1, null, 1),
                   (${playerId}, ${daily.id}, ${tenant.id}, 1, ${today}, 3)`
    await sql`insert into player_badges (player_id, badge_id, tenant_id, earned_at)
            values (${playerId}, ${badge.id}, ${tenant.id}, '2026-03-01T10:00:00Z')`
    p = await get()
    t.same(p.current_level, silver, 'spent points do not lower the level: lifetime earned counts')
    t.same(p.point_balances[1], { currency_id: lp.id, name: 'Loyalty', symbol: 'LP', type: 'virtual', balance: 200.5, lifetime: 400.5, lifetime_earned: 400.5 })
    t.same(p.active_missions.map((m: { mission_id: string; completions: number; progress: unknown }) => [m.mission_id, m.completions, m.progress]), [
      [daily.id, 3, 1],
    ], 'a mission completed max_completions_per_player times is no longer active for the player')
    t.same(p.badges_earned, [
      { badge_id: badge.id, name: 'Welcome', description: null, icon_url: 'https://x.example/w.png', rarity: 'rare', earned_at: '2026-03-01T10:00:00.000Z' },
    ])

    // Deleting definitions removes them from the profile.
    await h.request('DELETE', `/gamification/levels/${silver.id}`, { key: tenant.key })
    await h.request('DELETE', `/gamification/badges/${badge.id}`, { key: tenant.key })
    p = await get()
    t.equal(p.current_level.id, bronze.id)
    t.same(p.badges_earned, [])
  })

  t.test('no level when every level needs more points than the player has', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    await post(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 1000 })
    const res = await h.request('GET', `/gamification/player/${playerId}`, { key: tenant.key })
    t.equal(res.body.data.current_level, null)
  })

  t.test("the player's own brand supplies levels, currencies and missions", async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const playerId = await makePlayer(tenant, second.id)
    await post(tenant, '/gamification/levels', { name: 'Main level', tier: 1, min_points: 0 })
    await post(tenant, '/gamification/missions', { name: 'Main mission', type: 'daily' })
    const level = await post(tenant, '/gamification/levels', { name: 'Second level', tier: 1, min_points: 0, brand: 'second' })
    const res = await h.request('GET', `/gamification/player/${playerId}`, { key: tenant.key })
    t.equal(res.status, 200)
    t.equal(res.body.data.current_level.id, level.id)
    t.same(res.body.data.active_missions, [])
  })

  t.test('visibility: unknown player, another tenant, another brand for a pinned key → 404; read key may read', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant()
    await tenant.createBrand('second')
    const playerId = await makePlayer(tenant)
    const path = `/gamification/player/${playerId}`
    const unknown = await h.request('GET', '/gamification/player/00000000-0000-4000-8000-000000000000', { key: tenant.key })
    t.equal(unknown.status, 404)
    t.equal(unknown.body.code, 'NOT_FOUND')
    const foreign = await h.request('GET', path, { key: other.key })
    t.equal(foreign.status, 404)
    t.equal(foreign.body.code, 'NOT_FOUND')
    const pinnedElsewhere = await tenant.createKey({ brand: 'second' })
    t.equal((await h.request('GET', path, { key: pinnedElsewhere.key })).status, 404)
    const pinnedHere = await tenant.createKey({ brand: 'main' })
    t.equal((await h.request('GET', path, { key: pinnedHere.key })).status, 200)
    const reader = await tenant.createKey({ scopes: ['read'] })
    t.equal((await h.request('GET', path, { key: reader.key })).status, 200)
    t.equal((await h.request('GET', '/gamification/player/not-a-uuid', { key: tenant.key })).status, 404)
    t.equal((await h.request('GET', path)).status, 401)
  })
})

t.test('openapi', async (t) => {
  // The document is the HTTP layer's, the same whatever stores run: checked in the embedded run only.

  t.test('the OpenAPI document lists every gamification, bonus and tournament operation and still validates', embeddedRunOnly, async (t) => {
    const res = await h.request('GET', '/openapi.json')
    t.equal(res.status, 200)
    const doc = res.body
    const validator = new Validator()
    const result = await validator.validate(doc)
    t.ok(result.valid, JSON.stringify(result.errors))

    const expected: Record<string, string[]> = {}
    for (const collection of ['/gamification/levels', '/gamification/missions', '/gamification/badges', '/gamification/currencies', '/bonuses', '/tournaments']) {
      expected[`/api/v1${collection}`] = ['get', 'post']
      expected[`/api/v1${collection}/{id}`] = ['get', 'patch', 'delete']
    }
    expected['/api/v1/gamification/player/{playerId}'] = ['get']
    for (const [path, methods] of Object.entries(expected)) {
      t.ok(doc.paths[path], path)
      for (const m of methods) t.ok(doc.paths[path]?.[m], `${m} ${path}`)
    }
    for (const name of ['Level', 'Mission', 'Badge', 'PointCurrency', 'Bonus', 'Tournament', 'PlayerGamificationProfile']) {
      t.ok(doc.components.schemas[name], `component ${name}`)
    }
    const missions = doc.paths['/api/v1/gamification/missions'].get
    const limit = missions.parameters.find((p: { name: string }) => p.name === 'limit')
    t.same([limit.schema.default, limit.schema.maximum], [20, 100])
    t.ok(missions.parameters.some((p: { name: string; in: string }) => p.name === 'x-brand' && p.in === 'header'))
    const create = doc.paths['/api/v1/bonuses'].post.requestBody.content['application/json'].schema
    t.same([...create.required].sort(), ['name', 'type', 'value', 'value_type'])
    t.equal(create.properties.wagering_requirement.default, 0)
    t.equal(create.properties.active.default, true)
    const patch = doc.paths['/api/v1/tournaments/{id}'].patch.requestBody.content['application/json'].schema
    t.notOk(patch.required, 'every patch field is optional')
    t.notOk(patch.properties.brand, 'brand is not patchable')
    t.notOk(patch.properties.status.default, 'no defaults on patch')
    t.equal(doc.paths['/api/v1/gamification/badges/{id}'].get['x-required-scope'], 'read')
  })
})

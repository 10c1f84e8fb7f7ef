// Adversarial checks of docs/segments.md: rule language edge cases, membership after ingestion.
import t from 'tap'
import { recomputeSegments } from '../../src/segments/service.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t)
const sql = h.app.ctx.sql
const DAY = 86_400_000

async function createPlayer(tenant: TestTenant, body: Record<string, unknown>) {
  const res = await h.request('POST', '/players', { key: tenant.key, body })
  if (res.status !== 201) throw new Error(`create player: ${res.status} ${res.text}`)
  return res.body.data as { id: string; external_id: string }
}

async function exportAll(tenant: TestTenant, segmentId: string) {
  const rows: any[] = []
  let cursor: string | undefined
  for (;;) {
    const res = await h.request('GET', `/segments/${segmentId}/export`, { key: tenant.key, query: { limit: 1000, ...(cursor ? { cursor } : {}) } })
    if (res.status !== 200) throw new Error(`export: ${res.status} ${res.text}`)
    rows.push(...res.body.data)
    if (!res.body.next_cursor) return rows
    cursor = res.body.next_cursor
  }
}

function membersOf(tenant: TestTenant) {
  return async (rules: unknown) => {
    const res = await h.request('POST', '/segments', { key: tenant.key, body: { name: 'm', type: 'dynamic', rules } })
    if (res.status !== 201) throw new Error(`create segment ${JSON.stringify(rules)}: ${res.status} ${res.text}`)
    return (await exportAll(tenant, res.body.data.id)).map((r: { external_id: string }) => r.external_id).sort()
  }
}

t.test('json metadata: numbers vs strings, missing keys, not() over missing values', async (t) => {
  const tenant = await h.createTenant()
  await createPlayer(tenant, { external_id: 'num', metadata: { n: 10, tags: [1, 2, 'x'], flag: true } })
  await createPlayer(tenant, { external_id: 'str', metadata: { n: '10', tags: 'a,b' } })
  await createPlayer(tenant, { external_id: 'none', metadata: {} })
  await createPlayer(tenant, { external_id: 'nul', metadata: { n: null } })
  const members = membersOf(tenant)
  t.same(await members({ field: 'metadata.n', op: 'eq', value: 10 }), ['num'], '"10" is not 10')
  t.same(await members({ field: 'metadata.n', op: 'eq', value: '10' }), ['str'])
  t.same(await members({ field: 'metadata.n', op: 'gt', value: 9 }), ['num'], 'numbers compare with numbers only')
  t.same(await members({ field: 'metadata.n', op: 'gt', value: '1' }), ['str'], 'strings compare with strings only')
  t.same(await members({ field: 'metadata.n', op: 'lte', value: 10 }), ['num'])
  t.same(await members({ field: 'metadata.n', op: 'in', value: ['10', 3] }), ['str'])
  t.same(await members({ field: 'metadata.n', op: 'in', value: [10] }), ['num'])
  t.same(await members({ field: 'metadata.n', op: 'neq', value: 10 }), ['none', 'nul', 'str'], 'neq includes missing and null')
  t.same(await members({ field: 'metadata.n', op: 'not_in', value: [10, '10'] }), ['none', 'nul'], 'not_in includes missing')
  t.same(await members({ field: 'metadata.n', op: 'exists' }), ['num', 'str'], 'a JSON null is no value')
  t.same(await members({ field: 'metadata.n', op: 'exists', value: false }), ['none', 'nul'], 'exists false: missing or null')
  t.same(await members({ not: { field: 'metadata.n', op: 'gt', value: 5 } }), ['none', 'nul', 'str'], 'not() of a non-match on missing is a match')
  t.same(await members({ not: { field: 'metadata.n', op: 'eq', value: 10 } }), ['none', 'nul', 'str'])
  t.same(await members({ not: { not: { field: 'metadata.n', op: 'eq', value: 10 } } }), ['num'])
  t.same(await members({ not: { field: 'metadata.tags', op: 'contains', value: 'x' } }), ['none', 'nul', 'str'])
  t.same(await members({ field: 'metadata.tags', op: 'contains', value: 2 }), ['num'], 'a number element of an array')
  t.same(await members({ field: 'metadata.tags', op: 'contains', value: 'A,' }), ['str'], 'substring of a string value, case-insensitive')
  t.same(await members({ field: 'metadata.flag', op: 'eq', value: true }), ['num'])
  t.same(await members({ field: 'metadata.flag', op: 'neq', value: true }), ['none', 'nul', 'str'])
  t.same(await members({ any: [{ not: { field: 'metadata.flag', op: 'exists' } }, { all: [{ field: 'metadata.n', op: 'gte', value: 10 }, { field: 'metadata.tags', op: 'contains', value: 1 }] }] }), ['none', 'nul', 'num', 'str'])
  t.same(await members({ all: [{ any: [] }, { field: 'external_id', op: 'exists' }] }), [], 'an empty any inside all matches no one')
  t.same(await members({ not: { any: [] } }), ['none', 'nul', 'num', 'str'])
})

t.test('profile fields: null strings, neq/not_in/not on missing profile values, numeric comparisons', async (t) => {
  const tenant = await h.createTenant()
  const a = await createPlayer(tenant, { external_id: 'a' })
  const b = await createPlayer(tenant, { external_id: 'b' })
  await createPlayer(tenant, { external_id: 'c' })
  await sql`update player_profiles set country = 'IT', deposit_total = 10.5, deposit_count = 2 where player_id = ${a.id}`
  await sql`update player_profiles set country = 'it', deposit_total = 10.49, deposit_count = 1 where player_id = ${b.id}`
  const members = membersOf(tenant)
  t.same(await members({ field: 'country', op: 'eq', value: 'IT' }), ['a'], 'eq on strings is case-sensitive')
  t.same(await members({ field: 'country', op: 'neq', value: 'IT' }), ['b', 'c'])
  t.same(await members({ field: 'country', op: 'not_in', value: ['IT'] }), ['b', 'c'])
  t.same(await members({ not: { field: 'country', op: 'eq', value: 'IT' } }), ['b', 'c'])
  t.same(await members({ not: { field: 'country', op: 'in', value: ['IT', 'it'] } }), ['c'])
  t.same(await members({ field: 'country', op: 'contains', value: 'I' }), ['a', 'b'], 'contains is case-insensitive')
  t.same(await members({ field: 'deposit_total', op: 'gte', value: 10.5 }), ['a'])
  t.same(await members({ field: 'deposit_total', op: 'lt', value: 10.5 }), ['b', 'c'])
  t.same(await members({ field: 'deposit_total', op: 'eq', value: 0 }), ['c'])
  t.same(await members({ field: 'deposit_count', op: 'not_in', value: [2] }), ['b', 'c'])
  t.same(await members({ field: 'first_deposit_amount', op: 'exists' }), [])
  t.same(await members({ field: 'first_deposit_amount', op: 'lt', value: 1 }), [], 'a missing value never matches an ordering')
  t.same(await members({ not: { field: 'first_deposit_amount', op: 'lt', value: 1 } }), ['a', 'b', 'c'])
  t.same(await members({ field: 'consent.sms', op: 'neq', value: true }), ['a', 'b', 'c'])
})

t.test('date-times: date-only, offsets, relative values, and validation', async (t) => {
  const tenant = await h.createTenant()
  const a = await createPlayer(tenant, { external_id: 'a' })
  const b = await createPlayer(tenant, { external_id: 'b' })
  await sql`update players set created_at = '2026-01-31T10:30:00Z' where id = ${a.id}`
  await sql`update players set created_at = '2026-01-30T23:00:00Z' where id = ${b.id}`
  const members = membersOf(tenant)
  t.same(await members({ field: 'created_at', op: 'gte', value: '2026-01-31' }), ['a'], 'a date is midnight UTC')
  t.same(await members({ field: 'created_at', op: 'lt', value: '2026-01-31' }), ['b'])
  t.same(await members({ field: 'created_at', op: 'gt', value: '2026-01-31T12:00:00+02:00' }), ['a'], '12:00+02:00 is 10:00Z')
  t.same(await members({ field: 'created_at', op: 'lt', value: '2026-01-31T00:30:00+01:00' }), ['b'], '00:30+01:00 is 23:30Z the day before')
  t.same(await members({ field: 'created_at', op: 'eq', value: '2026-01-31T10:30:00Z' }), ['a'])
  t.same(await members({ field: 'created_at', op: 'eq', value: '2026-01-31T11:30:00+01:00' }), ['a'], 'eq compares instants')
  t.same(await members({ field: 'created_at', op: 'lt', value: 'now-1w' }), ['a', 'b'])
  t.same(await members({ field: 'created_at', op: 'gt', value: 'now+2h' }), [])
  t.same(await members({ field: 'last_login_at', op: 'lt', value: 'now' }), [], 'a never-set date never matches')
  t.same(await members({ field: 'last_login_at', op: 'neq', value: 'now' }), ['a', 'b'])
  const feb30 = await h.request('POST', '/segments', { key: tenant.key, body: { name: 'x', type: 'dynamic', rules: { field: 'created_at', op: 'gt', value: '2026-02-30' } } })
  t.equal(feb30.status, 400, 'an impossible calendar date (Feb 30) is refused, not rolled over to March 2')
  for (const value of ['now-5y', 'now-', 'now - 1d', '2026-01-31T25:00:00Z', '2026-13-01', 5, true]) {
    const res = await h.request('POST', '/segments', { key: tenant.key, body: { name: 'x', type: 'dynamic', rules: { field: 'created_at', op: 'gt', value } } })
    t.equal(res.status, 400, `created_at gt ${JSON.stringify(value)} → 400`)
  }
})

t.test('validation at the limits: values, conditions, nesting, metadata paths, types', async (t) => {
  const tenant = await h.createTenant()
  const post = (rules: unknown) => h.request('POST', '/segments', { key: tenant.key, body: { name: 'x', type: 'dynamic', rules } })
  const list = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`)
  t.equal((await post({ field: 'country', op: 'in', value: list(1000) })).status, 201, '1000 values')
  t.equal((await post({ field: 'country', op: 'in', value: list(1001) })).status, 400, '1001 values')
  const conds = (n: number) => ({ all: Array.from({ length: n }, () => ({ field: 'country', op: 'eq', value: 'IT' })) })
  t.equal((await post(conds(200))).status, 201, '200 conditions')
  t.equal((await post(conds(201))).status, 400, '201 conditions')
  t.equal((await post({ field: 'metadata.a.b.c.d.e.f.g.h', op: 'exists' })).status, 201, '8 nested keys')
  t.equal((await post({ field: 'metadata.a.b.c.d.e.f.g.h.i', op: 'exists' })).status, 400, '9 nested keys')
  t.equal((await post({ field: 'metadata.a b', op: 'exists' })).status, 400, 'a key with a space')
  t.equal((await post({ field: 'metadata.', op: 'exists' })).status, 400, 'an empty key')
  t.equal((await post({ field: 'metadata.a..b', op: 'exists' })).status, 400, 'an empty inner key')
  let deep: unknown = { field: 'country', op: 'eq', value: 'IT' }
  for (let i = 0; i < 12; i++) deep = { not: deep }
  t.equal((await post(deep)).status, 400, 'nesting beyond 10 levels')
  for (const [rules, why] of [
    [{ field: 'consent.email', op: 'eq', value: 'true' }, 'boolean field, string value'],
    [{ field: 'consent.email', op: 'gt', value: true }, 'ordering on a boolean'],
    [{ field: 'lifecycle_stage', op: 'eq', value: 'whale' }, 'enum value outside the list'],
    [{ field: 'lifecycle_stage', op: 'contains', value: 'vi' }, 'contains on an enum'],
    [{ field: 'deposit_count', op: 'contains', value: '1' }, 'contains on a number'],
    [{ field: 'deposit_count', op: 'in', value: [1, '2'] }, 'a string in a number list'],
    [{ field: 'deposit_total', op: 'gt', value: null }, 'null value'],
    [{ field: 'email', op: 'exists', value: 'yes' }, 'exists takes a boolean'],
    [{ field: 'email', op: 'contains', value: '' }, 'empty contains'],
    [{ field: 'metadata.x', op: 'contains', value: { a: 1 } }, 'contains an object'],
    [{ field: 'metadata.x', op: 'gt', value: true }, 'json ordering on a boolean'],
    [{ field: 'country', op: 'in', value: 'IT' }, 'in without an array'],
    [{ not: [] }, 'not of an array'],
    [{ field: 'status', op: 'in', value: ['active', 'banned'] }, 'an enum list value outside the list'],
  ] as [unknown, string][]) {
    const res = await post(rules)
    t.equal(res.status, 400, `${why}: ${JSON.stringify(rules)}`)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.ok(Array.isArray(res.body.details?.errors) && res.body.details.errors[0].field.startsWith('rules'), 'names a rules path')
  }
})

t.test('static segments: ids lower-cased and deduplicated; foreign and unknown ids never match', async (t) => {
  const tenant = await h.createTenant()
  const a = await createPlayer(tenant, { external_id: 'a' })
  const other = await h.createTenant()
  const foreign = await createPlayer(other, { external_id: 'f' })
  const unknown = '00000000-0000-4000-8000-000000000001'
  const res = await h.request('POST', '/segments', { key: tenant.key, body: { name: 's', type: 'static', rules: { player_ids: [a.id.toUpperCase(), a.id, foreign.id, unknown] } } })
  t.equal(res.status, 201, res.text)
  t.same(res.body.data.rules.player_ids, [a.id, foreign.id, unknown])
  t.same((await exportAll(tenant, res.body.data.id)).map((r) => r.external_id), ['a'])
  const tooMany = await h.request('POST', '/segments', {
    key: tenant.key,
    body: { name: 's', type: 'static', rules: { player_ids: Array.from({ length: 10_001 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`) } },
  })
  t.equal(tooMany.status, 400, 'more than 10 000 ids')
})

t.test('membership follows ingestion: events change the profile, recompute and export agree', async (t) => {
  const tenant = await h.createTenant()
  const send = (events: unknown[]) => h.request('POST', '/events', { key: tenant.key, body: { events } })
  const now = Date.now()
  const ts = (agoDays: number) => new Date(now - agoDays * DAY).toISOString()
  t.equal((await send([
    { player_id: 'p1', event_type: 'registration', timestamp: ts(2), payload: { country: 'IT', currency: 'EUR' } },
    { player_id: 'p2', event_type: 'registration', timestamp: ts(2), payload: { country: 'IT', currency: 'EUR' } },
    { player_id: 'p3', event_type: 'registration', timestamp: ts(2), payload: { country: 'ES', currency: 'EUR' } },
  ])).status, 200)
  const seg = (await h.request('POST', '/segments', {
    key: tenant.key,
    body: { name: 'it depositors', type: 'dynamic', rules: { all: [{ field: 'country', op: 'eq', value: 'IT' }, { field: 'deposit_count', op: 'gte', value: 1 }, { field: 'consent.email', op: 'neq', value: false }] } },
  })).body.data
  const ftd = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 'ftd', type: 'dynamic', rules: { field: 'lifecycle_stage', op: 'eq', value: 'ftd' } } })).body.data
  const usd = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 'usd', type: 'dynamic', rules: { field: 'deposit_total', op: 'gt', value: 0 } } })).body.data
  await recomputeSegments(h.app.ctx, { tenantId: tenant.id })
  t.equal((await h.request('GET', `/segments/${seg.id}`, { key: tenant.key })).body.data.player_count, 0)

  t.equal((await send([
    { player_id: 'p1', event_type: 'deposit', timestamp: ts(1), payload: { amount: 10, currency: 'EUR' } },
    { player_id: 'p2', event_type: 'deposit_failed', timestamp: ts(1), payload: { amount: 10, currency: 'EUR' } },
    { player_id: 'p3', event_type: 'deposit', timestamp: ts(1), payload: { amount: 10, currency: 'USD' } },
  ])).status, 200)
  t.same((await exportAll(tenant, seg.id)).map((r) => r.external_id), ['p1'])
  const ftdMembers = (await exportAll(tenant, ftd.id)).map((r) => r.external_id)
  t.ok(ftdMembers.includes('p1'), 'one deposit: ftd')
  t.notOk(ftdMembers.includes('p2'), 'a failed deposit never makes an ftd')
  t.same((await exportAll(tenant, usd.id)).map((r) => r.external_id), ['p1'], 'deposit_total is in the profile currency only')
  await recomputeSegments(h.app.ctx, { tenantId: tenant.id })
  t.equal((await h.request('GET', `/segments/${seg.id}`, { key: tenant.key })).body.data.player_count, 1)

  // Consent refused by event: p1 leaves; p2 deposits: joins. Same count, different membership → an event.
  t.equal((await send([
    { player_id: 'p1', event_type: 'consent_update', timestamp: ts(0.5), payload: { channel: 'email', granted: false } },
    { player_id: 'p2', event_type: 'deposit', timestamp: ts(0.5), payload: { amount: 5 } },
  ])).status, 200)
  const rows = await exportAll(tenant, seg.id)
  t.same(rows.map((r) => r.external_id), ['p2'])
  t.same(rows[0].consent, {})
  t.equal(rows[0].country, 'IT')
  await recomputeSegments(h.app.ctx, { tenantId: tenant.id })
  const events = await sql<{ data: any }[]>`select data from outbox where tenant_id = ${tenant.id} and event = 'segment.recomputed' and data->>'segment_id' = ${seg.id} order by id`
  t.same(events.map((e) => [e.data.previous_player_count, e.data.player_count]), [[0, 1], [1, 1]])
  // A status_change event moves the player out of a status-based segment.
  const active = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 'a', type: 'dynamic', rules: { all: [{ field: 'status', op: 'eq', value: 'active' }, { field: 'country', op: 'eq', value: 'IT' }] } } })).body.data
  await send([{ player_id: 'p2', event_type: 'status_change', payload: { status: 'self_excluded' } }])
  t.same((await exportAll(tenant, active.id)).map((r) => r.external_id), ['p1'])
})

t.test('export cursor is stable while players are created and removed between pages', async (t) => {
  const tenant = await h.createTenant()
  const first: string[] = []
  for (let i = 0; i < 5; i++) first.push((await createPlayer(tenant, { external_id: `p${i}` })).external_id)
  const seg = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 'all', type: 'dynamic', rules: {} } })).body.data
  const page1 = await h.request('GET', `/segments/${seg.id}/export`, { key: tenant.key, query: { limit: 2 } })
  t.same(page1.body.data.map((r: { external_id: string }) => r.external_id), ['p0', 'p1'])
  await createPlayer(tenant, { external_id: 'late1' })
  await h.request('POST', '/events', { key: tenant.key, body: { player_id: 'late2', event_type: 'login' } })
  const seen = page1.body.data.map((r: { external_id: string }) => r.external_id)
  let cursor = page1.body.next_cursor
  while (cursor) {
    const res = await h.request('GET', `/segments/${seg.id}/export`, { key: tenant.key, query: { limit: 2, cursor } })
    t.equal(res.status, 200)
    seen.push(...res.body.data.map((r: { external_id: string }) => r.external_id))
    cursor = res.body.next_cursor
  }
  t.same(seen, ['p0', 'p1', 'p2', 'p3', 'p4', 'late1', 'late2'], 'creation order, each once, late players at the end')
  const csv = await h.request('GET', `/segments/${seg.id}/export`, { key: tenant.key, query: { limit: 7, format: 'csv' } })
  t.equal(csv.headers.get('x-next-cursor'), null, 'a page ending exactly at the last member is the last page')
  t.equal(csv.text.split('\r\n').length, 9, 'header + 7 rows + trailing CRLF')
})

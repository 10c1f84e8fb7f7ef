// Adversarial: every list endpoint's `limit`, `page`/`offset` and `cursor` edges, from the served OpenAPI
// document. Spec "Limits" (list limit max 100, export 1..1000), "Conventions" 3; src/lib/cursor.ts
// promises a forged, truncated or foreign cursor is a 400.
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } })
const doc = (await h.request('GET', '/openapi.json')).body

interface ListOp { path: string; params: Record<string, any>; admin: boolean }
const lists: ListOp[] = []
for (const [path, item] of Object.entries<any>(doc.paths)) {
  const op = item.get
  if (!op?.parameters) continue
  const params = Object.fromEntries(op.parameters.filter((p: any) => p.in === 'query').map((p: any) => [p.name, p.schema]))
  if ('limit' in params || 'cursor' in params) lists.push({ path, params, admin: op['x-required-role'] === 'super_admin' })
}

async function fixture() {
  const tenant = await h.createTenant()
  const k = tenant.key
  const post = async (path: string, body: object, status = 201) => {
    const r = await h.request('POST', path, { key: k, body })
    if (r.status !== status) throw new Error(`${path}: ${r.status} ${r.text}`)
    return r.body
  }
  const ids: Record<string, string> = {}
  for (let i = 0; i < 3; i++) {
    const p = (await post('/players', { external_id: `ext-${i}`, email: `p${i}@example.com` })).data.id
    ids.player ??= p
    await post('/campaigns', { name: `c${i}`, type: 'one_shot', channels: ['email'] })
    await post('/notifications/templates', { name: `t${i}`, channel: 'in_app', body: 'x' })
    await post('/gamification/missions', { name: `m${i}`, type: 'daily' })
  }
  ids.segment = (await post('/segments', { name: 's', type: 'dynamic', rules: { all: [] } })).data.id
  ids.campaign = (await h.request('GET', '/campaigns', { key: k })).body.campaigns[0].id
  ids.webhook = (await post('/webhooks', { url: 'http://127.0.0.1:9/h', events: ['player.created'] })).data.id
  ids.tournament = (await post('/tournaments', { name: 't' })).data.id
  for (let i = 0; i < 3; i++) await post('/notifications/send', { player_id: ids.player, channel: 'in_app', payload: { title: 'x', body: 'y' } }, 202)
  await post('/events', { events: [0, 1, 2].map((i) => ({ player_id: `ext-${i}`, event_type: 'deposit', event_id: randomUUID(), payload: { amount: 5, currency: 'EUR' } })) }, 200)
  return { tenant, ids }
}

const fill = (path: string, ids: Record<string, string>) => {
  const base = path.replace('/api/v1', '')
  const first = base.startsWith('/players/') || base.startsWith('/gamification/player/') ? ids.player
    : base.startsWith('/segments/') ? ids.segment : base.startsWith('/campaigns/') ? ids.campaign
    : base.startsWith('/webhooks/') ? ids.webhook : base.startsWith('/tournaments/') ? ids.tournament : ''
  return base.replace('{dataset}', 'players').replace(/\{(id|playerId)\}/, first ?? '')
}
const get = (tenant: TestTenant, op: ListOp, ids: Record<string, string>, query: Record<string, string | number>) =>
  op.admin ? h.request('GET', `/admin${fill(op.path, ids).replace('/admin', '')}`, { key: h.adminKey, query: { ...query, tenant_id: tenant.id } })
    : h.request('GET', fill(op.path, ids), { key: tenant.key, query })

t.test('every list route declares its limit bounds, and the spec lists match the Limits table', async (t) => {
  const by = Object.fromEntries(lists.map((l) => [l.path.replace('/api/v1', ''), l.params.limit]))
  for (const p of ['/players', '/gamification/missions', '/campaigns', '/notifications/templates']) {
    t.equal(by[p]?.maximum, 100, `${p} max 100`)
    t.equal(by[p]?.default, 20, `${p} default 20`)
  }
  for (const p of ['/export/{dataset}', '/segments/{id}/export']) {
    t.equal(by[p]?.minimum, 1, `${p} min 1`)
    t.equal(by[p]?.maximum, 1000, `${p} max 1000`)
    t.equal(by[p]?.default, 200, `${p} default 200`)
  }
})

t.test('limit: min-1, max+1, non-integers and huge numbers are 400; min and max are 200', async (t) => {
  const { tenant, ids } = await fixture()
  const bad: string[] = []
  for (const op of lists) {
    const s = op.params.limit
    if (!s) continue
    const min = s.minimum ?? 1
    const max = s.maximum
    const expect: [string | number, number][] = [[min, 200], [min - 1, 400], ['abc', 400], ['1.5', 400], ['1e400', 400], ['99999999999999999999999', 400], ['-1', 400], ['0x10', 400]]
    if (max !== undefined) expect.push([max, 200], [max + 1, 400])
    for (const [limit, status] of expect) {
      const res = await get(tenant, op, ids, { limit })
      if (res.status !== status || (status === 400 && res.body?.code !== 'BAD_REQUEST')) bad.push(`${op.path}?limit=${limit} -> ${res.status} (want ${status}) ${res.text.slice(0, 80)}`)
    }
  }
  t.same(bad, [])
})

t.test('page and offset edges never 500', async (t) => {
  const { tenant, ids } = await fixture()
  const bad: string[] = []
  for (const op of lists) {
    for (const name of ['page', 'offset']) {
      if (!op.params[name]) continue
      const min = op.params[name].minimum ?? (name === 'page' ? 1 : 0)
      for (const [v, status] of [[min, 200], [min - 1, 400], ['x', 400], ['1e400', 400], ['99999999999999999999', 400], [1000000, 200]] as [string | number, number][]) {
        const res = await get(tenant, op, ids, { [name]: v })
        if (res.status !== status) bad.push(`${op.path}?${name}=${v} -> ${res.status} (want ${status}) ${res.text.slice(0, 80)}`)
      }
    }
  }
  t.same(bad, [])
})

t.test('page/limit pagination is consistent: total, pages, and no overlap', async (t) => {
  const { tenant } = await fixture()
  for (const path of ['/players', '/gamification/missions']) {
    const p1 = await h.request('GET', path, { key: tenant.key, query: { limit: 2, page: 1 } })
    const p2 = await h.request('GET', path, { key: tenant.key, query: { limit: 2, page: 2 } })
    const p3 = await h.request('GET', path, { key: tenant.key, query: { limit: 2, page: 3 } })
    t.same(p1.body.pagination, { page: 1, limit: 2, total: 3, pages: 2 }, path)
    t.equal(p2.body.data.length, 1)
    t.same(p3.body.data, [], 'past the end: empty')
    const seen = [...p1.body.data, ...p2.body.data].map((x: any) => x.id)
    t.equal(new Set(seen).size, 3, `${path}: no row twice`)
  }
  for (const [path, key] of [['/campaigns', 'campaigns'], ['/notifications/templates', 'templates']] as [string, string][]) {
    const a = await h.request('GET', path, { key: tenant.key, query: { limit: 2, offset: 0 } })
    const b = await h.request('GET', path, { key: tenant.key, query: { limit: 2, offset: 2 } })
    t.equal(a.body.total, 3, path)
    t.equal(b.body.total, 3)
    t.equal(new Set([...a.body[key], ...b.body[key]].map((x: any) => x.id)).size, 3, `${path}: no row twice`)
  }
})

t.test('cursors: walking with limit=1 sees every row once; a forged, truncated or foreign cursor is 400', async (t) => {
  const { tenant, ids } = await fixture()
  const other = await fixture()
  const bad: string[] = []
  const cursorOps = lists.filter((l) => l.params.cursor)
  t.ok(cursorOps.length >= 5, `${cursorOps.length} cursor lists`)
  const nextOf = (res: any) => res.body?.next_cursor ?? res.headers.get('x-next-cursor') ?? null
  const issued: Record<string, string> = {}
  for (const op of cursorOps) {
    const first = await get(tenant, op, ids, { limit: 1 })
    if (first.status !== 200) { bad.push(`${op.path} -> ${first.status} ${first.text.slice(0, 80)}`); continue }
    const c = nextOf(first)
    if (typeof c === 'string') issued[op.path] = c
    const foreign = await get(other.tenant, op, other.ids, { limit: 1 })
    const fc = nextOf(foreign)
    const tries: [string, string][] = [['garbage', 'garbage'], ['empty-ish', '.'], ['b64 json', Buffer.from('{"id":"x"}').toString('base64url')]]
    if (c) tries.push(['truncated', c.slice(0, -2)], ['flipped', c.slice(0, 3) + (c[3] === 'A' ? 'B' : 'A') + c.slice(4)], ['payload only', c.split('.')[0]!])
    // the admin audit cursor is a plain signed position for the super admin, who sees every tenant
    if (typeof fc === 'string' && !op.admin) tries.push(['other tenant', fc])
    if (op.admin && typeof fc === 'string') {
      const res = await get(tenant, op, ids, { limit: 50, cursor: fc })
      if (res.status !== 200 || res.body.data.some((r: any) => r.tenant_id !== tenant.id)) bad.push(`admin audit: foreign cursor breaks the tenant_id filter -> ${res.status}`)
    }
    for (const [label, cursor] of tries) {
      const res = await get(tenant, op, ids, { limit: 1, cursor })
      if (res.status !== 400 || res.body?.code !== 'BAD_REQUEST') bad.push(`${op.path} cursor ${label} -> ${res.status} ${res.text.slice(0, 80)}`)
    }
  }
  // a cursor of one list is never valid on another
  const paths = Object.keys(issued)
  t.ok(paths.length >= 4, `cursors issued by ${paths.length} lists`)
  for (const from of paths) for (const to of cursorOps) {
    if (to.path === from) continue
    const res = await get(tenant, to, ids, { limit: 1, cursor: issued[from]! })
    if (res.status !== 400) bad.push(`cursor of ${from} on ${to.path} -> ${res.status}`)
  }
  t.same(bad, [])
})

t.test('export walk with limit=1 returns each player once and ends with next_cursor null', async (t) => {
  const { tenant } = await fixture()
  const seen: string[] = []
  let cursor: string | undefined
  for (let i = 0; i < 10; i++) {
    const res = await h.request('GET', '/export/players', { key: tenant.key, query: cursor ? { limit: 1, cursor } : { limit: 1 } })
    t.equal(res.status, 200)
    seen.push(...res.body.data.map((r: any) => r.external_id ?? r.id))
    cursor = res.body.next_cursor ?? undefined
    if (!cursor) break
  }
  t.equal(cursor, undefined, 'exhausted')
  t.same([...seen].sort(), ['ext-0', 'ext-1', 'ext-2'])
})

// HTTP, adversarial: tenant isolation and pagination, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } })

// Adversarial: tenant and brand isolation on every `{id}` route of the served OpenAPI document.
// Spec "Conventions" 6, "Errors" 404; contract "Brands and visibility"; docs/tenancy.md "Visibility".
t.test('adversarial-isolation', async (t) => {
  interface Op { method: string; path: string }
  const doc = (await h.request('GET', '/openapi.json')).body
  const idOps: Op[] = []
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [m, op] of Object.entries<any>(item)) {
      if (!op?.responses || !op.security?.length || op['x-required-role'] || !path.includes('{') || path.includes('{dataset}')) continue
      idOps.push({ method: m.toUpperCase(), path })
    }
  }

  type Ids = Record<string, string>
  async function must(p: Promise<any>, status: number) {
    const res = await p
    if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`)
    return res.body
  }

  /** One of everything, in the brand the key/hint resolves to. */
  async function seed(tenant: TestTenant, key: string, brand?: string): Promise<Ids> {
    const post = (path: string, body: object) => must(h.request('POST', path, { key, body: brand ? { ...body, brand } : body }), 201)
    const ids: Ids = {}
    ids.player = (await post('/players', { external_id: `p-${randomUUID()}`, email: 'a@example.com' })).data.id
    ids.segment = (await post('/segments', { name: 's', type: 'static', rules: { player_ids: [ids.player] } })).data.id
    ids.campaign = (await post('/campaigns', { name: 'c', type: 'one_shot', channels: ['email'] })).data.id
    ids.template = (await post('/notifications/templates', { name: 't', channel: 'in_app', body: 'hi {{name}}' })).data.id
    ids.level = (await post('/gamification/levels', { name: 'l', tier: 1, min_points: 0 })).data.id
    ids.mission = (await post('/gamification/missions', { name: 'm', type: 'daily' })).data.id
    ids.badge = (await post('/gamification/badges', { name: 'b' })).data.id
    ids.currency = (await post('/gamification/currencies', { name: 'c', symbol: 'P', type: 'virtual' })).data.id
    ids.bonus = (await post('/bonuses', { name: 'b', type: 'welcome', value: 10, value_type: 'fixed' })).data.id
    ids.tournament = (await post('/tournaments', { name: 't' })).data.id
    ids.webhook = (await post('/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['player.created'] })).data.id
    const sent = await must(h.request('POST', '/notifications/send', { key, body: { player_id: ids.player, channel: 'in_app', payload: { title: 'x', body: 'y' } } }), 202)
    ids.notification = sent.notification_id
    await h.request('POST', `/webhooks/${ids.webhook}/ping`, { key })
    const deliveries = await h.request('GET', `/webhooks/${ids.webhook}/deliveries`, { key })
    ids.delivery = deliveries.body?.data?.[0]?.id ?? randomUUID()
    return ids
  }

  function fill(path: string, ids: Ids): string {
    const base = path.replace('/api/v1', '')
    const first = base.startsWith('/players/') ? ids.player
      : base.startsWith('/segments/') ? ids.segment
      : base.startsWith('/campaigns/') ? ids.campaign
      : base.startsWith('/notifications/templates/') ? ids.template
      : base.startsWith('/notifications/') ? ids.notification
      : base.startsWith('/gamification/levels/') ? ids.level
      : base.startsWith('/gamification/missions/') ? ids.mission
      : base.startsWith('/gamification/badges/') ? ids.badge
      : base.startsWith('/gamification/currencies/') ? ids.currency
      : base.startsWith('/gamification/player/') ? ids.player
      : base.startsWith('/bonuses/') ? ids.bonus
      : base.startsWith('/tournaments/') ? ids.tournament
      : base.startsWith('/webhooks/') ? ids.webhook
      : base.startsWith('/t/') ? 'not-a-token'
      : undefined
    if (!first) throw new Error(`no id for ${path}`)
    return base.replace(/\{(id|playerId|token)\}/, first).replace('{notificationId}', ids.notification!).replace('{deliveryId}', ids.delivery!).replace('{subscriptionId}', randomUUID())
  }

  /** Valid bodies, so that a 404 cannot hide behind a 400. `own` holds the caller's own ids. */
  function bodyFor(op: Op, own: Ids): unknown {
    const p = op.path.replace('/api/v1', '')
    if (op.method === 'GET' || op.method === 'DELETE') return undefined
    if (p === '/players/{id}/telegram') return { chat_id: '12345' }
    if (p === '/players/{id}/push-subscriptions') return { endpoint: 'https://fcm.googleapis.com/fcm/send/abc', keys: { p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM', auth: 'tBHItJI5svbpez7KI4CCXg' } }
    if (p === '/gamification/missions/{id}/join' || p === '/bonuses/{id}/grant') return { player_id: own.player }
    if (p === '/gamification/player/{playerId}/points') return { currency_id: own.currency, amount: 5 }
    if (p === '/webhooks/{id}') return { active: false }
    if (p === '/players/{id}') return { metadata: { hacked: true } }
    if (p.endsWith('/{id}') && op.method === 'PATCH') return { name: 'hacked' }
    return {}
  }

  const pub = (p: string) => p.startsWith('/api/v1/t/')
  const order = (o: Op) => (o.method === 'DELETE' ? 1 : 0)

  async function probe(_t: unknown, key: string, victim: Ids, own: Ids, label: string) {
    const bad: string[] = []
    for (const op of [...idOps].filter((o) => !pub(o.path)).sort((a, b) => order(a) - order(b))) {
      const res = await h.request(op.method, fill(op.path, victim), { key, body: bodyFor(op, own) })
      if (res.status !== 404 || res.body?.code !== 'NOT_FOUND') bad.push(`${label}: ${op.method} ${op.path} -> ${res.status} ${res.text.slice(0, 100)}`)
    }
    return bad
  }

  async function intact(t: any, tenant: TestTenant, ids: Ids) {
    const gets: [string, string][] = [['player', '/players/'], ['segment', '/segments/'], ['campaign', '/campaigns/'], ['template', '/notifications/templates/'],
      ['level', '/gamification/levels/'], ['mission', '/gamification/missions/'], ['badge', '/gamification/badges/'], ['currency', '/gamification/currencies/'],
      ['bonus', '/bonuses/'], ['tournament', '/tournaments/'], ['webhook', '/webhooks/'], ['notification', '/notifications/']]
    for (const [k, p] of gets) {
      const res = await h.request('GET', p + ids[k], { key: tenant.key })
      t.equal(res.status, 200, `${k} still there`)
      t.not(res.body?.data?.name, 'hacked', `${k} not renamed`)
    }
    const player = await h.request('GET', `/players/${ids.player}`, { key: tenant.key })
    t.notOk(player.body.data.metadata?.hacked, 'player metadata untouched')
    t.equal((await h.request('GET', `/webhooks/${ids.webhook}`, { key: tenant.key })).body.data.active, true, 'webhook still active')
    t.equal((await h.request('GET', `/campaigns/${ids.campaign}`, { key: tenant.key })).body.data.status, 'draft')
  }

  t.test("another tenant's ids are 404 NOT_FOUND on every {id} route, and nothing changes", async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const victim = await seed(a, a.key)
    const own = await seed(b, b.key)
    t.ok(idOps.length >= 40, `${idOps.length} {id} routes`)
    t.same(await probe(t, b.key, victim, own, 'other tenant'), [])
    await intact(t, a, victim)
  })

  t.test("a brand-pinned key gets 404 on every {id} route for its tenant's other brands", async (t) => {
    const a = await h.createTenant()
    await a.createBrand('vip')
    const pinned = (await a.createKey({ brand: 'vip' })).key
    const victim = await seed(a, a.key) // default brand
    const own = await seed(a, pinned)
    t.same(await probe(t, pinned, victim, own, 'pinned'), [])
    await intact(t, a, victim)
  })

  t.test('a tenant-wide key finds a resource of any of its brands by id, whatever the hint', async (t) => {
    const a = await h.createTenant()
    const vip = await a.createBrand('vip')
    const ids = await seed(a, a.key, 'vip')
    for (const p of ['/players/', '/campaigns/', '/bonuses/', '/gamification/badges/']) {
      const k = p === '/players/' ? 'player' : p === '/campaigns/' ? 'campaign' : p === '/bonuses/' ? 'bonus' : 'badge'
      t.equal((await h.request('GET', p + ids[k], { key: a.key })).status, 200, `${p} without hint`)
      t.equal((await h.request('GET', p + ids[k], { key: a.key, headers: { 'x-brand': 'main' } })).status, 200, `${p} hint main`)
    }
    const pinnedVip = (await a.createKey({ brand: vip.id })).key
    t.equal((await h.request('GET', `/players/${ids.player}`, { key: pinnedVip })).status, 200, 'pinned key sees its own brand')
  })

  t.test('ids in bodies that belong to another tenant are never acted on', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const va = await seed(a, a.key)
    const vb = await seed(b, b.key)
    const send = await h.request('POST', '/notifications/send', { key: b.key, body: { player_id: va.player, channel: 'in_app', payload: {} } })
    t.equal(send.status, 404, 'send to another tenant player')
    const tpl = await h.request('POST', '/notifications/send', { key: b.key, body: { player_id: vb.player, channel: 'in_app', template_id: va.template } })
    t.equal(tpl.status, 404, "send with another tenant's template")
    const camp = await h.request('POST', '/campaigns', { key: b.key, body: { name: 'x', type: 'one_shot', channels: ['email'], target_segment_id: va.segment } })
    t.ok([400, 404].includes(camp.status), `campaign targeting another tenant's segment -> ${camp.status}`)
    const patch = await h.request('PATCH', `/campaigns/${vb.campaign}`, { key: b.key, body: { target_segment_id: va.segment } })
    t.ok([400, 404].includes(patch.status), `patch campaign to another tenant's segment -> ${patch.status}`)
    const grant = await h.request('POST', `/bonuses/${vb.bonus}/grant`, { key: b.key, body: { player_id: va.player } })
    const grantNone = await h.request('POST', `/bonuses/${vb.bonus}/grant`, { key: b.key, body: { player_id: randomUUID() } })
    t.ok([400, 404].includes(grant.status), `grant own bonus to another tenant player -> ${grant.status}`)
    t.equal(grant.status, grantNone.status, 'indistinguishable from a player that does not exist')
    t.same(grant.body.details, grantNone.body.details)
    const join = await h.request('POST', `/gamification/missions/${vb.mission}/join`, { key: b.key, body: { player_id: va.player } })
    const joinNone = await h.request('POST', `/gamification/missions/${vb.mission}/join`, { key: b.key, body: { player_id: randomUUID() } })
    t.ok([400, 404].includes(join.status), `join own mission with another tenant player -> ${join.status}`)
    t.equal(join.status, joinNone.status, 'indistinguishable from a player that does not exist')
    const pts = await h.request('POST', `/gamification/player/${vb.player}/points`, { key: b.key, body: { currency_id: va.currency, amount: 5 } })
    t.ok([400, 404].includes(pts.status), `points in another tenant's currency -> ${pts.status}`)
    const seg = await h.request('POST', '/segments', { key: b.key, body: { name: 'steal', type: 'static', rules: { player_ids: [va.player] } } })
    if (seg.status === 201) {
      const exp = await h.request('GET', `/segments/${seg.body.data.id}/export`, { key: b.key })
      t.equal(exp.status, 200)
      t.same(exp.body.data, [], "a static segment never lists another tenant's player")
    } else t.ok([400, 404].includes(seg.status))
  })

  t.test('tenant, brand and id names in a body or query string never override the key\'s tenant or the path', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const va = await seed(a, a.key)
    const vb = await seed(b, b.key)
    const theirs = { tenantId: a.id, brandId: a.brand.id, tenant_id: a.id, brand_id: a.brand.id }
    // Lists: b sees only its own rows, whatever the query names.
    for (const path of ['/players', '/campaigns', '/notifications/templates', '/notifications']) {
      const res = await h.request('GET', `${path}?tenantId=${a.id}&brandId=${a.brand.id}&tenant_id=${a.id}`, { key: b.key })
      t.equal(res.status, 200, path)
      t.notOk(JSON.stringify(res.body).includes(va.player!) || JSON.stringify(res.body).includes(va.campaign!) || JSON.stringify(res.body).includes(va.template!), `${path}: none of a's rows`)
    }
    // Creates land in the key's tenant.
    const tpl = await h.request('POST', '/notifications/templates', { key: b.key, body: { name: 'mine', channel: 'in_app', body: 'x', ...theirs } })
    t.equal(tpl.status, 201)
    t.same(await h.app.ctx.sql`select tenant_id from notification_templates where id = ${tpl.body.data.id}`, [{ tenant_id: b.id }], 'the template is b\'s')
    const camp = await h.request('POST', '/campaigns', { key: b.key, body: { name: 'mine', type: 'one_shot', channels: ['email'], ...theirs } })
    t.equal(camp.status, 201)
    t.same(await h.app.ctx.sql`select tenant_id from campaigns where id = ${camp.body.data.id}`, [{ tenant_id: b.id }], 'the campaign is b\'s')
    // Updates name the path's resource of the key's tenant: a's player stays as it was.
    const patch = await h.request('PATCH', `/players/${vb.player!}`, { key: b.key, body: { email: 'moved@example.com', playerId: va.player, id: va.player, ...theirs } })
    t.equal(patch.status, 200)
    t.equal(patch.body.data.id, vb.player)
    t.same(await h.app.ctx.sql`select email from players where id = ${va.player!}`, [{ email: 'a@example.com' }], "a's player untouched")
  })
})

// Adversarial: every list endpoint's `limit`, `page`/`offset` and `cursor` edges, from the served OpenAPI
// document. Spec "Limits" (list limit max 100, export 1..1000), "Conventions" 3; src/lib/cursor.ts
// promises a forged, truncated or foreign cursor is a 400.
t.test('adversarial-pagination', async (t) => {
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
})

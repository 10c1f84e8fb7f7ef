// Adversarial: brand resolution on every brand-scoped collection (create and list), from the OpenAPI
// document. Spec "Authentication" 4; docs/tenancy.md "Brand resolution": a pinned key ignores every hint;
// a tenant-wide key takes x-brand, then ?brand=, then the body's brand, then the default.
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } })

const creates: Record<string, () => object> = {
  '/players': () => ({ external_id: `p-${randomUUID()}` }),
  '/segments': () => ({ name: 's', type: 'dynamic', rules: { all: [] } }),
  '/campaigns': () => ({ name: 'c', type: 'one_shot', channels: ['email'] }),
  '/notifications/templates': () => ({ name: 't', channel: 'in_app', body: 'b' }),
  '/gamification/levels': () => ({ name: 'l', tier: 1, min_points: 0 }),
  '/gamification/missions': () => ({ name: 'm', type: 'daily' }),
  '/gamification/badges': () => ({ name: 'b' }),
  '/gamification/currencies': () => ({ name: 'c', symbol: 'C', type: 'virtual' }),
  '/bonuses': () => ({ name: 'b', type: 'welcome', value: 1, value_type: 'fixed' }),
  '/tournaments': () => ({ name: 't' }),
  '/webhooks': () => ({ url: 'http://127.0.0.1:9/h', events: ['player.created'] }),
}
const rows = (body: any) => body.data ?? body.campaigns ?? body.templates

async function listIds(key: string, path: string, opts: { headers?: Record<string, string>; query?: Record<string, string> } = {}) {
  const res = await h.request('GET', path, { key, ...opts })
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`)
  return rows(res.body).map((r: any) => r.id as string)
}

t.test('the OpenAPI document marks every brand-scoped collection this file checks', async (t) => {
  const doc = (await h.request('GET', '/openapi.json')).body
  for (const p of Object.keys(creates)) {
    const names = (doc.paths[`/api/v1${p}`].post.parameters ?? []).map((x: any) => x.name)
    t.ok(names.includes('x-brand') && names.includes('brand'), `POST ${p} documents the brand hint`)
  }
})

t.test('a pinned key creates in its own brand whatever x-brand, ?brand= and body brand say', async (t) => {
  const tenant = await h.createTenant()
  const vip = await tenant.createBrand('vip')
  const pinned = (await tenant.createKey({ brand: 'vip' })).key
  const bad: string[] = []
  for (const [path, body] of Object.entries(creates)) {
    const res = await h.request('POST', path, { key: pinned, body: { ...body(), brand: tenant.brand.id }, headers: { 'x-brand': 'main' }, query: { brand: 'main' } })
    if (res.status !== 201) { bad.push(`${path} -> ${res.status} ${res.text.slice(0, 80)}`); continue }
    const id = res.body.data.id
    if (path === '/webhooks') { if (res.body.data.brand_id !== vip.id) bad.push(`/webhooks: pinned key made brand_id ${res.body.data.brand_id}`); continue }
    const inVip = await listIds(tenant.key, path, { headers: { 'x-brand': vip.id } })
    const inMain = await listIds(tenant.key, path, { headers: { 'x-brand': 'main' } })
    if (!inVip.includes(id) || inMain.includes(id)) bad.push(`${path}: created outside the pinned brand`)
    // and the pinned key's own list ignores hints too
    const own = await listIds(pinned, path, { headers: { 'x-brand': 'main' }, query: { brand: 'main' } })
    if (!own.includes(id)) bad.push(`${path}: pinned list followed a hint`)
    // an unknown hint is ignored for a pinned key, not a 400
    const unknown = await h.request('GET', path, { key: pinned, headers: { 'x-brand': 'no-such-brand' } })
    if (unknown.status !== 200) bad.push(`${path}: pinned key with unknown hint -> ${unknown.status}`)
  }
  t.same(bad, [])
})

t.test('a tenant-wide key: x-brand beats ?brand= beats body brand beats the default, on every collection', async (t) => {
  const tenant = await h.createTenant()
  const a = await tenant.createBrand('aaa')
  const b = await tenant.createBrand('bbb')
  const bad: string[] = []
  const where = async (path: string, id: string, data?: any) => {
    if (path === '/webhooks') return data.brand_id ?? 'tenant-wide'
    for (const [slug, brandId] of [['main', tenant.brand.id], ['aaa', a.id], ['bbb', b.id]] as [string, string][]) if ((await listIds(tenant.key, path, { query: { brand: slug } })).includes(id)) return brandId
    return 'nowhere'
  }
  for (const [path, body] of Object.entries(creates)) {
    const cases: [string, any, string][] = [
      ['header over query and body', { body: { ...body(), brand: 'main' }, headers: { 'x-brand': 'aaa' }, query: { brand: 'bbb' } }, a.id],
      ['query over body', { body: { ...body(), brand: 'aaa' }, query: { brand: 'bbb' } }, b.id],
      ['body by slug', { body: { ...body(), brand: 'bbb' } }, b.id],
      ['body by id', { body: { ...body(), brand: a.id } }, a.id],
      ['default', { body: body() }, tenant.brand.id],
    ]
    for (const [label, opts, want] of cases) {
      const res = await h.request('POST', path, { key: tenant.key, ...opts })
      if (res.status !== 201) { bad.push(`${path} ${label} -> ${res.status} ${res.text.slice(0, 80)}`); continue }
      const got = await where(path, res.body.data.id, res.body.data)
      const wanted = path === '/webhooks' && label === 'default' ? 'tenant-wide' : want // contract: brand omitted = tenant-wide
      if (got !== wanted) bad.push(`${path} ${label}: in ${got}, want ${want}`)
    }
  }
  t.same(bad, [])
})

t.test('unknown, inactive or foreign brand hints are 400 on every collection list and create', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant({ brand: 'foreign' })
  const off = await tenant.createBrand('off')
  t.equal((await h.admin('PATCH', `/brands/${off.id}`, { active: false })).status, 200)
  const bad: string[] = []
  for (const [path, body] of Object.entries(creates)) {
    for (const hint of ['nope', 'off', off.id, other.brand.id, 'foreign', randomUUID(), ' main', 'MAIN%']) {
      for (const [how, opts] of [['header', { headers: { 'x-brand': hint } }], ['query', { query: { brand: hint } }]] as const) {
        if (hint === ' main' && how === 'header') continue // HTTP strips leading whitespace of a header value
        const list = await h.request('GET', path, { key: tenant.key, ...opts })
        const create = await h.request('POST', path, { key: tenant.key, body: body(), ...opts })
        // GET /webhooks is not brand-scoped (no hint documented): it lists the tenant's endpoints
        for (const [what, res] of (path === '/webhooks' ? [['create', create]] : [['list', list], ['create', create]]) as [string, any][]) {
          if (res.status !== 400 || res.body?.code !== 'BAD_REQUEST') bad.push(`${what} ${path} ${how}=${JSON.stringify(hint)} -> ${res.status}`)
        }
      }
    }
    const bodyHint = await h.request('POST', path, { key: tenant.key, body: { ...body(), brand: other.brand.id } })
    if (bodyHint.status !== 400) bad.push(`create ${path} body brand of another tenant -> ${bodyHint.status}`)
  }
  t.same(bad, [])
})

t.test('events: a pinned key ingests into its brand whatever the hint', async (t) => {
  const tenant = await h.createTenant()
  await tenant.createBrand('vip')
  const pinned = (await tenant.createKey({ brand: 'vip', scopes: ['events:write'] })).key
  const ext = `e-${randomUUID()}`
  const res = await h.request('POST', '/events', { key: pinned, headers: { 'x-brand': 'main' }, query: { brand: 'main' }, body: { player_id: ext, event_type: 'login' } })
  t.equal(res.status, 200)
  const vip = await h.request('GET', '/players', { key: tenant.key, query: { brand: 'vip', search: ext } })
  const main = await h.request('GET', '/players', { key: tenant.key, query: { brand: 'main', search: ext } })
  t.equal(vip.body.data.length, 1, 'the player is in the pinned brand')
  t.equal(main.body.data.length, 0, 'and not in the hinted one')
})

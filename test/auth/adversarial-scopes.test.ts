// Adversarial: every keyed route in the served OpenAPI document, against every kind of key
// (none, revoked, expired, events:write, read, full). Spec "Authentication" 1, 5, 6; docs/errors.md.
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)

interface Op { method: string; path: string; scope?: string; role?: string; public: boolean }
const doc = (await h.request('GET', '/openapi.json')).body
const ops: Op[] = []
for (const [path, item] of Object.entries<any>(doc.paths)) {
  for (const [m, op] of Object.entries<any>(item)) {
    if (!op || typeof op !== 'object' || !op.responses) continue
    ops.push({ method: m.toUpperCase(), path, scope: op['x-required-scope'], role: op['x-required-role'], public: !op.security || op.security.length === 0 })
  }
}
const operator = ops.filter((o) => !o.public && !o.role)
const url = (p: string) => p.replace('{dataset}', 'players').replace(/\{[^}]+\}/g, () => randomUUID())
const call = (o: Op, key?: string) => h.request(o.method, url(o.path), { key, ...(['POST', 'PUT', 'PATCH'].includes(o.method) ? { body: {} } : {}) })

t.test('the OpenAPI document lists the operator routes this file checks', async (t) => {
  t.ok(operator.length >= 60, `${operator.length} keyed operator routes`)
  t.ok(operator.some((o) => o.method === 'POST' && o.path === '/api/v1/events' && o.scope === 'events:write'))
})

t.test('no key, a revoked key and an expired key are 401 UNAUTHORIZED on every keyed route', async (t) => {
  const tenant = await h.createTenant()
  const revoked = await tenant.createKey({ name: 'revoked' })
  const expiring = await tenant.createKey({ name: 'expiring', expires_at: new Date(Date.now() + 1500).toISOString() })
  // warm the caches: both keys were valid a moment ago
  t.equal((await h.request('GET', '/players', { key: revoked.key })).status, 200)
  t.equal((await h.request('GET', '/players', { key: expiring.key })).status, 200)
  t.equal((await h.admin('DELETE', `/keys/${revoked.id}`)).status, 200)
  await new Promise((r) => setTimeout(r, 1600))
  const bad: string[] = []
  for (const o of operator) {
    for (const [label, key] of [['none', undefined], ['revoked', revoked.key], ['expired', expiring.key]] as const) {
      const res = await call(o, key)
      if (res.status !== 401 || res.body?.code !== 'UNAUTHORIZED' || typeof res.body?.request_id !== 'string') bad.push(`${label} ${o.method} ${o.path} -> ${res.status} ${res.text.slice(0, 80)}`)
    }
  }
  t.same(bad, [], 'every keyed route refuses')
})

t.test('an events:write key is 403 FORBIDDEN everywhere but POST /events', async (t) => {
  const tenant = await h.createTenant()
  const { key } = await tenant.createKey({ scopes: ['events:write'] })
  const bad: string[] = []
  for (const o of operator) {
    const res = await call(o, key)
    const allowed = o.method === 'POST' && o.path === '/api/v1/events'
    if (allowed ? res.status === 403 || res.status === 401 : res.status !== 403 || res.body?.code !== 'FORBIDDEN') bad.push(`${o.method} ${o.path} -> ${res.status}`)
  }
  t.same(bad, [])
  const ok = await h.request('POST', '/events', { key, body: { player_id: 'p1', event_type: 'login' } })
  t.equal(ok.status, 200, 'the ingestion key ingests')
})

t.test('a read key may call exactly the read-scoped routes; every write is 403', async (t) => {
  const tenant = await h.createTenant()
  const { key } = await tenant.createKey({ scopes: ['read'] })
  const bad: string[] = []
  for (const o of operator) {
    const res = await call(o, key)
    if (o.scope === 'read') {
      if (o.method !== 'GET') bad.push(`read scope on a non-GET route ${o.method} ${o.path}`)
      if (res.status === 401 || res.status === 403 || res.status >= 500) bad.push(`${o.method} ${o.path} -> ${res.status}`)
    } else if (res.status !== 403 || res.body?.code !== 'FORBIDDEN') bad.push(`${o.method} ${o.path} -> ${res.status} (want 403)`)
  }
  t.same(bad, [])
})

t.test('a read+events:write key still cannot write anything but events', async (t) => {
  const tenant = await h.createTenant()
  const { key } = await tenant.createKey({ scopes: ['read', 'events:write'] })
  const bad: string[] = []
  for (const o of operator.filter((o) => o.method !== 'GET' && !(o.method === 'POST' && o.path === '/api/v1/events'))) {
    const res = await call(o, key)
    if (res.status !== 403) bad.push(`${o.method} ${o.path} -> ${res.status}`)
  }
  t.same(bad, [])
})

t.test('a full key is never 401/403 and never 500 on any keyed route (random ids, empty bodies)', async (t) => {
  const tenant = await h.createTenant()
  const bad: string[] = []
  for (const o of operator) {
    const res = await call(o, tenant.key)
    if (res.status === 401 || res.status === 403 || res.status >= 500) bad.push(`${o.method} ${o.path} -> ${res.status} ${res.text.slice(0, 120)}`)
    if (res.status >= 400 && (typeof res.body?.error !== 'string' || typeof res.body?.code !== 'string')) bad.push(`${o.method} ${o.path}: error shape ${res.text.slice(0, 80)}`)
  }
  t.same(bad, [])
})

t.test('an operator key on every admin route is 403; no key 401', async (t) => {
  const tenant = await h.createTenant()
  const admin = ops.filter((o) => o.role === 'super_admin')
  t.ok(admin.length >= 9)
  const bad: string[] = []
  for (const o of admin) {
    const withKey = await call(o, tenant.key)
    if (withKey.status !== 403 || withKey.body?.code !== 'FORBIDDEN') bad.push(`op key ${o.method} ${o.path} -> ${withKey.status}`)
    const none = await call(o)
    if (none.status !== 401) bad.push(`no key ${o.method} ${o.path} -> ${none.status}`)
    const wrong = await call(o, 'admin-wrong')
    if (wrong.status !== 401) bad.push(`wrong key ${o.method} ${o.path} -> ${wrong.status}`)
  }
  t.same(bad, [])
})

t.test('keys from Bearer and api_key are revoked at once too', async (t) => {
  const tenant = await h.createTenant()
  const k = await tenant.createKey()
  t.equal((await h.request('GET', '/players', { headers: { authorization: `Bearer ${k.key}` } })).status, 200)
  t.equal((await h.request('POST', '/events', { query: { api_key: k.key }, body: { player_id: 'p', event_type: 'login' } })).status, 200)
  await h.admin('DELETE', `/keys/${k.id}`)
  t.equal((await h.request('GET', '/players', { headers: { authorization: `Bearer ${k.key}` } })).status, 401)
  t.equal((await h.request('POST', '/events', { query: { api_key: k.key }, body: { player_id: 'p', event_type: 'login' } })).status, 401)
  t.equal((await h.request('GET', '/players', { headers: { authorization: `bearer ${k.key}` } })).status, 401)
})

t.test('the key is shown once: never in the listing, nor in the audit log', async (t) => {
  const tenant = await h.createTenant()
  const created = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'once', scopes: ['read'] })
  t.equal(created.status, 201)
  const key = created.body.data.key as string
  t.match(key, /^rsp_[0-9A-Za-z]{40}$/)
  for (const path of [`/tenants/${tenant.id}/keys`, `/audit?tenant_id=${tenant.id}`, '/tenants']) {
    const res = await h.admin('GET', path)
    t.equal(res.status, 200, path)
    t.notOk(res.text.includes(key.slice(12)), `${path} never shows the secret part of the key`)
  }
})

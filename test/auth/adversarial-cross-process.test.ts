// Adversarial: a second API process with warm caches. docs/tenancy.md "Caching, and why revocation is
// still immediate": every change publishes on the bus and the admin request answers once every process
// has acknowledged; expiry is checked on every request against the cached entry. Needs DATABASE_URL.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { spawnServer } from '../helpers/processes.ts'

if (!process.env.DATABASE_URL) {
  t.pass('skipped: needs DATABASE_URL (several API processes share one PostgreSQL)')
} else {
  const h = await startHarness(t)
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-adv-second-'))
  const { proc: child, port, exited } = await spawnServer({ DATA_DIR: dataDir, ADMIN_KEY: h.adminKey })
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
    rmSync(dataDir, { recursive: true, force: true })
  })
  const other = async (method: string, path: string, opts: { headers?: Record<string, string>; body?: unknown } = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}/api/v1${path}`, {
      method, headers: { ...(opts.body ? { 'content-type': 'application/json' } : {}), ...opts.headers }, body: opts.body ? JSON.stringify(opts.body) : undefined,
    })
    const text = await res.text()
    return { status: res.status, body: text.startsWith('{') ? JSON.parse(text) : text }
  }
  const ev = { player_id: 'p1', event_type: 'login' }

  t.test('a revoked key fails at once in the other process through every key source and route family', async (t) => {
    const tenant = await h.createTenant()
    const { id, key } = await tenant.createKey()
    const sources: { headers: Record<string, string> }[] = [{ headers: { 'x-api-key': key } }, { headers: { authorization: `Bearer ${key}` } }]
    for (const s of sources) {
      t.equal((await other('GET', '/players', s)).status, 200, 'warm: read')
      t.equal((await other('POST', '/events', { ...s, body: ev })).status, 200, 'warm: ingest')
    }
    t.equal((await other('POST', `/events?api_key=${key}`, { body: ev })).status, 200, 'warm: ingest by query key')
    t.equal((await h.admin('DELETE', `/keys/${id}`)).status, 200)
    for (const s of sources) {
      t.equal((await other('GET', '/players', s)).status, 401)
      t.equal((await other('POST', '/events', { ...s, body: ev })).status, 401)
      t.equal((await other('POST', '/bonuses', { ...s, body: { name: 'b', type: 'welcome', value: 1, value_type: 'f' } })).status, 401)
      t.equal((await other('GET', '/analytics/summary', s)).status, 401)
    }
    t.equal((await other('POST', `/events?api_key=${key}`, { body: ev })).status, 401, 'query key revoked too')
  })

  t.test('a key expiring while cached in the other process fails there at its expiry', async (t) => {
    const tenant = await h.createTenant()
    const { key } = await tenant.createKey({ expires_at: new Date(Date.now() + 1500).toISOString(), scopes: ['events:write'] })
    t.equal((await other('POST', '/events', { headers: { 'x-api-key': key }, body: ev })).status, 200)
    await new Promise((r) => setTimeout(r, 1700))
    const res = await other('POST', '/events', { headers: { 'x-api-key': key }, body: ev })
    t.equal(res.status, 401)
    t.equal(res.body.code, 'UNAUTHORIZED')
  })

  t.test('brand changes reach the other process before the admin call answers', async (t) => {
    const tenant = await h.createTenant()
    const vip = await tenant.createBrand('vip')
    const hdr = (b?: string) => ({ headers: { 'x-api-key': tenant.key, ...(b ? { 'x-brand': b } : {}) } })
    t.equal((await other('GET', '/players', hdr('vip'))).status, 200, 'warm: vip is a valid hint there')
    // a new brand is a valid hint there at once
    await tenant.createBrand('fresh')
    t.equal((await other('GET', '/players', hdr('fresh'))).status, 200, 'a brand made in one process is known in the other')
    // deactivation
    t.equal((await h.admin('PATCH', `/brands/${vip.id}`, { active: false })).status, 200)
    t.equal((await other('GET', '/players', hdr('vip'))).status, 400, 'inactive brand refused there at once')
    // moving the default
    const fresh = (await h.admin('GET', `/tenants`)).status // keep the admin connection warm
    t.equal(fresh, 200)
    const created = await other('POST', '/players', { ...hdr(), body: { external_id: 'before-move' } })
    t.equal(created.status, 201)
    const freshBrand = await h.request('GET', '/players', { key: tenant.key, query: { brand: 'fresh' } })
    t.equal(freshBrand.status, 200)
    const brands = await h.app.ctx.sql`select id from brands where tenant_id = ${tenant.id} and slug = 'fresh'`
    t.equal((await h.admin('PATCH', `/brands/${brands[0]!.id}`, { is_default: true })).status, 200)
    const after = await other('POST', '/players', { ...hdr(), body: { external_id: 'after-move' } })
    t.equal(after.status, 201)
    const inFresh = await h.request('GET', '/players', { key: tenant.key, query: { brand: 'fresh', search: 'after-move' } })
    t.equal(inFresh.body.data.length, 1, 'the other process used the new default at once')
  })

  t.test('an event mapping set through one process applies to the next request in the other', async (t) => {
    const tenant = await h.createTenant()
    const hdr = { headers: { 'x-api-key': tenant.key } }
    const first = await other('POST', '/events', { ...hdr, body: { player_id: 'm1', event_type: 'test_x' } })
    t.equal(first.body.rejected, 0, 'warm: no mapping')
    t.equal((await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'test_*', action: 'reject' }], default_action: 'accept' })).status, 200)
    const second = await other('POST', '/events', { ...hdr, body: { player_id: 'm1', event_type: 'test_x' } })
    t.equal(second.status, 200)
    t.equal(second.body.rejected, 1, 'the mapping took effect there for the next request')
  })

  t.test('a key revoked through one process fails on its next use in the other, and the revocation answers once both have it', async (t) => {
    const tenant = await h.createTenant()
    const { id, key } = await tenant.createKey()
    const admin = () => other('GET', '/admin/tenants', { headers: { 'x-api-key': key } })
    // On /admin/* a live operator key is 403 and an unknown or revoked one 401: that tells them apart.
    t.equal((await admin()).status, 403, 'the other process knows and caches the key')
    const started = Date.now()
    t.equal((await h.admin('DELETE', `/keys/${id}`)).status, 200)
    // It answers once both processes have acknowledged, well before the 5 s give-up.
    t.ok(Date.now() - started < 2500, `revocation acknowledged by every process in ${Date.now() - started} ms`)
    t.equal((await admin()).status, 401, 'revoked there too, at once')
  })

  t.test('SIGTERM: the process that ingested, was revoked against and remapped exits within 10 s (docs/http.md, Shutdown)', async (t) => {
    const started = Date.now()
    child.kill('SIGTERM')
    const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 10_500))])
    console.error(`child exit ${String(code)} after ${Date.now() - started} ms`)
    t.not(code, 'hung', `exited after ${Date.now() - started} ms`)
  })
}

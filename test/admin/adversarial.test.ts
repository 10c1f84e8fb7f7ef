// Adversarial: the admin API (tenants, brands, API keys) and the admin CLI, as ../shared/docs/contract.md
// "Admin API" fixes them, with docs/tenancy.md and docs/errors.md. What the 'admin' subtest at the end (the
// routes' plain behaviour, under this harness to save a process and a harness start), cli.test.ts and
// test/auth/* already prove is not repeated here: this file goes after the edges (auth spellings, hostile
// values with real ids, concurrency, shown-once, the CLI's own input checks).
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { generateApiKey, hashApiKey } from '../../src/auth/keys.ts'
import { seedEmbeddedPostgres, startHarness, type TestResponse } from '../helpers/harness.ts'
import { probeRoutes } from '../helpers/probe-routes.ts'
import { runCli, type CliResult } from '../helpers/processes.ts'
import { rawRequest, parseResponses } from '../helpers/raw-http.ts'

const h = await startHarness(t, { extraRoutes: probeRoutes })

t.test('adversarial', async (t) => {
  const NO_CLICKHOUSE = 'http://127.0.0.1:9'

  /** docs/errors.md: `{ error, code, details?, request_id }` and an x-request-id header. */
  function errorShape(res: TestResponse, status: number, code: string): string | undefined {
    const b = res.body as { error?: unknown; code?: unknown; request_id?: unknown } | undefined
    if (res.status !== status) return `status ${res.status} (want ${status}) ${res.text.slice(0, 120)}`
    if (typeof b?.error !== 'string' || b.code !== code || typeof b.request_id !== 'string') return `body ${res.text.slice(0, 120)}`
    if (res.headers.get('x-request-id') !== b.request_id) return 'x-request-id header differs from request_id'
    return undefined
  }
  const whoami = (key: string) => h.request('GET', '/_probe/whoami', { key })
  const keysOf = async (tenantId: string) => (await h.admin('GET', `/tenants/${tenantId}/keys`)).body.data as { id: string; name: string; prefix: string; revoked_at: string | null }[]

  // ---------------------------------------------------------------------------------------------------
  // Admin authentication. Contract: "Authenticated with ADMIN_KEY through the same three means as operator
  // keys (x-api-key, Bearer, api_key). An operator key on these paths gets 403 FORBIDDEN; no key or a wrong
  // key, 401."
  // ---------------------------------------------------------------------------------------------------

  t.test('admin auth: the Bearer scheme in any letter case is the admin key (RFC 7235: schemes are case-insensitive)', async (t) => {
    const bad: string[] = []
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      const res = await h.request('GET', '/admin/tenants', { headers: { authorization: `${scheme} ${h.adminKey}` } })
      if (res.status !== 200) bad.push(`${scheme} -> ${res.status}`)
    }
    // RFC 6750: credentials = "Bearer" 1*SP b64token
    const twoSpaces = await h.request('GET', '/admin/tenants', { headers: { authorization: `Bearer  ${h.adminKey}` } })
    if (twoSpaces.status !== 200) bad.push(`two spaces -> ${twoSpaces.status}`)
    t.same(bad, [])
  })

  t.test('admin auth: header names in any case (raw HTTP), as HTTP header names are case-insensitive', async (t) => {
    const bad: string[] = []
    for (const line of [`X-API-KEY: ${h.adminKey}`, `X-Api-Key: ${h.adminKey}`, `AUTHORIZATION: Bearer ${h.adminKey}`, `Authorization: BEARER ${h.adminKey}`]) {
      const raw = await rawRequest(h.app.port, [`GET /api/v1/admin/tenants HTTP/1.1\r\nHost: 127.0.0.1\r\n${line}\r\nConnection: close\r\n\r\n`], { responses: 1 })
      if (raw.statuses[0] !== 200) bad.push(`${line.split(':')[0]} -> ${raw.statuses[0]}`)
    }
    t.same(bad, [])
  })

  t.test('admin auth: anything but the exact admin key through a documented means is 401 UNAUTHORIZED', async (t) => {
    const k = h.adminKey
    const cases: [string, Record<string, string>, Record<string, string>?][] = [
      ['key + one char', { 'x-api-key': `${k}x` }],
      ['key minus its last char', { 'x-api-key': k.slice(0, -1) }],
      ['key upper-cased', { 'x-api-key': k.toUpperCase() }],
      ['key as Basic credentials', { authorization: `Basic ${Buffer.from(`admin:${k}`).toString('base64')}` }],
      ['key after Basic', { authorization: `Basic ${k}` }],
      ['key after Token', { authorization: `Token ${k}` }],
      ['bare key in Authorization', { authorization: k }],
      ['Bearer with no space', { authorization: `Bearer${k}` }],
      ['empty Bearer', { authorization: 'Bearer ' }],
      // spec Authentication 3: x-api-key is tried first; a wrong one is not rescued by a right Bearer
      ['wrong x-api-key, right Bearer', { 'x-api-key': 'admin-wrong-0000000000000000', authorization: `Bearer ${k}` }],
      ['wrong Bearer, right api_key', { authorization: 'Bearer admin-wrong-0000000000000000' }, { api_key: k }],
      ['a 10 KB key', { 'x-api-key': 'a'.repeat(10_000) }],
      ['an rsp_ key nobody issued', { 'x-api-key': generateApiKey() }],
    ]
    const bad: string[] = []
    for (const [label, headers, query] of cases) {
      const res = await h.request('GET', '/admin/tenants', { headers, query })
      const why = errorShape(res, 401, 'UNAUTHORIZED')
      if (why) bad.push(`${label}: ${why}`)
    }
    t.same(bad, [])
  })

  t.test('admin auth: revoked and expired operator keys are 401 on admin routes, a live one 403; none ever gets in', async (t) => {
    const tenant = await h.createTenant()
    const revoked = await tenant.createKey({ name: 'revoked' })
    const expiresAt = Date.now() + 2500
    const expiring = await tenant.createKey({ name: 'expiring', expires_at: new Date(expiresAt).toISOString() })
    t.equal((await whoami(revoked.key)).status, 200, 'warm the key cache')
    t.equal((await whoami(expiring.key)).status, 200)
    t.equal((await h.admin('DELETE', `/keys/${revoked.id}`)).status, 200)
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now() + 150)))
    const bad: string[] = []
    for (const [label, key] of [['revoked', revoked.key], ['expired', expiring.key]] as const) {
      for (const how of ['x-api-key', 'bearer', 'query'] as const) {
        const opts = how === 'x-api-key' ? { key } : how === 'bearer' ? { headers: { authorization: `Bearer ${key}` } } : { query: { api_key: key } }
        const res = await h.request('POST', `/admin/tenants/${tenant.id}/keys`, { ...opts, body: { name: 'escalate' } })
        // docs/errors.md: 401 for a key "missing, unknown, revoked or expired"
        const why = errorShape(res, 401, 'UNAUTHORIZED')
        if (why) bad.push(`${label} via ${how}: ${why}`)
      }
    }
    const live = await h.request('GET', '/admin/tenants', { headers: { authorization: `bearer ${tenant.key}` } })
    const why = errorShape(live, 403, 'FORBIDDEN')
    if (why) bad.push(`live operator key via lower-case bearer: ${why}`)
    t.same(bad, [])
    t.equal((await keysOf(tenant.id)).filter((k) => k.name === 'escalate').length, 0, 'no key was issued')
  })

  t.test('with ADMIN_KEY unset the admin API answers 401 to everything, operator keys included', async (t) => {
    // contract, Configuration: ADMIN_KEY "unset: admin API answers 401"
    // chDB allows one data directory per process: this second server gets an unreachable ClickHouse instead
    // (it starts anyway: docs, "unreachable at start"), which the admin API does not use.
    const h2 = await startHarness(t, { env: { ADMIN_KEY: '', CLICKHOUSE_URL: NO_CLICKHOUSE } })
    // an operator key of this installation, made straight in its database (there is no admin API to make one)
    const [tenant] = await h2.app.ctx.sql<{ id: string }[]>`insert into tenants (name, slug) values ('noadmin', ${`noadmin-${randomUUID()}`}) returning id`
    await h2.app.ctx.sql`insert into brands (tenant_id, name, slug, is_default) values (${tenant!.id}, 'main', 'main', true)`
    const opKey = generateApiKey()
    await h2.app.ctx.sql`insert into api_keys (tenant_id, name, key_hash, prefix) values (${tenant!.id}, 'op', ${hashApiKey(opKey)}, ${opKey.slice(0, 12)})`
    t.equal((await h2.request('GET', '/players', { key: opKey })).status, 200, 'sanity: the operator key works')
    const bad: string[] = []
    for (const key of [undefined, h.adminKey, h2.adminKey, opKey, 'undefined', 'null', '', 'admin']) {
      for (const [method, path, body] of [['GET', '/admin/tenants'], ['POST', '/admin/tenants', { name: 'x' }], ['GET', '/admin/audit'], ['POST', `/admin/tenants/${tenant!.id}/keys`, { name: 'x' }]] as [string, string, unknown?][]) {
        const res = await h2.request(method, path, { headers: key === undefined ? {} : { 'x-api-key': key }, body })
        const why = errorShape(res, 401, 'UNAUTHORIZED')
        if (why) bad.push(`${method} ${path} with ${JSON.stringify(key?.slice(0, 12))}: ${why}`)
      }
    }
    t.same(bad, [])
  })

  // ---------------------------------------------------------------------------------------------------
  // Keys: shown once, stored as SHA-256, pinned, rotated (spec Authentication 2: "rotation is revoke plus
  // issue a new key. Revocation is immediate.")
  // ---------------------------------------------------------------------------------------------------

  t.test('the created key carries every contract field, and its key appears in no later admin response', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'fields', scopes: ['events:write'], brand: tenant.brand.slug, expires_at: '2099-01-01T02:00:00+02:00' })
    t.equal(res.status, 201)
    const d = res.body.data
    for (const f of ['id', 'name', 'key', 'prefix', 'scopes', 'brand_id', 'created_at', 'expires_at']) t.ok(f in d, `create response has ${f}`)
    t.notOk('key_hash' in d, 'never the hash')
    t.equal(Date.parse(d.expires_at), Date.parse('2099-01-01T00:00:00Z'), 'expires_at is the instant given, whatever its offset')
    t.equal(d.prefix, d.key.slice(0, 12), 'docs/tenancy.md: prefix is the first 12 characters')
    const secretPart = (d.key as string).slice(12)
    // every admin read there is, including the audit trail
    const reads = ['/tenants', `/tenants/${tenant.id}/keys`, `/brands/${tenant.brand.id}/event-mapping`, `/audit?tenant_id=${tenant.id}&limit=200`, '/audit?limit=200']
    for (const path of reads) {
      const r = await h.admin('GET', path)
      t.equal(r.status, 200, path)
      t.notOk(r.text.includes(secretPart), `${path} does not carry the key`)
      t.notOk(r.text.includes(hashApiKey(d.key)), `${path} does not carry its SHA-256 either`)
    }
    const listed = (await keysOf(tenant.id)).find((k) => k.id === d.id)
    t.match(listed, { id: d.id, prefix: d.prefix, revoked_at: null })
    t.notOk(listed && 'key' in listed, 'listing: ApiKey without key')
  })

  t.test('rotation (issue, then revoke the old one) takes effect at once; both stay listed, the old one revoked', async (t) => {
    const tenant = await h.createTenant()
    const old = await tenant.createKey({ name: 'ci', scopes: ['read'] })
    t.equal((await whoami(old.key)).status, 200, 'the old key works (and is now cached)')
    const fresh = await tenant.createKey({ name: 'ci', scopes: ['read'] })
    t.not(fresh.key, old.key)
    t.equal((await whoami(fresh.key)).status, 200, 'the new key works on its first use')
    const revoked = await h.admin('DELETE', `/keys/${old.id}`)
    t.equal(revoked.status, 200)
    t.same(Object.keys(revoked.body.data).sort(), ['id', 'revoked_at'], 'DELETE answers { data: { id, revoked_at } }')
    const after = await whoami(old.key)
    t.equal(errorShape(after, 401, 'UNAUTHORIZED'), undefined, 'the old key fails on its very next use')
    t.equal((await whoami(fresh.key)).status, 200, 'the new one keeps working')
    const list = await keysOf(tenant.id)
    t.equal(list.find((k) => k.id === old.id)?.revoked_at, revoked.body.data.revoked_at)
    t.equal(list.find((k) => k.id === fresh.id)?.revoked_at, null)
  })

  t.test("a key cannot be pinned to another tenant's brand, by id or by slug, and nothing is issued", async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant({ brand: `foreign-${Date.now()}` })
    const before = (await keysOf(tenant.id)).length
    const bad: string[] = []
    for (const brand of [other.brand.id, other.brand.id.toUpperCase(), other.brand.slug]) {
      const res = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'cross', brand })
      // contract: brand is "id or slug" of the tenant's brands; errors.md: an unknown brand is 400
      const why = errorShape(res, 400, 'BAD_REQUEST')
      if (why) bad.push(`${brand}: ${why}`)
    }
    t.same(bad, [])
    t.equal((await keysOf(tenant.id)).length, before)
  })

  t.test('keys: unknown tenant is 404 and issues nothing; keys and revocations are per tenant', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant()
    const missing = randomUUID()
    const res = await h.admin('POST', `/tenants/${missing}/keys`, { name: 'ghost' })
    t.equal(errorShape(res, 404, 'NOT_FOUND'), undefined)
    t.equal((await h.app.ctx.sql`select 1 from api_keys where tenant_id = ${missing}`).length, 0)
    const bKey = await b.createKey({ name: 'b-only' })
    t.notOk((await keysOf(a.id)).some((k) => k.id === bKey.id), "a tenant's listing never shows another's key")
    t.equal((await h.admin('DELETE', `/keys/${bKey.id}`)).status, 200)
    t.equal((await whoami(a.key)).status, 200, "revoking b's key leaves a's keys working")
    t.equal((await whoami(b.key)).status, 200, "and b's other keys")
  })

  t.test('the key name is optional: the contract marks only the tenant name and the brand name and slug required', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.admin('POST', `/tenants/${tenant.id}/keys`, {})
    t.equal(res.status, 201, res.text)
    t.match(res.body?.data?.key, /^rsp_/)
  })

  t.test('a brand whose valid slug looks like a UUID can still be named by that slug when pinning a key', async (t) => {
    const tenant = await h.createTenant()
    const slug = '11111111-1111-4111-8111-111111111111' // matches the contract's slug pattern
    const brand = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'uuid-looking', slug })
    t.equal(brand.status, 201, 'the slug is accepted')
    const key = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'by-slug', brand: slug })
    t.equal(key.status, 201, key.text)
    t.equal(key.body?.data?.brand_id, brand.body.data.id, 'pinned to the brand of that slug')
  })

  t.test('client-chosen ids, keys and timestamps in a create body are never honoured', async (t) => {
    const tenant = await h.createTenant()
    const chosen = { id: randomUUID(), key: generateApiKey(), prefix: 'rsp_CHOSEN00', key_hash: hashApiKey('x'), revoked_at: '2001-01-01T00:00:00Z', created_at: '2001-01-01T00:00:00Z', expires: null }
    const res = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'chosen', ...chosen })
    t.ok(res.status === 201 || res.status === 400, `${res.status}`)
    if (res.status === 201) {
      const d = res.body.data
      t.not(d.id, chosen.id)
      t.not(d.key, chosen.key, 'the key is generated, never the caller\'s')
      t.equal(d.prefix, d.key.slice(0, 12))
      t.not(d.created_at, chosen.created_at)
      t.equal((await keysOf(tenant.id)).find((k) => k.id === d.id)?.revoked_at, null, 'not born revoked')
      t.equal((await h.request('GET', '/players', { key: chosen.key })).status, 401, 'the chosen key is no key')
      t.equal((await h.request('GET', '/players', { key: d.key })).status, 200)
    }
    const brand = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'b', slug: 'chosen-b', id: chosen.id, is_default: true, active: false })
    t.ok(brand.status === 201 || brand.status === 400, `${brand.status}`)
    if (brand.status === 201) t.match(brand.body.data, { is_default: false, active: true }, 'the second brand is not the default, and starts active')
    if (brand.status === 201) t.not(brand.body.data.id, chosen.id)
  })

  t.test('a body naming tenantId or brandId never redirects an admin write away from the tenant or brand in the path', async (t) => {
    const a = await h.createTenant()
    const b = await h.createTenant({ brand: `victim-${Date.now()}` })
    const key = await h.admin('POST', `/tenants/${a.id}/keys`, { name: 'redirected-key', tenantId: b.id })
    const brand = await h.admin('POST', `/tenants/${a.id}/brands`, { name: 'redirected-brand', slug: 'redirected-brand', tenantId: b.id })
    const patch = await h.admin('PATCH', `/brands/${a.brand.id}`, { name: 'redirected-rename', brandId: b.brand.id })
    // contract: POST /admin/tenants/{tenantId}/keys issues a key of {tenantId}; PATCH /admin/brands/{brandId} changes {brandId}
    t.notOk((await keysOf(b.id)).some((k) => k.name === 'redirected-key'), `tenant b got no key (answer ${key.status})`)
    const [made] = await h.app.ctx.sql<{ tenant_id: string }[]>`select tenant_id from brands where slug = 'redirected-brand' and tenant_id in (${a.id}, ${b.id})`
    t.ok(!made || made.tenant_id === a.id, `the brand, if made, is tenant a's (answer ${brand.status})`)
    const [victim] = await h.app.ctx.sql<{ name: string }[]>`select name from brands where id = ${b.brand.id}`
    t.not(victim?.name, 'redirected-rename', `tenant b's brand is not renamed (answer ${patch.status} ${JSON.stringify(patch.body?.data?.id)})`)
  })

  t.test('a key pinned to a deactivated brand never acts on another brand; reactivating restores it at once', async (t) => {
    const tenant = await h.createTenant()
    const vip = await tenant.createBrand('vip')
    const pinned = await tenant.createKey({ brand: 'vip' })
    t.equal((await whoami(pinned.key)).body.brand.id, vip.id, 'warm: pinned to vip')
    t.equal((await h.admin('PATCH', `/brands/${vip.id}`, { active: false })).status, 200)
    // docs/tenancy.md: "a pinned key always acts on its brand and ignores hints"
    const bad: string[] = []
    for (const [label, res] of [
      ['whoami', await whoami(pinned.key)],
      ['whoami hinting main', await h.request('GET', '/_probe/whoami', { key: pinned.key, headers: { 'x-brand': 'main' } })],
      ['create', await h.request('POST', '/_probe/echo', { key: pinned.key, body: { n: 1, brand: 'main' } })],
      ['players list', await h.request('GET', '/players', { key: pinned.key })],
    ] as [string, TestResponse][]) {
      if (res.status < 400 || res.status >= 500) bad.push(`${label} -> ${res.status} ${res.text.slice(0, 100)}`)
      else if (typeof res.body?.code !== 'string') bad.push(`${label}: no error shape`)
    }
    t.same(bad, [], 'refused in the error shape, never served from another brand')
    t.equal((await h.admin('PATCH', `/brands/${vip.id}`, { active: true })).status, 200)
    const back = await whoami(pinned.key)
    t.equal(back.status, 200)
    t.equal(back.body.brand.id, vip.id)
  })

  // ---------------------------------------------------------------------------------------------------
  // Concurrency. Contract: "the tenant's first brand is its default"; "is_default (true moves the default
  // here)"; slugs unique in the tenant (so distinct slugs never collide). docs/errors.md: never a 500 for this.
  // ---------------------------------------------------------------------------------------------------

  t.test('concurrent first brands of a brandless tenant: every distinct slug is created and exactly one is the default', async (t) => {
    const tenant = await h.createTenant({ brand: null })
    const slugs = ['a1', 'b2', 'c3', 'd4', 'e5', 'f6']
    const results = await Promise.all(slugs.map((slug) => h.admin('POST', `/tenants/${tenant.id}/brands`, { name: slug, slug })))
    t.same(results.map((r) => r.status), slugs.map(() => 201), results.filter((r) => r.status !== 201).map((r) => r.text).join(' | '))
    const [row] = await h.app.ctx.sql<{ n: number; d: number }[]>`select count(*)::int as n, count(*) filter (where is_default)::int as d from brands where tenant_id = ${tenant.id}`
    t.equal(row?.n, slugs.length, 'every brand exists')
    t.equal(row?.d, 1, 'exactly one default')
    t.equal(results.filter((r) => r.body?.data?.is_default === true).length, 1, 'exactly one answer says is_default')
  })

  t.test('concurrent default moves: every PATCH answers 200 (never 500) and exactly one brand ends the default', async (t) => {
    const tenant = await h.createTenant()
    const brands = await Promise.all(['m1', 'm2', 'm3', 'm4', 'm5'].map((s) => tenant.createBrand(s)))
    const bad: string[] = []
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(brands.map((b) => h.admin('PATCH', `/brands/${b.id}`, { is_default: true })))
      for (const r of results) if (r.status !== 200) bad.push(`round ${round}: ${r.status} ${r.text.slice(0, 100)}`)
      const [row] = await h.app.ctx.sql<{ d: number }[]>`select count(*) filter (where is_default)::int as d from brands where tenant_id = ${tenant.id}`
      if (row?.d !== 1) bad.push(`round ${round}: ${row?.d} defaults`)
    }
    t.same(bad, [])
  })

  t.test('concurrent tenants with one name all get created, each with its own slug', async (t) => {
    const name = `Same Name ${randomUUID().slice(0, 8)}`
    const results = await Promise.all(Array.from({ length: 6 }, () => h.admin('POST', '/tenants', { name })))
    t.same(results.map((r) => r.status), results.map(() => 201), results.filter((r) => r.status !== 201).map((r) => r.text).join(' | '))
    t.equal(new Set(results.map((r) => r.body?.data?.slug)).size, 6, 'distinct slugs')
  })

  t.test('concurrent revocations of one key all answer 200 with the one revocation time', async (t) => {
    const tenant = await h.createTenant()
    const k = await tenant.createKey()
    const results = await Promise.all(Array.from({ length: 6 }, () => h.admin('DELETE', `/keys/${k.id}`)))
    t.same(results.map((r) => r.status), results.map(() => 200))
    t.equal(new Set(results.map((r) => r.body?.data?.revoked_at)).size, 1)
    t.equal((await whoami(k.key)).status, 401)
  })

  // ---------------------------------------------------------------------------------------------------
  // Error shapes on the admin routes (docs/errors.md: every error in the shape, never a 500 for bad input).
  // ---------------------------------------------------------------------------------------------------

  t.test('hostile values, one field at a time, with REAL tenant and brand ids: never a 500, errors in the shape', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant({ brand: `elsewhere-${Date.now()}` })
    const spare = await tenant.createBrand('spare')
    const values: unknown[] = [
      '\u0000', 'a\u0000b', '', ' ', '\ud800', '😀'.repeat(300), 'x'.repeat(70_000), 1e308, -1, 0, true, false, null, [], {}, [null], ['read', 'read'], ['READ'], ['events:write', 'admin'],
      '0001-01-01T00:00:00Z', '294277-01-01T00:00:00Z', '2030-02-30T00:00:00Z', '2030-01-01T24:00:00Z', '2030-01-01T00:00:00+25:00', '9999-12-31T23:59:59.999999999Z',
      randomUUID(), '00000000-0000-0000-0000-000000000000', other.brand.id, other.brand.slug, spare.id.toUpperCase(), "main' or '1'='1", '../main', { $ne: null },
      { rules: [] }, [{ match: '*'.repeat(9) }], [{ match: 'a', action: 'reject', type: 'deposit' }], [{ match: '(', type: '[' }], [{ match: 'x', fields: { amount: '..' } }],
      // hostile values one level down, where the mapping is stored as given
      ...['\u0000', '\ud800', '\udfff\ud800', '\\', '%', '_', '.*', '$1', 'a'.repeat(129)].flatMap((v) => [[{ match: v, type: 'deposit' }], [{ match: 'm', type: v }], [{ match: 'm', type: 'deposit', fields: { amount: v } }]]),
    ]
    const routes: [string, string, Record<string, unknown>, string[]][] = [
      ['POST', '/admin/tenants', { name: 'hostile' }, ['name', 'slug']],
      ['POST', `/admin/tenants/${tenant.id}/brands`, { name: 'n', slug: 'ok' }, ['name', 'slug']],
      ['PATCH', `/admin/brands/${spare.id}`, {}, ['name', 'is_default', 'active']],
      ['POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k' }, ['name', 'scopes', 'brand', 'expires_at']],
      ['PUT', `/admin/brands/${spare.id}/event-mapping`, { rules: [] }, ['rules', 'default_action']],
    ]
    const bad: string[] = []
    let served = 0
    for (const [method, path, base, fields] of routes) {
      for (const field of fields) {
        for (const v of values) {
          const body = { ...base, [field]: v }
          if (path.endsWith('/brands') && field !== 'slug') body.slug = `s${++served}`
          const res = await h.request(method, path, { key: h.adminKey, body })
          if (res.status >= 500) bad.push(`${method} ${path} ${field}=${JSON.stringify(v).slice(0, 30)} -> ${res.status} ${res.text.slice(0, 100)}`)
          else if (res.status >= 400 && (typeof res.body?.code !== 'string' || typeof res.body?.request_id !== 'string')) bad.push(`${method} ${path} ${field}: no error shape`)
          else if (res.status < 300 && res.body?.data?.brand_id === other.brand.id) bad.push(`key pinned to another tenant's brand: ${JSON.stringify(res.body.data)}`)
        }
      }
    }
    t.same(bad, [])
    // and a 400 for a refused value says so (errors.md: VALUE_REJECTED, or a validation error)
    const nul = await h.admin('POST', '/tenants', { name: 'a\u0000b' })
    t.equal(errorShape(nul, 400, 'BAD_REQUEST'), undefined)
  })

  t.test('bad ids in every admin path are 404 NOT_FOUND in the error shape', async (t) => {
    const ids = ['not-a-uuid', '00000000-0000-0000-0000-00000000000g', `${randomUUID()}x`, `{${randomUUID()}}`, '%00', '%ZZ', 'x'.repeat(5000),
      "1'%20or%20'1'%3D'1", '..%2F..%2Ftenants', randomUUID().replace(/-/g, ''), ' ', 'null', randomUUID()]
    const routes: [string, (id: string) => string, unknown?][] = [
      ['POST', (id) => `/admin/tenants/${id}/brands`, { name: 'n', slug: 'n' }],
      ['POST', (id) => `/admin/tenants/${id}/keys`, { name: 'n' }],
      ['GET', (id) => `/admin/tenants/${id}/keys`],
      ['PATCH', (id) => `/admin/brands/${id}`, { name: 'n' }],
      ['DELETE', (id) => `/admin/keys/${id}`],
      ['PUT', (id) => `/admin/brands/${id}/event-mapping`, { rules: [] }],
      ['GET', (id) => `/admin/brands/${id}/event-mapping`],
    ]
    const bad: string[] = []
    for (const [method, path, body] of routes) {
      for (const id of ids) {
        const res = await h.request(method, path(id === ' ' ? '%20' : id), { key: h.adminKey, body })
        const why = errorShape(res, 404, 'NOT_FOUND')
        if (why) bad.push(`${method} ${path(id.slice(0, 20))}: ${why}`)
      }
    }
    t.same(bad, [])
  })

  t.test('admin paths the contract does not define (no tenant or brand deletion, no key rotation route) are 404', async (t) => {
    const tenant = await h.createTenant()
    const key = await tenant.createKey()
    const bad: string[] = []
    for (const [method, path] of [
      ['DELETE', `/admin/tenants/${tenant.id}`], ['DELETE', `/admin/brands/${tenant.brand.id}`], ['PATCH', `/admin/tenants/${tenant.id}`],
      ['POST', `/admin/keys/${key.id}/rotate`], ['PATCH', `/admin/keys/${key.id}`], ['GET', `/admin/keys/${key.id}`], ['GET', '/admin/keys'], ['GET', '/admin'],
    ]) {
      const res = await h.request(method!, path!, { key: h.adminKey, ...(method === 'GET' || method === 'DELETE' ? {} : { body: {} }) })
      const why = errorShape(res, 404, 'NOT_FOUND')
      if (why) bad.push(`${method} ${path}: ${why}`)
    }
    t.same(bad, [])
    t.equal((await whoami(key.key)).status, 200, 'the key is untouched')
    t.equal((await whoami(tenant.key)).status, 200)
  })

  t.test('bodies: the README curl example (form content-type, JSON body) works; a real form body is 400; oversized is 413', async (t) => {
    // README: curl -X POST .../admin/tenants -H "x-api-key: $ADMIN_KEY" -d '{"name":"Acme Casino"}' (curl -d sends a form content-type)
    const name = `Curl ${randomUUID().slice(0, 6)}`
    const curl = await h.request('POST', '/admin/tenants', { key: h.adminKey, rawBody: JSON.stringify({ name }), headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    t.equal(curl.status, 201, curl.text)
    t.equal(curl.body?.data?.name, name)
    const form = await h.request('POST', '/admin/tenants', { key: h.adminKey, rawBody: 'name=Acme&slug=acme', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    t.equal(errorShape(form, 400, 'BAD_REQUEST'), undefined, 'a form body is not JSON')
    const none = await h.request('POST', '/admin/tenants', { key: h.adminKey })
    t.equal(errorShape(none, 400, 'BAD_REQUEST'), undefined, 'no body at all')
    // docs/errors.md: 413 PAYLOAD_TOO_LARGE, details.limit (default 1 MiB)
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024) })
    const over = await h.request('POST', '/admin/tenants', { key: h.adminKey, rawBody: big, headers: { 'content-type': 'application/json' } })
    t.equal(errorShape(over, 413, 'PAYLOAD_TOO_LARGE'), undefined)
    t.equal(over.body?.details?.limit, 1024 * 1024)
    const mapping = JSON.stringify({ rules: Array.from({ length: 20_000 }, (_, i) => ({ match: `m${i}-${'y'.repeat(40)}`, type: 'deposit' })) })
    const overMapping = await h.request('PUT', `/admin/brands/${(await h.createTenant()).brand.id}/event-mapping`, { key: h.adminKey, rawBody: mapping, headers: { 'content-type': 'application/json' } })
    t.equal(errorShape(overMapping, 413, 'PAYLOAD_TOO_LARGE'), undefined, 'an oversized mapping too')
    const anon = await h.request('POST', '/admin/tenants', { rawBody: big, headers: { 'content-type': 'application/json' } })
    t.ok(anon.status === 401 || anon.status === 413, `without a key: 401 or 413, got ${anon.status}`)
    t.equal(typeof anon.body?.code, 'string')
    // the server survives all of it
    t.equal((await h.admin('GET', '/tenants')).status, 200)
  })

  t.test('a raw request with a bad Content-Length on an admin route is answered in the error shape, never 500', async (t) => {
    const body = JSON.stringify({ name: 'cl' })
    const raw = await rawRequest(h.app.port, [
      `POST /api/v1/admin/tenants HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${h.adminKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length - 3}\r\nConnection: close\r\n\r\n${body}`,
    ], { responses: 1, waitMs: 3000 })
    const [res] = parseResponses(raw.text)
    t.ok(res, 'answered')
    t.ok(res!.status >= 400 && res!.status < 500, `4xx, got ${res?.status}`)
    t.equal(typeof JSON.parse(res!.body).code, 'string')
  })

  // ---------------------------------------------------------------------------------------------------
  // The admin CLI (`npm run admin`, src/admin/cli.ts): "the admin API's operations straight against the
  // database". Its input must meet the same contract as the API's: scopes are events:write or read; a brand
  // slug matches ^[a-z0-9][a-z0-9-]{0,63}$.
  // ---------------------------------------------------------------------------------------------------

  const cliDirs: string[] = []
  t.teardown(() => { for (const d of cliDirs) rmSync(d, { recursive: true, force: true }) })
  async function cliDir(): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), 'respin-adv-cli-'))
    cliDirs.push(dir)
    if (!process.env.DATABASE_URL) await seedEmbeddedPostgres(dir)
    return dir
  }
  const cli = runCli

  // The CLI runs (seconds each: a process, PGlite) start with the file and run beside the API tests above;
  // the test below waits for them. Embedded, the directory is the CLI's own database (one process at a time).
  const cliRuns = (async () => {
    const dir = await cliDir()
    const name = `CLI Adversarial ${randomUUID().slice(0, 6)}`
    const badSlug = await cli(dir, 'bootstrap', '--name', name, '--brand', 'Bad Slug!')
    // a fixed CLI refuses that bootstrap: make the tenant the next command needs with a good slug
    const boot = badSlug.status === 0 ? badSlug : await cli(dir, 'bootstrap', '--name', name, '--brand', 'acme')
    const tenantId = boot.status === 0 ? (JSON.parse(boot.stdout).tenant.id as string) : randomUUID()
    const badScopes = await cli(dir, 'key:create', '--tenant', tenantId, '--scopes', 'read,admin', '--name', 'bad-scopes')
    return { boot, badSlug, badScopes }
  })()
  cliRuns.catch(() => {}) // awaited (and reported) by the test below

  t.test('admin CLI: input the API refuses is refused too (exit non-zero, nothing printed as created)', async (t) => {
    const { boot, badSlug, badScopes } = await cliRuns
    t.equal(boot.status, 0, `a bootstrap with a good slug works: ${boot.stderr}`)
    const printed = (r: CliResult) => { try { return JSON.parse(r.stdout) } catch { return undefined } }
    await t.test('bootstrap --brand "Bad Slug!" is refused (contract: a brand slug matches ^[a-z0-9][a-z0-9-]{0,63}$)', async (t) => {
      t.not(badSlug.status, 0, `exit ${badSlug.status}; created brand ${JSON.stringify(printed(badSlug)?.brand)}`)
    })
    await t.test('key:create --scopes read,admin is refused (contract: scopes are events:write, read)', async (t) => {
      t.not(badScopes.status, 0, `exit ${badScopes.status}; issued scopes ${JSON.stringify(printed(badScopes)?.scopes)}`)
    })
  })
})

t.test('admin', async (t) => {
  t.test('the admin API needs the ADMIN_KEY: none or wrong is 401, an operator key is 403', async (t) => {
    const tenant = await h.createTenant()
    t.equal((await h.request('GET', '/admin/tenants')).status, 401)
    const wrong = await h.request('GET', '/admin/tenants', { key: 'admin-wrong' })
    t.equal(wrong.status, 401)
    t.equal(wrong.body.code, 'UNAUTHORIZED')
    const operator = await h.request('GET', '/admin/tenants', { key: tenant.key })
    t.equal(operator.status, 403)
    t.equal(operator.body.code, 'FORBIDDEN')
    t.equal((await h.request('GET', '/admin/tenants', { headers: { authorization: `Bearer ${h.adminKey}` } })).status, 200)
    t.equal((await h.request('GET', '/admin/tenants', { query: { api_key: h.adminKey } })).status, 200)
  })

  t.test('with no ADMIN_KEY the admin API says it is off, whatever key is tried', async (t) => {
    const config = h.app.ctx.config as { adminKey?: string }
    const adminKey = config.adminKey
    config.adminKey = undefined
    t.teardown(() => {
      config.adminKey = adminKey
    })
    for (const key of [undefined, 'admin-anything', adminKey]) {
      const res = await h.request('GET', '/admin/tenants', { key })
      t.equal(res.status, 401)
      t.equal(res.body.code, 'UNAUTHORIZED')
      t.match(res.body.error, /admin API is off: start the server with ADMIN_KEY/)
    }
  })

  t.test('tenants: create with or without slug, list', async (t) => {
    const a = await h.admin('POST', '/tenants', { name: 'Lucky Spins Ltd' })
    t.equal(a.status, 201)
    t.match(a.body.data, { name: 'Lucky Spins Ltd', slug: /^lucky-spins-ltd/ })
    t.match(a.body.data.id, /^[0-9a-f-]{36}$/)
    const b = await h.admin('POST', '/tenants', { name: 'Lucky Spins Ltd' })
    t.equal(b.status, 201, 'a derived slug that collides gets a suffix')
    t.not(b.body.data.slug, a.body.data.slug)
    const slug = `explicit-${Date.now()}`
    t.equal((await h.admin('POST', '/tenants', { name: 'X', slug })).status, 201)
    const dup = await h.admin('POST', '/tenants', { name: 'Y', slug })
    t.equal(dup.status, 400, 'an explicit slug that is taken is refused')
    t.equal(dup.body.details.reason, 'ALREADY_EXISTS')
    const bad = await h.admin('POST', '/tenants', { name: '' })
    t.equal(bad.status, 400)
    t.equal(bad.body.details.errors[0].field, 'name')
    const list = await h.admin('GET', '/tenants')
    t.ok(list.body.data.some((x: { id: string }) => x.id === a.body.data.id))
  })

  t.test('brands: first is the default, slugs validated and unique per tenant', async (t) => {
    const tenant = await h.createTenant({ brand: null })
    const first = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'Main', slug: 'main' })
    t.equal(first.status, 201)
    t.match(first.body.data, { tenant_id: tenant.id, slug: 'main', is_default: true, active: true })
    const second = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'Sport', slug: 'sport' })
    t.equal(second.body.data.is_default, false)
    t.equal((await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'Again', slug: 'main' })).status, 400)
    for (const slug of ['Main', '-x', 'a b', 'x'.repeat(65)]) {
      const res = await h.admin('POST', `/tenants/${tenant.id}/brands`, { name: 'n', slug })
      t.equal(res.status, 400, `slug ${slug}`)
      t.equal(res.body.details.errors[0].field, 'slug')
    }
    t.equal((await h.admin('POST', '/tenants/00000000-0000-4000-8000-000000000000/brands', { name: 'n', slug: 'n' })).status, 404)
    t.equal((await h.admin('POST', '/tenants/not-a-uuid/brands', { name: 'n', slug: 'n' })).status, 404)
    t.equal((await h.admin('PATCH', '/brands/00000000-0000-4000-8000-000000000000', { active: false })).status, 404)
  })

  t.test('keys: scopes validated, pinned to a brand, listed without the key', async (t) => {
    const tenant = await h.createTenant()
    const bad = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'k', scopes: ['admin'] })
    t.equal(bad.status, 400)
    t.equal(bad.body.details.errors[0].field, 'scopes.0')
    t.equal((await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'k', brand: 'nope' })).status, 400)
    const pinned = await h.admin('POST', `/tenants/${tenant.id}/keys`, { name: 'k', brand: 'main', scopes: ['read'] })
    t.equal(pinned.status, 201)
    t.match(pinned.body.data, { brand_id: tenant.brand.id, scopes: ['read'], expires_at: null })
    const list = await h.admin('GET', `/tenants/${tenant.id}/keys`)
    t.equal(list.body.data.length, 2)
    t.match(list.body.data[1], { id: pinned.body.data.id, brand_id: tenant.brand.id, revoked_at: null })
    t.equal((await h.admin('GET', '/tenants/00000000-0000-4000-8000-000000000000/keys')).status, 404)
  })

  t.test('event mapping: empty by default, validated, stored and read back', async (t) => {
    const tenant = await h.createTenant()
    const empty = await h.admin('GET', `/brands/${tenant.brand.id}/event-mapping`)
    t.same(empty.body.data, { rules: [], default_action: 'accept' })
    const mapping = {
      rules: [
        { match: 'dep_ok', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.cur' } },
        { match: 'heartbeat', action: 'ignore' },
        { match: 'test_*', action: 'reject' },
      ],
      default_action: 'accept',
    }
    const put = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, mapping)
    t.equal(put.status, 200)
    t.same(put.body.data, mapping)
    t.same((await h.admin('GET', `/brands/${tenant.brand.id}/event-mapping`)).body.data, mapping)
    const badField = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'x', type: 'deposit', fields: { amountz: 'payload.a' } }] })
    t.equal(badField.status, 400)
    t.equal(badField.body.details.errors[0].field, 'rules.0.fields.amountz')
    const badAction = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'x', action: 'drop' }] })
    t.equal(badAction.status, 400)
    t.equal(badAction.body.details.errors[0].field, 'rules.0.action')
    t.equal((await h.admin('PUT', '/brands/00000000-0000-4000-8000-000000000000/event-mapping', { rules: [] })).status, 404)
    const operator = await h.request('PUT', `/admin/brands/${tenant.brand.id}/event-mapping`, { key: tenant.key, body: { rules: [] } })
    t.equal(operator.status, 403, 'mapping configuration is for the platform owner only')
  })
})

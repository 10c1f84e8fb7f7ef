// Adversarial: the audit trail and where secrets may (not) go. docs/operating.md "Audit trail": every
// admin-API call (reads included) and every change of settings, keys, mappings and webhooks writes a row in
// the transaction of the change: actor, action (the operationId), target, before/after with secrets masked,
// time and request id; "A refused change writes nothing"; GET /admin/audit pages it newest first.
// Where secrets live: contract "key appears here only"; docs/tenancy.md "Only their SHA-256 is stored";
// docs/engines.md "The key is never in the database, so a dump alone reveals no tenant secret"; docs/operating.md
// "Logs": headers, bodies and query strings are never logged. audit.test.ts covers the ordinary rows; this
// file goes after completeness, refusals, paging under writes, and leaks.
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import webpush from 'web-push'
import { openPostgres } from '../../src/db/postgres.ts'
import { createLogger } from '../../src/lib/log.ts'
import { seedEmbeddedPostgres, startHarness, type TestResponse } from '../helpers/harness.ts'
import { runCli } from '../helpers/processes.ts'
import { waitFor } from '../helpers/wait.ts'

const logText: string[] = []
const h = await startHarness(t, {
  env: { WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'info', DELIVERY_RETRY_DELAYS: '0,0,0,0', RATE_LIMIT_INGEST_PER_MIN: '0' },
  logDestination: { write: (line: string) => void logText.push(line) },
})
const sql = h.app.ctx.sql

/** Every secret this file hands the service; none may come back where it must not. */
const secrets = new Map<string, string>([['ADMIN_KEY', h.adminKey]])

function errorShape(res: TestResponse, status: number, code: string): string | undefined {
  const b = res.body as { error?: unknown; code?: unknown; request_id?: unknown } | undefined
  if (res.status !== status) return `status ${res.status} (want ${status}) ${res.text.slice(0, 120)}`
  if (typeof b?.error !== 'string' || b.code !== code || typeof b.request_id !== 'string') return `body ${res.text.slice(0, 120)}`
  return undefined
}
const audit = (query: Record<string, string | number>) => h.request('GET', '/admin/audit', { key: h.adminKey, query })
let ridCounter = 0
const rid = () => `adv-${process.pid}-${++ridCounter}-${Date.now()}`

// The CLI (a process per command, PGlite: seconds each) runs from the start, beside the tests below.
const cliDir = mkdtempSync(join(tmpdir(), 'respin-adv-audit-cli-'))
t.teardown(() => rmSync(cliDir, { recursive: true, force: true }))
const cli = (...args: string[]) => runCli(cliDir, ...args)
const cliRuns = (async () => {
  if (!process.env.DATABASE_URL) await seedEmbeddedPostgres(cliDir)
  const boot = await cli('bootstrap', '--name', `Audit CLI ${randomUUID().slice(0, 6)}`)
  if (boot.status !== 0) throw new Error(`bootstrap: ${boot.stderr}`)
  const out = JSON.parse(boot.stdout) as { tenant: { id: string }; key: { id: string; key: string } }
  const revoke = await cli('key:revoke', '--id', out.key.id)
  return { out, revoke }
})()
cliRuns.catch(() => {})

const ADMIN_OPS = ['adminCreateTenant', 'adminListTenants', 'adminCreateBrand', 'adminUpdateBrand', 'adminCreateKey', 'adminListKeys', 'adminRevokeKey', 'adminSetEventMapping', 'adminGetEventMapping', 'adminListAudit']

t.test('the admin operations in the OpenAPI document are the ones this file checks', async (t) => {
  const doc = (await h.request('GET', '/openapi.json')).body
  const ids: string[] = []
  for (const item of Object.values<any>(doc.paths)) for (const op of Object.values<any>(item)) if (op?.['x-required-role'] === 'super_admin') ids.push(op.operationId)
  t.same(ids.sort(), [...ADMIN_OPS].sort())
})


t.test('every admin operation, reads included, writes exactly one row: its operationId, actor admin, the request id', async (t) => {
  const tenant = await h.createTenant()
  const victim = await tenant.createKey({ name: 'victim' })
  const mapping = { rules: [{ match: 'dep', type: 'deposit' }], default_action: 'accept' }
  const calls: [string, string, string, unknown, string | null | undefined][] = [
    // [operationId, method, path, body, the tenant_id a change's row must carry (undefined: not checked; reads' attribution is left open)]
    ['adminCreateTenant', 'POST', '/admin/tenants', { name: 'Audited Tenant' }, undefined],
    ['adminListTenants', 'GET', '/admin/tenants', undefined, undefined],
    ['adminCreateBrand', 'POST', `/admin/tenants/${tenant.id}/brands`, { name: 'B', slug: 'audited-b' }, tenant.id],
    ['adminUpdateBrand', 'PATCH', `/admin/brands/${tenant.brand.id}`, { name: 'Renamed' }, tenant.id],
    ['adminCreateKey', 'POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k' }, tenant.id],
    ['adminListKeys', 'GET', `/admin/tenants/${tenant.id}/keys`, undefined, undefined],
    ['adminRevokeKey', 'DELETE', `/admin/keys/${victim.id}`, undefined, tenant.id],
    ['adminSetEventMapping', 'PUT', `/admin/brands/${tenant.brand.id}/event-mapping`, mapping, tenant.id],
    ['adminGetEventMapping', 'GET', `/admin/brands/${tenant.brand.id}/event-mapping`, undefined, undefined],
    ['adminListAudit', 'GET', `/admin/audit?tenant_id=${tenant.id}&limit=5`, undefined, undefined],
  ]
  t.same(calls.map((c) => c[0]).sort(), [...ADMIN_OPS].sort(), 'every admin operation')
  const bad: string[] = []
  for (const [op, method, path, body, tenantId] of calls) {
    const id = rid()
    const res = await h.request(method, path, { key: h.adminKey, body, headers: { 'x-request-id': id } })
    if (res.status >= 300) { bad.push(`${op}: ${res.status} ${res.text.slice(0, 80)}`); continue }
    if (op === 'adminCreateKey') secrets.set('admin-created key', res.body.data.key)
    const rows = await sql<{ action: string; actor: string; actor_key_id: string | null; tenant_id: string | null }[]>`
      select action, actor, actor_key_id, tenant_id from audit_log where request_id = ${id}`
    if (rows.length !== 1) { bad.push(`${op}: ${rows.length} rows`); continue }
    const [row] = rows
    if (row!.action !== op || row!.actor !== 'admin' || row!.actor_key_id !== null) bad.push(`${op}: ${JSON.stringify(row)}`)
    const want = op === 'adminCreateTenant' ? res.body.data.id : tenantId
    if (want !== undefined && row!.tenant_id !== want) bad.push(`${op}: tenant_id ${row!.tenant_id}, want ${want}`)
  }
  t.same(bad, [])
})

t.test('a refused change writes nothing: no audit row, no key, no brand, whatever the refusal', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant({ brand: `elsewhere-${Date.now()}` })
  const taken = `taken-${randomUUID().slice(0, 8)}`
  t.equal((await h.admin('POST', '/tenants', { name: 'Taken', slug: taken })).status, 201)
  const before = { audit: (await sql<{ n: number }[]>`select count(*)::int as n from audit_log where tenant_id in (${tenant.id}, ${other.id})`)[0]!.n, keys: (await sql`select id from api_keys where tenant_id = ${tenant.id}`).length, brands: (await sql`select id from brands where tenant_id = ${tenant.id}`).length }
  const missing = randomUUID()
  const refusals: [string, string, unknown, number, string?][] = [
    ['POST', '/admin/tenants', { name: 'Dup', slug: taken }, 400],
    ['POST', '/admin/tenants', { name: '' }, 400],
    ['POST', '/admin/tenants', { name: 'nul\u0000' }, 400],
    ['POST', `/admin/tenants/${tenant.id}/brands`, { name: 'Main again', slug: 'main' }, 400],
    ['POST', `/admin/tenants/${tenant.id}/brands`, { name: 'bad', slug: 'Bad Slug' }, 400],
    ['POST', `/admin/tenants/${missing}/brands`, { name: 'ghost', slug: 'ghost' }, 404],
    ['PATCH', `/admin/brands/${tenant.brand.id}`, { name: 'x\u0000' }, 400],
    ['POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k', scopes: ['admin'] }, 400],
    ['POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k', brand: 'nope' }, 400],
    ['POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k', brand: other.brand.id }, 400],
    ['POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k', expires_at: '2001-01-01T00:00:00Z' }, 400],
    ['POST', `/admin/tenants/${tenant.id}/keys`, { name: 'k\u0000' }, 400],
    ['POST', `/admin/tenants/${missing}/keys`, { name: 'k' }, 404],
    ['GET', `/admin/tenants/${missing}/keys`, undefined, 404],
    ['DELETE', `/admin/keys/${missing}`, undefined, 404],
    ['PUT', `/admin/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'x', action: 'drop' }] }, 400],
    ['PUT', `/admin/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'x', type: 'deposit', fields: { nope: 'payload.a' } }] }, 400],
    ['PUT', `/admin/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: '*a*b*c*d*e*f*g*h*i', type: 'deposit' }] }, 400],
    ['PUT', `/admin/brands/${missing}/event-mapping`, { rules: [] }, 404],
    ['GET', `/admin/brands/${missing}/event-mapping`, undefined, 404],
    ['GET', '/admin/audit?cursor=forged.cursor', undefined, 400],
  ]
  const bad: string[] = []
  const tag = `refused-${process.pid}-${Date.now()}-`
  let n = 0
  for (const [method, path, body, status] of refusals) {
    const res = await h.request(method, path, { key: h.adminKey, body, headers: { 'x-request-id': `${tag}${++n}` } })
    if (res.status !== status || typeof res.body?.code !== 'string') bad.push(`${method} ${path} ${JSON.stringify(body)} -> ${res.status} (want ${status})`)
  }
  // refused by auth: an operator key (403), a wrong key (401)
  for (const key of [tenant.key, 'admin-wrong-000000000000000']) {
    const res = await h.request('POST', `/admin/tenants/${tenant.id}/keys`, { key, body: { name: 'sneaky' }, headers: { 'x-request-id': `${tag}${++n}` } })
    if (res.status !== 401 && res.status !== 403) bad.push(`auth refusal -> ${res.status}`)
  }
  // refused operator changes
  for (const [method, path, body] of [
    ['PUT', '/settings/channels/email', { smtp_url: 'smtp://u:refused-pw-1@127.0.0.1:2525', from: 42 }],
    ['PUT', '/settings/channels/telegram', { bot_token: 12345 }],
    ['PUT', '/settings/delivery', { frequency_caps: 'lots' }],
    ['POST', '/webhooks', { url: 'ftp://127.0.0.1/h', events: ['player.created'] }],
    ['PATCH', `/webhooks/${missing}`, { rotate_secret: true }],
    ['DELETE', `/webhooks/${missing}`, undefined],
  ] as [string, string, unknown][]) {
    const res = await h.request(method, path, { key: tenant.key, body, headers: { 'x-request-id': `${tag}${++n}` } })
    if (res.status < 400 || res.status >= 500) bad.push(`${method} ${path} -> ${res.status} ${res.text.slice(0, 80)}`)
  }
  t.same(bad, [], 'every refusal refused')
  t.equal((await sql`select 1 from audit_log where request_id like ${`${tag}%`}`).length, 0, 'not one audit row for any refused request')
  t.equal((await sql<{ n: number }[]>`select count(*)::int as n from audit_log where tenant_id in (${tenant.id}, ${other.id})`)[0]!.n, before.audit, 'nor any for either tenant')
  t.equal((await sql`select id from api_keys where tenant_id = ${tenant.id}`).length, before.keys, 'no key issued')
  t.equal((await sql`select id from brands where tenant_id = ${tenant.id}`).length, before.brands, 'no brand made')
  t.equal((await sql`select 1 from audit_log where target_id = ${missing} or tenant_id = ${missing}`).length, 0)
})

t.test('operator changes: the actor is the very key used (pinned or not); one tenant never sees another\'s rows', async (t) => {
  const a = await h.createTenant()
  const b = await h.createTenant()
  const vip = await a.createBrand('vip')
  const pinned = await a.createKey({ name: 'pinned', brand: 'vip' })
  const bKey = await b.createKey({ name: 'b-ops' })
  const put = (key: string, body: unknown) => h.request('PUT', '/settings/channels/in_app', { key, body })
  t.equal((await put(pinned.key, { retention_days: 30 })).status, 200)
  t.equal((await put(a.key, { retention_days: 40 })).status, 200)
  t.equal((await put(bKey.key, { retention_days: 50 })).status, 200)
  const walk = async (tenantId: string) => {
    const all: any[] = []
    let cursor: string | undefined
    for (let i = 0; i < 50; i++) {
      const res = await audit({ tenant_id: tenantId, limit: 3, ...(cursor ? { cursor } : {}) })
      if (res.status !== 200) throw new Error(res.text)
      all.push(...res.body.data)
      cursor = res.body.next_cursor ?? undefined
      if (!cursor) break
    }
    return all
  }
  const rowsA = await walk(a.id)
  const inApp = rowsA.filter((r) => r.action === 'putInAppChannelSettings')
  t.equal(inApp.length, 2, 'both of tenant a\'s in_app changes (a settings change, docs/operating.md)')
  t.match(inApp.find((r) => r.target?.id === `${vip.id}:in_app`), { actor: 'key', actor_key_id: pinned.id, tenant_id: a.id, after: { retention_days: 30 } }, 'the pinned key, on its brand')
  const aFull = (await sql<{ id: string }[]>`select id from api_keys where tenant_id = ${a.id} and name = 'full'`)[0]!.id
  t.match(inApp.find((r) => r.target?.id === `${a.brand.id}:in_app`), { actor: 'key', actor_key_id: aFull, after: { retention_days: 40 } })
  t.ok(rowsA.every((r) => r.tenant_id === a.id), 'only tenant a')
  t.notOk(rowsA.some((r) => r.actor_key_id === bKey.id || JSON.stringify(r).includes(b.id)), "nothing of tenant b's")
  const rowsB = await walk(b.id)
  t.ok(rowsB.some((r) => r.action === 'putInAppChannelSettings' && r.actor_key_id === bKey.id))
  t.ok(rowsB.every((r) => r.tenant_id === b.id))
})

t.test("an operator key cannot reach another tenant's webhook or player by naming that tenant in the body; each trail stays its own", async (t) => {
  const a = await h.createTenant()
  const b = await h.createTenant()
  const bHook = await h.request('POST', '/webhooks', { key: b.key, body: { url: 'http://127.0.0.1:9/b', events: ['player.created'] } })
  const aHook = await h.request('POST', '/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/a', events: ['player.created'] } })
  t.equal(bHook.status, 201)
  const bId = bHook.body.data.id as string
  // spec: a resource "not visible to the caller's tenant, yields 404"
  const direct = await h.request('PATCH', `/webhooks/${bId}`, { key: a.key, body: { tenantId: b.id, brandId: null, url: 'http://127.0.0.1:9/taken', rotate_secret: true } })
  t.equal(direct.status, 404, `PATCH of b's webhook with tenantId in the body: ${direct.status}`)
  t.notOk(direct.text.includes('whsec_') || /"secret"/.test(direct.text), "b's signing secret is not handed to a")
  const sideways = await h.request('PATCH', `/webhooks/${aHook.body.data.id}`, { key: a.key, body: { tenantId: b.id, id: bId, url: 'http://127.0.0.1:9/taken-2' } })
  t.not(sideways.body?.data?.id, bId, `PATCH of a's own webhook with b's id in the body does not answer for b's (${sideways.status})`)
  const bNow = await h.request('GET', `/webhooks/${bId}`, { key: b.key })
  t.equal(bNow.body.data.url, 'http://127.0.0.1:9/b', "b's webhook is unchanged")
  const aRows = (await audit({ tenant_id: a.id, limit: 200 })).body.data as { target: { id: string } | null }[]
  t.notOk(aRows.some((r) => r.target?.id === bId), "a's trail never names b's webhook")
  const bPlayer = await h.request('POST', '/players', { key: b.key, body: { external_id: 'victim', email: 'victim@b.example' } })
  const aPlayer = await h.request('POST', '/players', { key: a.key, body: { external_id: 'mine' } })
  await h.request('PATCH', `/players/${aPlayer.body.data.id}`, { key: a.key, body: { tenantId: b.id, brandId: b.brand.id, playerId: bPlayer.body.data.id, email: 'taken@a.example' } })
  t.equal((await h.request('GET', `/players/${bPlayer.body.data.id}`, { key: b.key })).body.data.email, 'victim@b.example', "b's player is unchanged")
})

t.test('a player erasure leaves one audit row that says who erased whom, with no personal data', async (t) => {
  const tenant = await h.createTenant()
  const external = `ext-erase-${randomUUID().slice(0, 8)}`
  const created = await h.request('POST', '/players', { key: tenant.key, body: { external_id: external, email: 'erase.me@casino.example', phone: '+390612345678', metadata: { name: 'Erasmo Secret' } } })
  t.equal(created.status, 201, created.text)
  const id = rid()
  const erase = await h.request('DELETE', `/players/${created.body.data.id}`, { key: tenant.key, headers: { 'x-request-id': id } })
  t.equal(erase.status, 202, erase.text)
  const rows = await sql<any[]>`select * from audit_log where request_id = ${id}`
  t.equal(rows.length, 1)
  const full = (await sql<{ id: string }[]>`select id from api_keys where tenant_id = ${tenant.id} and name = 'full'`)[0]!.id
  t.match(rows[0], { actor: 'key', actor_key_id: full, tenant_id: tenant.id, target_type: 'player', target_id: created.body.data.id })
  const text = JSON.stringify(rows[0])
  for (const pii of [external, 'erase.me', '612345678', 'Erasmo']) t.notOk(text.includes(pii), `no ${pii} in the row`)
})

t.test('paging the trail while it grows: every row that was there is seen once, newest first', async (t) => {
  const tenant = await h.createTenant()
  for (let i = 0; i < 5; i++) await h.admin('GET', `/tenants/${tenant.id}/keys`)
  const existing = (await sql<{ id: string }[]>`select id::text as id from audit_log where tenant_id = ${tenant.id} order by id desc`).map((r) => r.id)
  const seen: string[] = []
  let cursor: string | undefined
  for (let page = 0; page < 100; page++) {
    // every page read writes a row for this tenant (adminListAudit), and so does this: the trail grows at the top
    await h.admin('GET', `/tenants/${tenant.id}/keys`)
    const res = await audit({ tenant_id: tenant.id, limit: 1, ...(cursor ? { cursor } : {}) })
    t.equal(res.status, 200)
    seen.push(...(res.body.data as { id: string }[]).map((r) => r.id))
    cursor = res.body.next_cursor ?? undefined
    if (!cursor) break
  }
  t.notOk(cursor, 'the walk ends')
  t.equal(new Set(seen).size, seen.length, 'no row twice')
  for (let i = 1; i < seen.length; i++) if (BigInt(seen[i]!) >= BigInt(seen[i - 1]!)) t.fail(`not newest first at ${i}`)
  t.same(existing.filter((id) => !seen.includes(id)), [], 'no row that existed before the walk is skipped')
})

t.test('the audit query: forged, truncated, foreign and cross-tenant cursors; limits and filters', async (t) => {
  const a = await h.createTenant()
  const b = await h.createTenant()
  for (let i = 0; i < 3; i++) await h.admin('GET', `/tenants/${b.id}/keys`)
  const first = await audit({ tenant_id: b.id, limit: 1 })
  const cursor = first.body.next_cursor as string
  t.type(cursor, 'string')
  const [body, mac] = cursor.split('.') as [string, string]
  const forged = Buffer.from(JSON.stringify({ id: '999999999999' })).toString('base64url')
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1)
  // a cursor another endpoint issued (the players export): "a cursor of one endpoint is never valid for another"
  for (const ext of ['exp-1', 'exp-2']) await h.request('POST', '/players', { key: a.key, body: { external_id: ext } })
  const exported = await h.request('GET', '/export/players', { key: a.key, query: { limit: 1 } })
  const foreign = exported.body?.next_cursor as string | undefined
  const bad: string[] = []
  for (const [label, c] of [
    ['appended', `${cursor}x`], ['truncated', cursor.slice(0, -2)], ['flipped mac', `${body}.${flip(mac, 3)}`], ['flipped body', `${flip(body, 2)}.${mac}`],
    ['forged body, old mac', `${forged}.${mac}`], ['no mac', body], ['two dots', `${cursor}.${mac}`], ['only a dot', '.'], ['spaces', '   '], ['2049 chars', 'a'.repeat(2049)],
    ['unicode', '😀.😀'], ...(foreign ? [['export cursor', foreign]] : []),
  ] as [string, string][]) {
    const why = errorShape(await audit({ cursor: c }), 400, 'BAD_REQUEST')
    if (why) bad.push(`${label}: ${why}`)
  }
  for (const [label, query] of [
    ['limit 0', { limit: 0 }], ['limit 201', { limit: 201 }], ['limit -1', { limit: -1 }], ['limit 1.5', { limit: '1.5' }], ['limit abc', { limit: 'abc' }], ['limit 1e2', { limit: '1e2' }],
    ['tenant_id nope', { tenant_id: 'nope' }], ['tenant_id uuid+x', { tenant_id: `${a.id}x` }], ['tenant_id sql', { tenant_id: "' or 1=1 --" }],
  ] as [string, Record<string, string | number>][]) {
    const why = errorShape(await audit(query), 400, 'BAD_REQUEST')
    if (why) bad.push(`${label}: ${why}`)
  }
  for (const raw of [`tenant_id=${a.id}&tenant_id=${b.id}`, 'limit=1&limit=2']) {
    const why = errorShape(await h.request('GET', `/admin/audit?${raw}`, { key: h.adminKey }), 400, 'BAD_REQUEST')
    if (why) bad.push(`repeated ${raw.slice(0, 20)}: ${why}`)
  }
  t.same(bad, [])
  t.ok(foreign, 'the export gave a cursor to try')
  // b's cursor with a's filter: a position only, never b's rows
  const cross = await audit({ tenant_id: a.id, cursor, limit: 200 })
  t.equal(cross.status, 200)
  t.ok((cross.body.data as { tenant_id: string }[]).every((r) => r.tenant_id === a.id), "a cursor from b's pages shows only a's rows")
  for (const limit of [1, 200]) t.equal((await audit({ limit })).status, 200, `limit ${limit}`)
  const unknown = randomUUID()
  const none = await audit({ tenant_id: unknown })
  t.equal(none.status, 200)
  t.same(none.body.data, [], 'an unknown tenant has an empty trail')
})

// ---------------------------------------------------------------------------------------------------
// Secrets: set up one tenant with every kind there is, then look everywhere.
// ---------------------------------------------------------------------------------------------------

const proxyHits: string[] = []
const proxy = createServer((req, res) => {
  proxyHits.push(req.url ?? '')
  // a Bot API proxy whose error page repeats the requested path, the token in it
  res.writeHead(500, { 'content-type': 'text/plain' }).end(`upstream failed for ${req.url}`)
})
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => proxy.close(() => resolve())))
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`

const S = await h.createTenant()
const sKeys = { pinned: await S.createKey({ name: 'pinned', brand: 'main', scopes: ['read'] }), ingest: await S.createKey({ name: 'ingest', scopes: ['events:write'] }) }
secrets.set('full key', S.key).set('pinned key', sKeys.pinned.key).set('ingest key', sKeys.ingest.key)
let webhookId = ''
let notificationId = ''

t.test('set-up: every kind of secret, through the API (keys sent by every means, to be looked for later)', async (t) => {
  t.equal((await h.request('GET', `/admin/tenants/${S.id}/keys`, { query: { api_key: h.adminKey } })).status, 200, 'the admin key in the query string')
  const hook = await h.request('POST', '/webhooks', { query: { api_key: S.key }, body: { url: `${proxyUrl}/hook`, events: ['player.created'] } })
  t.equal(hook.status, 201, hook.text)
  webhookId = hook.body.data.id
  secrets.set('webhook secret', hook.body.data.secret)
  const rotated = await h.request('PATCH', `/webhooks/${webhookId}`, { headers: { authorization: `Bearer ${S.key}` }, body: { rotate_secret: true } })
  t.equal(rotated.status, 200)
  secrets.set('rotated webhook secret', rotated.body.data.secret)
  // an SMTP password with reserved characters, percent-encoded in the URL
  t.equal((await h.request('PUT', '/settings/channels/email', { key: S.key, body: { smtp_url: 'smtp://mailer:Sm%2Fp%40ss-4c9e@127.0.0.1:9', from: 'a@casino.example' } })).status, 200)
  secrets.set('smtp password (encoded)', 'Sm%2Fp%40ss-4c9e').set('smtp password', 'Sm/p@ss-4c9e')
  const token = '424242:AAAdvSecretBotToken-9f1e7'
  t.equal((await h.request('PUT', '/settings/channels/telegram', { key: S.key, body: { bot_token: token, api_base_url: proxyUrl } })).status, 200)
  secrets.set('bot token', token.split(':')[1]!)
  const vapid = webpush.generateVAPIDKeys()
  const push = await h.request('PUT', '/settings/channels/push', { key: S.key, body: { vapid_subject: 'mailto:ops@casino.example', vapid_public_key: vapid.publicKey, vapid_private_key: vapid.privateKey } })
  t.equal(push.status, 200, push.text)
  secrets.set('vapid private key', vapid.privateKey)
  // a telegram send that fails at the proxy (which quotes the path with the token)
  const ext = `sec-${randomUUID().slice(0, 8)}`
  const ev = await h.request('POST', '/events', { query: { api_key: sKeys.ingest.key }, body: { events: [
    { player_id: ext, event_type: 'registration', event_id: randomUUID(), payload: { email: 'sec@casino.example' } },
    { player_id: ext, event_type: 'consent_update', event_id: randomUUID(), payload: { channel: 'telegram', granted: true } },
  ] } })
  t.equal(ev.status, 200, ev.text)
  const [player] = await sql<{ id: string }[]>`select id from players where brand_id = ${S.brand.id} and external_id = ${ext}`
  t.equal((await h.request('PUT', `/players/${player!.id}/telegram`, { key: S.key, body: { chat_id: '777' } })).status, 200)
  const sent = await h.request('POST', '/notifications/send', { key: S.key, body: { player_id: player!.id, channel: 'telegram', payload: { body: 'hello' } } })
  t.equal(sent.status, 202, sent.text)
  notificationId = sent.body.notification_id
  await waitFor('the telegram attempt', () => proxyHits.some((p) => p.includes('/bot')), 10_000)
  await waitFor('the notification to settle', async () => {
    const n = await h.request('GET', `/notifications/${notificationId}`, { key: S.key })
    return n.body?.data?.status !== 'queued' && n.body?.data?.status !== 'sending'
  }, 10_000).catch(() => {})
  // a webhook URL with a password in it: docs/operating.md masks "the password of any scheme://user:pass@ URL"
  const withPw = await h.request('PATCH', `/webhooks/${webhookId}`, { key: S.key, body: { url: `http://hookuser:hookpass-5d2a@127.0.0.1:${(proxy.address() as AddressInfo).port}/hook` } })
  t.ok(withPw.status === 200 || withPw.status === 400, `url with credentials: ${withPw.status}`)
})

t.test('no secret in the audit trail, read through the API or straight from the table', async (t) => {
  const rows = await sql<{ r: string }[]>`select row_to_json(a)::text as r from audit_log a`
  const table = rows.map((r) => r.r).join('\n')
  const api = (await audit({ tenant_id: S.id, limit: 200 })).text + (await audit({ limit: 200 })).text
  t.ok(table.includes('updateWebhook') && table.includes('putTelegramChannelSettings'), 'the changes are there')
  for (const [name, value] of [...secrets, ['webhook URL password', 'hookpass-5d2a']] as [string, string][]) {
    t.notOk(table.includes(value), `${name} not in audit_log`)
    t.notOk(api.includes(value), `${name} not in GET /admin/audit`)
  }
})

t.test('no secret anywhere in the database (a dump reveals none): keys as SHA-256 only, channel and webhook secrets sealed', async (t) => {
  const tables = await sql<{ table_name: string }[]>`
    select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`
  t.ok(tables.length > 20, `${tables.length} tables`)
  const found: string[] = []
  for (const { table_name } of tables) {
    const [dump] = await sql<{ text: string }[]>`select coalesce(string_agg(x::text, E'\n'), '') as text from ${sql(table_name)} x`
    for (const [name, value] of secrets) {
      // the prefix (rsp_ + 8) is stored on purpose; what follows it is the secret
      if (dump!.text.includes(value.startsWith('rsp_') ? value.slice(12) : value)) found.push(`${name} in ${table_name}`)
    }
  }
  t.same(found, [])
})

t.test('no secret in any GET response of the API', async (t) => {
  const doc = (await h.request('GET', '/openapi.json')).body
  const paths: [string, string][] = [] // [path, key]
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    if (!item.get || !item.get.security?.length) continue
    const admin = item.get['x-required-role'] === 'super_admin'
    const filled = path.replace('/api/v1', '')
      .replace('{tenantId}', S.id).replace('{brandId}', S.brand.id).replace('{dataset}', 'players')
      .replace(/\/webhooks\/\{id\}/, `/webhooks/${webhookId}`).replace(/\/notifications\/\{id\}/, `/notifications/${notificationId}`)
    if (/\{/.test(filled)) continue
    paths.push([filled, admin ? h.adminKey : S.key])
  }
  t.ok(paths.length >= 25, `${paths.length} GET routes`)
  const bad: string[] = []
  for (const [path, key] of paths) {
    const res = await h.request('GET', path, { key })
    if (res.status >= 500) bad.push(`${path} -> ${res.status}`)
    for (const [name, value] of secrets) if (res.text.includes(value) || (value.startsWith('rsp_') && res.text.includes(value.slice(12)))) bad.push(`${name} in GET ${path}`)
  }
  t.same(bad, [])
})

t.test('the CLI key changes are in the audit trail (docs/operating.md: every change of ... keys ... writes a row)', async (t) => {
  const { out, revoke } = await cliRuns
  t.equal(revoke.status, 0, revoke.stderr)
  secrets.set('CLI key', out.key.key)
  // the CLI's database: this file's own on a server; its own directory when embedded (read after the CLI exited)
  const pg = process.env.DATABASE_URL ? undefined : await openPostgres({ databaseUrl: undefined, dataDir: cliDir }, createLogger('silent'))
  try {
    const db = pg?.sql ?? sql
    const rows = await db<{ action: string; after: unknown }[]>`select action, after from audit_log where target_id = ${out.key.id} order by id`
    t.ok(rows.length >= 2, `the key's creation and its revocation (rows: ${JSON.stringify(rows.map((r) => r.action))})`)
    t.notOk(JSON.stringify(rows).includes(out.key.key.slice(12)), 'never the key itself')
  } finally {
    await pg?.close()
  }
})

t.test('no secret in the log (docs/operating.md: headers, bodies and query strings are never logged)', async (t) => {
  await new Promise((r) => setTimeout(r, 200)) // the last request lines
  const log = logText.join('')
  t.ok(log.includes('"msg":"request"'), 'the log has the request lines')
  t.ok(logText.length > 100, `${logText.length} lines`)
  for (const [name, value] of secrets) t.notOk(log.includes(value) || (value.startsWith('rsp_') && log.includes(value.slice(12))), `${name} not logged`)
  t.notOk(log.includes('hookpass-5d2a'), 'nor a URL password')
})

// The core routes' conformance to the spec, and values the API refuses, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import { readFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.ts'
import { startHarness, type TestResponse, type TestTenant } from '../helpers/harness.ts'

const h = await startHarness(t)

// Conformance of the CORE routes (System, Events, Players, Segments), statement by statement, to
// /work/shared/spec/interface-spec.md ("Resources", "Player status", "Endpoints", "Authentication",
// "Inbound player events", "Errors", "Limits", "Versioning") and docs/contract.md (naming, configuration,
// resources, brand scope), plus the project's own docs/players.md and docs/segments.md where they fix what
// the spec leaves open. Only what test/http/*, test/players/*, test/segments/*, test/events/*, test/auth/*
// and test/system/* do not already pin down: exact response field sets, every field's type, the OpenAPI
// document's statement of the spec's parameters, every key source on every core route, and the places
// where the product's own paths (ingestion, a repeated write) bypass what its API validates.
t.test('spec-conformance-core', async (t) => {
  const sql = h.app.ctx.sql

  /** Spec conventions 4: "Every id of a resource is a UUID string. Timestamps are ISO 8601 date-time strings." */
  const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
  const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/
  /** What an address must look like at the least (the API's own check, format "email", is stricter). */
  const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
  /** Spec "Resources": Player. */
  const PLAYER_FIELDS = ['created_at', 'email', 'external_id', 'id', 'metadata', 'phone', 'status', 'updated_at']
  /** Spec "Resources": Segment; docs/segments.md adds player_count and last_computed_at (documented extensions). */
  const SEGMENT_FIELDS = ['created_at', 'id', 'last_computed_at', 'name', 'player_count', 'rules', 'type', 'updated_at']
  /** Spec "Errors": the codes, plus RATE_LIMITED for 429 (contract.md). */
  const ERROR_CODES = ['UNAUTHORIZED', 'BAD_REQUEST', 'NOT_FOUND', 'FORBIDDEN', 'INTERNAL_ERROR']
  const CANONICAL_TYPES = ['registration', 'login', 'logout', 'profile_update', 'consent_update', 'deposit', 'deposit_failed', 'withdrawal', 'bet', 'win',
    'bet_rollback', 'win_rollback', 'status_change', 'game_start', 'bonus_granted', 'bonus_completed', 'bonus_forfeited']

  const keys = (o: unknown) => Object.keys(o as object).sort()
  const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v)

  async function must(p: Promise<TestResponse>, status: number): Promise<any> {
    const res = await p
    if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text.slice(0, 300)}`)
    return res.body
  }
  const createPlayer = async (tenant: TestTenant, body: Record<string, unknown>) =>
    (await must(h.request('POST', '/players', { key: tenant.key, body }), 201)).data
  const ingest = (tenant: TestTenant, body: unknown, opts: { headers?: Record<string, string>; query?: Record<string, string> } = {}) =>
    h.request('POST', '/events', { key: tenant.key, body, ...opts })
  const playerByExternalId = async (tenant: TestTenant, externalId: string, brand?: string) => {
    const list = await must(h.request('GET', '/players', { key: tenant.key, query: { search: externalId, ...(brand ? { brand } : {}) } }), 200)
    return list.data.find((p: { external_id: string }) => p.external_id === externalId)
  }
  const outbox = (tenantId: string) => sql<{ event: string; data: any }[]>`select event, data from outbox where tenant_id = ${tenantId} order by id`

  /** A Player exactly as the spec's table lists it: these fields, these types, no others. */
  function checkPlayer(t: Test, p: any, label: string) {
    t.same(keys(p), PLAYER_FIELDS, `${label}: exactly the spec's Player fields`)
    t.match(p.id, UUID_RE, `${label}: id is a UUID`)
    t.type(p.external_id, 'string', `${label}: external_id`)
    t.ok(p.email === null || (typeof p.email === 'string' && EMAIL_RE.test(p.email)), `${label}: email is an email or null (${JSON.stringify(p.email)})`)
    t.ok(p.phone === null || typeof p.phone === 'string', `${label}: phone is a string or null`)
    t.ok(['active', 'suspended', 'self_excluded', 'closed'].includes(p.status), `${label}: status is one of the four`)
    t.ok(isObject(p.metadata), `${label}: metadata is an object`)
    t.match(p.created_at, ISO_RE, `${label}: created_at is a date-time`)
    t.match(p.updated_at, ISO_RE, `${label}: updated_at is a date-time`)
    t.ok(Date.parse(p.created_at) <= Date.parse(p.updated_at), `${label}: created_at <= updated_at`)
  }

  t.test('System: GET /health is public (a wrong key changes nothing) and answers exactly { status, version, timestamp, service, checks }', async (t) => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    const variants: [string, { headers?: Record<string, string>; query?: Record<string, string> }][] = [
      ['no key', {}],
      ['a wrong x-api-key', { headers: { 'x-api-key': 'rsp_wrong' } }],
      ['a wrong Bearer', { headers: { authorization: 'Bearer rsp_wrong' } }],
      ['a wrong api_key', { query: { api_key: 'garbage' } }],
    ]
    for (const [label, o] of variants) {
      const res = await h.request('GET', '/health', o)
      t.equal(res.status, 200, `${label}: 200`)
      t.match(res.headers.get('content-type'), /^application\/json/, 'conventions 1: application/json')
      t.same(keys(res.body), ['checks', 'service', 'status', 'timestamp', 'version'], `${label}: exactly the spec's fields`)
      t.equal(res.body.status, 'ok')
      t.equal(res.body.service, 'respin', 'contract: health service field "respin"')
      t.equal(res.body.version, pkg.version, 'Versioning 2: the version of the running service')
      t.match(res.body.timestamp, ISO_RE)
      t.ok(isObject(res.body.checks), 'checks is an object')
      for (const [name, check] of Object.entries<any>(res.body.checks)) t.type(check.status, 'string', `check ${name} has a status`)
      // Versioning 3: "served at /api/v1/openapi.json and needs no key" (a wrong one included).
      const doc = await h.request('GET', '/openapi.json', o)
      t.equal(doc.status, 200, `${label}: openapi.json 200`)
      t.match(doc.body.openapi, /^3\.1\./, 'an OpenAPI 3.1 document')
    }
  })

  t.test('Contract "Configuration": every documented default', async (t) => {
    const c = loadConfig({})
    t.equal(c.port, 8080, 'PORT 8080')
    t.equal(c.host, '0.0.0.0', 'HOST 0.0.0.0')
    t.equal(c.adminKey, undefined, 'ADMIN_KEY unset')
    t.equal(c.dataDir, './data', 'DATA_DIR ./data')
    t.equal(c.databaseUrl, undefined)
    t.equal(c.clickhouseUrl, undefined)
    t.equal(c.redisUrl, undefined)
    t.equal(c.rateLimitIngestPerMin, 6000, 'RATE_LIMIT_INGEST_PER_MIN 6000 (also spec "Limits")')
    t.equal(c.webhookTimeoutMs, 10000, 'WEBHOOK_TIMEOUT_MS 10000')
    t.same(c.webhookRetryDelaysSec, [60, 300, 900, 3600], 'WEBHOOK_RETRY_DELAYS 60,300,900,3600')
    t.equal(c.webhookAllowPrivate, false, 'WEBHOOK_ALLOW_PRIVATE false')
    t.equal(c.logLevel, 'info', 'LOG_LEVEL info')
    t.equal(loadConfig({ RATE_LIMIT_INGEST_PER_MIN: '0' }).rateLimitIngestPerMin, 0, '0 is accepted (disables)')
  })

  t.test("the OpenAPI document states the spec's core parameters, defaults, limits, required fields and statuses", async (t) => {
    const doc = (await h.request('GET', '/openapi.json')).body
    const deref = (s: any): any => (s?.$ref ? deref(doc.components.schemas[s.$ref.split('/').pop()]) : s)
    const op = (method: string, path: string) => doc.paths[`/api/v1${path}`]?.[method]
    const param = (o: any, name: string, where = 'query') => o?.parameters?.find((p: any) => p.name === name && p.in === where)
    const enumOf = (s: any): string[] => (deref(s).anyOf ?? []).map((x: any) => x.const).sort()

    const list = op('get', '/players')
    t.match(deref(param(list, 'page').schema), { type: 'integer', default: 1 }, 'page: integer, default 1')
    t.match(deref(param(list, 'limit').schema), { type: 'integer', default: 20, maximum: 100 }, 'limit: integer, default 20, max 100')
    t.match(deref(param(list, 'search').schema), { type: 'string' }, 'search: string')
    t.same(enumOf(param(list, 'status').schema), ['active', 'closed', 'self_excluded', 'suspended'], 'status: a player status')

    const create = op('post', '/players')
    const createBody = deref(create.requestBody.content['application/json'].schema)
    t.same(createBody.required, ['external_id'], 'POST /players: only external_id is required ("no other field is accepted as required")')
    t.same(enumOf(createBody.properties.language), ['en', 'es', 'it'], 'language en/it/es')
    t.ok(create.responses['201'], 'POST /players answers 201')

    const seg = deref(op('post', '/segments').requestBody.content['application/json'].schema)
    t.same([...seg.required].sort(), ['name', 'type'], 'POST /segments: name and type required, nothing else')
    t.ok(op('post', '/segments').responses['201'], 'POST /segments answers 201')

    const exp = op('get', '/segments/{id}/export')
    t.match(deref(param(exp, 'limit').schema), { type: 'integer', minimum: 1, maximum: 1000, default: 200 }, 'export limit 1..1000, default 200')
    t.same(enumOf(param(exp, 'format').schema), ['csv', 'json'], 'format json or csv')
    t.equal(deref(param(exp, 'format').schema).default, 'json', 'format default json')
    t.ok(param(exp, 'cursor'), 'cursor parameter')

    const events = op('post', '/events')
    t.ok(events.responses['200'], 'POST /events answers 200')
    const alternatives = deref(events.requestBody.content['application/json'].schema).anyOf.map(deref)
    const batch = alternatives.find((s: any) => s.properties?.events)
    const single = alternatives.find((s: any) => s.properties?.player_id)
    t.match(batch.properties.events, { minItems: 1, maxItems: 100 }, 'a batch holds 1 to 100 events')
    t.same([...single.required].sort(), ['event_type', 'player_id'], 'an event requires player_id and event_type only')
    t.match(single.properties.event_id, { type: 'string', maxLength: 128 }, 'event_id: string, max 128')
    for (const [method, path] of [['get', '/players'], ['post', '/players'], ['get', '/segments'], ['post', '/segments'], ['post', '/events']]) {
      t.ok(param(op(method!, path!), 'x-brand', 'header') && param(op(method!, path!), 'brand'), `${method} ${path}: brand hint by x-brand header and brand query`)
    }

    // "401 applies to every keyed endpoint, 404 to every endpoint with an {id}, and 400 to every endpoint that
    // validates a body or query."
    const core = [['get', '/players'], ['post', '/players'], ['get', '/players/{id}'], ['patch', '/players/{id}'], ['get', '/players/{id}/next-best-action'],
      ['get', '/segments'], ['post', '/segments'], ['get', '/segments/{id}/export'], ['post', '/events']]
    for (const [method, path] of core) {
      const o = op(method!, path!)
      t.ok(o, `${method} ${path} is documented`)
      t.ok(o.responses['401'], `${method} ${path}: 401 documented`)
      if (path!.includes('{id}')) t.ok(o.responses['404'], `${method} ${path}: 404 documented`)
      if (o.requestBody || o.parameters?.some((p: any) => p.in === 'query' && p.name !== 'brand')) t.ok(o.responses['400'], `${method} ${path}: 400 documented`)
    }
    for (const path of ['/health', '/openapi.json']) t.same(op('get', path).security, [], `${path} needs no key`)
    t.ok(op('get', '/health').responses['503'], '/health: 503 documented')
  })

  t.test('Authentication 3: each of the three key sources works on every core route, the Bearer scheme in any letter case', async (t) => {
    const tenant = await h.createTenant()
    const player = await createPlayer(tenant, { external_id: 'auth-base' })
    const segment = (await must(h.request('POST', '/segments', { key: tenant.key, body: { name: 's', type: 'dynamic' } }), 201)).data
    let n = 0
    const routes: [string, string, () => unknown, number][] = [
      ['GET', '/players', () => undefined, 200],
      ['POST', '/players', () => ({ external_id: `auth-${++n}` }), 201],
      ['GET', `/players/${player.id}`, () => undefined, 200],
      ['PATCH', `/players/${player.id}`, () => ({ phone: String(++n) }), 200],
      ['GET', `/players/${player.id}/next-best-action`, () => undefined, 200],
      ['GET', '/segments', () => undefined, 200],
      ['POST', '/segments', () => ({ name: `s${++n}`, type: 'dynamic' }), 201],
      ['GET', `/segments/${segment.id}/export`, () => undefined, 200],
      ['POST', '/events', () => ({ player_id: 'auth-ev', event_type: 'login' }), 200],
    ]
    const sources: [string, { headers?: Record<string, string>; query?: Record<string, string> }][] = [
      ['x-api-key', { headers: { 'x-api-key': tenant.key } }],
      ['Bearer', { headers: { authorization: `Bearer ${tenant.key}` } }],
      ['bearer (RFC 7235: the scheme is case-insensitive)', { headers: { authorization: `bearer ${tenant.key}` } }],
      ['api_key', { query: { api_key: tenant.key } }],
    ]
    const bad: string[] = []
    for (const [method, path, body, status] of routes) {
      for (const [label, o] of sources) {
        const res = await h.request(method, path, { ...o, body: body() })
        if (res.status !== status) bad.push(`${method} ${path} by ${label} -> ${res.status} ${res.text.slice(0, 100)}`)
      }
      const none = await h.request(method, path, { body: body() })
      if (none.status !== 401 || none.body?.code !== 'UNAUTHORIZED' || typeof none.body?.error !== 'string') bad.push(`${method} ${path} without a key -> ${none.status}`)
    }
    t.same(bad, [])
  })

  t.test('Events: every documented field has its documented type; a wrong type is 400 naming the field, single or batched, and nothing is stored', async (t) => {
    const tenant = await h.createTenant()
    const base = { player_id: 'typed', event_type: 'login' }
    const cases: [string, Record<string, unknown>][] = [
      ['player_id', { ...base, player_id: 123 }],
      ['player_id', { event_type: 'login' }],
      ['event_type', { ...base, event_type: 5 }],
      ['event_type', { player_id: 'typed' }],
      ['event_id', { ...base, event_id: 7 }],
      ['payload', { ...base, payload: [] }],
      ['payload', { ...base, payload: 'x' }],
      ['payload', { ...base, payload: null }],
      ['timestamp', { ...base, timestamp: 1704067200000 }],
      ['timestamp', { ...base, timestamp: '2024-01-01' }],
      ['timestamp', { ...base, timestamp: '2024-01-01T00:00:00' }],
      ['session_id', { ...base, session_id: 5 }],
    ]
    for (const [field, event] of cases) {
      for (const [shape, body, path] of [['single', event, field], ['batch', { events: [base, event] }, `events.1.${field}`]] as const) {
        const res = await ingest(tenant, body)
        const label = `${shape} ${JSON.stringify(event)}`
        t.equal(res.status, 400, label)
        t.equal(res.body.code, 'BAD_REQUEST', label)
        t.ok(res.body.details?.errors?.some((e: { field: string }) => e.field === path), `${label}: names ${path} (${JSON.stringify(res.body.details)})`)
      }
    }
    t.equal((await must(h.request('GET', '/players', { key: tenant.key }), 200)).pagination.total, 0, 'no player upserted by a refused request')
    // Every field at its documented type is accepted.
    const full = await ingest(tenant, { player_id: 'typed', event_type: 'login', event_id: 'x'.repeat(128), payload: { a: [1] }, timestamp: new Date(Date.now() - 60_000).toISOString(), session_id: 's-1' })
    t.equal(full.status, 200, full.text)
    t.match(full.body, { received: 1, stored: 1, deduped: 0, rejected: 0, ignored: 0, status: 'queued' })
    t.match(full.body.timestamp, ISO_RE, 'the response timestamp is a date-time')
  })

  t.test('Events rule 3: unknown_event_types lists stored types that are not canonical, each once; never a canonical type, never a deduplicated one', async (t) => {
    const tenant = await h.createTenant()
    const payloadOf = (type: string) => (type === 'status_change' ? { status: 'active' } : type === 'consent_update' ? { channel: 'email', granted: true } : {})
    const events = CANONICAL_TYPES.map((event_type, i) => ({ player_id: `c${i}`, event_type, event_id: `canon-${i}`, payload: payloadOf(event_type) }))
    const first = await ingest(tenant, { events: [...events, { player_id: 'u', event_type: 'mystery', event_id: 'm1' }, { player_id: 'u', event_type: 'mystery', event_id: 'm2' }] })
    t.equal(first.status, 200, first.text)
    t.match(first.body, { received: 19, stored: 19, deduped: 0 })
    t.same(first.body.unknown_event_types, ['mystery'], 'the one unknown type, once; none of the 17 canonical types')
    const again = await ingest(tenant, { events: [{ player_id: 'u', event_type: 'mystery', event_id: 'm1' }, { player_id: 'u', event_type: 'other', event_id: 'o1' }, { player_id: 'u', event_type: 'other', event_id: 'o1' }] })
    t.match(again.body, { received: 3, stored: 1, deduped: 2 })
    t.same(again.body.unknown_event_types, ['other'], '"stored types": the deduplicated mystery is not stored, so not listed')
  })

  t.test('Events: the body\'s top-level `brand` is the brand hint (docs/tenancy.md), never ignored: a batch\'s or a single event\'s; an event inside a batch has none',
    async (t) => {
      // The spec names x-brand and ?brand= for POST /events; docs/tenancy.md adds the body's top-level brand,
      // as on create routes. Ignoring it would write the events silently to the default brand.
      const tenant = await h.createTenant()
      await tenant.createBrand('second')
      const inBatch = await ingest(tenant, { events: [{ player_id: 'b-batch', event_type: 'login', brand: 'second' }] })
      t.equal(inBatch.status, 200, 'in a batch, a brand field of an event is an event field like any other')
      t.ok(await playerByExternalId(tenant, 'b-batch'), 'stored in the default brand')
      const batchHint = await ingest(tenant, { brand: 'second', events: [{ player_id: 'b-batch-2', event_type: 'login' }] })
      t.equal(batchHint.status, 200)
      t.ok(await playerByExternalId(tenant, 'b-batch-2', 'second'), "a batch's brand selects the brand")
      const named = await ingest(tenant, { player_id: 'b-single-2', event_type: 'login', brand: 'second' })
      t.equal(named.status, 200)
      t.ok(await playerByExternalId(tenant, 'b-single-2', 'second'), "a single event's brand selects the brand")
      const unknown = await ingest(tenant, { player_id: 'b-single-1', event_type: 'login', brand: 'operator-brand-x' })
      t.equal(unknown.status, 400, 'an unknown brand is 400, never the default brand in its place')
      t.equal(unknown.body.code, 'BAD_REQUEST')
      t.notOk(await playerByExternalId(tenant, 'b-single-1'), 'nothing stored')
    })

  t.test('Players: the Player resource has exactly the spec fields, with their types, wherever it is returned; GET by id adds only the profile', async (t) => {
    const tenant = await h.createTenant()
    const created = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'shape', email: 'shape@example.com', phone: '+39 1', metadata: { k: [1, { a: null }] }, language: 'it', currency: 'gbp' } })
    t.equal(created.status, 201)
    t.same(keys(created.body), ['data'], 'conventions 2: { data: <resource> }')
    checkPlayer(t, created.body.data, 'POST (created)')
    const repeat = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'shape', status: 'suspended' } })
    t.equal(repeat.status, 201, 'a repeat is 201 too')
    checkPlayer(t, repeat.body.data, 'POST (repeat)')
    t.equal(repeat.body.data.status, 'suspended')
    const patched = await h.request('PATCH', `/players/${created.body.data.id}`, { key: tenant.key, body: { phone: null } })
    t.equal(patched.status, 200)
    checkPlayer(t, patched.body.data, 'PATCH')
    const list = await h.request('GET', '/players', { key: tenant.key })
    t.same(keys(list.body), ['data', 'pagination'], 'conventions 3: { data, pagination }')
    t.same(keys(list.body.pagination), ['limit', 'page', 'pages', 'total'])
    for (const v of Object.values(list.body.pagination)) t.ok(Number.isInteger(v), 'pagination fields are integers')
    checkPlayer(t, list.body.data[0], 'GET list')
    const got = await h.request('GET', `/players/${created.body.data.id}`, { key: tenant.key })
    const { profile, ...player } = got.body.data
    checkPlayer(t, player, 'GET by id')
    t.match(profile, { language: 'it', currency: 'GBP' }, 'the joined profile carries language and currency')

    // A player that ingestion created is the same resource.
    t.equal((await ingest(tenant, { player_id: 'from-events', event_type: 'login' })).status, 200)
    const fromEvents = await playerByExternalId(tenant, 'from-events')
    checkPlayer(t, fromEvents, 'created by ingestion')
    t.match(fromEvents, { email: null, phone: null, status: 'active', metadata: {} })
    const full = await must(h.request('GET', `/players/${fromEvents.id}`, { key: tenant.key }), 200)
    t.match(full.data.profile, { language: 'en', currency: 'EUR' }, 'the profile defaults of POST /players apply to an ingested player too')
    for (const [k, v] of Object.entries<any>(full.data.profile)) {
      if (k.endsWith('_at') && v !== null) t.match(v, ISO_RE, `profile.${k} is a date-time`)
    }
  })

  t.test('Players: Player.email is "string (email) or null", also when a registration or profile_update event carries something else',
    async (t) => {
      const tenant = await h.createTenant()
      const refused = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'x', email: 'not an email' } })
      t.equal(refused.status, 400, 'the API itself refuses the value: it is no email')
      t.equal((await ingest(tenant, { player_id: 'bad-mail', event_type: 'registration', payload: { email: 'not an email', country: 'IT' } })).status, 200, 'the event is accepted (the raw payload is kept)')
      const fresh = await playerByExternalId(tenant, 'bad-mail')
      t.ok(fresh.email === null || EMAIL_RE.test(fresh.email), `a new player's email is an email or null, not ${JSON.stringify(fresh.email)}`)
      await createPlayer(tenant, { external_id: 'good-mail', email: 'good@example.com' })
      t.equal((await ingest(tenant, { player_id: 'good-mail', event_type: 'profile_update', payload: { email: 'still@not@valid' } })).status, 200)
      const kept = await playerByExternalId(tenant, 'good-mail')
      t.ok(kept.email === null || EMAIL_RE.test(kept.email), `an existing player's address is not replaced by a malformed one: ${JSON.stringify(kept.email)}`)
      const long = `${'a'.repeat(250)}@example.com`
      t.equal((await ingest(tenant, { player_id: 'long-mail', event_type: 'registration', payload: { email: long } })).status, 200)
      const cut = (await playerByExternalId(tenant, 'long-mail')).email
      t.ok(cut === null || cut === long, `a 262-character address is kept whole or not at all, never cut into another string: ${JSON.stringify(cut)}`)
    })

  t.test('Players: a PATCH or repeated POST with the same metadata in another key order changes nothing (docs/players.md: "A write that changes nothing (same values) emits nothing and does not touch updated_at")',
    async (t) => {
      const tenant = await h.createTenant()
      const p = await createPlayer(tenant, { external_id: 'order', metadata: { prefs: { sms: false, email: true }, vip: { tier: 2, since: '2024' } } })
      await new Promise((r) => setTimeout(r, 15))
      // jsonb keeps object keys shortest first (sms, email; tier, since): both writes below give the other order.
      const patched = await must(h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { metadata: { prefs: { email: true, sms: false } } } }), 200)
      t.same(patched.data.metadata, p.metadata, 'the metadata is the same')
      t.equal(patched.data.updated_at, p.updated_at, 'updated_at untouched by a PATCH that changes nothing')
      const repeated = await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'order', metadata: { vip: { since: '2024', tier: 2 } } } }), 201)
      t.equal(repeated.data.updated_at, p.updated_at, 'nor by a repeated POST that changes nothing')
      t.same((await outbox(tenant.id)).map((e) => e.event), ['player.created'], 'no player.updated for a write that changes nothing')
    })

  t.test('Players: PATCH takes every field as optional ({} is 200 and changes nothing); an upper-case UUID names the same player; ids come back lower-case', async (t) => {
    const tenant = await h.createTenant()
    const p = await createPlayer(tenant, { external_id: 'opt', email: 'opt@example.com' })
    const empty = await h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: {} })
    t.equal(empty.status, 200, '"body (all optional)"')
    t.same(empty.body.data, p, 'nothing changed')
    for (const path of [`/players/${p.id.toUpperCase()}`, `/players/${p.id.toUpperCase()}/next-best-action`]) {
      const res = await h.request('GET', path, { key: tenant.key })
      t.equal(res.status, 200, `${path}: a UUID in upper case is the same UUID (RFC 4122)`)
      t.equal(res.body.data.id ?? res.body.data.player_id, p.id, 'answered with the canonical lower-case id')
    }
    const patchUpper = await h.request('PATCH', `/players/${p.id.toUpperCase()}`, { key: tenant.key, body: { phone: '7' } })
    t.equal(patchUpper.status, 200)
    t.equal(patchUpper.body.data.id, p.id)
  })

  t.test('Players: GET /players filters by each of the four statuses; pages are ceil(total/limit) at the limit edges 1 and 100', async (t) => {
    const tenant = await h.createTenant()
    const statuses = ['active', 'suspended', 'self_excluded', 'closed']
    for (const [i, status] of statuses.entries()) for (let j = 0; j <= i; j++) await createPlayer(tenant, { external_id: `${status}-${j}`, status })
    for (const [i, status] of statuses.entries()) {
      const res = await must(h.request('GET', '/players', { key: tenant.key, query: { status } }), 200)
      t.equal(res.pagination.total, i + 1, `status=${status}`)
      t.ok(res.data.every((p: { status: string }) => p.status === status))
    }
    for (const [limit, pages] of [[1, 10], [3, 4], [100, 1]] as const) {
      const res = await must(h.request('GET', '/players', { key: tenant.key, query: { limit } }), 200)
      t.same(res.pagination, { page: 1, limit, total: 10, pages }, `limit=${limit}`)
      t.equal(res.data.length, Math.min(limit, 10))
    }
  })

  t.test('Segments: the resource, the list and the export have exactly the documented fields; required fields are required', async (t) => {
    const tenant = await h.createTenant()
    await createPlayer(tenant, { external_id: 'seg-1', email: 'seg1@example.com' })
    const created = await h.request('POST', '/segments', { key: tenant.key, body: { name: 'everyone', type: 'dynamic' } })
    t.equal(created.status, 201)
    t.same(keys(created.body), ['data'])
    const s = created.body.data
    t.same(keys(s), SEGMENT_FIELDS, "the spec's Segment fields plus docs/segments.md's player_count and last_computed_at")
    t.match(s.id, UUID_RE)
    t.match(s, { name: 'everyone', type: 'dynamic', player_count: null, last_computed_at: null })
    t.ok(isObject(s.rules), 'rules is an object even when omitted')
    t.match(s.created_at, ISO_RE)
    t.match(s.updated_at, ISO_RE)
    for (const [field, body] of [['name', { type: 'dynamic' }], ['type', { name: 'n' }], ['type', { name: 'n', type: 'other' }], ['rules', { name: 'n', type: 'dynamic', rules: [] }]] as const) {
      const res = await h.request('POST', '/segments', { key: tenant.key, body })
      t.equal(res.status, 400, JSON.stringify(body))
      t.ok(res.body.details?.errors?.some((e: { field: string }) => e.field === field || e.field.startsWith(`${field}.`)), `names ${field}`)
    }
    const list = await h.request('GET', '/segments', { key: tenant.key })
    t.same(keys(list.body), ['data'], 'conventions 3: segments are { data: [...] }, no pagination')
    t.same(list.body.data, [s])
    const exp = await h.request('GET', `/segments/${s.id}/export`, { key: tenant.key })
    t.equal(exp.status, 200)
    t.same(keys(exp.body), ['data', 'next_cursor', 'segment'], '{ segment, data, next_cursor }')
    t.equal(exp.body.segment.id, s.id)
    t.equal(exp.body.next_cursor, null, 'a single page: next_cursor null')
    t.same(exp.body.data.map(keys), [['consent', 'country', 'email', 'external_id', 'name', 'phone']], 'rows: exactly external_id, email, phone, name, consent, country')
    t.match(exp.body.data[0], { external_id: 'seg-1', email: 'seg1@example.com', phone: null })
  })

  t.test('Errors: every refusal of the core routes is { error, code, details? } with the status and code of the spec table', async (t) => {
    const tenant = await h.createTenant()
    const ingestOnly = await tenant.createKey({ scopes: ['events:write'] })
    const readOnly = await tenant.createKey({ scopes: ['read'] })
    const brandless = await h.createTenant({ brand: null })
    const p = await createPlayer(tenant, { external_id: 'err' })
    const missing = '00000000-0000-4000-8000-000000000000'
    const cases: [string, string, string | undefined, Record<string, unknown>, number, string][] = [
      ['GET', '/players', undefined, {}, 401, 'UNAUTHORIZED'],
      ['GET', '/players', 'rsp_0000000000000000000000000000000000000000', {}, 401, 'UNAUTHORIZED'],
      ['GET', '/players', ingestOnly.key, {}, 403, 'FORBIDDEN'],
      ['GET', '/segments', ingestOnly.key, {}, 403, 'FORBIDDEN'],
      ['POST', '/events', readOnly.key, { body: { player_id: 'x', event_type: 'login' } }, 403, 'FORBIDDEN'],
      ['PATCH', `/players/${p.id}`, readOnly.key, { body: { phone: '1' } }, 403, 'FORBIDDEN'],
      ['GET', `/players/${missing}`, tenant.key, {}, 404, 'NOT_FOUND'],
      ['PATCH', `/players/${missing}`, tenant.key, { body: {} }, 404, 'NOT_FOUND'],
      ['GET', `/players/${missing}/next-best-action`, tenant.key, {}, 404, 'NOT_FOUND'],
      ['GET', `/segments/${missing}/export`, tenant.key, {}, 404, 'NOT_FOUND'],
      ['GET', '/players', tenant.key, { query: { limit: 101 } }, 400, 'BAD_REQUEST'],
      ['GET', '/segments', tenant.key, { query: { type: 'nope' } }, 400, 'BAD_REQUEST'],
      ['POST', '/players', tenant.key, { body: { email: 'a@b.co' } }, 400, 'BAD_REQUEST'],
      ['POST', '/events', tenant.key, { body: { events: [] } }, 400, 'BAD_REQUEST'],
      ['GET', '/players', tenant.key, { headers: { 'x-brand': 'no-such-brand' } }, 400, 'BAD_REQUEST'],
      ['POST', '/events', tenant.key, { query: { brand: 'no-such-brand' }, body: { player_id: 'x', event_type: 'login' } }, 400, 'BAD_REQUEST'],
    ]
    // "tenant has no active brand": 400 on every brand-scoped core route.
    for (const [method, path, body] of [['GET', '/players'], ['POST', '/players', { external_id: 'x' }], ['GET', '/segments'], ['POST', '/segments', { name: 'n', type: 'dynamic' }], ['POST', '/events', { player_id: 'x', event_type: 'login' }]] as const) {
      cases.push([method, path, brandless.key, body ? { body } : {}, 400, 'BAD_REQUEST'])
    }
    const bad: string[] = []
    for (const [method, path, key, o, status, code] of cases) {
      const res = await h.request(method, path, { key, ...o })
      const body = res.body
      const shapeOk = isObject(body) && typeof body.error === 'string' && body.error.length > 0 && ERROR_CODES.includes(body.code) &&
        (body.details === undefined || isObject(body.details)) && Object.keys(body).every((k) => ['error', 'code', 'details', 'request_id'].includes(k))
      if (res.status !== status || body?.code !== code || !shapeOk || !/^application\/json/.test(res.headers.get('content-type') ?? '')) {
        bad.push(`${method} ${path} ${JSON.stringify(o).slice(0, 60)} -> ${res.status} ${res.text.slice(0, 120)} (want ${status} ${code})`)
      }
    }
    t.same(bad, [])
    t.equal((await must(h.request('GET', '/players', { key: tenant.key }), 200)).pagination.total, 1, 'no refused request wrote a player')
  })
})

// Values the schemas let through but the stores cannot take (a NUL character in text or jsonb, JSON nested
// deeper than any serialiser's stack) are the caller's mistake: 400 in the error shape, never 500.
t.test('refused-values', async (t) => {
  const NUL = 'a\u0000b'
  /** `{"a":{"a":...1...}}`, n levels deep, as JSON text (JSON.stringify would overflow the test's stack). */
  const deep = (n: number): string => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`
  t.test('a NUL character anywhere PostgreSQL would store or compare it is 400 BAD_REQUEST', async (t) => {
    const tenant = await h.createTenant()
    const key = tenant.key
    const player = (await h.request('POST', '/players', { key, body: { external_id: 'p1' } })).body.data
    const campaign = (await h.request('POST', '/campaigns', { key, body: { name: 'c', type: 'one_shot', channels: ['email'] } })).body.data
    const template = (await h.request('POST', '/notifications/templates', { key, body: { name: 't', channel: 'email', body: 'b' } })).body.data
    const cases: [string, string, { body?: unknown; query?: Record<string, string> }][] = [
      ['POST', '/players', { body: { external_id: NUL } }],
      ['POST', '/players', { body: { external_id: 'x', phone: NUL } }],
      ['POST', '/players', { body: { external_id: 'x', metadata: { note: NUL } } }],
      ['POST', '/players', { body: { external_id: 'x', metadata: { [NUL]: 1 } } }],
      ['GET', '/players', { query: { search: NUL } }],
      ['PATCH', `/players/${player.id}`, { body: { phone: NUL } }],
      ['PATCH', `/players/${player.id}`, { body: { metadata: { note: NUL } } }],
      ['POST', '/segments', { body: { name: NUL, type: 'dynamic' } }],
      ['POST', '/segments', { body: { name: 's', type: 'dynamic', rules: { field: 'email', op: 'eq', value: NUL } } }],
      ['POST', '/segments', { body: { name: 's', type: 'dynamic', rules: { field: 'metadata.x', op: 'gt', value: NUL } } }],
      ['POST', '/campaigns', { body: { name: NUL, type: 'one_shot', channels: ['email'] } }],
      ['POST', '/campaigns', { body: { name: 'c', type: 'one_shot', channels: ['email'], description: NUL } }],
      ['POST', '/campaigns', { body: { name: 'c', type: 'one_shot', channels: ['email'], config: { x: NUL } } }],
      ['PATCH', `/campaigns/${campaign.id}`, { body: { name: NUL } }],
      ['PATCH', `/campaigns/${campaign.id}`, { body: { schedule: { x: NUL } } }],
      ['POST', '/notifications/templates', { body: { name: 't', channel: 'email', body: NUL } }],
      ['POST', '/notifications/templates', { body: { name: 't', channel: 'email', body: 'b', variables: [NUL] } }],
      ['PATCH', `/notifications/templates/${template.id}`, { body: { subject: NUL } }],
      ['POST', '/notifications/send', { body: { player_id: player.id, channel: 'email', payload: { subject: 's', body: 'b', x: NUL } } }],
      ['POST', '/gamification/levels', { body: { name: NUL, tier: 1, min_points: 0 } }],
      ['POST', '/bonuses', { body: { name: 'b', type: 'custom', value: 1, value_type: 'x', config: { x: NUL } } }],
      ['POST', '/tournaments', { body: { name: 't', prize_pool: { x: NUL } } }],
    ]
    for (const [method, path, o] of cases) {
      const res = await h.request(method, path, { key, ...o })
      const label = `${method} ${path} ${JSON.stringify(o)}`
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST', label)
      t.equal(res.body.details?.reason, 'VALUE_REJECTED', label)
    }
    // Nothing was half-written.
    const list = await h.request('GET', '/players', { key })
    t.same(list.body.data.map((p: { external_id: string }) => p.external_id), ['p1'])
  })

  t.test('a JSON body nested deeper than 64 levels is 400 BAD_REQUEST (was 500)', async (t) => {
    const tenant = await h.createTenant()
    const key = tenant.key
    const cases: [string, string][] = [
      ['/players', `{"external_id":"deep","metadata":${deep(20_000)}}`],
      ['/campaigns', `{"name":"c","type":"one_shot","channels":["email"],"config":${deep(20_000)}}`],
      ['/gamification/badges', `{"name":"b","criteria":${deep(20_000)}}`],
    ]
    for (const [path, rawBody] of cases) {
      const res = await h.request('POST', path, { key, rawBody, headers: { 'content-type': 'application/json' } })
      t.equal(res.status, 400, path)
      t.equal(res.body.code, 'BAD_REQUEST', path)
    }
    // 64 levels (the body object plus 63 below it) are stored as given; brackets inside strings do not count.
    const ok = await h.request('POST', '/players', {
      key,
      rawBody: `{"external_id":"[[[{{{\\"{{","metadata":${deep(63)}}`,
      headers: { 'content-type': 'application/json' },
    })
    t.equal(ok.status, 201, ok.text)
    const tooDeep = await h.request('POST', '/players', { key, rawBody: `{"external_id":"x","metadata":${deep(64)}}`, headers: { 'content-type': 'application/json' } })
    t.equal(tooDeep.status, 400)
    t.match(tooDeep.body.details, { reason: 'TOO_DEEP', max_depth: 64 })
  })
})

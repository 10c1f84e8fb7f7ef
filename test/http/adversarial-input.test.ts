// Adversarial: bad input on every body-taking route of the served OpenAPI document, the spec's Limits
// table at and one past each edge, and HTTP edge cases. Spec "Errors", "Limits"; docs/errors.md
// (never a 500 for bad input; every error in the shape with a request id); docs/http.md.
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', RATE_LIMIT_INGEST_PER_MIN: '0' } })
const doc = (await h.request('GET', '/openapi.json')).body
interface Op { method: string; path: string; admin: boolean }
const bodyOps: Op[] = []
for (const [path, item] of Object.entries<any>(doc.paths)) for (const [m, op] of Object.entries<any>(item)) {
  if (!op?.responses || !op.requestBody || !op.security?.length) continue
  bodyOps.push({ method: m.toUpperCase(), path, admin: op['x-required-role'] === 'super_admin' })
}
const isError = (res: any) => typeof res.body?.error === 'string' && typeof res.body?.code === 'string' && typeof res.body?.request_id === 'string' && res.headers.get('x-request-id') === res.body.request_id

t.test('every body route: malformed, non-object, empty and too-deep bodies are 400 BAD_REQUEST in the error shape', async (t) => {
  const tenant = await h.createTenant()
  t.ok(bodyOps.length >= 30, `${bodyOps.length} body routes`)
  let deep: unknown = 1
  for (let i = 0; i < 65; i++) deep = { a: deep }
  const raws: [string, string][] = [['malformed', '{"a":'], ['trailing comma', '{"a":1,}'], ['array', '[]'], ['null', 'null'], ['number', '1e999'], ['string', '"x"'],
    ['single quotes', "{'a':1}"], ['NaN', '{"a":NaN}'], ['deep', JSON.stringify(deep)], ['deep array', '['.repeat(100000) + ']'.repeat(100000)], ['lone NUL', '\u0000']]
  const bad: string[] = []
  for (const op of bodyOps) {
    const path = op.path.replace('{dataset}', 'players').replace(/\{[^}]+\}/g, () => randomUUID())
    const key = op.admin ? h.adminKey : tenant.key
    for (const [label, raw] of raws) {
      const res = await h.request(op.method, path, { key, rawBody: raw, headers: { 'content-type': 'application/json' } })
      if (res.status !== 400 || !isError(res)) bad.push(`${label} ${op.method} ${op.path} -> ${res.status} ${res.text.slice(0, 100)}`)
      if (label === 'deep' && res.body?.details?.reason !== 'TOO_DEEP') bad.push(`deep ${op.method} ${op.path}: reason ${JSON.stringify(res.body?.details)}`)
    }
  }
  t.same(bad, [])
})

t.test('every body route: hostile values inside a well-formed body never give a 500', async (t) => {
  const tenant = await h.createTenant()
  const values: unknown[] = ['\u0000', 'a\u0000b', 1e308, -1e308, 2 ** 63, -(2 ** 31) - 1, 0.1 + 0.2, '9'.repeat(400), '\ud800', '😀'.repeat(1000), '0001-01-01T00:00:00Z', '294277-01-01T00:00:00Z', { $gt: '' }, [[[[[]]]]], true]
  const fields = ['name', 'external_id', 'email', 'tier', 'min_points', 'value', 'amount', 'starts_at', 'ends_at', 'expires_at', 'max_participants', 'metadata', 'rules', 'config', 'brand', 'player_id', 'currency_id', 'status', 'channels', 'url', 'events', 'chat_id', 'slug', 'body', 'subject', 'scopes', 'type', 'symbol', 'value_type']
  const bad: string[] = []
  for (const op of bodyOps) {
    const path = op.path.replace(/\{[^}]+\}/g, () => randomUUID())
    const key = op.admin ? h.adminKey : tenant.key
    for (const v of values) {
      const body = Object.fromEntries(fields.map((f) => [f, v]))
      const res = await h.request(op.method, path, { key, body })
      if (res.status >= 500 || (res.status >= 400 && !isError(res))) bad.push(`${op.method} ${op.path} all=${JSON.stringify(v).slice(0, 30)} -> ${res.status} ${res.text.slice(0, 100)}`)
    }
  }
  t.same(bad, [])
})

t.test('a value outside a choice names the choices (not one "must be equal to constant" per choice)', async (t) => {
  const tenant = await h.createTenant()
  const bad = await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'x', type: 'bogus', channels: ['in_app'] } })
  t.equal(bad.status, 400)
  const errors = bad.body.details.errors as { field: string; message: string }[]
  t.same(errors.filter((e) => e.field === 'type'), [{ in: 'body', field: 'type', message: 'must be one of: one_shot, recurring, triggered, journey' }])
  t.notOk(errors.some((e) => /equal to constant|schema in anyOf/.test(e.message)), JSON.stringify(errors))
  const channel = await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'x', type: 'one_shot', channels: ['in_app', 'pigeon'] } })
  t.equal(channel.status, 400)
  t.match(channel.body.details.errors, [{ field: 'channels.1', message: /^must be one of: .*in_app/ }])
})

t.test('a body that is not JSON says what it was sent as; malformed JSON says so', async (t) => {
  const tenant = await h.createTenant()
  const xml = await h.request('POST', '/events', { key: tenant.key, rawBody: '<event type="deposit"/>', headers: { 'content-type': 'application/xml' } })
  t.equal(xml.status, 400)
  t.equal(xml.body.error, 'the request body is not JSON (sent as application/xml): the API takes application/json')
  const form = await h.request('POST', '/campaigns', { key: tenant.key, rawBody: 'name=x&type=one_shot', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(form.status, 400)
  t.match(form.body.error, /not JSON \(sent as application\/x-www-form-urlencoded\)/)
  const broken = await h.request('POST', '/campaigns', { key: tenant.key, rawBody: '{"name": ', headers: { 'content-type': 'application/json' } })
  t.equal(broken.body.error, 'malformed JSON body')
  // curl -d sends a form type: a JSON body under it is read as JSON (the README's examples rely on it).
  const curl = await h.request('POST', '/events', { key: tenant.key, rawBody: JSON.stringify({ player_id: 'p1', event_type: 'login' }), headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(curl.status, 200)
})

t.test('Limits: events per batch 1..100, event_id up to 128 characters', async (t) => {
  const tenant = await h.createTenant()
  const ev = (i: number, id?: string) => ({ player_id: `p${i % 3}`, event_type: 'login', event_id: id ?? randomUUID() })
  const post = (body: unknown) => h.request('POST', '/events', { key: tenant.key, body })
  t.equal((await post({ events: [] })).status, 400, '0 events')
  t.equal((await post({ events: [ev(1)] })).status, 200, '1 event')
  const hundred = await post({ events: Array.from({ length: 100 }, (_, i) => ev(i)) })
  t.equal(hundred.status, 200, '100 events')
  t.equal(hundred.body.received, 100)
  const over = await post({ events: Array.from({ length: 101 }, (_, i) => ev(i)) })
  t.equal(over.status, 400, '101 events')
  t.equal(over.body.code, 'BAD_REQUEST')
  t.equal((await post(ev(1, 'x'.repeat(128)))).status, 200, 'event_id of 128')
  t.equal((await post(ev(1, 'x'.repeat(129)))).status, 400, 'event_id of 129')
  t.equal((await post(ev(1, '😀'.repeat(64)))).status, 200, '128 UTF-16 code units (64 astral characters) is within the limit')
  t.equal((await post(ev(1, '😀'.repeat(128)))).status, 200, '128 characters, astral: still 128 characters')
  t.equal((await post(ev(1, '😀'.repeat(129)))).status, 400, '129 astral characters')
  t.equal((await post({ events: [ev(1, 'y'.repeat(129))] })).status, 400, 'event_id of 129 inside a batch')
  const nul = await post({ player_id: 'p\u0000', event_type: 'login' })
  t.equal(nul.status, 400, 'a NUL in player_id')
  const nulType = await post({ player_id: 'p', event_type: 'lo\u0000gin' })
  t.equal(nulType.status, 400, 'a NUL in event_type')
  const nulPayload = await post({ player_id: 'p', event_type: 'login', payload: { 'k\u0000': 'v\u0000' } })
  t.ok(nulPayload.status === 200 || nulPayload.status === 400, `a NUL in the payload -> ${nulPayload.status}`)
})

t.test('Limits: cohort months 1..36, export limit 1..1000 (at and one past each edge)', async (t) => {
  const tenant = await h.createTenant()
  for (const [months, status] of [[0, 400], [1, 200], [36, 200], [37, 400]] as const) {
    t.equal((await h.request('GET', '/analytics/cohorts', { key: tenant.key, query: { months } })).status, status, `months=${months}`)
  }
  const seg = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 's', type: 'dynamic', rules: { all: [] } } })).body.data.id
  for (const path of ['/export/players', '/export/events', '/export/transactions', `/segments/${seg}/export`]) {
    for (const [limit, status] of [[0, 400], [1, 200], [1000, 200], [1001, 400]] as const) {
      t.equal((await h.request('GET', path, { key: tenant.key, query: { limit } })).status, status, `${path} limit=${limit}`)
    }
  }
})

t.test('extreme and junk amounts in ingested events never break analytics, reports or exports', async (t) => {
  const tenant = await h.createTenant()
  const amounts: unknown[] = [1e308, -1e308, 1e308, 'lots', null, { n: 1 }, 0.000001, 1e-320, '1e400', 12345678901234567890]
  const events = amounts.flatMap((amount, i) => [
    { player_id: `x${i}`, event_type: 'deposit', event_id: randomUUID(), payload: { amount, currency: i % 2 ? 'EUR' : 'X\u00e9' } },
    { player_id: `x${i}`, event_type: 'bet', event_id: randomUUID(), payload: { amount, currency: 'EUR', game: 'g'.repeat(300) } },
    { player_id: `x${i}`, event_type: 'win', event_id: randomUUID(), payload: { amount, currency: 'EUR' } },
  ])
  const ing = await h.request('POST', '/events', { key: tenant.key, body: { events } })
  t.equal(ing.status, 200)
  const bad: string[] = []
  const gets: [string, Record<string, string>][] = [['/analytics/summary', {}], ['/analytics/timeseries', {}], ['/analytics/cohorts', {}], ['/export/transactions', {}], ['/export/events', {}], ['/players', {}]]
  for (const d of ['country', 'device', 'os', 'browser', 'platform', 'game', 'provider', 'category', 'heatmap', 'bonus_roi']) gets.push(['/analytics/revenue', { dimension: d }])
  for (const metric of ['players', 'events', 'deposits', 'wagered']) for (const dimension of ['day', 'week', 'status', 'country', 'game', 'event_type']) gets.push(['/reports/run', { metric, dimension }])
  for (const [path, query] of gets) {
    const res = await h.request('GET', path, { key: tenant.key, query })
    if (res.status !== 200) bad.push(`${path} ${JSON.stringify(query)} -> ${res.status} ${res.text.slice(0, 120)}`)
  }
  t.same(bad, [])
})

t.test('unicode round-trips exactly; search treats LIKE wildcards literally', async (t) => {
  const tenant = await h.createTenant()
  const names = ['Ünïcödé', '😀👨‍👩‍👧', 'مرحبا', 'e\u0301', '\u202etxt', 'a'.repeat(200)]
  for (const name of names) {
    const res = await h.request('POST', '/gamification/badges', { key: tenant.key, body: { name } })
    t.equal(res.status, 201)
    const got = await h.request('GET', `/gamification/badges/${res.body.data.id}`, { key: tenant.key })
    t.equal(got.body.data.name, name, `round trip ${JSON.stringify(name.slice(0, 10))}`)
  }
  t.equal((await h.request('POST', '/gamification/badges', { key: tenant.key, body: { name: 'a'.repeat(201) } })).status, 400, 'name over its maxLength (200)')
  const astral = await h.request('POST', '/gamification/badges', { key: tenant.key, body: { name: '😀'.repeat(200) } })
  t.equal(astral.status, 201, '200 astral characters are 200 characters (JSON Schema maxLength counts code points)')
  for (const ext of ['ab_cd', 'abXcd', 'a%z', 'aQQz', 'back\\slash']) t.equal((await h.request('POST', '/players', { key: tenant.key, body: { external_id: ext } })).status, 201)
  const s = async (search: string) => (await h.request('GET', '/players', { key: tenant.key, query: { search } })).body.data.map((p: any) => p.external_id).sort()
  t.same(await s('b_c'), ['ab_cd'], '_ is literal')
  t.same(await s('a%'), ['a%z'], '% is literal')
  t.same(await s('K\\S'), ['back\\slash'], 'backslash is literal, case-insensitive')
  t.same(await s('AB_'), ['ab_cd'], 'case-insensitive')
})

t.test('HEAD, OPTIONS, unknown methods, trailing slashes and case are 404 NOT_FOUND in the error shape, never 500', async (t) => {
  const tenant = await h.createTenant()
  const bad: string[] = []
  const cases: [string, string][] = [['OPTIONS', '/players'], ['PUT', '/players'], ['DELETE', '/players'], ['PROPFIND', '/players'], ['PATCH', '/health'], ['POST', '/openapi.json'],
    ['GET', '/players/'], ['GET', '//players'], ['GET', '/Players'], ['GET', '/health/'], ['GET', '/nope'], ['GET', '/players/x/y/z'], ['POST', '/events/'],
    ['GET', '/api/v2/players'], ['GET', '/api/v1'], ['GET', '/api/v1/'], ['GET', '/players%2F']]
  for (const [m, p] of cases) {
    const res = await h.request(m, p, { key: tenant.key })
    if (res.status !== 404 || !isError(res) || res.body.code !== 'NOT_FOUND') bad.push(`${m} ${p} -> ${res.status} ${res.text.slice(0, 80)}`)
  }
  for (const p of ['/players', '/health', '/openapi.json']) {
    const res = await h.request('HEAD', p, { key: tenant.key })
    if (res.status >= 500 || !res.headers.get('x-request-id')) bad.push(`HEAD ${p} -> ${res.status}`)
    if (res.text !== '') bad.push(`HEAD ${p} has a body`)
  }
  t.same(bad, [])
})

t.test("the caller's x-request-id is echoed when a short token, replaced otherwise", async (t) => {
  const ok = await h.request('GET', '/nope', { headers: { 'x-request-id': 'abc-123_XYZ' } })
  t.equal(ok.headers.get('x-request-id'), 'abc-123_XYZ')
  t.equal(ok.body.request_id, 'abc-123_XYZ')
  for (const id of ['x'.repeat(5000), 'has space', '<script>', 'a"b', '']) {
    const res = await h.request('GET', '/nope', { headers: { 'x-request-id': id } })
    t.not(res.headers.get('x-request-id'), id || null, `not echoed: ${id.slice(0, 12)}`)
    t.ok(res.headers.get('x-request-id'), 'but one is given')
    t.equal(res.body.request_id, res.headers.get('x-request-id'))
  }
})

t.test('one hostile field at a time in an otherwise valid create: never a 500, and what is stored reads back', async (t) => {
  const tenant = await h.createTenant()
  const player = (await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'base' } })).body.data.id
  const creates: Record<string, Record<string, unknown>> = {
    '/players': { external_id: 'e', email: 'a@b.co', phone: '1', status: 'active', metadata: {}, language: 'en', currency: 'EUR' },
    '/segments': { name: 's', type: 'dynamic', rules: { all: [{ field: 'status', op: 'eq', value: 'active' }] } },
    '/campaigns': { name: 'c', type: 'one_shot', channels: ['email'], description: 'd', schedule: {}, config: {} },
    '/notifications/templates': { name: 't', channel: 'email', body: 'hi {{x}}', subject: 's', locale: 'en' },
    '/gamification/levels': { name: 'l', tier: 1, min_points: 0, max_points: 10, benefits: {} },
    '/gamification/missions': { name: 'm', type: 'daily', description: 'd', rules: {}, rewards: {}, max_completions_per_player: 1, starts_at: '2026-01-01T00:00:00Z', ends_at: '2027-01-01T00:00:00Z' },
    '/gamification/badges': { name: 'b', description: 'd', icon_url: 'https://x.example/i.png', criteria: {}, rarity: 'rare' },
    '/gamification/currencies': { name: 'c', symbol: 'C', type: 'virtual' },
    '/bonuses': { name: 'b', type: 'welcome', value: 1, value_type: 'fixed', wagering_requirement: 0, config: {}, expires_in_hours: 1, active: true },
    '/tournaments': { name: 't', description: 'd', status: 'draft', game_config: {}, prize_pool: {}, max_participants: 10, starts_at: '2026-01-01T00:00:00Z', ends_at: '2027-01-01T00:00:00Z' },
    '/notifications/send': { player_id: player, channel: 'in_app', payload: { body: 'b', subject: 's' } },
  }
  const hostile: unknown[] = ['a\u0000b', '\ud800', 1e308, -1e308, 2 ** 31, 2 ** 53 + 2, -1, 1.5, '', '294277-01-01T00:00:00Z', 'not a date', null, [], { $ne: 1 }, '𝔘'.repeat(300)]
  const bad: string[] = []
  for (const [path, base] of Object.entries(creates)) {
    const ok = await h.request('POST', path, { key: tenant.key, body: path === '/players' ? { ...base, external_id: `e-${randomUUID()}` } : base })
    if (ok.status >= 300) bad.push(`base body of ${path} is refused: ${ok.status} ${ok.text.slice(0, 100)}`)
    for (const field of Object.keys(base)) {
      for (const v of hostile) {
        const body = { ...base, [field]: v, ...(path === '/players' ? { external_id: field === 'external_id' ? v : `e-${randomUUID()}` } : {}) }
        const res = await h.request('POST', path, { key: tenant.key, body })
        const tag = `${path}.${field}=${JSON.stringify(v)?.slice(0, 24)}`
        if (res.status >= 500 || (res.status >= 400 && !isError(res))) { bad.push(`${tag} -> ${res.status} ${res.text.slice(0, 100)}`); continue }
        if (res.status < 300 && path !== '/notifications/send') {
          const got = await h.request('GET', `${path}/${res.body.data.id}`, { key: tenant.key })
          if (got.status !== 200) bad.push(`${tag}: created, then GET -> ${got.status} ${got.text.slice(0, 80)}`)
        }
      }
    }
    const list = await h.request('GET', path === '/notifications/send' ? '/notifications' : path, { key: tenant.key })
    if (list.status !== 200) bad.push(`list ${path} after hostile creates -> ${list.status} ${list.text.slice(0, 100)}`)
  }
  t.same(bad, [])
})

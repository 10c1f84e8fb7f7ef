// Values the schemas let through but the stores cannot take (a NUL character in text or jsonb, JSON nested
// deeper than any serialiser's stack) are the caller's mistake: 400 in the error shape, never 500.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)

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

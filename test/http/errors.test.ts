import t from 'tap'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { startHarness } from '../helpers/harness.ts'
import { probeRoutes } from '../helpers/probe-routes.ts'

// The HTTP layer's own behaviour: the same whatever stores run.
const h = embeddedRunOnly.skip ? (undefined as never) : await startHarness(t, { extraRoutes: probeRoutes, env: { BODY_LIMIT_BYTES: '4096' } })

t.test('malformed JSON is 400 BAD_REQUEST', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  for (const rawBody of ['{"n":', 'not json', '']) {
    const res = await h.request('POST', '/_probe/echo', { key: tenant.key, rawBody, headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400, JSON.stringify(rawBody))
    t.equal(res.body.code, 'BAD_REQUEST')
  }
})

t.test('validation failures name each failing field', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', '/_probe/echo', { key: tenant.key, body: { n: 0, nested: { email: 'nope' } } })
  t.equal(res.status, 400)
  t.equal(res.body.code, 'BAD_REQUEST')
  const fields = res.body.details.errors.map((e: { field: string }) => e.field).sort()
  t.same(fields, ['n', 'nested.email'])
  t.ok(res.body.details.errors.every((e: { in: string; message: string }) => e.in === 'body' && e.message))
  const missing = await h.request('POST', '/_probe/echo', { key: tenant.key, body: {} })
  t.same(missing.body.details.errors, [{ in: 'body', field: 'n', message: 'is required' }])
})

t.test('path and query values are coerced, defaulted and validated', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  const id = '3f1c9a52-7d3e-4c1b-9a2f-0e8d6b5c4a31'
  const ok = await h.request('GET', `/_probe/items/${id}`, { key: tenant.key, query: { flag: 'true' } })
  t.equal(ok.status, 200)
  t.same(ok.body, { params: { id }, query: { limit: 20, flag: true } })
  t.equal((await h.request('GET', `/_probe/items/${id}`, { key: tenant.key, query: { limit: '7' } })).body.query.limit, 7)
  for (const limit of ['0', '101', 'abc', '1.5']) {
    const res = await h.request('GET', `/_probe/items/${id}`, { key: tenant.key, query: { limit } })
    t.equal(res.status, 400, `limit=${limit}`)
    t.match(res.body.details.errors[0], { in: 'query', field: 'limit' })
  }
  const badId = await h.request('GET', '/_probe/items/not-a-uuid', { key: tenant.key })
  t.equal(badId.status, 404, 'an id that is no uuid names no resource')
  t.equal(badId.body.code, 'NOT_FOUND')
  t.match(badId.body.details.errors[0], { in: 'path', field: 'id' })
})

t.test('a body over the limit is 413 in the error shape', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('POST', '/_probe/echo', { key: tenant.key, rawBody: JSON.stringify({ n: 1, pad: 'x'.repeat(5000) }) })
  t.equal(res.status, 413)
  t.equal(res.body.code, 'PAYLOAD_TOO_LARGE')
  t.equal(res.body.details.limit, 4096)
  const under = await h.request('POST', '/_probe/echo', { key: tenant.key, rawBody: JSON.stringify({ n: 1, pad: 'x'.repeat(3000) }) })
  t.equal(under.status, 201)
})

t.test('a chunked body over the limit is 413 too (no content-length to trust)', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  const chunks = (async function* () {
    for (let i = 0; i < 10; i++) yield new TextEncoder().encode('x'.repeat(1000))
  })()
  const res = await fetch(`${h.origin}/api/v1/_probe/echo`, {
    method: 'POST',
    headers: { 'x-api-key': tenant.key },
    body: chunks as unknown as string,
    duplex: 'half',
  } as RequestInit)
  t.equal(res.status, 413)
  t.equal(((await res.json()) as { code: string }).code, 'PAYLOAD_TOO_LARGE')
})

t.test('an unexpected exception is a 500 that leaks nothing and carries a request id', embeddedRunOnly, async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('GET', '/_probe/boom', { key: tenant.key, headers: { 'x-request-id': 'req-abc-123' } })
  t.equal(res.status, 500)
  t.same(res.body, { error: 'internal error', code: 'INTERNAL_ERROR', request_id: 'req-abc-123' })
  t.notMatch(res.text, /hunter2|select/)
  t.equal(res.headers.get('x-request-id'), 'req-abc-123')
})

t.test('every response carries a request id', embeddedRunOnly, async (t) => {
  const res = await h.request('GET', '/health')
  const first = res.headers.get('x-request-id')
  t.match(first, /^[\w.:-]{4,128}$/)
  t.not((await h.request('GET', '/health')).headers.get('x-request-id'), first, 'a new id per request')
})

// RESPONSE_SCHEMA_CHECK (src/http/router.ts): every 2xx JSON body is checked against the schema its route
// documents, the one the OpenAPI document publishes. `error` answers a mismatch with a 500 (the test
// suite's setting, test/helpers/harness.ts), `log` sends the body and logs a warning, `off` checks nothing.
import Type from 'typebox'
import t from 'tap'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { startHarness } from '../helpers/harness.ts'
import { loadConfig } from '../../src/config.ts'
import { definePublicRoute, reply, type RouteDef } from '../../src/http/route.ts'

const Thing = Type.Object({
  data: Type.Object({
    id: Type.String({ format: 'uuid' }),
    count: Type.Integer(),
    note: Type.Union([Type.String(), Type.Null()]),
    at: Type.String({ format: 'date-time' }),
  }, { additionalProperties: false }),
})
const ID = '3f1c9a52-7d3e-4c1b-9a2f-0e8d6b5c4a31'
const route = (path: string, handler: () => unknown, responses: RouteDef['responses'] = { 200: Thing }) =>
  definePublicRoute({ method: 'GET', path, operationId: `check${path.replace(/\W/g, '')}`, tags: ['probe'], summary: 'probe', responses, handler })

/** Test-only routes: bodies that match their schema, bodies that do not, and bodies the check leaves alone. */
const routes: RouteDef[] = [
  // A Date is checked as the client receives it: an ISO string.
  route('/_check/good', () => ({ data: { id: ID, count: 3, note: null, at: new Date() } })),
  route('/_check/bad', () => ({ data: { id: 'p-17', count: 'three', at: '2026-01-01T00:00:00Z', extra: true } })),
  // A field the documentation does not name, under a schema that does not close its object itself.
  route('/_check/extra', () => ({ data: { id: ID, secret_sauce: 1 } }), { 200: Type.Object({ data: Type.Object({ id: Type.String() }) }) }),
  // A 202 the route does not document: its answer is no documented response at all.
  route('/_check/undeclared', () => reply(202, { data: { id: ID } })),
  // Serialised beforehand (as GET /health does): checked all the same.
  route('/_check/prestringified', () => reply(200, JSON.stringify({ data: { id: ID, count: 1.5, note: null, at: '2026-01-01T00:00:00Z' } }))),
  // Not JSON, or nothing to check: skipped.
  route('/_check/csv', () => reply(200, 'id,count\n1,2\n', {}, 'text/csv; charset=utf-8'), {
    200: { description: 'CSV or JSON', content: { 'application/json': Thing, 'text/csv': Type.String() } },
  }),
  route('/_check/unknown', () => ({ anything: ['goes'] }), { 200: Type.Unknown() }),
  route('/_check/empty', () => reply(204, ''), { 204: { description: 'nothing', contentType: 'application/json' } }),
]

const bad = ['/_check/bad', '/_check/undeclared', '/_check/prestringified']
const fine = ['/_check/good', '/_check/csv', '/_check/unknown', '/_check/empty']

t.test('error: a body its schema does not describe is a 500 naming the route, the status and the fields', embeddedRunOnly, async (t) => {
  const h = await startHarness(t, { extraRoutes: routes, env: { RESPONSE_SCHEMA_CHECK: 'error' } })
  const res = await h.request('GET', '/_check/bad')
  t.equal(res.status, 500)
  t.equal(res.body.code, 'INTERNAL_ERROR')
  t.match(res.body, { error: String, request_id: String })
  t.match(res.body.details, { reason: 'RESPONSE_SCHEMA_MISMATCH', route: 'GET /_check/bad', status: 200 })
  const fields = res.body.details.errors.map((e: { field: string }) => e.field)
  for (const field of ['data.id', 'data.count', 'data.note', 'data.extra']) t.ok(fields.includes(field), `${field} is named`)
  t.ok(res.body.details.errors.length <= 5, 'the first few errors only')

  const undeclared = await h.request('GET', '/_check/undeclared')
  t.equal(undeclared.status, 500)
  t.match(undeclared.body.details, { reason: 'RESPONSE_SCHEMA_MISMATCH', status: 202, errors: [{ field: 'status' }] })
  const extra = await h.request('GET', '/_check/extra')
  t.equal(extra.status, 500, 'an undocumented field is a mismatch: the check closes every object to the fields it names')
  t.match(extra.body.details.errors, [{ field: 'data.secret_sauce', message: 'is not allowed' }])
  const pre = await h.request('GET', '/_check/prestringified')
  t.equal(pre.status, 500, 'a body serialised by the handler is checked too')
  t.match(pre.body.details.errors, [{ field: 'data.count' }])

  for (const path of fine) t.equal((await h.request('GET', path)).status, path.endsWith('empty') ? 204 : 200, path)
  const csv = await h.request('GET', '/_check/csv')
  t.equal(csv.text, 'id,count\n1,2\n', 'a CSV body goes out untouched')
  t.equal((await h.request('HEAD', '/_check/bad')).status, 500, 'HEAD answers as its GET does')
})

t.test('log: the body goes out as the handler made it, and a warning names route, status and errors', embeddedRunOnly, async (t) => {
  const lines: string[] = []
  const h = await startHarness(t, { extraRoutes: routes, env: { RESPONSE_SCHEMA_CHECK: 'log', LOG_LEVEL: 'warn' }, logDestination: { write: (line: string) => void lines.push(line) } })
  const res = await h.request('GET', '/_check/bad')
  t.equal(res.status, 200)
  t.same(res.body, { data: { id: 'p-17', count: 'three', at: '2026-01-01T00:00:00Z', extra: true } })
  t.equal((await h.request('GET', '/_check/undeclared')).status, 202)
  for (const path of fine) await h.request('GET', path)
  const warnings = lines.map((l) => JSON.parse(l)).filter((l) => l.reason === 'RESPONSE_SCHEMA_MISMATCH')
  t.equal(warnings.length, 2, 'one warning per mismatching response, none for the others')
  t.match(warnings[0], { level: 40, route: 'GET /_check/bad', status: 200, reqId: res.headers.get('x-request-id') })
  t.ok(warnings[0].errors.some((e: { field: string }) => e.field === 'data.count'))
  t.match(warnings[1], { route: 'GET /_check/undeclared', status: 202 })
})

t.test('off (the default): nothing is checked', embeddedRunOnly, async (t) => {
  t.equal(loadConfig({}).responseSchemaCheck, 'off', 'the default')
  t.throws(() => loadConfig({ RESPONSE_SCHEMA_CHECK: 'on' }), /RESPONSE_SCHEMA_CHECK/)
  const h = await startHarness(t, { extraRoutes: routes, env: { RESPONSE_SCHEMA_CHECK: 'off' } })
  for (const path of bad) t.equal((await h.request('GET', path)).status, path.endsWith('undeclared') ? 202 : 200, path)
})

import $RefParser from '@apidevtools/json-schema-ref-parser'
import { Validator } from '@seriousme/openapi-schema-validator'
import t from 'tap'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { startHarness } from '../helpers/harness.ts'

// The document and page are the HTTP layer's: the same whatever stores run.
const h = embeddedRunOnly.skip ? (undefined as never) : await startHarness(t)

t.test('the OpenAPI document is public and valid OpenAPI 3.1', embeddedRunOnly, async (t) => {
  const res = await h.request('GET', '/openapi.json')
  t.equal(res.status, 200)
  const doc = res.body
  t.equal(doc.openapi, '3.1.0')
  const validator = new Validator()
  const result = await validator.validate(doc)
  t.same(result.errors ?? [], [], 'no validation errors')
  t.equal(result.valid, true)
  t.equal(validator.version, '3.1')
})

t.test('it is generated from the route table: every served route is in it', embeddedRunOnly, async (t) => {
  const doc = (await h.request('GET', '/openapi.json')).body
  const { allRoutes } = await import('../../src/http/routes.ts')
  for (const route of allRoutes('test')) {
    const path = `/api/v1${route.path.replace(/:(\w+)/g, '{$1}')}`
    const op = doc.paths[path]?.[route.method.toLowerCase()]
    t.ok(op, `${route.method} ${path}`)
    if (!op) continue
    t.equal(op.operationId, route.operationId)
    if (route.auth === 'public') t.same(op.security, [])
    else t.same(op.security, [{ ApiKeyHeader: [] }, { BearerAuth: [] }, { ApiKeyQuery: [] }])
  }
  t.same(Object.keys(doc.components.securitySchemes).sort(), ['ApiKeyHeader', 'ApiKeyQuery', 'BearerAuth'])
  t.ok(doc.components.schemas.Error, 'the error shape is a shared component')
  t.ok(doc.paths['/api/v1/admin/tenants'].post.responses['401'], 'error responses are documented')
})

t.test('the document resolves completely: every $ref points at a real schema, and none at itself', embeddedRunOnly, async (t) => {
  const doc = (await h.request('GET', '/openapi.json')).body
  const refs: string[] = []
  const collect = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(collect)
    if (!node || typeof node !== 'object') return
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') refs.push(v)
      else collect(v)
    }
  }
  collect(doc)
  t.ok(refs.includes('#/components/schemas/Error'), 'error responses refer to the shared Error schema')
  for (const ref of new Set(refs)) {
    const target = ref.replace(/^#\//, '').split('/').reduce<any>((node, part) => node?.[part], doc)
    t.ok(target && typeof target === 'object', `${ref} exists`)
    t.notOk(Object.keys(target ?? {}).length === 1 && '$ref' in target, `${ref} is a schema, not only another reference`)
  }
  t.match(doc.components.schemas.Error, { type: 'object', properties: { error: { type: 'string' } }, required: ['error'] })
  // What a client generator does: replace every reference by its target. A reference cycle with no schema
  // in it (Error -> Error) is refused here.
  const resolved = await $RefParser.dereference(structuredClone(doc), { dereference: { circular: false } })
  t.notMatch(JSON.stringify(resolved), /"\$ref"/, 'nothing left unresolved')
  t.match((resolved as any).paths['/api/v1/players'].get.responses['401'].content['application/json'].schema, {
    type: 'object',
    properties: { error: { type: 'string' }, request_id: { type: 'string' } },
  })
})

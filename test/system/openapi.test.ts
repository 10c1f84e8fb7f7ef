import { Validator } from '@seriousme/openapi-schema-validator'
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)

t.test('the OpenAPI document is public and valid OpenAPI 3.1', async (t) => {
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

t.test('it is generated from the route table: every served route is in it', async (t) => {
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

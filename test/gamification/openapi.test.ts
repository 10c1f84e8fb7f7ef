import { Validator } from '@seriousme/openapi-schema-validator'
import t from 'tap'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { startHarness } from '../helpers/harness.ts'

// The document and page are the HTTP layer's: the same whatever stores run.
const h = embeddedRunOnly.skip ? (undefined as never) : await startHarness(t)

t.test('the OpenAPI document lists every gamification, bonus and tournament operation and still validates', embeddedRunOnly, async (t) => {
  const res = await h.request('GET', '/openapi.json')
  t.equal(res.status, 200)
  const doc = res.body
  const validator = new Validator()
  const result = await validator.validate(doc)
  t.ok(result.valid, JSON.stringify(result.errors))

  const expected: Record<string, string[]> = {}
  for (const collection of ['/gamification/levels', '/gamification/missions', '/gamification/badges', '/gamification/currencies', '/bonuses', '/tournaments']) {
    expected[`/api/v1${collection}`] = ['get', 'post']
    expected[`/api/v1${collection}/{id}`] = ['get', 'patch', 'delete']
  }
  expected['/api/v1/gamification/player/{playerId}'] = ['get']
  for (const [path, methods] of Object.entries(expected)) {
    t.ok(doc.paths[path], path)
    for (const m of methods) t.ok(doc.paths[path]?.[m], `${m} ${path}`)
  }
  for (const name of ['Level', 'Mission', 'Badge', 'PointCurrency', 'Bonus', 'Tournament', 'PlayerGamificationProfile']) {
    t.ok(doc.components.schemas[name], `component ${name}`)
  }
  const missions = doc.paths['/api/v1/gamification/missions'].get
  const limit = missions.parameters.find((p: { name: string }) => p.name === 'limit')
  t.same([limit.schema.default, limit.schema.maximum], [20, 100])
  t.ok(missions.parameters.some((p: { name: string; in: string }) => p.name === 'x-brand' && p.in === 'header'))
  const create = doc.paths['/api/v1/bonuses'].post.requestBody.content['application/json'].schema
  t.same([...create.required].sort(), ['name', 'type', 'value', 'value_type'])
  t.equal(create.properties.wagering_requirement.default, 0)
  t.equal(create.properties.active.default, true)
  const patch = doc.paths['/api/v1/tournaments/{id}'].patch.requestBody.content['application/json'].schema
  t.notOk(patch.required, 'every patch field is optional')
  t.notOk(patch.properties.brand, 'brand is not patchable')
  t.notOk(patch.properties.status.default, 'no defaults on patch')
  t.equal(doc.paths['/api/v1/gamification/badges/{id}'].get['x-required-scope'], 'read')
})

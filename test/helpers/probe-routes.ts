// Test-only routes that expose what the router resolved, so auth, scopes and brands are tested on their own.
import Type from 'typebox'
import { defineRoute, type RouteDef } from '../../src/http/route.ts'

export const probeRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/_probe/whoami', operationId: 'probeWhoami', tags: ['probe'], summary: 'probe', brandScoped: true,
    responses: { 200: Type.Unknown() },
    handler: async (_ctx, req) => ({ principal: req.principal, brand: await req.resolveBrand() }),
  }),
  defineRoute({
    method: 'POST', path: '/_probe/echo', operationId: 'probeEcho', tags: ['probe'], summary: 'probe', brandScoped: true,
    body: Type.Object({ n: Type.Integer({ minimum: 1 }), brand: Type.Optional(Type.String()), nested: Type.Optional(Type.Object({ email: Type.String({ format: 'email' }) })) }),
    responses: { 201: Type.Unknown() },
    handler: async (_ctx, req) => ({ body: req.body, brand: await req.resolveBrand() }),
  }),
  defineRoute({
    method: 'POST', path: '/_probe/ingest', operationId: 'probeIngest', tags: ['probe'], summary: 'probe', scope: 'events:write',
    responses: { 200: Type.Unknown() },
    handler: () => ({ ok: true }),
  }),
  defineRoute({
    method: 'GET', path: '/_probe/items/:id', operationId: 'probeItem', tags: ['probe'], summary: 'probe',
    params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
    query: Type.Object({ limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }), flag: Type.Optional(Type.Boolean()) }),
    responses: { 200: Type.Unknown() },
    handler: (_ctx, req) => ({ params: req.params, query: req.query }),
  }),
  defineRoute({
    method: 'GET', path: '/_probe/boom', operationId: 'probeBoom', tags: ['probe'], summary: 'probe',
    responses: { 200: Type.Unknown() },
    handler: () => {
      throw new Error('select * from secrets where password = hunter2')
    },
  }),
]

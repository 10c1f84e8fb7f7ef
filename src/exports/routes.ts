import Type from 'typebox'
import { defineRoute, reply, type RouteDef } from '../http/route.ts'
import { FreeObject, Nullable } from '../lib/schemas.ts'
import { DATASETS, exportPage } from './service.ts'

export const ExportParams = Type.Object({ dataset: Type.Union(DATASETS.map((d) => Type.Literal(d)), { description: 'players, events or transactions' }) })
export const ExportQuery = Type.Object({
  cursor: Type.Optional(Type.String({ maxLength: 2048, description: 'Opaque; the next_cursor of the previous page. Omit to start.' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 200 })),
})
export const ExportPage = Type.Object({
  data: Type.Array(FreeObject),
  next_cursor: Nullable(Type.String({ description: 'null on a page without rows; keep the last non-null one to sync incrementally' })),
})

export const exportRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/export/:dataset', operationId: 'exportDataset', tags: ['export'], brandScoped: true, errors: [403],
    summary: 'Keyset-paginated export of players (creation order), events or transactions (insertion order)',
    description:
      'Pass the previous next_cursor to continue. A full scan yields each row once; next_cursor is null only on a page ' +
      'without rows, so the last non-null cursor, used again later, yields exactly the rows added since (incremental ' +
      'sync). Cursors are signed and bound to the tenant, brand and dataset: any other is a 400. Events appear within ' +
      '2 s of their 200 (docs/analytics.md).',
    params: ExportParams, query: ExportQuery, responses: { 200: ExportPage },
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      // The page arrives as JSON text (its event rows are made by ClickHouse).
      return reply(200, await exportPage(ctx, { tenantId: req.principal.tenantId, brandId: brand.id, dataset: req.params.dataset, cursor: req.query.cursor, limit: req.query.limit ?? 200 }))
    },
  }),
]

import Type from 'typebox'
import { defineRoute, reply, type RouteDef } from '../http/route.ts'
import { IdParams, data } from '../lib/schemas.ts'
import { CreateSegmentBody, ExportQuery, ExportResponse, ListSegmentsQuery, Segment } from './schemas.ts'
import * as segments from './service.ts'

const tags = ['segments']

export const segmentRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/segments', operationId: 'listSegments', tags,
    summary: "List the brand's segments",
    query: ListSegmentsQuery, responses: { 200: data(Type.Array(Segment)) }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return { data: await segments.listSegments(ctx, { tenantId: req.principal.tenantId, brandId: brand.id, type: req.query.type }) }
    },
  }),
  defineRoute({
    method: 'POST', path: '/segments', operationId: 'createSegment', tags,
    summary: 'Create a dynamic or static segment',
    description: 'Rules are validated on write: an unknown field or operator is a 400 naming it (docs/segments.md).',
    body: CreateSegmentBody, responses: { 201: data(Segment) }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      const { name, type, rules } = req.body
      return { data: await segments.createSegment(ctx, { tenantId: req.principal.tenantId, brandId: brand.id, name, type, rules }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/segments/:id', operationId: 'getSegment', tags,
    summary: 'Get a segment',
    params: IdParams, responses: { 200: data(Segment) },
    handler: async (ctx, req) => ({
      data: await segments.getSegment(ctx, { tenantId: req.principal.tenantId, brandId: req.principal.brandId, segmentId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'GET', path: '/segments/:id/export', operationId: 'exportSegment', tags,
    summary: "Export the segment's current members (keyset-paginated)",
    description:
      'Members in player creation order. Pass the previous next_cursor to continue; it is null on the last page. ' +
      'With format=csv the body is text/csv (header row external_id,email,phone,name,consent,country; consent ' +
      'encoded as email:1;push:0) and the next cursor is in the x-next-cursor response header (absent on the last page).',
    params: IdParams, query: ExportQuery,
    responses: {
      200: {
        description: 'One page of members: JSON, or with format=csv a CSV body with the cursor in x-next-cursor',
        content: {
          'application/json': ExportResponse,
          'text/csv': Type.String({ description: 'Header row external_id,email,phone,name,consent,country, then one row per member (RFC 4180)' }),
        },
        headers: {
          'x-next-cursor': { description: 'format=csv only: the cursor of the next page; absent on the last page', schema: Type.String() },
        },
      },
    },
    handler: async (ctx, req) => {
      const page = await segments.exportSegment(ctx, {
        tenantId: req.principal.tenantId,
        brandId: req.principal.brandId,
        segmentId: req.params.id,
        cursor: req.query.cursor,
        limit: req.query.limit ?? 200,
      })
      if (req.query.format === 'csv') {
        const headers: Record<string, string> = page.next_cursor ? { 'x-next-cursor': page.next_cursor } : {}
        return reply(200, segments.exportPageCsv(page), headers, 'text/csv; charset=utf-8')
      }
      return page
    },
  }),
]

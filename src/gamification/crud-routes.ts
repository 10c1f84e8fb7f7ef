// The five routes of a brand-owned definition resource (list, create, get, patch, delete), generated from
// its descriptor and schemas so that every resource behaves the same way.
import Type, { type TObject, type TSchema } from 'typebox'
import type { AppContext } from '../context.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { data, IdParams, Uuid } from '../lib/schemas.ts'
import { visibilityOf } from '../lib/visibility.ts'
import { createRow, deleteRow, getRow, listRows, patchRow, type ResourceDef, type Row } from './crud.ts'

export const DeletedBody = data(Type.Object({ id: Uuid }))

const withoutBrand = (body: Row): Row => {
  const { brand: _brand, ...fields } = body
  return fields
}

export interface CrudRoutesSpec {
  /** Collection path, e.g. `/gamification/levels`. */
  path: string
  tag: string
  /** Operation id nouns: `Level` → listLevels, createLevel, getLevel, updateLevel, deleteLevel. */
  singular: string
  plural: string
  def: ResourceDef<unknown>
  schema: TSchema
  createBody: TObject
  patchBody: TObject
  /** Replaces the default `{ data: [...] }` list (missions are paged). */
  list?: RouteDef
  listSummary?: string
  /** After a create, patch or delete (e.g. the engines reload their rules). */
  onChange?: (ctx: AppContext) => Promise<void>
}

export function crudRoutes(spec: CrudRoutesSpec): RouteDef[] {
  const { def, tag, singular, plural } = spec
  const tags = [tag]
  const item = `${spec.path}/:id`
  const list =
    spec.list ??
    defineRoute({
      method: 'GET', path: spec.path, operationId: `list${plural}`, tags, brandScoped: true,
      summary: spec.listSummary ?? `List the brand's ${plural.toLowerCase()}`,
      query: Type.Object({ brand: Type.Optional(Type.String()) }),
      responses: { 200: data(Type.Array(spec.schema)) },
      handler: async (ctx, req) => {
        const brand = await req.resolveBrand()
        return { data: await listRows(ctx.sql, def, { tenantId: req.principal.tenantId, brandId: brand.id }) }
      },
    })
  return [
    list,
    defineRoute({
      method: 'POST', path: spec.path, operationId: `create${singular}`, tags, brandScoped: true,
      summary: `Create a ${def.label} in the resolved brand`,
      body: spec.createBody, responses: { 201: data(spec.schema) },
      handler: async (ctx, req) => {
        const brand = await req.resolveBrand()
        const fields = withoutBrand(req.body as Row)
        const created = await createRow(ctx.sql, def, { tenantId: req.principal.tenantId, brandId: brand.id, fields })
        await spec.onChange?.(ctx)
        return { data: created }
      },
    }),
    defineRoute({
      method: 'GET', path: item, operationId: `get${singular}`, tags,
      summary: `Get a ${def.label}`,
      params: IdParams, responses: { 200: data(spec.schema) },
      handler: async (ctx, req) => ({ data: await getRow(ctx.sql, def, { ...visibilityOf(req.principal), id: req.params.id }) }),
    }),
    defineRoute({
      method: 'PATCH', path: item, operationId: `update${singular}`, tags,
      summary: `Update any subset of a ${def.label}'s fields (not its brand)`,
      params: IdParams, body: spec.patchBody, responses: { 200: data(spec.schema) },
      handler: async (ctx, req) => {
        const fields = withoutBrand(req.body as Row)
        const updated = await patchRow(ctx.sql, def, { ...visibilityOf(req.principal), id: req.params.id, fields })
        await spec.onChange?.(ctx)
        return { data: updated }
      },
    }),
    defineRoute({
      method: 'DELETE', path: item, operationId: `delete${singular}`, tags,
      summary: `Delete a ${def.label}`,
      params: IdParams, responses: { 200: DeletedBody },
      handler: async (ctx, req) => {
        const deleted = await deleteRow(ctx.sql, def, { ...visibilityOf(req.principal), id: req.params.id })
        await spec.onChange?.(ctx)
        return { data: deleted }
      },
    }),
  ]
}

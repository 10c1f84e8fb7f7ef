// Shapes shared by every feature. Features define their own schemas next to their routes.
import Type from 'typebox'

export const Uuid = Type.String({ format: 'uuid' })
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/** What Uuid accepts. */
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID_RE.test(v)
export const DateTime = Type.String({ format: 'date-time' })
export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()])
export const FreeObject = Type.Record(Type.String(), Type.Unknown())

export const IdParams = Type.Object({ id: Uuid })

export const ErrorBody = Type.Object(
  {
    error: Type.String(),
    code: Type.Optional(Type.String()),
    details: Type.Optional(FreeObject),
    request_id: Type.Optional(Type.String()),
  },
  { $id: 'Error' },
)

export const Pagination = Type.Object(
  { page: Type.Integer(), limit: Type.Integer(), total: Type.Integer(), pages: Type.Integer() },
  { $id: 'Pagination' },
)

/** `page`/`limit` of the spec's paged lists: limit defaults to 20 and may not exceed 100. */
export const PageQuery = {
  page: Type.Integer({ minimum: 1, default: 1 }),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
}
/** `limit`/`offset` of the campaign and template lists. */
export const OffsetQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  offset: Type.Integer({ minimum: 0, default: 0 }),
}

export const data = <T extends Parameters<typeof Type.Object>[0][string]>(t: T) => Type.Object({ data: t })

export function pagination(page: number, limit: number, total: number) {
  return { page, limit, total, pages: Math.ceil(total / limit) }
}

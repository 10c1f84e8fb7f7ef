// One generic store for the brand-owned definition resources (levels, missions, badges, currencies,
// bonuses, tournaments): each is a table with id, tenant_id, brand_id, its own columns, created_at and
// updated_at. A resource is described once (table, writable columns, JSON columns, order, row → output) and
// these functions do list/create/get/patch/delete for it. Identifiers come from the descriptor (never from
// the request) and every value is a bound parameter.
import type { Sql } from '../db/postgres.ts'
import { badRequest, notFound } from '../errors.ts'
import type { FieldError } from '../http/router.ts'
import { visibleTo, type Visibility } from '../lib/visibility.ts'

export type Row = Record<string, unknown>

export interface ResourceDef<Out> {
  /** SQL table. */
  table: string
  /** Singular name used in error messages: `level not found`. */
  label: string
  /** Writable columns; request field names equal column names. */
  columns: readonly string[]
  /** Columns stored as jsonb (values are sent with sql.json). */
  jsonColumns?: readonly string[]
  /** List order, most significant first; `id` is always appended as the tie-breaker. */
  orderBy: readonly string[]
  toOut(row: Row): Out
  /** Rules across fields, checked on the complete record (the stored row merged with a patch). */
  check?(record: Row): FieldError[]
  /** References to other resources of the brand (reward currencies, badges, bonuses), on the complete record. */
  checkRefs?(sql: Sql, record: Row, brandId: string): Promise<FieldError[]>
  /** A patch's change from the stored row: throws when it is not allowed (a status that is final). */
  checkChange?(current: Row, merged: Row): void
}

// postgres.js's helper types want `any` values; every value here is a validated request field.
type Values = Record<string, any>

function values(sql: Sql, def: ResourceDef<unknown>, input: Row): { row: Values; columns: string[] } {
  const row: Values = {}
  const columns: string[] = []
  for (const column of def.columns) {
    if (!(column in input) || input[column] === undefined) continue
    const value = input[column]
    row[column] = def.jsonColumns?.includes(column) && value !== null ? sql.json(value as never) : value
    columns.push(column)
  }
  return { row, columns }
}

function runChecks(def: ResourceDef<unknown>, record: Row): void {
  const errors = def.check?.(record) ?? []
  if (errors.length) throw badRequest(`invalid ${def.label}`, { errors })
}

async function runRefChecks(sql: Sql, def: ResourceDef<unknown>, record: Row, brandId: string): Promise<void> {
  const errors = (await def.checkRefs?.(sql, record, brandId)) ?? []
  if (errors.length) throw badRequest(`invalid ${def.label}`, { errors })
}

export async function createRow<Out>(
  sql: Sql,
  def: ResourceDef<Out>,
  input: { tenantId: string; brandId: string; fields: Row },
): Promise<Out> {
  runChecks(def, input.fields)
  await runRefChecks(sql, def, input.fields, input.brandId)
  const { row, columns } = values(sql, def, input.fields)
  const all: Values = { ...row, tenant_id: input.tenantId, brand_id: input.brandId }
  // A value PostgreSQL refuses (a date out of its range, ...) is a 400 VALUE_REJECTED (http/errors.ts).
  const [created] = await sql<Row[]>`
    insert into ${sql(def.table)} ${sql(all, [...columns, 'tenant_id', 'brand_id'])}
    returning *`
  return def.toOut(created!)
}

/** Equality filters: column → value; undefined values are skipped. */
export type Filters = Record<string, unknown>

function filterSql(sql: Sql, filters: Filters | undefined) {
  let fragment = sql``
  for (const [column, value] of Object.entries(filters ?? {})) {
    if (value === undefined) continue
    fragment = sql`${fragment} and ${sql(column)} = ${value as string}`
  }
  return fragment
}

export async function listRows<Out>(
  sql: Sql,
  def: ResourceDef<Out>,
  input: { tenantId: string; brandId: string; filters?: Filters },
): Promise<Out[]> {
  const rows = await sql<Row[]>`
    select * from ${sql(def.table)}
    where tenant_id = ${input.tenantId} and brand_id = ${input.brandId} ${filterSql(sql, input.filters)}
    order by ${sql([...def.orderBy, 'id'])}`
  return rows.map((r) => def.toOut(r))
}

export async function pageRows<Out>(
  sql: Sql,
  def: ResourceDef<Out>,
  input: { tenantId: string; brandId: string; filters?: Filters; page: number; limit: number },
): Promise<{ rows: Out[]; total: number }> {
  const where = sql`where tenant_id = ${input.tenantId} and brand_id = ${input.brandId} ${filterSql(sql, input.filters)}`
  const [count] = await sql<{ total: string }[]>`select count(*) as total from ${sql(def.table)} ${where}`
  const rows = await sql<Row[]>`
    select * from ${sql(def.table)} ${where}
    order by ${sql([...def.orderBy, 'id'])}
    limit ${input.limit} offset ${(input.page - 1) * input.limit}`
  return { rows: rows.map((r) => def.toOut(r)), total: Number(count?.total ?? 0) }
}

export async function getRow<Out>(sql: Sql, def: ResourceDef<Out>, input: Visibility & { id: string }): Promise<Out> {
  const [row] = await sql<Row[]>`select * from ${sql(def.table)} where id = ${input.id} and ${visibleTo(sql, input)}`
  if (!row) throw notFound(def.label)
  return def.toOut(row)
}

/**
 * Updates the given fields. The stored row is locked and merged with the patch first, so cross-field rules
 * (max_points ≥ min_points, ends_at after starts_at) hold for the resulting record, not just the patch.
 * A patch with no updatable field (`{}`, the empty subset) changes nothing and returns the resource as it is.
 */
export async function patchRow<Out>(
  sql: Sql,
  def: ResourceDef<Out>,
  input: Visibility & { id: string; fields: Row },
): Promise<Out> {
  const { row, columns } = values(sql, def, input.fields)
  if (columns.length === 0) return getRow(sql, def, input)
  return sql.begin(async (tx) => {
    const [current] = await tx<Row[]>`
      select * from ${tx(def.table)} where id = ${input.id} and ${visibleTo(tx, input)} for update`
    if (!current) throw notFound(def.label)
    const merged: Row = { ...current }
    for (const column of columns) merged[column] = input.fields[column]
    runChecks(def, merged)
    def.checkChange?.(current, merged)
    await runRefChecks(tx as unknown as Sql, def, merged, current.brand_id as string)
    const [updated] = await tx<Row[]>`
      update ${tx(def.table)} set ${tx(row, columns)}, updated_at = now()
      where id = ${input.id}
      returning *`
    return def.toOut(updated!)
  }) as Promise<Out>
}

export async function deleteRow(sql: Sql, def: ResourceDef<unknown>, input: Visibility & { id: string }): Promise<{ id: string }> {
  const [row] = await sql<{ id: string }[]>`
    delete from ${sql(def.table)} where id = ${input.id} and ${visibleTo(sql, input)} returning id`
  if (!row) throw notFound(def.label)
  return { id: row.id }
}

/** `ends_at` must be after `starts_at` when both are set. Stored values are Dates, input values strings. */
export function endsAfterStarts(record: Row): FieldError[] {
  const start = record.starts_at
  const end = record.ends_at
  if (start == null || end == null) return []
  const s = start instanceof Date ? start.getTime() : Date.parse(String(start))
  const e = end instanceof Date ? end.getTime() : Date.parse(String(end))
  return e > s ? [] : [{ in: 'body', field: 'ends_at', message: 'must be after starts_at' }]
}

// SQL for notification templates and the notification queue. Every query filters on tenant_id; `brandId`
// (a brand-pinned key's brand, or the resolved brand of a list) narrows it further.
import type postgres from 'postgres'
import { visibleTo } from '../lib/visibility.ts'
import type { Channel, Locale, NotificationTemplate } from './schemas.ts'

/** The pool or a transaction. */
export type Sql = postgres.ISql

interface TemplateRow {
  id: string
  name: string
  channel: Channel
  locale: Locale
  subject: string | null
  body: string
  variables: string[]
  declared_variables: string[]
  active: boolean
  created_at: Date
  updated_at: Date
}

/** A template with the declared variable names that `variables` is recomputed from. */
export interface StoredTemplate extends NotificationTemplate {
  declared_variables: string[]
}

const templateOut = (r: TemplateRow): NotificationTemplate => ({
  id: r.id,
  name: r.name,
  channel: r.channel,
  locale: r.locale,
  subject: r.subject,
  body: r.body,
  variables: r.variables,
  active: r.active,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
})

const templateColumns = (sql: Sql) =>
  sql`id, name, channel, locale, subject, body, variables, declared_variables, active, created_at, updated_at`

export async function insertTemplate(
  sql: Sql,
  t: {
    tenantId: string
    brandId: string
    name: string
    channel: Channel
    locale: Locale
    subject: string | null
    body: string
    declaredVariables: string[]
    variables: string[]
  },
): Promise<NotificationTemplate> {
  const [row] = await sql<TemplateRow[]>`
    insert into notification_templates (tenant_id, brand_id, name, channel, locale, subject, body, declared_variables, variables)
    values (${t.tenantId}, ${t.brandId}, ${t.name}, ${t.channel}, ${t.locale}, ${t.subject}, ${t.body},
            ${sql.array(t.declaredVariables)}::text[], ${sql.array(t.variables)}::text[])
    returning ${templateColumns(sql)}`
  return templateOut(row!)
}

export async function selectTemplates(
  sql: Sql,
  f: { tenantId: string; brandId: string; channel?: Channel; active: boolean; limit: number; offset: number },
): Promise<{ templates: NotificationTemplate[]; total: number }> {
  const where = sql`tenant_id = ${f.tenantId} and brand_id = ${f.brandId} and active = ${f.active}
    ${f.channel ? sql`and channel = ${f.channel}` : sql``}`
  const [rows, [count]] = await Promise.all([
    sql<TemplateRow[]>`
      select ${templateColumns(sql)} from notification_templates where ${where}
      order by created_at desc, id desc limit ${f.limit} offset ${f.offset}`,
    sql<{ total: number }[]>`select count(*)::int as total from notification_templates where ${where}`,
  ])
  return { templates: rows.map(templateOut), total: count?.total ?? 0 }
}

export async function selectTemplate(
  sql: Sql,
  k: { tenantId: string; brandId: string | null; templateId: string; forUpdate?: boolean },
): Promise<StoredTemplate | undefined> {
  const [row] = await sql<TemplateRow[]>`
    select ${templateColumns(sql)} from notification_templates where id = ${k.templateId} and ${visibleTo(sql, k)}
    ${k.forUpdate ? sql`for update` : sql``}`
  return row && { ...templateOut(row), declared_variables: row.declared_variables }
}

export interface TemplateChanges {
  name?: string
  channel?: Channel
  locale?: Locale
  subject?: string | null
  body?: string
  declared_variables?: string[]
  variables?: string[]
  active?: boolean
}

export async function updateTemplate(
  sql: Sql,
  k: { tenantId: string; brandId: string | null; templateId: string },
  changes: TemplateChanges,
): Promise<NotificationTemplate | undefined> {
  const sets: Record<string, unknown> = {}
  for (const [column, value] of Object.entries(changes)) {
    if (value === undefined) continue
    sets[column] = Array.isArray(value) ? sql.array(value) : value
  }
  if (Object.keys(sets).length === 0) {
    const current = await selectTemplate(sql, k)
    if (!current) return undefined
    const { declared_variables: _declared, ...template } = current
    return template
  }
  const [row] = await sql<TemplateRow[]>`
    update notification_templates set ${sql(sets)}, updated_at = now()
    where id = ${k.templateId} and ${visibleTo(sql, k)}
    returning ${templateColumns(sql)}`
  return row && templateOut(row)
}

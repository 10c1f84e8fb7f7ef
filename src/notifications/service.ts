// Notification templates (CRUD with soft delete) and single sends, which wait in the queue as 'queued'
// until the delivery issue renders and sends them.
import type { AppContext } from '../context.ts'
import { badRequest, notFound } from '../errors.ts'
import type { Visibility } from '../lib/visibility.ts'
import { findPlayerRef } from '../players/service.ts'
import * as q from './queries.ts'
import type { Channel, Locale, NotificationTemplate, QueuedNotification } from './schemas.ts'
import { templateVariables } from './variables.ts'

type Deps = Pick<AppContext, 'sql' | 'log'>

type Viewer = Visibility

const distinct = (names: readonly string[]) => [...new Set(names)]

export async function createTemplate(
  deps: Deps,
  input: {
    tenantId: string
    brandId: string
    name: string
    channel: Channel
    body: string
    locale?: Locale
    subject?: string | null
    variables?: string[]
  },
): Promise<NotificationTemplate> {
  const declared = distinct(input.variables ?? [])
  const subject = input.subject ?? null
  return q.insertTemplate(deps.sql, {
    tenantId: input.tenantId,
    brandId: input.brandId,
    name: input.name,
    channel: input.channel,
    locale: input.locale ?? 'en',
    subject,
    body: input.body,
    declaredVariables: declared,
    variables: templateVariables({ subject, body: input.body, declared }),
  })
}

export const listTemplates = (
  deps: Deps,
  input: { tenantId: string; brandId: string; channel?: Channel; active: boolean; limit: number; offset: number },
) => q.selectTemplates(deps.sql, input)

export async function getTemplate(deps: Deps, input: Viewer & { templateId: string }): Promise<NotificationTemplate> {
  const found = await q.selectTemplate(deps.sql, input)
  if (!found) throw notFound('template')
  const { declared_variables: _declared, ...template } = found
  return template
}

export interface TemplateUpdate {
  name?: string
  channel?: Channel
  locale?: Locale
  subject?: string | null
  body?: string
  variables?: string[]
  active?: boolean
}

/**
 * Changing subject, body or variables recomputes `variables` as the placeholders of the resulting subject
 * and body plus the declared names (the new `variables` if given, else the previously declared ones).
 */
export async function updateTemplate(deps: Deps, input: Viewer & { templateId: string; changes: TemplateUpdate }): Promise<NotificationTemplate> {
  const { name, channel, locale, subject, body, variables, active } = input.changes
  const updated = await deps.sql.begin(async (tx) => {
    const current = await q.selectTemplate(tx, { ...input, forUpdate: true })
    if (!current) return undefined
    const changes: q.TemplateChanges = { name, channel, locale, subject, body, active }
    if (subject !== undefined || body !== undefined || variables !== undefined) {
      const declared = variables !== undefined ? distinct(variables) : current.declared_variables
      changes.declared_variables = declared
      changes.variables = templateVariables({
        subject: subject !== undefined ? subject : current.subject,
        body: body ?? current.body,
        declared,
      })
    }
    return q.updateTemplate(tx, input, changes)
  })
  if (!updated) throw notFound('template')
  return updated
}

/** DELETE is a soft delete: the template stays readable by id, with `active` false. */
export const deactivateTemplate = (deps: Deps, input: Viewer & { templateId: string }) =>
  updateTemplate(deps, { ...input, changes: { active: false } })

export async function sendNotification(
  deps: Deps,
  input: Viewer & { playerId: string; channel: Channel; templateId?: string; payload?: Record<string, unknown> },
): Promise<QueuedNotification> {
  const player = await findPlayerRef(deps, { tenantId: input.tenantId, brandId: input.brandId, playerId: input.playerId })
  if (!player) throw notFound('player')
  if (input.templateId) {
    const template = await q.selectTemplate(deps.sql, { tenantId: input.tenantId, brandId: input.brandId, templateId: input.templateId })
    if (!template) throw notFound('template')
    if (!template.active) {
      throw badRequest('the template is inactive', { reason: 'TEMPLATE_INACTIVE', template_id: template.id })
    }
    if (template.channel !== input.channel) {
      throw badRequest(`the template is for channel '${template.channel}', not '${input.channel}'`, {
        reason: 'CHANNEL_MISMATCH',
        channel: input.channel,
        template_channel: template.channel,
      })
    }
  }
  const queued = await q.insertNotification(deps.sql, {
    tenantId: input.tenantId,
    brandId: player.brandId,
    playerId: player.id,
    channel: input.channel,
    templateId: input.templateId ?? null,
    payload: input.payload ?? {},
  })
  deps.log.info({ tenantId: input.tenantId, notificationId: queued.id, channel: queued.channel }, 'notification queued')
  return queued
}

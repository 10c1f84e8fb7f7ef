// Notification templates (CRUD with soft delete), the enqueue of every send path (single sends, campaigns)
// with the send rules checked at once, and the campaign stats hook. Delivery: dispatcher.ts.
import { randomUUID } from 'node:crypto'
import type { AppContext } from '../context.ts'
import type { Sql } from '../db/postgres.ts'
import { createBatcher, type Batcher } from '../engine/batcher.ts'
import { badRequest, notFound } from '../errors.ts'
import type { Visibility } from '../lib/visibility.ts'
import { findPlayerRef } from '../players/service.ts'
import * as q from './queries.ts'
import { lockSendGate } from '../lib/send-gate.ts'
import { checkSend, checkSends, type Checked } from './check.ts'
import * as dq from './delivery-queries.ts'
import { inboxItemOf } from './engagement.ts'
import { messageEvents } from './events.ts'
import type { Decision, MessageClass } from './rules.ts'
import type { Channel, Locale, NotificationTemplate, QueuedNotification } from './schemas.ts'
import { templateVariables } from './variables.ts'

type Deps = Pick<AppContext, 'sql' | 'log'>

type Viewer = Visibility

type EnqueueContext = Pick<AppContext, 'clock'> & Partial<Pick<AppContext, 'metrics' | 'delivery'>>

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

export interface EnqueueInput {
  tenantId: string
  /** The player's brand. */
  brandId: string
  playerId: string
  channel: Channel
  /** A template of the brand (its locale variant is picked at send time), or inline `content`. */
  templateId?: string | null
  content?: { subject?: string | null; body: string } | null
  /** `marketing` (default) or `transactional`. */
  class?: MessageClass
  campaignId?: string | null
  /** Placeholder values (and for push, `url`). */
  payload?: Record<string, unknown>
  /**
   * Makes the enqueue idempotent per tenant: a second call with the same key creates nothing and returns
   * the first notification (`created: false`). A campaign uses campaign:run:player:step:channel.
   */
  idempotencyKey?: string | null
  /** Not before this time (default now). */
  scheduledAt?: Date | null
  /** A bulk campaign's send (one-shot, recurring): delivered in its own lane (sql/0140), beside real-time messages. */
  bulk?: boolean
}

export interface EnqueueResult {
  notification: QueuedNotification
  /** false when suppressed at once (`status: suppressed`, `reason` says why). */
  queued: boolean
  /** false when the idempotency key named an existing notification. */
  created: boolean
}

/**
 * Queues one message, checking the send rules now (they run again right before sending). Runs on `sql`,
 * the pool or the caller's transaction, so a campaign can enqueue inside its own transaction; the
 * dispatcher is woken when that transaction commits (pg_notify is transactional) and polls regardless.
 * Does not check that the player is visible to an API key: callers pass players of their tenant.
 */
export async function enqueueNotification(sql: dq.Sql, ctx: EnqueueContext, input: EnqueueInput): Promise<EnqueueResult> {
  if (input.idempotencyKey) {
    const existing = await dq.selectByIdempotencyKey(sql, input.tenantId, input.idempotencyKey)
    if (existing) return { notification: dq.notificationOut(existing), queued: existing.status !== 'suppressed', created: false }
  }
  const now = ctx.clock()
  const { decision } = await checkSend(sql, { ...input, class: input.class ?? 'marketing', campaignId: input.campaignId ?? null }, now)
  const row = await dq.insertNotification(sql, newNotification(input, decision, now))
  if (!row) {
    // A concurrent enqueue with the same key won the insert.
    const existing = await dq.selectByIdempotencyKey(sql, input.tenantId, input.idempotencyKey as string)
    if (!existing) throw new Error('notification idempotency key conflict without a row')
    return { notification: dq.notificationOut(existing), queued: existing.status !== 'suppressed', created: false }
  }
  if (row.status === 'queued') {
    await sql`select pg_notify(${DELIVERY_CHANNEL}, '')`
    ctx.delivery?.wake()
  } else {
    // Stopped by the rules at once: an outcome like one the dispatcher reaches right before sending.
    ctx.metrics?.outcome('message', 'suppressed', input.channel)
  }
  return { notification: dq.notificationOut(row), queued: row.status === 'queued', created: true }
}

const singleSends = new WeakMap<object, Batcher<EnqueueInput, EnqueueResult>>()

/**
 * enqueueNotification on the pool (POST /notifications/send), with the calls that arrive together folded
 * into one transaction: the rules checked for all of them in a few queries, one insert, one NOTIFY,
 * instead of about six round trips each. Each caller gets its own result, as from enqueueNotification.
 */
export function enqueueNotificationBatched(sql: dq.Sql, ctx: EnqueueContext, input: EnqueueInput): Promise<EnqueueResult> {
  let batcher = singleSends.get(sql)
  if (!batcher) {
    batcher = createBatcher<EnqueueInput, EnqueueResult>({
      maxSize: 256,
      concurrency: 2,
      // A failed batch rolled back whole: its inputs are then enqueued one by one.
      run: (inputs) =>
        inputs.length === 1
          ? enqueueNotification(sql, ctx, inputs[0]!).then((r) => [r])
          : (sql as Sql).begin((tx) => enqueueTogether(tx, ctx, inputs)) as Promise<EnqueueResult[]>,
    })
    singleSends.set(sql, batcher)
  }
  return batcher.add(input)
}

/** Single enqueues arriving together, on one transaction: each result as enqueueNotification's. */
async function enqueueTogether(sql: dq.Sql, ctx: EnqueueContext, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
  const stored = await enqueueMany(sql, ctx, inputs, 'rows')
  return stored.map(({ row, created }) => {
    // 'rows': every row read back in full.
    const full = row as dq.NotificationRow
    return { notification: dq.notificationOut(full), queued: full.status !== 'suppressed', created }
  })
}

/**
 * The batch enqueue of both batch paths: the rules checked for all inputs in a few queries (they do not
 * count towards each other's caps, as at a single enqueue: only sent messages count), one insert, the
 * rows of idempotency keys that already had a notification read back, one NOTIFY. `returning` says
 * whether the rows come back in full (for the API's answer) or as id and status (a campaign chunk).
 * With `inAppNow` (campaign sends) and a delivery engine that offers it, in-app messages due now are
 * delivered here, in the caller's transaction (dispatcher.ts, InAppNow): checked as the dispatcher checks
 * right before sending (under the players' send gates, counting each other), rendered, and stored once as
 * delivered with their message.delivered event and inbox announce. Bulk sends still queue, in their lane.
 */
async function enqueueMany(
  sql: dq.Sql,
  ctx: EnqueueContext,
  inputs: (EnqueueInput & { id?: string })[],
  returning: 'rows' | 'ids',
  opts: { inAppNow?: boolean } = {},
): Promise<{ row: { id: string; status: string }; created: boolean }[]> {
  const now = ctx.clock()
  const ids = inputs.map((i) => i.id ?? randomUUID())
  const inAppNow = opts.inAppNow ? ctx.delivery?.inAppNow : undefined
  const direct = new Set<number>()
  if (inAppNow) inputs.forEach((i, k) => i.channel === 'in_app' && i.bulk !== true && !(i.scheduledAt && i.scheduledAt > now) && direct.add(k))
  const checkInput = (k: number) => {
    const i = inputs[k]!
    return { id: ids[k], playerId: i.playerId, brandId: i.brandId, channel: i.channel, class: i.class ?? 'marketing', campaignId: i.campaignId ?? null }
  }
  const checked: Checked[] = new Array(inputs.length)
  const queuedIdx = inputs.map((_, k) => k).filter((k) => !direct.has(k))
  for (const [k, c] of (await checkSends(sql, queuedIdx.map(checkInput), now)).entries()) checked[queuedIdx[k]!] = c
  if (direct.size) {
    const directIdx = [...direct]
    await lockSendGate(sql, distinct(directIdx.filter((k) => (inputs[k]!.class ?? 'marketing') === 'marketing').map((k) => inputs[k]!.playerId)))
    for (const [k, c] of (await checkSends(sql, directIdx.map(checkInput), now, { inFlight: true })).entries()) checked[directIdx[k]!] = c
  }
  const rows: (dq.NewNotification & { id: string })[] = inputs.map((input, k) => ({ id: ids[k]!, ...newNotification(input, checked[k]!.decision, now) }))
  const toRender = [...direct].filter((k) => checked[k]!.decision.action === 'send' && checked[k]!.recipient)
  if (inAppNow && toRender.length) {
    const out = await inAppNow.render(sql, toRender.map((k) => {
      const r = rows[k]!
      return { id: r.id, channel: r.channel, template_id: r.templateId, content: r.content, payload: r.payload, brand_id: r.brandId, recipient: checked[k]!.recipient! }
    }))
    for (const [j, k] of toRender.entries()) {
      const o = out[j]!
      Object.assign(rows[k]!, 'error' in o ? { status: 'failed', error: o.error } : { status: 'delivered', rendered: o.rendered })
    }
  }
  // A player erased since the caller chose them (a delayed trigger's run, a one-shot's chunk) has no
  // recipient row: their message is not inserted (it would break the foreign key and fail the batch).
  const insertable = rows.filter((_, k) => checked[k]!.recipient)
  const inserted = new Map<string, { id: string; status: string; created_at?: Date }>(
    (returning === 'rows' ? await dq.insertNotifications(sql, insertable, 'rows') : await dq.insertNotifications(sql, insertable)).map((r) => [r.id, r]),
  )
  // Keys that named an existing notification (a retry after a crash, or a key twice in one batch) keep it.
  const lost = inputs.filter((_, k) => !inserted.has(ids[k]!) && checked[k]!.recipient)
  const existing = new Map<string, { id: string; status: string }>()
  if (lost.length) {
    const found = await dq.selectByIdempotencyKeys(sql, distinct(lost.map((i) => i.tenantId)), lost.map((i) => i.idempotencyKey as string), returning)
    for (const r of found) existing.set(`${r.tenant_id}:${r.idempotency_key}`, r)
  }
  const delivered = rows.filter((r) => r.status === 'delivered' && inserted.has(r.id))
  if (inAppNow && delivered.length) {
    await messageEvents(sql, 'message.delivered', delivered.map((r) => ({ id: r.id, tenant_id: r.tenantId, brand_id: r.brandId, player_id: r.playerId, channel: r.channel, campaign_id: r.campaignId })))
    await inAppNow.announce(sql, delivered.map((r) => ({
      playerId: r.playerId,
      item: inboxItemOf({ id: r.id, rendered: r.rendered ?? null, campaign_id: r.campaignId, created_at: inserted.get(r.id)!.created_at!, read_at: null }),
    })))
  }
  if ([...inserted.values()].some((r) => r.status === 'queued')) {
    await sql`select pg_notify(${DELIVERY_CHANNEL}, '')`
    ctx.delivery?.wake()
  }
  return inputs.map((input, k) => {
    const own = inserted.get(ids[k]!)
    const row = own ?? existing.get(`${input.tenantId}:${input.idempotencyKey}`)
    if (!row && !checked[k]!.recipient) {
      // The player was erased (not inserted, above): no message, and no error that would fail the rest of
      // a campaign's chunk forever. A single send answers as for a player that does not exist.
      if (returning === 'rows') throw notFound('player')
      return { row: { id: ids[k]!, status: 'suppressed' }, created: false }
    }
    if (!row) throw new Error(`notification ${input.idempotencyKey} neither inserted nor found`)
    // Final at once (suppressed by the rules, or an in-app message delivered or failed here): an
    // outcome like one the dispatcher reaches.
    if (own && own.status !== 'queued') ctx.metrics?.outcome('message', own.status as 'suppressed' | 'delivered' | 'failed', input.channel)
    return { row, created: own !== undefined }
  })
}

/** The row an enqueue inserts, given the rules' decision. */
function newNotification(input: EnqueueInput, decision: Decision, now: Date): dq.NewNotification {
  const scheduledAt = input.scheduledAt && input.scheduledAt > now ? input.scheduledAt : now
  return {
    tenantId: input.tenantId,
    brandId: input.brandId,
    playerId: input.playerId,
    channel: input.channel,
    templateId: input.templateId ?? null,
    content: input.content ? { subject: input.content.subject ?? null, body: input.content.body } : null,
    payload: input.payload ?? {},
    class: input.class ?? 'marketing',
    campaignId: input.campaignId ?? null,
    idempotencyKey: input.idempotencyKey ?? null,
    status: decision.action === 'suppress' ? 'suppressed' : 'queued',
    reason: decision.action === 'suppress' ? decision.reason : null,
    scheduledAt: decision.action === 'hold' && decision.until > scheduledAt ? decision.until : scheduledAt,
    bulk: input.bulk === true,
  }
}

/**
 * enqueueNotification for many messages in one go (a campaign chunk): the rules checked for all of them
 * in a few queries, one insert, one NOTIFY. Every input needs an idempotency key (the exactly-once guard);
 * a key that exists already keeps its notification. An input may bring the id its notification gets.
 * Returns, per input, its notification's id, whether it is queued (false: suppressed at once) and whether
 * this call created it (false: its key had a notification already).
 */
export async function enqueueNotifications(
  sql: dq.Sql,
  ctx: EnqueueContext,
  inputs: (EnqueueInput & { idempotencyKey: string; id?: string })[],
): Promise<{ id: string; queued: boolean; created: boolean }[]> {
  if (!inputs.length) return []
  return (await enqueueMany(sql, ctx, inputs, 'ids', { inAppNow: true })).map(({ row, created }) => ({ id: row.id, queued: row.status !== 'suppressed', created }))
}

/** The NOTIFY channel that wakes the dispatchers of every process when a notification is queued. */
export const DELIVERY_CHANNEL = 'respin_delivery'

/**
 * What a campaign counts: its notifications per status, and how many were opened and clicked (the stats
 * hook of campaign execution; the same facts also reach webhooks as message.* events with campaign_id).
 */
export async function campaignDeliveryStats(sql: dq.Sql, campaignId: string) {
  const [row] = await sql<{ queued: number; delivered: number; suppressed: number; bounced: number; failed: number; opened: number; clicked: number }[]>`
    select count(*) filter (where status = 'queued')::int as queued,
           count(*) filter (where status = 'delivered')::int as delivered,
           count(*) filter (where status = 'suppressed')::int as suppressed,
           count(*) filter (where status = 'bounced')::int as bounced,
           count(*) filter (where status = 'failed')::int as failed,
           count(opened_at)::int as opened,
           count(clicked_at)::int as clicked
    from notifications where campaign_id = ${campaignId}`
  return row!
}

/** Checks a template for a send: it exists in the brand, is active and is for this channel. */
async function usableTemplate(sql: dq.Sql, input: Visibility & { templateId: string; channel: Channel }) {
  const template = await q.selectTemplate(sql, input)
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
  return template
}

/** POST /notifications/send. */
export async function sendNotification(
  deps: Deps & Pick<AppContext, 'clock'> & Partial<Pick<AppContext, 'metrics'>> & { delivery?: { wake(): void } },
  input: Viewer & { playerId: string; channel: Channel; templateId?: string; payload?: Record<string, unknown>; class?: MessageClass },
): Promise<EnqueueResult> {
  const player = await findPlayerRef(deps, { tenantId: input.tenantId, brandId: input.brandId, playerId: input.playerId })
  if (!player) throw notFound('player')
  const payload = input.payload ?? {}
  let content: EnqueueInput['content'] = null
  if (input.templateId) {
    // Any template of the key's tenant (or of its pinned brand), as for the other by-id routes.
    await usableTemplate(deps.sql, { tenantId: input.tenantId, brandId: input.brandId, templateId: input.templateId, channel: input.channel })
  } else {
    // Without a template the payload carries the message itself.
    const errors = []
    if (typeof payload.body !== 'string' || payload.body.length === 0) errors.push({ in: 'body', field: 'payload.body', message: 'is required (a non-empty string) without template_id' })
    if (payload.subject !== undefined && payload.subject !== null && typeof payload.subject !== 'string') errors.push({ in: 'body', field: 'payload.subject', message: 'must be a string' })
    if (errors.length) throw badRequest('invalid payload', { errors })
    content = { subject: (payload.subject as string | undefined) ?? null, body: payload.body as string }
  }
  const result = await enqueueNotificationBatched(deps.sql, deps, {
    tenantId: input.tenantId,
    brandId: player.brandId,
    playerId: player.id,
    channel: input.channel,
    templateId: input.templateId ?? null,
    content,
    class: input.class,
    payload,
  })
  deps.log.info({ tenantId: input.tenantId, notificationId: result.notification.id, channel: input.channel, status: result.notification.status }, 'notification queued')
  return result
}

// Webhook endpoint management and the delivery log: create (URL policy, secret shown once), rotate with a
// 24 h overlap, ping and redeliver (new deliveries the dispatcher sends like any other).
import { recordAudit, type AuditActor } from '../audit/service.ts'
import type { AppContext } from '../context.ts'
import { badRequest, notFound } from '../errors.ts'
import { keysetCursor } from '../lib/cursor.ts'
import { checkUrl, UrlPolicyError } from '../lib/url-policy.ts'
import type { Visibility } from '../lib/visibility.ts'
import { PING_EVENT } from './catalog.ts'
import * as q from './queries.ts'
import type { Delivery, DeliveryListQuery, WebhookEndpoint } from './schemas.ts'
import { generateSecret } from './signing.ts'

type Deps = Pick<AppContext, 'sql' | 'config' | 'secretBox'> & Partial<Pick<AppContext, 'bus'>> & { webhooks?: { wake(): void; endpointChanged(id: string): void } }

/**
 * Every process's dispatcher forgets the endpoint before the change's request answers (the bus waits for
 * their acknowledgements): a rotated secret, a new URL or a deactivation holds for the next attempt
 * anywhere. Without a bus (tests of the service alone), this process's only.
 */
async function endpointChanged(deps: Deps, id: string): Promise<void> {
  if (deps.bus) await deps.bus.publish('webhook_endpoint', id)
  else deps.webhooks?.endpointChanged(id)
}
/** Who makes a change, for its audit row (src/audit/service.ts); written in the change's transaction. */
type Audit = AuditActor & { requestId: string }

export const toEndpoint = (r: q.EndpointRow): WebhookEndpoint => ({
  id: r.id,
  url: r.url,
  events: r.events,
  brand_id: r.brand_id,
  active: r.active,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
})

export const toDelivery = (r: q.DeliveryRow): Delivery => ({
  id: r.id,
  endpoint_id: r.endpoint_id,
  event: r.event,
  status: r.status,
  attempt_count: r.attempt_count,
  next_attempt_at: r.status === 'pending' && r.next_attempt_at ? r.next_attempt_at.toISOString() : null,
  created_at: r.created_at.toISOString(),
  completed_at: r.completed_at?.toISOString() ?? null,
  redelivery_of: r.redelivery_of,
  attempts: r.attempts,
})

/** The URL policy at create/PATCH: a 400 naming the field. */
async function checkEndpointUrl(deps: Deps, url: string): Promise<void> {
  try {
    await checkUrl(url, { allowPrivate: deps.config.webhookAllowPrivate })
  } catch (err) {
    if (!(err instanceof UrlPolicyError)) throw err
    throw badRequest(`url is not allowed: ${err.message}`, { errors: [{ in: 'body', field: 'url', message: err.message }] })
  }
}

export async function createEndpoint(
  deps: Deps,
  input: { tenantId: string; brandId: string | null; url: string; events: string[] },
  audit?: Audit,
): Promise<WebhookEndpoint & { secret: string }> {
  await checkEndpointUrl(deps, input.url)
  const secret = generateSecret()
  const row = await deps.sql.begin(async (tx) => {
    const row = await q.insertEndpoint(tx, { ...input, secretSealed: deps.secretBox.seal(secret) })
    if (audit) await recordAudit(tx, { ...audit, action: 'createWebhook', target: { type: 'webhook', id: row.id }, after: toEndpoint(row) })
    return row
  })
  return { ...toEndpoint(row), secret }
}

export async function listEndpoints(deps: Deps, v: Visibility): Promise<WebhookEndpoint[]> {
  return (await q.selectEndpoints(deps.sql, v)).map(toEndpoint)
}

async function endpointOr404(deps: Deps, v: Visibility & { id: string }): Promise<q.EndpointRow> {
  const row = await q.selectEndpoint(deps.sql, v)
  if (!row) throw notFound('webhook endpoint')
  return row
}

export const getEndpoint = async (deps: Deps, v: Visibility & { id: string }) => toEndpoint(await endpointOr404(deps, v))

export async function updateEndpoint(
  deps: Deps,
  input: Visibility & { id: string; url?: string; events?: string[]; active?: boolean; rotate_secret?: boolean },
  audit?: Audit,
): Promise<WebhookEndpoint & { secret?: string }> {
  if (input.url !== undefined) await checkEndpointUrl(deps, input.url)
  const newSecret = input.rotate_secret ? generateSecret() : undefined
  const row = await deps.sql.begin(async (tx) => {
    const prev = await q.selectEndpoint(tx, input, true)
    if (!prev) throw notFound('webhook endpoint')
    const next = await q.updateEndpoint(tx, prev.id, {
      url: input.url,
      events: input.events,
      active: input.active,
      secretSealed: newSecret ? deps.secretBox.seal(newSecret) : undefined,
      // The secret that signed until now keeps signing for 24 h, so receivers can roll over.
      previousSecretSealed: newSecret ? prev.secret_sealed : undefined,
    })
    if (input.active === true && !prev.active) await q.resumeDeliveries(tx, prev.id)
    if (audit) {
      await recordAudit(tx, {
        ...audit, action: 'updateWebhook', target: { type: 'webhook', id: prev.id },
        before: toEndpoint(prev), after: { ...toEndpoint(next), ...(newSecret ? { secret_rotated: true } : {}) },
      })
    }
    return next
  })
  await endpointChanged(deps, row.id)
  if (input.active === true) deps.webhooks?.wake()
  return newSecret ? { ...toEndpoint(row), secret: newSecret } : toEndpoint(row)
}

export async function deleteEndpoint(deps: Deps, v: Visibility & { id: string }, audit?: Audit): Promise<{ id: string }> {
  await deps.sql.begin(async (tx) => {
    const prev = audit ? await q.selectEndpoint(tx, v, true) : undefined
    const rows = await q.deleteEndpoint(tx, v)
    if (!rows.length) throw notFound('webhook endpoint')
    if (audit) await recordAudit(tx, { ...audit, action: 'deleteWebhook', target: { type: 'webhook', id: v.id }, before: prev && toEndpoint(prev) })
  })
  await endpointChanged(deps, v.id)
  return { id: v.id }
}

const CURSOR_PURPOSE = 'webhook-deliveries'

export async function listDeliveries(
  deps: Deps,
  input: Visibility & { id: string } & DeliveryListQuery,
): Promise<{ data: Delivery[]; next_cursor: string | null }> {
  const endpoint = await endpointOr404(deps, input)
  // Bound to the endpoint: one endpoint's cursor is no position in another's log.
  const { after, next } = await keysetCursor(deps.sql, CURSOR_PURPOSE, endpoint.id, input.cursor)
  const rows = await q.selectDeliveries(deps.sql, { endpointId: endpoint.id, status: input.status, event: input.event, limit: input.limit + 1, after })
  return { data: rows.slice(0, input.limit).map(toDelivery), next_cursor: next(rows, input.limit) }
}

/** A body as the dispatcher sends it: the event, the delivery's timestamp and the data (with brand_id). */
export const deliveryBody = (event: string, createdAt: Date, data: Record<string, unknown>): string =>
  JSON.stringify({ event, created_at: createdAt.toISOString(), data })

/** contract-engines §2: "an inactive endpoint gets no new deliveries": nor a ping or a redelivery asked for. */
function assertActive(endpoint: { active: boolean }): void {
  if (!endpoint.active) throw badRequest('the endpoint is inactive: it gets no new deliveries (PATCH active: true first)', { reason: 'ENDPOINT_INACTIVE' })
}

export async function ping(deps: Deps, v: Visibility & { id: string }): Promise<Delivery> {
  const endpoint = await endpointOr404(deps, v)
  assertActive(endpoint)
  const createdAt = new Date()
  const row = await q.insertDelivery(deps.sql, {
    tenantId: endpoint.tenant_id,
    endpointId: endpoint.id,
    keyId: q.keyIdOf(endpoint.secret_sealed),
    event: PING_EVENT,
    body: deliveryBody(PING_EVENT, createdAt, { endpoint_id: endpoint.id, brand_id: endpoint.brand_id }),
    createdAt,
  })
  deps.webhooks?.wake()
  return toDelivery(row)
}

export async function redeliver(deps: Deps, v: Visibility & { id: string; deliveryId: string }): Promise<Delivery> {
  const endpoint = await endpointOr404(deps, v)
  const original = await q.selectDelivery(deps.sql, { endpointId: endpoint.id, id: v.deliveryId })
  if (!original) throw notFound('delivery')
  assertActive(endpoint)
  const row = await q.insertDelivery(deps.sql, {
    tenantId: endpoint.tenant_id,
    endpointId: endpoint.id,
    keyId: q.keyIdOf(endpoint.secret_sealed),
    event: original.event,
    // The identical body, its created_at included.
    body: original.body,
    createdAt: new Date(),
    outboxId: original.outbox_id,
    redeliveryOf: original.id,
  })
  deps.webhooks?.wake()
  return toDelivery(row)
}

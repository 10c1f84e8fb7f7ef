// SQL of the notification lifecycle: the recipient's facts for the send rules, the queue rows, their
// status moves. Every function takes the pool or a transaction first.
import type postgres from 'postgres'
import { iso } from '../lib/rows.ts'
import { DEFAULT_DELIVERY_SETTINGS, type Channel, type ConsentEntry, type DeliverySettings, type PlayerStatus } from './rules.ts'
import type { QueuedNotification } from './schemas.ts'

export type Sql = postgres.ISql

export interface NotificationRow {
  id: string
  tenant_id: string
  brand_id: string
  player_id: string
  channel: Channel
  template_id: string | null
  payload: Record<string, unknown>
  content: { subject?: string | null; body?: string } | null
  status: string
  class: 'marketing' | 'transactional'
  campaign_id: string | null
  reason: string | null
  error: string | null
  attempts: number
  links: string[]
  rendered: { subject: string | null; body: string } | null
  scheduled_at: Date
  sent_at: Date | null
  delivered_at: Date | null
  opened_at: Date | null
  clicked_at: Date | null
  read_at: Date | null
  created_at: Date
  updated_at: Date
}

export const notificationOut = (r: NotificationRow): QueuedNotification => ({
  id: r.id,
  tenant_id: r.tenant_id,
  player_id: r.player_id,
  channel: r.channel,
  template_id: r.template_id,
  payload: r.payload,
  status: r.status,
  class: r.class,
  campaign_id: r.campaign_id,
  reason: r.reason,
  error: r.error,
  attempts: r.attempts,
  scheduled_at: iso(r.scheduled_at) as string,
  sent_at: iso(r.sent_at),
  delivered_at: iso(r.delivered_at),
  opened_at: iso(r.opened_at),
  clicked_at: iso(r.clicked_at),
  created_at: iso(r.created_at) as string,
  updated_at: iso(r.updated_at) as string,
})

/** What the send rules and rendering need to know about a recipient. */
export interface Recipient {
  id: string
  tenant_id: string
  brand_id: string
  external_id: string
  status: PlayerStatus
  email: string | null
  phone: string | null
  name: string | null
  language: string | null
  currency: string | null
  country: string | null
  timezone: string | null
  consent: Record<string, ConsentEntry | undefined>
  telegram_chat_id: string | null
  undeliverable_email: string | null
  push_subscriptions: number
}

type RecipientRow = Recipient & { delivery_settings: Partial<DeliverySettings> | null }

/**
 * The recipients' facts by player id (the notification feature reads players through this one query),
 * with their brand's delivery settings: one round trip per check, whatever the number of messages.
 */
export async function selectRecipients(sql: Sql, playerIds: string[]): Promise<Map<string, RecipientRow>> {
  const rows = await sql<RecipientRow[]>`
    select p.id, p.tenant_id, p.brand_id, p.external_id, p.status, p.email, p.phone,
           pp.name, pp.language, pp.currency, pp.country, pp.timezone, coalesce(pp.consent, '{}') as consent,
           c.telegram_chat_id, c.undeliverable_email,
           (select count(*)::int from push_subscriptions s where s.player_id = p.id) as push_subscriptions,
           (select settings from brand_delivery_settings d where d.brand_id = p.brand_id) as delivery_settings
    from players p
    left join player_profiles pp on pp.player_id = p.id
    left join player_contacts c on c.player_id = p.id
    where p.id = any(${playerIds}::uuid[])`
  return new Map(rows.map((r) => [r.id, r]))
}

/**
 * Marketing messages handed to a channel (delivered, or in flight right now) since `earliest`, for many
 * players: what the frequency caps count.
 */
export async function selectSentSince(sql: Sql, playerIds: string[], earliest: Date): Promise<Map<string, { id: string; channel: Channel; sent_at: Date }[]>> {
  const rows = await sql<{ id: string; player_id: string; channel: Channel; sent_at: Date }[]>`
    select id, player_id, channel, sent_at from notifications
    where player_id = any(${playerIds}::uuid[]) and class = 'marketing' and sent_at >= ${earliest} and status in ('delivered', 'queued')`
  const byPlayer = new Map<string, { id: string; channel: Channel; sent_at: Date }[]>()
  for (const r of rows) {
    const list = byPlayer.get(r.player_id)
    if (list) list.push(r)
    else byPlayer.set(r.player_id, [r])
  }
  return byPlayer
}

export function hasAddress(r: Recipient, channel: Channel): boolean {
  switch (channel) {
    case 'email':
      return !!r.email
    case 'telegram':
      return !!r.telegram_chat_id
    case 'push':
      return r.push_subscriptions > 0
    case 'in_app':
      return true
  }
}

export const isUndeliverable = (r: Recipient, channel: Channel) =>
  channel === 'email' && !!r.email && r.undeliverable_email !== null && r.undeliverable_email.toLowerCase() === r.email.toLowerCase()

export async function selectDeliverySettings(sql: Sql, brandId: string): Promise<DeliverySettings> {
  const [row] = await sql<{ settings: Partial<DeliverySettings> }[]>`select settings from brand_delivery_settings where brand_id = ${brandId}`
  return withDefaults(row?.settings)
}

export function withDefaults(s: Partial<DeliverySettings> | undefined): DeliverySettings {
  return {
    frequency_caps: s?.frequency_caps ?? DEFAULT_DELIVERY_SETTINGS.frequency_caps,
    quiet_hours: s?.quiet_hours ?? DEFAULT_DELIVERY_SETTINGS.quiet_hours,
    consent_policy: { ...DEFAULT_DELIVERY_SETTINGS.consent_policy, ...(s?.consent_policy ?? {}) },
  }
}

const COLUMNS = `id, tenant_id, brand_id, player_id, channel, template_id, payload, content, status, class, campaign_id, reason,
  error, attempts, links, rendered, scheduled_at, sent_at, delivered_at, opened_at, clicked_at, read_at, created_at, updated_at`

export const notificationColumns = (sql: Sql) => sql.unsafe(COLUMNS)

export async function selectNotification(sql: Sql, id: string): Promise<NotificationRow | undefined> {
  const [row] = await sql<NotificationRow[]>`select ${notificationColumns(sql)} from notifications where id = ${id}`
  return row
}

/** The notifications of idempotency keys: in full, or ('ids') id and status only. */
export const selectByIdempotencyKeys = (sql: Sql, tenantIds: string[], keys: string[], returning: 'rows' | 'ids' = 'rows') => sql<
  ({ id: string; status: string; tenant_id: string; idempotency_key: string } & Partial<NotificationRow>)[]
>`
  select ${returning === 'rows' ? notificationColumns(sql) : sql`id, status, tenant_id`}, idempotency_key from notifications
  where tenant_id = any(${tenantIds}::uuid[]) and idempotency_key = any(${keys}::text[])`

export async function selectByIdempotencyKey(sql: Sql, tenantId: string, key: string): Promise<NotificationRow | undefined> {
  const [row] = await sql<NotificationRow[]>`
    select ${notificationColumns(sql)} from notifications where tenant_id = ${tenantId} and idempotency_key = ${key}`
  return row
}

export interface NewNotification {
  tenantId: string
  brandId: string
  playerId: string
  channel: Channel
  templateId: string | null
  content: { subject: string | null; body: string } | null
  payload: Record<string, unknown>
  class: 'marketing' | 'transactional'
  campaignId: string | null
  idempotencyKey: string | null
  /** delivered, failed: an in-app message settled where it is enqueued (service.ts, enqueueMany). */
  status: 'queued' | 'suppressed' | 'delivered' | 'failed'
  reason: string | null
  scheduledAt: Date
  /** A bulk campaign's send: its own delivery lane (sql/0140). */
  bulk?: boolean
  /** What a message delivered at enqueue showed. */
  rendered?: { subject: string | null; body: string }
  /** Why a message failed at enqueue. */
  error?: string
}

/**
 * insertNotification for many rows in one statement. JSON goes in as text[] cast per row: postgres.js
 * encodes each element of a jsonb[] parameter as JSON again, which would store strings, not objects. Returns the rows inserted (id, key, status); a row
 * whose idempotency key exists already is left alone and not returned.
 */
export async function insertNotifications(sql: Sql, ns: (NewNotification & { id?: string })[]): Promise<{ id: string; idempotency_key: string | null; status: string; created_at: Date }[]>
export async function insertNotifications(sql: Sql, ns: (NewNotification & { id?: string })[], returning: 'rows'): Promise<NotificationRow[]>
export async function insertNotifications(sql: Sql, ns: (NewNotification & { id?: string })[], returning?: 'rows'): Promise<{ id: string; idempotency_key: string | null; status: string; created_at: Date }[] | NotificationRow[]> {
  if (!ns.length) return []
  // A message settled at enqueue (in-app delivered or failed) has made its one attempt, like the
  // dispatcher's: a delivered one was also sent then.
  return sql<{ id: string; idempotency_key: string | null; status: string; created_at: Date }[]>`
    insert into notifications (id, tenant_id, brand_id, player_id, channel, template_id, content, payload, class, campaign_id,
                               idempotency_key, status, reason, scheduled_at, due_at, bulk, rendered, error, attempts, sent_at, delivered_at)
    select coalesce(x.id, gen_random_uuid()), x.tenant_id, x.brand_id, x.player_id, x.channel, x.template_id, x.content::jsonb, x.payload::jsonb, x.class, x.campaign_id,
           x.idempotency_key, x.status, x.reason, x.scheduled_at, x.scheduled_at, x.bulk = 'true', x.rendered::jsonb, x.error,
           (x.status in ('delivered', 'failed'))::int, case when x.status = 'delivered' then now() end, case when x.status = 'delivered' then now() end
    from unnest(${ns.map((n) => n.id ?? null)}::uuid[], ${ns.map((n) => n.tenantId)}::uuid[], ${ns.map((n) => n.brandId)}::uuid[], ${ns.map((n) => n.playerId)}::uuid[],
                ${ns.map((n) => n.channel)}::text[], ${ns.map((n) => n.templateId)}::uuid[],
                ${ns.map((n) => (n.content ? JSON.stringify(n.content) : null))}::text[], ${ns.map((n) => JSON.stringify(n.payload))}::text[],
                ${ns.map((n) => n.class)}::text[], ${ns.map((n) => n.campaignId)}::uuid[], ${ns.map((n) => n.idempotencyKey)}::text[],
                ${ns.map((n) => n.status)}::text[], ${ns.map((n) => n.reason)}::text[], ${ns.map((n) => n.scheduledAt.toISOString())}::timestamptz[],
                ${ns.map((n) => String(n.bulk === true))}::text[], ${ns.map((n) => (n.rendered ? JSON.stringify(n.rendered) : null))}::text[],
                ${ns.map((n) => n.error ?? null)}::text[])
      as x(id, tenant_id, brand_id, player_id, channel, template_id, content, payload, class, campaign_id, idempotency_key, status, reason, scheduled_at, bulk, rendered, error)
    on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
    returning ${returning === 'rows' ? notificationColumns(sql) : sql`id, idempotency_key, status, created_at`}`
}

/** Inserts, or (same idempotency key) returns undefined and leaves the existing row alone. */
export async function insertNotification(sql: Sql, n: NewNotification): Promise<NotificationRow | undefined> {
  const [row] = await sql<NotificationRow[]>`
    insert into notifications (tenant_id, brand_id, player_id, channel, template_id, content, payload, class, campaign_id,
                               idempotency_key, status, reason, scheduled_at, due_at)
    values (${n.tenantId}, ${n.brandId}, ${n.playerId}, ${n.channel}, ${n.templateId},
            ${n.content ? sql.json(n.content as never) : null}, ${sql.json(n.payload as never)}, ${n.class}, ${n.campaignId},
            ${n.idempotencyKey}, ${n.status}, ${n.reason}, ${n.scheduledAt}, ${n.scheduledAt})
    on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
    returning ${notificationColumns(sql)}`
  return row
}

/**
 * The in-flight mark of many messages about to be handed to their channels (sent_at, one more attempt,
 * what was rendered), each only while the caller's lease holds. Returns the ids marked, with attempts.
 */
export async function markInFlight(
  sql: Sql,
  rows: { id: string; owner: string; rendered: { subject: string | null; body: string }; links: string[] }[],
): Promise<Map<string, number>> {
  if (!rows.length) return new Map()
  const marked = await sql<{ id: string; attempts: number }[]>`
    update notifications n set sent_at = now(), attempts = n.attempts + 1, rendered = x.rendered::jsonb,
      links = array(select jsonb_array_elements_text(x.links::jsonb)), paused_wait = false, updated_at = now()
    from unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.owner)}::text[],
                ${rows.map((r) => JSON.stringify(r.rendered))}::text[],
                ${rows.map((r) => JSON.stringify(r.links))}::text[])
      as x(id, owner, rendered, links)
    where n.id = x.id and n.lease_owner = x.owner and n.status = 'queued'
    returning n.id, n.attempts`
  return new Map(marked.map((r) => [r.id, r.attempts]))
}

/**
 * In-app messages delivered where they are checked (their channel is this database): the in-flight mark
 * and the delivery in one update, each only while the caller's lease holds; returns the rows that were.
 */
export async function markInAppDelivered(
  sql: Sql,
  rows: { id: string; owner: string; rendered: { subject: string | null; body: string } }[],
): Promise<NotificationRow[]> {
  if (!rows.length) return []
  return sql<NotificationRow[]>`
    update notifications n set sent_at = now(), attempts = n.attempts + 1, rendered = x.rendered::jsonb, links = '{}',
      status = 'delivered', delivered_at = now(), error = null, lease_owner = null, updated_at = now()
    from unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.owner)}::text[], ${rows.map((r) => JSON.stringify(r.rendered))}::text[])
      as x(id, owner, rendered)
    where n.id = x.id and n.lease_owner = x.owner and n.status = 'queued'
    returning n.id, n.rendered, n.campaign_id, n.created_at, n.read_at`
}

/** Many messages delivered at once, each only while the caller's lease holds; returns the ids of those that were. */
export async function markDelivered(sql: Sql, rows: { id: string; owner: string }[]): Promise<string[]> {
  if (!rows.length) return []
  const done = await sql<{ id: string }[]>`
    update notifications n set status = 'delivered', delivered_at = now(), error = null, lease_owner = null, updated_at = now()
    from unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.owner)}::text[]) as x(id, owner)
    where n.id = x.id and n.lease_owner = x.owner and n.status = 'queued'
    returning n.id`
  return done.map((r) => r.id)
}

/** What the send rules' check decided for a message that is not sent now. */
export interface CheckSettlement {
  id: string
  owner: string
  channel: Channel
  /** Suppressed, for this reason. */
  suppressReason?: string
  /** Looked at again in this many seconds (its campaign is paused). */
  waitSec?: number
  /** Held until then (quiet hours), and checked again then. */
  holdUntil?: Date
}

/** Settles many checked messages at once, each only while the caller's lease holds; returns those settled. */
export async function settleChecks(sql: Sql, rows: CheckSettlement[]): Promise<{ id: string; status: string; channel: Channel }[]> {
  if (!rows.length) return []
  return sql<{ id: string; status: string; channel: Channel }[]>`
    update notifications n set
      status = case when x.reason is not null then 'suppressed' else n.status end,
      reason = coalesce(x.reason, n.reason),
      scheduled_at = coalesce(x.hold_until, n.scheduled_at),
      -- A message found waiting on its paused campaign: unless the campaign was resumed since the check
      -- read it (the resume skipped this message, leased then), in which case it is due at once.
      due_at = case
        when x.wait_sec is null then coalesce(x.hold_until, n.due_at)
        when exists (select 1 from campaigns c where c.id = n.campaign_id and c.status = 'paused') then now() + x.wait_sec * interval '1 second'
        else now() end,
      paused_wait = x.wait_sec is not null,
      lease_owner = null, updated_at = now()
    from unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.owner)}::text[], ${rows.map((r) => r.suppressReason ?? null)}::text[],
                ${rows.map((r) => r.waitSec ?? null)}::int[], ${rows.map((r) => r.holdUntil?.toISOString() ?? null)}::timestamptz[])
      as x(id, owner, reason, wait_sec, hold_until)
    where n.id = x.id and n.lease_owner = x.owner and n.status = 'queued'
    returning n.id, n.status, n.channel`
}

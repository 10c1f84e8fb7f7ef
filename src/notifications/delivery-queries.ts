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

/**
 * The recipient's facts (the notification feature reads players through this one query), with the brand's
 * delivery settings and the campaign's status: one round trip per check.
 */
export async function selectRecipient(
  sql: Sql,
  playerId: string,
  campaignId: string | null = null,
): Promise<(Recipient & { delivery_settings: Partial<DeliverySettings> | null; campaign_status: string | null }) | undefined> {
  const [row] = await sql<(Recipient & { delivery_settings: Partial<DeliverySettings> | null; campaign_status: string | null })[]>`
    select p.id, p.tenant_id, p.brand_id, p.external_id, p.status, p.email, p.phone,
           pp.name, pp.language, pp.currency, pp.country, pp.timezone, coalesce(pp.consent, '{}') as consent,
           c.telegram_chat_id, c.undeliverable_email,
           (select count(*)::int from push_subscriptions s where s.player_id = p.id) as push_subscriptions,
           (select settings from brand_delivery_settings d where d.brand_id = p.brand_id) as delivery_settings,
           (select status from campaigns k where k.id = ${campaignId}::uuid) as campaign_status
    from players p
    left join player_profiles pp on pp.player_id = p.id
    left join player_contacts c on c.player_id = p.id
    where p.id = ${playerId}`
  return row
}

/** selectRecipient for many players at once (a campaign chunk), by player id; the campaign status apart. */
export async function selectRecipients(
  sql: Sql,
  playerIds: string[],
): Promise<Map<string, Recipient & { delivery_settings: Partial<DeliverySettings> | null }>> {
  const rows = await sql<(Recipient & { delivery_settings: Partial<DeliverySettings> | null })[]>`
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

/** Marketing messages handed to a channel since `earliest`, for many players: what countSentSince counts. */
export async function selectSentSince(sql: Sql, playerIds: string[], earliest: Date): Promise<Map<string, { channel: Channel; sent_at: Date }[]>> {
  const rows = await sql<{ player_id: string; channel: Channel; sent_at: Date }[]>`
    select player_id, channel, sent_at from notifications
    where player_id = any(${playerIds}::uuid[]) and class = 'marketing' and sent_at >= ${earliest} and status in ('delivered', 'queued')`
  const byPlayer = new Map<string, { channel: Channel; sent_at: Date }[]>()
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

/**
 * Marketing messages of this player handed to a channel (delivered, or in flight right now) since each
 * window's start, on the window's channel or any channel. One count per window, in order.
 */
export async function countSentSince(
  sql: Sql,
  playerId: string,
  windows: { channel: Channel | 'any'; since: Date }[],
  excludeId?: string,
): Promise<number[]> {
  if (windows.length === 0) return []
  const earliest = new Date(Math.min(...windows.map((w) => w.since.getTime())))
  const rows = await sql<{ channel: Channel; sent_at: Date }[]>`
    select channel, sent_at from notifications
    where player_id = ${playerId} and class = 'marketing' and sent_at >= ${earliest}
      and status in ('delivered', 'queued') and id <> ${excludeId ?? '00000000-0000-0000-0000-000000000000'}`
  return windows.map((w) => rows.filter((r) => (w.channel === 'any' || r.channel === w.channel) && r.sent_at >= w.since).length)
}

const COLUMNS = `id, tenant_id, brand_id, player_id, channel, template_id, payload, content, status, class, campaign_id, reason,
  error, attempts, links, rendered, scheduled_at, sent_at, delivered_at, opened_at, clicked_at, read_at, created_at, updated_at`

export const notificationColumns = (sql: Sql) => sql.unsafe(COLUMNS)

export async function selectNotification(sql: Sql, id: string): Promise<NotificationRow | undefined> {
  const [row] = await sql<NotificationRow[]>`select ${notificationColumns(sql)} from notifications where id = ${id}`
  return row
}

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
  status: 'queued' | 'suppressed'
  reason: string | null
  scheduledAt: Date
}

/**
 * insertNotification for many rows in one statement. Returns the rows inserted (id, key, status); a row
 * whose idempotency key exists already is left alone and not returned.
 */
export async function insertNotifications(sql: Sql, ns: (NewNotification & { id?: string })[]): Promise<{ id: string; idempotency_key: string | null; status: string }[]> {
  if (!ns.length) return []
  return sql<{ id: string; idempotency_key: string | null; status: string }[]>`
    insert into notifications (id, tenant_id, brand_id, player_id, channel, template_id, content, payload, class, campaign_id,
                               idempotency_key, status, reason, scheduled_at, due_at)
    select coalesce(x.id, gen_random_uuid()), x.tenant_id, x.brand_id, x.player_id, x.channel, x.template_id, x.content, x.payload, x.class, x.campaign_id,
           x.idempotency_key, x.status, x.reason, x.scheduled_at, x.scheduled_at
    from unnest(${ns.map((n) => n.id ?? null)}::uuid[], ${ns.map((n) => n.tenantId)}::uuid[], ${ns.map((n) => n.brandId)}::uuid[], ${ns.map((n) => n.playerId)}::uuid[],
                ${ns.map((n) => n.channel)}::text[], ${ns.map((n) => n.templateId)}::uuid[],
                ${ns.map((n) => (n.content ? JSON.stringify(n.content) : null))}::jsonb[], ${ns.map((n) => JSON.stringify(n.payload))}::jsonb[],
                ${ns.map((n) => n.class)}::text[], ${ns.map((n) => n.campaignId)}::uuid[], ${ns.map((n) => n.idempotencyKey)}::text[],
                ${ns.map((n) => n.status)}::text[], ${ns.map((n) => n.reason)}::text[], ${ns.map((n) => n.scheduledAt.toISOString())}::timestamptz[])
      as x(id, tenant_id, brand_id, player_id, channel, template_id, content, payload, class, campaign_id, idempotency_key, status, reason, scheduled_at)
    on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
    returning id, idempotency_key, status`
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

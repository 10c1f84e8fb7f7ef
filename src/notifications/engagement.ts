// What players do with a message: open it (pixel), click a link, unsubscribe, read it in the inbox; and
// what operators read back: GET /notifications, the inbox. First open / first click fire once each.
import type { AppContext } from '../context.ts'
import { markStatsStale } from '../campaigns/stats.ts'
import { notFound } from '../errors.ts'
import { CREATED_KEY, cursorCodec, keysetCursor } from '../lib/cursor.ts'
import { apiTimeSql } from '../lib/rows.ts'
import type { Visibility } from '../lib/visibility.ts'
import { visibleTo } from '../lib/visibility.ts'
import { findPlayerRef } from '../players/service.ts'
import * as dq from './delivery-queries.ts'
import { messageEvent, type MessageRef } from './events.ts'
import type { NotificationListQuery } from './schemas.ts'
import { trackingTokens } from './tracking.ts'

type Deps = Pick<AppContext, 'config' | 'sql'>

/** GET /t/o/{token}.gif: the first open sets opened_at and fires message.opened (email only). */
export async function recordOpen(deps: Deps, token: string): Promise<boolean> {
  const found = (await trackingTokens(deps)).verify('o', token)
  if (!found) return false
  return deps.sql.begin(async (tx) => {
    const [n] = await tx<(MessageRef & { first: boolean })[]>`
      with old as (select id, opened_at from notifications where id = ${found.notificationId} for update)
      update notifications n set opened_at = coalesce(n.opened_at, now()), updated_at = case when old.opened_at is null then now() else n.updated_at end
      from old where n.id = old.id
      returning n.id, n.tenant_id, n.brand_id, n.player_id, n.channel, n.campaign_id, old.opened_at is null as first`
    if (!n) return false
    if (n.first && n.channel === 'email') await messageEvent(tx, 'message.opened', n)
    if (n.first) await markStatsStale(tx, [n.campaign_id])
    return true
  })
}

/** GET /t/c/{token}: the link (one of the message's own), after recording the first click. */
export async function recordClick(deps: Deps, token: string): Promise<string | undefined> {
  const found = (await trackingTokens(deps)).verify('c', token)
  if (!found) return undefined
  return deps.sql.begin(async (tx) => {
    const [n] = await tx<(MessageRef & { links: string[]; first_click: boolean; first_open: boolean })[]>`
      with old as (select id, opened_at, clicked_at from notifications where id = ${found.notificationId} for update)
      update notifications n set clicked_at = coalesce(n.clicked_at, now()), opened_at = coalesce(n.opened_at, now()),
        updated_at = case when old.clicked_at is null then now() else n.updated_at end
      from old where n.id = old.id
      returning n.id, n.tenant_id, n.brand_id, n.player_id, n.channel, n.campaign_id, n.links,
        old.clicked_at is null as first_click, old.opened_at is null as first_open`
    const url = n?.links[found.index]
    if (!n || !url) return undefined
    // A click proves an open the pixel may have missed (images off): an email's open is recorded too.
    if (n.first_open && n.channel === 'email') await messageEvent(tx, 'message.opened', n)
    if (n.first_click) await messageEvent(tx, 'message.clicked', n, { url })
    if (n.first_click || n.first_open) await markStatsStale(tx, [n.campaign_id])
    return url
  })
}

export async function unsubscribeTokenValid(deps: Deps, token: string): Promise<boolean> {
  const found = (await trackingTokens(deps)).verify('u', token)
  if (!found) return false
  return !!(await dq.selectNotification(deps.sql, found.notificationId))
}

/**
 * POST /t/u/{token} (RFC 8058 one-click): withdraws the player's email consent (later marketing email is
 * suppressed `unsubscribed`), on every click, and fires email.unsubscribed once per message.
 */
export async function unsubscribe(deps: Deps, token: string): Promise<boolean> {
  const found = (await trackingTokens(deps)).verify('u', token)
  if (!found) return false
  return deps.sql.begin(async (tx) => {
    const [n] = await tx<(MessageRef & { first: boolean; email: string | null })[]>`
      with old as (select id, unsubscribed_at from notifications where id = ${found.notificationId} for update)
      update notifications n set unsubscribed_at = coalesce(n.unsubscribed_at, now()), updated_at = now()
      from old where n.id = old.id
      returning n.id, n.tenant_id, n.brand_id, n.player_id, n.channel, n.campaign_id, old.unsubscribed_at is null as first,
        (select email from players p where p.id = n.player_id) as email`
    if (!n) return false
    // Every click withdraws consent, not only a message's first: the player may have granted it again
    // since (a consent_update), and this click says no again. Already withdrawn, it stays as it was.
    await tx`
      update player_profiles set consent = consent || jsonb_build_object('email',
        jsonb_build_object('granted', false, 'at', ${tx.unsafe(apiTimeSql('now()'))}, 'source', 'unsubscribe')),
        updated_at = now()
      where player_id = ${n.player_id} and (consent->'email'->>'granted') is distinct from 'false'`
    if (n.first) await messageEvent(tx, 'email.unsubscribed', { ...n, channel: 'email' }, { email: n.email })
    if (n.first) await markStatsStale(tx, [n.campaign_id])
    return true
  })
}

// --- Operator reads --------------------------------------------------------------------------------------

export async function getNotification(deps: Deps, v: Visibility & { id: string }) {
  const [row] = await deps.sql<dq.NotificationRow[]>`
    select ${dq.notificationColumns(deps.sql)} from notifications where id = ${v.id} and ${visibleTo(deps.sql, v)}`
  if (!row) throw notFound('notification')
  return dq.notificationOut(row)
}

export async function listNotifications(deps: Deps, v: Visibility & NotificationListQuery) {
  const of = JSON.stringify([v.tenantId, v.brandId, v.player_id ?? null, v.campaign_id ?? null, v.status ?? null, v.channel ?? null])
  const { after, next } = await keysetCursor(deps.sql, 'notifications', of, v.cursor)
  const sql = deps.sql
  const rows = await sql<(dq.NotificationRow & { created_key: string })[]>`
    select ${dq.notificationColumns(sql)}, ${sql.unsafe(CREATED_KEY)} from notifications
    where ${visibleTo(sql, v)}
      ${v.player_id ? sql`and player_id = ${v.player_id}` : sql``}
      ${v.campaign_id ? sql`and campaign_id = ${v.campaign_id}` : sql``}
      ${v.status ? sql`and status = ${v.status}` : sql``}
      ${v.channel ? sql`and channel = ${v.channel}` : sql``}
      ${after ? sql`and (created_at, id) < (${after.t}::text::timestamptz, ${after.id}::uuid)` : sql``}
    order by created_at desc, id desc limit ${v.limit + 1}`
  return { data: rows.slice(0, v.limit).map(dq.notificationOut), next_cursor: next(rows, v.limit) }
}

// --- The in-app inbox ------------------------------------------------------------------------------------

export interface InboxItem {
  id: string
  subject: string | null
  body: string
  campaign_id: string | null
  created_at: string
  read_at: string | null
}

export const inboxItemOf = (r: { id: string; rendered: { subject: string | null; body: string } | null; campaign_id: string | null; created_at: Date; read_at: Date | null }): InboxItem => ({
  id: r.id,
  subject: r.rendered?.subject ?? null,
  body: r.rendered?.body ?? '',
  campaign_id: r.campaign_id,
  created_at: r.created_at.toISOString(),
  read_at: r.read_at ? r.read_at.toISOString() : null,
})

async function inboxPlayer(deps: Deps, v: Visibility & { playerId: string }) {
  const p = await findPlayerRef(deps, v)
  if (!p) throw notFound('player')
  return p
}

/** Messages older than the brand's in-app retention (default 90 days) are no longer listed. */
const retentionDays = async (sql: dq.Sql, brandId: string) => {
  const [row] = await sql<{ days: number | null }[]>`
    select (settings->>'retention_days')::int as days from brand_channel_settings where brand_id = ${brandId} and channel = 'in_app'`
  return row?.days ?? 90
}

/**
 * Marketing in the inbox is shown only to an active player: a player who self-excluded, or was
 * suspended or closed, no longer sees the promotions delivered before (responsible gaming: marketing
 * never reaches them, on any path). Transactional messages stay.
 */
const shownInInbox = (sql: dq.Sql, playerId: string) =>
  sql`(class = 'transactional' or (select status from players where id = ${playerId}) = 'active')`

export async function listInbox(deps: Deps, v: Visibility & { playerId: string; unread?: boolean; limit: number; cursor?: string }) {
  const p = await inboxPlayer(deps, v)
  const { after, next } = await keysetCursor(deps.sql, 'inbox', JSON.stringify([p.id, !!v.unread]), v.cursor)
  const sql = deps.sql
  const days = await retentionDays(sql, p.brandId)
  const rows = await sql<(dq.NotificationRow & { created_key: string })[]>`
    select id, rendered, campaign_id, created_at, read_at, ${sql.unsafe(CREATED_KEY)} from notifications
    where player_id = ${p.id} and channel = 'in_app' and status = 'delivered'
      and delivered_at > now() - ${days} * interval '1 day' and ${shownInInbox(sql, p.id)}
      ${v.unread ? sql`and read_at is null` : sql``}
      ${after ? sql`and (created_at, id) < (${after.t}::text::timestamptz, ${after.id}::uuid)` : sql``}
    order by created_at desc, id desc limit ${v.limit + 1}`
  return { data: rows.slice(0, v.limit).map(inboxItemOf), next_cursor: next(rows, v.limit) }
}

/** The first read sets read_at and counts as the open (opened_at); message.opened stays email-only. */
export async function markRead(deps: Deps, v: Visibility & { playerId: string; notificationId: string }) {
  const p = await inboxPlayer(deps, v)
  // What the inbox lists, and only that, can be read: not a message past the brand's retention.
  const days = await retentionDays(deps.sql, p.brandId)
  const [row] = await deps.sql<dq.NotificationRow[]>`
    update notifications set read_at = coalesce(read_at, now()), opened_at = coalesce(opened_at, now()),
      updated_at = case when read_at is null then now() else updated_at end
    where id = ${v.notificationId} and player_id = ${p.id} and channel = 'in_app' and status = 'delivered'
      and delivered_at > now() - ${days} * interval '1 day' and ${shownInInbox(deps.sql, p.id)}
    returning id, rendered, campaign_id, created_at, read_at`
  if (!row) throw notFound('inbox message')
  await markStatsStale(deps.sql, [row.campaign_id])
  return inboxItemOf(row)
}

/** A short-lived token for the inbox WebSocket of one player (15 minutes). */
export async function inboxToken(deps: Deps & Pick<AppContext, 'clock'>, v: Visibility & { playerId: string }) {
  const p = await inboxPlayer(deps, v)
  const codec = await cursorCodec(deps.sql, 'inbox-ws')
  const expiresAt = new Date(deps.clock().getTime() + 15 * 60_000)
  return { token: codec.encode({ p: p.id, e: expiresAt.getTime() }), expires_at: expiresAt.toISOString() }
}

/** The player of a valid, unexpired inbox token, else null. */
export async function playerOfInboxToken(deps: Deps & Pick<AppContext, 'clock'>, token: string): Promise<string | null> {
  const codec = await cursorCodec(deps.sql, 'inbox-ws')
  const payload = codec.decode(token)
  if (!payload || typeof payload.p !== 'string' || typeof payload.e !== 'number') return null
  return payload.e > deps.clock().getTime() ? payload.p : null
}

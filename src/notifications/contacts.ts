// Player contact points beside the email (contract-engines §3): the Telegram chat id and Web Push
// subscriptions. Push endpoints are outbound targets a tenant gives us: they pass the URL policy.
import Type, { type Static } from 'typebox'
import type { AppContext } from '../context.ts'
import { badRequest, notFound } from '../errors.ts'
import { checkUrl, UrlPolicyError } from '../lib/url-policy.ts'
import type { Visibility } from '../lib/visibility.ts'
import { findPlayerRef } from '../players/service.ts'

export const TelegramBody = Type.Object({ chat_id: Type.String({ minLength: 1, maxLength: 64, pattern: '^-?[0-9]+$|^@[A-Za-z0-9_]{5,32}$', description: 'numeric chat id (or @channel username)' }) })
export const TelegramContact = Type.Object({ chat_id: Type.String(), updated_at: Type.String({ format: 'date-time' }) })

export const PushSubscriptionBody = Type.Object({
  endpoint: Type.String({ minLength: 8, maxLength: 2048 }),
  keys: Type.Object({
    p256dh: Type.String({ pattern: '^[A-Za-z0-9_-]+={0,2}$', minLength: 80, maxLength: 100, description: 'URL-safe base64 of the 65-byte P-256 point' }),
    auth: Type.String({ pattern: '^[A-Za-z0-9_-]+={0,2}$', minLength: 16, maxLength: 32, description: 'URL-safe base64 of the 16-byte secret' }),
  }),
  expirationTime: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
})
export const PushSubscriptionOut = Type.Object({ id: Type.String({ format: 'uuid' }), endpoint: Type.String(), created_at: Type.String({ format: 'date-time' }) }, { $id: 'PushSubscription' })
export const SubscriptionParams = Type.Object({ id: Type.String({ format: 'uuid' }), subscriptionId: Type.String({ format: 'uuid' }) })

type Deps = Pick<AppContext, 'config' | 'sql'>

async function player(deps: Deps, v: Visibility & { playerId: string }) {
  const found = await findPlayerRef(deps, v)
  if (!found) throw notFound('player')
  return found
}

export async function putTelegram(deps: Deps, v: Visibility & { playerId: string; chatId: string }) {
  const p = await player(deps, v)
  const [row] = await deps.sql<{ telegram_chat_id: string; updated_at: Date }[]>`
    insert into player_contacts (player_id, tenant_id, brand_id, telegram_chat_id) values (${p.id}, ${p.tenantId}, ${p.brandId}, ${v.chatId})
    on conflict (player_id) do update set telegram_chat_id = excluded.telegram_chat_id, updated_at = now()
    returning telegram_chat_id, updated_at`
  return { chat_id: row!.telegram_chat_id, updated_at: row!.updated_at.toISOString() }
}

export async function deleteTelegram(deps: Deps, v: Visibility & { playerId: string }) {
  const p = await player(deps, v)
  const rows = await deps.sql`update player_contacts set telegram_chat_id = null, updated_at = now() where player_id = ${p.id} and telegram_chat_id is not null returning 1`
  if (rows.length === 0) throw notFound('telegram chat id')
}

const b64Length = (s: string) => Buffer.from(s, 'base64url').length

export async function addPushSubscription(deps: Deps, v: Visibility & { playerId: string; body: Static<typeof PushSubscriptionBody> }) {
  const p = await player(deps, v)
  const errors = []
  if (b64Length(v.body.keys.p256dh) !== 65) errors.push({ in: 'body', field: 'keys.p256dh', message: 'must be a 65-byte P-256 public key' })
  if (b64Length(v.body.keys.auth) !== 16) errors.push({ in: 'body', field: 'keys.auth', message: 'must be a 16-byte secret' })
  // The unique index on (player, endpoint) takes ~2,700 bytes: 2,048 characters of non-ASCII text are more.
  if (Buffer.byteLength(v.body.endpoint) > 2048) {
    errors.push({ in: 'body', field: 'endpoint', message: 'must be at most 2,048 bytes as UTF-8' })
  } else {
    try {
      await checkUrl(v.body.endpoint, { allowPrivate: deps.config.webhookAllowPrivate })
    } catch (err) {
      errors.push({ in: 'body', field: 'endpoint', message: err instanceof UrlPolicyError ? err.message : `cannot be resolved: ${(err as Error).message}` })
    }
  }
  if (errors.length) throw badRequest('invalid push subscription', { errors })
  const [row] = await deps.sql<{ id: string; endpoint: string; created_at: Date }[]>`
    insert into push_subscriptions (tenant_id, brand_id, player_id, endpoint, p256dh, auth)
    values (${p.tenantId}, ${p.brandId}, ${p.id}, ${v.body.endpoint}, ${v.body.keys.p256dh}, ${v.body.keys.auth})
    on conflict (player_id, endpoint) do update set p256dh = excluded.p256dh, auth = excluded.auth
    returning id, endpoint, created_at`
  return { id: row!.id, endpoint: row!.endpoint, created_at: row!.created_at.toISOString() }
}

export async function listPushSubscriptions(deps: Deps, v: Visibility & { playerId: string }) {
  const p = await player(deps, v)
  const rows = await deps.sql<{ id: string; endpoint: string; created_at: Date }[]>`
    select id, endpoint, created_at from push_subscriptions where player_id = ${p.id} order by created_at, id`
  return rows.map((r) => ({ id: r.id, endpoint: r.endpoint, created_at: r.created_at.toISOString() }))
}

export async function deletePushSubscription(deps: Deps, v: Visibility & { playerId: string; subscriptionId: string }) {
  const p = await player(deps, v)
  const rows = await deps.sql`delete from push_subscriptions where id = ${v.subscriptionId} and player_id = ${p.id} returning 1`
  if (rows.length === 0) throw notFound('push subscription')
}

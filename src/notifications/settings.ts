// Brand settings of message delivery (contract-engines §3): per channel (SMTP, Telegram bot, VAPID keys,
// inbox retention) and the delivery rules (frequency caps, quiet hours, consent policy). Secrets are
// sealed with the secret box (src/lib/secret-box.ts) and never readable again: reads mask them. Every
// outbound target (SMTP host, Telegram api_base_url) passes the URL policy of contract-engines §0.
import Type, { type Static } from 'typebox'
import webpush from 'web-push'
import { recordAudit, type AuditActor } from '../audit/service.ts'
import type { AppContext } from '../context.ts'
import type { Sql as Db } from '../db/postgres.ts'
import { badRequest } from '../errors.ts'
import type { SecretBox } from '../lib/secret-box.ts'
import { checkUrl, UrlPolicyError } from '../lib/url-policy.ts'
import { Nullable } from '../lib/schemas.ts'
import * as dq from './delivery-queries.ts'
import type { Channel, DeliverySettings } from './rules.ts'
import { Channel as ChannelSchema } from './schemas.ts'
import { isTimeZone } from '../lib/zoned-time.ts'

type Sql = dq.Sql

// --- Schemas -------------------------------------------------------------------------------------------

const Hhmm = Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', description: 'HH:MM, 24-hour' })

export const EmailSettingsBody = Type.Object({
  smtp_url: Type.String({ pattern: '^smtps?://', maxLength: 2048, description: '`smtp://` or `smtps://`, with credentials: `smtp://user:pass@host:587`' }),
  from: Type.String({ minLength: 3, maxLength: 320, description: 'address, optionally `Name <addr>`' }),
  reply_to: Type.Optional(Nullable(Type.String({ minLength: 3, maxLength: 320 }))),
  track_opens: Type.Boolean({ default: true }),
  track_clicks: Type.Boolean({ default: true }),
})
export const TelegramSettingsBody = Type.Object({
  bot_token: Type.String({ pattern: '^[0-9]{1,20}:[A-Za-z0-9_-]{10,200}$', description: 'the bot token of @BotFather' }),
  api_base_url: Type.String({ default: 'https://api.telegram.org', maxLength: 2048 }),
})
export const PushSettingsBody = Type.Object({
  vapid_subject: Type.String({ pattern: '^(mailto:|https:)', maxLength: 1024 }),
  vapid_public_key: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{80,100}$', description: 'URL-safe base64 (generated when both keys are omitted)' })),
  vapid_private_key: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{40,50}$', description: 'write-only' })),
})
export const InAppSettingsBody = Type.Object({
  retention_days: Type.Integer({ minimum: 1, maximum: 3650, default: 90 }),
})

export const EmailSettings = Type.Object({
  smtp_url: Type.String({ description: 'password masked: `smtp://user:***@host:587`' }),
  from: Type.String(),
  reply_to: Nullable(Type.String()),
  track_opens: Type.Boolean(),
  track_clicks: Type.Boolean(),
  updated_at: Type.String({ format: 'date-time' }),
}, { $id: 'EmailSettings' })
export const TelegramSettings = Type.Object({
  bot_token: Type.String({ description: 'masked: `123456:***`' }),
  api_base_url: Type.String(),
  updated_at: Type.String({ format: 'date-time' }),
}, { $id: 'TelegramSettings' })
export const PushSettings = Type.Object({
  vapid_subject: Type.String(),
  vapid_public_key: Type.String({ description: 'the applicationServerKey browsers subscribe with' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { $id: 'PushSettings' })
export const InAppSettings = Type.Object({
  retention_days: Type.Integer(),
  updated_at: Type.String({ format: 'date-time' }),
}, { $id: 'InAppSettings' })

export const ChannelSettings = Type.Object({
  email: Nullable(EmailSettings),
  telegram: Nullable(TelegramSettings),
  push: Nullable(PushSettings),
  in_app: Nullable(InAppSettings),
})

const CapChannel = Type.Union([...(['email', 'telegram', 'push', 'in_app', 'any'] as const).map((c) => Type.Literal(c))])
const Policy = Type.Union([Type.Literal('opt_in'), Type.Literal('opt_out')])

export const DeliverySettingsBody = Type.Object({
  frequency_caps: Type.Array(
    Type.Object({ channel: CapChannel, max: Type.Integer({ minimum: 0, maximum: 10_000 }), per: Type.Union([Type.Literal('day'), Type.Literal('week')]) }),
    { maxItems: 20, default: [] },
  ),
  quiet_hours: Type.Union([Type.Object({ start: Hhmm, end: Hhmm, timezone: Type.String({ minLength: 1, maxLength: 64, description: 'IANA time zone' }) }), Type.Null()], { default: null }),
  consent_policy: Type.Object(
    { email: Type.Optional(Policy), telegram: Type.Optional(Policy), push: Type.Optional(Policy), in_app: Type.Optional(Policy) },
    { default: {} },
  ),
})
export type DeliverySettingsBody = Static<typeof DeliverySettingsBody>

export const DeliverySettingsOut = Type.Object({
  frequency_caps: Type.Array(Type.Object({ channel: CapChannel, max: Type.Integer(), per: Type.Union([Type.Literal('day'), Type.Literal('week')]) })),
  quiet_hours: Nullable(Type.Object({ start: Type.String(), end: Type.String(), timezone: Type.String() })),
  consent_policy: Type.Object({ email: Policy, telegram: Policy, push: Policy, in_app: Policy }),
}, { $id: 'DeliverySettings' })

export { ChannelSchema }

// --- Stored forms -------------------------------------------------------------------------------------

/** What is kept in clear per channel; the secret (sealed) is beside it. */
interface StoredEmail { smtp_url_masked: string; from: string; reply_to: string | null; track_opens: boolean; track_clicks: boolean }
interface StoredTelegram { bot_token_masked: string; api_base_url: string }
interface StoredPush { vapid_subject: string; vapid_public_key: string }
interface StoredInApp { retention_days: number }

/** A channel's settings as the dispatcher uses them, secrets opened. */
export type ResolvedChannelSettings =
  | { channel: 'email'; smtpUrl: string; from: string; replyTo: string | null; trackOpens: boolean; trackClicks: boolean; updatedAt: Date }
  | { channel: 'telegram'; botToken: string; apiBaseUrl: string; updatedAt: Date }
  | { channel: 'push'; vapidSubject: string; vapidPublicKey: string; vapidPrivateKey: string; updatedAt: Date }
  | { channel: 'in_app'; retentionDays: number; updatedAt: Date }

type Deps = Pick<AppContext, 'config'> & { sql: Db; box: SecretBox }

const fieldError = (field: string, message: string) => badRequest('invalid settings', { errors: [{ in: 'body', field, message }] })

export function maskSmtpUrl(raw: string): string {
  const u = new URL(raw)
  const user = u.username ? `${u.username}:***@` : ''
  return `${u.protocol}//${user}${u.host}${u.pathname === '/' ? '' : u.pathname}`
}
export const maskBotToken = (token: string) => `${token.slice(0, token.indexOf(':'))}:***`

/** Checks a tenant's target with the URL policy (its address rules; DNS resolved now). */
async function checkTarget(ctx: Pick<AppContext, 'config'>, field: string, raw: string, schemes?: string[]): Promise<URL> {
  try {
    const checked = await checkUrl(raw, { allowPrivate: ctx.config.webhookAllowPrivate, schemes })
    return checked.url
  } catch (err) {
    if (err instanceof UrlPolicyError) throw fieldError(field, err.message)
    throw fieldError(field, `cannot be resolved: ${(err as Error).message}`)
  }
}

/** The SMTP URL without its credentials, for the URL policy (which refuses credentials in a URL). */
export function smtpTarget(raw: string): { bare: string; user: string; pass: string; secure: boolean; host: string; port: number } {
  const u = new URL(raw)
  const secure = u.protocol === 'smtps:'
  const port = u.port ? Number(u.port) : secure ? 465 : 587
  return {
    bare: `${u.protocol}//${u.host}`,
    user: decodeURIComponent(u.username),
    pass: decodeURIComponent(u.password),
    secure,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port,
  }
}

/** Who changes a brand's settings, for the audit trail (docs/operating.md): actorOf(req), the route's operationId, the request id. */
export type SettingsAudit = AuditActor & { action: string; requestId?: string }

/**
 * Writes a channel's settings and its audit row in the same transaction: before and after as a read shows
 * them (`out`: secrets masked or absent), so the trail never holds a secret.
 */
async function upsert<S extends object>(
  sql: Db, brand: { tenantId: string; brandId: string }, channel: Channel, settings: S, secret: string | null,
  out: (stored: S, at: Date) => object, audit: SettingsAudit,
): Promise<Date> {
  return sql.begin(async (tx) => {
    const [prev] = await tx<{ settings: S; updated_at: Date }[]>`
      select settings, updated_at from brand_channel_settings where brand_id = ${brand.brandId} and channel = ${channel} for update`
    const [row] = await tx<{ updated_at: Date }[]>`
      insert into brand_channel_settings (brand_id, tenant_id, channel, settings, secret)
      values (${brand.brandId}, ${brand.tenantId}, ${channel}, ${tx.json(settings as never)}, ${secret})
      on conflict (brand_id, channel) do update set settings = excluded.settings, secret = excluded.secret, updated_at = now()
      returning updated_at`
    const at = row!.updated_at
    await recordAudit(tx, {
      ...audit, target: { type: 'brand_channel_settings', id: `${brand.brandId}:${channel}` },
      before: prev ? out(prev.settings, prev.updated_at) : undefined, after: out(settings, at),
    })
    return at
  })
}

/** An address, optionally `Name <addr>`, with no control character anywhere. */
const MAILBOX_RE = /^(?:[^<>@\s]+@[^<>@\s]+|[^<>\p{Cc}]*<[^<>@\s]+@[^<>@\s]+>)$/u

export async function putEmailSettings(deps: Deps, brand: { tenantId: string; brandId: string }, body: Static<typeof EmailSettingsBody>, audit: SettingsAudit) {
  // Checked before the host is resolved: a plain mistake is named without a DNS round trip. No control
  // characters: a line break in a header value would let it add headers of its own (Bcc: ...).
  if (!MAILBOX_RE.test(body.from.trim())) throw fieldError('from', 'must be an address, optionally `Name <addr>`, without line breaks')
  if (body.reply_to != null && !MAILBOX_RE.test(body.reply_to.trim())) throw fieldError('reply_to', 'must be an address, optionally `Name <addr>`, without line breaks')
  let target: ReturnType<typeof smtpTarget>
  try {
    target = smtpTarget(body.smtp_url)
  } catch {
    throw fieldError('smtp_url', 'is not a URL')
  }
  if (!target.host) throw fieldError('smtp_url', 'has no host')
  await checkTarget(deps, 'smtp_url', target.bare, ['smtp', 'smtps'])
  const stored: StoredEmail = {
    smtp_url_masked: maskSmtpUrl(body.smtp_url), from: body.from.trim(), reply_to: body.reply_to ?? null,
    track_opens: body.track_opens, track_clicks: body.track_clicks,
  }
  const at = await upsert(deps.sql, brand, 'email', stored, deps.box.seal(body.smtp_url), emailOut, audit)
  return emailOut(stored, at)
}

export async function putTelegramSettings(deps: Deps, brand: { tenantId: string; brandId: string }, body: Static<typeof TelegramSettingsBody>, audit: SettingsAudit) {
  // https only, unless WEBHOOK_ALLOW_PRIVATE (then http too: a local Bot API server).
  const base = (await checkTarget(deps, 'api_base_url', body.api_base_url)).toString().replace(/\/+$/, '')
  const stored: StoredTelegram = { bot_token_masked: maskBotToken(body.bot_token), api_base_url: base }
  const at = await upsert(deps.sql, brand, 'telegram', stored, deps.box.seal(body.bot_token), telegramOut, audit)
  return telegramOut(stored, at)
}

export async function putPushSettings(deps: Deps, brand: { tenantId: string; brandId: string }, body: Static<typeof PushSettingsBody>, audit: SettingsAudit) {
  const given = [body.vapid_public_key, body.vapid_private_key].filter((k) => k !== undefined).length
  if (given === 1) throw fieldError(body.vapid_public_key ? 'vapid_private_key' : 'vapid_public_key', 'both VAPID keys are given, or neither (then they are generated)')
  const keys = given === 2 ? { publicKey: body.vapid_public_key!, privateKey: body.vapid_private_key! } : webpush.generateVAPIDKeys()
  try {
    // web-push's own checks: a P-256 point of 65 bytes, a 32-byte private key.
    webpush.getVapidHeaders('https://push.example', body.vapid_subject, keys.publicKey, keys.privateKey, 'aes128gcm')
  } catch (err) {
    throw fieldError('vapid_public_key', (err as Error).message)
  }
  const stored: StoredPush = { vapid_subject: body.vapid_subject, vapid_public_key: keys.publicKey }
  const at = await upsert(deps.sql, brand, 'push', stored, deps.box.seal(keys.privateKey), pushOut, audit)
  return pushOut(stored, at)
}

export async function putInAppSettings(deps: Deps, brand: { tenantId: string; brandId: string }, body: Static<typeof InAppSettingsBody>, audit: SettingsAudit) {
  const stored: StoredInApp = { retention_days: body.retention_days }
  const at = await upsert(deps.sql, brand, 'in_app', stored, null, inAppOut, audit)
  return inAppOut(stored, at)
}

const emailOut = (s: StoredEmail, at: Date) => ({ smtp_url: s.smtp_url_masked, from: s.from, reply_to: s.reply_to, track_opens: s.track_opens, track_clicks: s.track_clicks, updated_at: at.toISOString() })
const telegramOut = (s: StoredTelegram, at: Date) => ({ bot_token: s.bot_token_masked, api_base_url: s.api_base_url, updated_at: at.toISOString() })
const pushOut = (s: StoredPush, at: Date) => ({ vapid_subject: s.vapid_subject, vapid_public_key: s.vapid_public_key, updated_at: at.toISOString() })
const inAppOut = (s: StoredInApp, at: Date) => ({ retention_days: s.retention_days, updated_at: at.toISOString() })

export async function getChannelSettings(sql: Sql, brandId: string) {
  const rows = await sql<{ channel: Channel; settings: never; updated_at: Date }[]>`
    select channel, settings, updated_at from brand_channel_settings where brand_id = ${brandId}`
  const out: Static<typeof ChannelSettings> = { email: null, telegram: null, push: null, in_app: null }
  for (const r of rows) {
    if (r.channel === 'email') out.email = emailOut(r.settings, r.updated_at)
    else if (r.channel === 'telegram') out.telegram = telegramOut(r.settings, r.updated_at)
    else if (r.channel === 'push') out.push = pushOut(r.settings, r.updated_at)
    else out.in_app = inAppOut(r.settings, r.updated_at)
  }
  return out
}

/** A channel's settings with the secret opened, for the dispatcher; undefined when not configured. */
export async function resolveChannelSettings(sql: Sql, box: SecretBox, brandId: string, channel: Channel): Promise<ResolvedChannelSettings | undefined> {
  const [row] = await sql<{ settings: Record<string, unknown>; secret: string | null; updated_at: Date }[]>`
    select settings, secret, updated_at from brand_channel_settings where brand_id = ${brandId} and channel = ${channel}`
  if (!row) return channel === 'in_app' ? { channel, retentionDays: 90, updatedAt: new Date(0) } : undefined
  const s = row.settings
  switch (channel) {
    case 'email':
      return { channel, smtpUrl: box.open(row.secret!), from: s.from as string, replyTo: (s.reply_to as string | null) ?? null, trackOpens: s.track_opens !== false, trackClicks: s.track_clicks !== false, updatedAt: row.updated_at }
    case 'telegram':
      return { channel, botToken: box.open(row.secret!), apiBaseUrl: s.api_base_url as string, updatedAt: row.updated_at }
    case 'push':
      return { channel, vapidSubject: s.vapid_subject as string, vapidPublicKey: s.vapid_public_key as string, vapidPrivateKey: box.open(row.secret!), updatedAt: row.updated_at }
    case 'in_app':
      return { channel, retentionDays: Number(s.retention_days ?? 90), updatedAt: row.updated_at }
  }
}

export async function getDeliverySettings(sql: Sql, brandId: string): Promise<DeliverySettings> {
  return dq.selectDeliverySettings(sql, brandId)
}

export async function putDeliverySettings(sql: Db, brand: { tenantId: string; brandId: string }, body: DeliverySettingsBody, audit: SettingsAudit): Promise<DeliverySettings> {
  if (body.quiet_hours && !isTimeZone(body.quiet_hours.timezone)) throw fieldError('quiet_hours.timezone', 'is not an IANA time zone')
  if (body.quiet_hours && body.quiet_hours.start === body.quiet_hours.end) throw fieldError('quiet_hours.end', 'must differ from start')
  const settings = dq.withDefaults({
    frequency_caps: body.frequency_caps,
    quiet_hours: body.quiet_hours,
    consent_policy: body.consent_policy as DeliverySettings['consent_policy'],
  })
  await sql.begin(async (tx) => {
    const [before] = await tx<{ settings: DeliverySettings }[]>`select settings from brand_delivery_settings where brand_id = ${brand.brandId} for update`
    await tx`
      insert into brand_delivery_settings (brand_id, tenant_id, settings) values (${brand.brandId}, ${brand.tenantId}, ${tx.json(settings as never)})
      on conflict (brand_id) do update set settings = excluded.settings, updated_at = now()`
    await recordAudit(tx, {
      ...audit, target: { type: 'brand_delivery_settings', id: brand.brandId },
      before: before ? dq.withDefaults(before.settings) : undefined, after: settings,
    })
  })
  return settings
}

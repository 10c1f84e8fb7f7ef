// The delivery engine: the notifications table is the persistent queue, claimed by the shared work loop
// (src/engine/work-loop.ts: FOR UPDATE SKIP LOCKED + leases, so several API processes never send one
// message twice and a crashed process's messages are retried after the lease: at most one duplicate send
// after a crash mid-call, never a silent loss). Rows are keyed per brand and channel, each key with its
// own concurrency limit. Each message is checked again by the send rules right before its channel call
// (with the cap's in-flight mark, under a per-player lock), rendered, sent, and its outcome recorded with
// its message.* event in one transaction.
import postgres from 'postgres'
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { confirmLease, startWorkLoop, type Lease, type QueueTable } from '../engine/work-loop.ts'
import { createOutboundHttp } from '../lib/outbound-http.ts'
import { createEmailChannel } from './channels/email.ts'
import type { Outcome } from './channels/outcome.ts'
import { createPushChannel, type PushTarget } from './channels/push.ts'
import { createTargetCache } from './channels/targets.ts'
import { createTelegramChannel } from './channels/telegram.ts'
import { checkSend } from './check.ts'
import * as dq from './delivery-queries.ts'
import { inboxItemOf, type InboxItem } from './engagement.ts'
import { messageEvent } from './events.ts'
import { createInboxHub, type InboxHub } from './inbox-socket.ts'
import { addOpenPixel, escapeHtml, htmlToText, linksOf, render, rewriteLinks } from './render.ts'
import type { Channel } from './rules.ts'
import { DELIVERY_CHANNEL } from './service.ts'
import { resolveChannelSettings, type ResolvedChannelSettings } from './settings.ts'
import { trackingTokens, trackingUrls, type TrackingTokens } from './tracking.ts'

export const MAX_ATTEMPTS = 5

interface QueueRow extends dq.NotificationRow {
  dispatch_key: string
}

/** The queue's name in logs and on /metrics. */
const QUEUE_NAME = 'delivery'

const QUEUE: QueueTable = {
  table: 'notifications',
  keyColumn: 'dispatch_key',
  dueColumn: 'due_at',
  ownerColumn: 'lease_owner',
  where: (sql) => sql`status = 'queued'`,
}

/** Concurrent channel calls per brand and channel (an SMTP pool's connections, a bot's parallel calls). */
const PER_KEY: Record<Channel, number> = { email: 8, telegram: 8, push: 16, in_app: 32 }
const LEASE_MS = 60_000
const CHANNEL_TIMEOUT_MS = 10_000

export interface DeliveryEngine extends BackgroundService {
  wake(): void
  inbox: InboxHub
}

interface Prepared {
  recipient: dq.Recipient
  attempts: number
  rendered: { subject: string | null; body: string }
  links: string[]
  /** What goes to the channel (email: html + text; push: JSON; telegram: HTML text). */
  wire: { html?: string; text: string; url?: string | null }
  settings: ResolvedChannelSettings | undefined
}

export async function startDelivery(ctx: AppContext): Promise<DeliveryEngine> {
  const { sql, log } = ctx
  const allowPrivate = ctx.config.webhookAllowPrivate
  const http = createOutboundHttp({ connectionsPerTarget: 16, keepBodyBytes: 2048 })
  const targets = createTargetCache({ allowPrivate })
  const email = createEmailChannel({ allowPrivate })
  const telegram = createTelegramChannel({ http, targets, timeoutMs: CHANNEL_TIMEOUT_MS })
  const push = createPushChannel({ http, targets, timeoutMs: CHANNEL_TIMEOUT_MS })
  const inbox = await createInboxHub(ctx)
  // Loaded now, not inside a send's transaction: embedded PGlite has one connection, and a pool query
  // made while a transaction holds it would wait forever.
  const tokens: TrackingTokens = await trackingTokens(ctx)
  const base = ctx.config.publicBaseUrl
  const delays = ctx.config.deliveryRetryDelaysSec

  /** Sets the row's final or next state, only while our lease holds. */
  async function settle(tx: dq.Sql, row: QueueRow, lease: Lease, set: postgres.PendingQuery<postgres.Row[]>) {
    const done = await tx`
      update notifications set ${set}, lease_owner = null, updated_at = now()
      where id = ${row.id} and lease_owner = ${lease.owner} and status = 'queued'
      returning id`
    return done.length > 0
  }

  /** The rules again, and on `send` the render and the in-flight mark, in one transaction. */
  async function prepare(row: QueueRow, lease: Lease): Promise<Prepared | null> {
    const now = ctx.clock()
    // A final status reached here (suppressed, failed to render), reported to /metrics once committed.
    let ended: 'suppressed' | 'failed' | undefined
    const prepared = await sql.begin(async (tx) => {
      // Two processes sending to one player must not both pass a frequency cap: one player at a time.
      if (row.class === 'marketing') await tx`select pg_advisory_xact_lock(hashtext(${row.player_id}))`
      const { decision, recipient } = await checkSend(tx, { id: row.id, playerId: row.player_id, brandId: row.brand_id, channel: row.channel, class: row.class, campaignId: row.campaign_id }, now)
      if (decision.action === 'suppress' || !recipient) {
        if (await settle(tx, row, lease, tx`status = 'suppressed', reason = ${decision.action === 'suppress' ? decision.reason : 'no_address'}`)) ended = 'suppressed'
        return null
      }
      if (decision.action === 'wait') {
        // Its campaign is paused. Resuming makes the campaign's queued messages due at once
        // (campaigns/execution.ts); until then a look every few minutes costs nothing.
        await settle(tx, row, lease, tx`due_at = now() + interval '5 minutes'`)
        return null
      }
      if (decision.action === 'hold') {
        // Quiet hours: held, then sent when they end (and checked again then).
        await settle(tx, row, lease, tx`scheduled_at = ${decision.until}, due_at = ${decision.until}`)
        return null
      }
      let settings: ResolvedChannelSettings | undefined
      try {
        settings = await resolveChannelSettings(tx, ctx.secretBox, row.brand_id, row.channel)
      } catch (err) {
        // The sealed secret does not open here: this process has another SECRET_KEY than the one that
        // wrote it. Left for a process that can (or for this one once fixed), without using an attempt.
        log.error({ err, notificationId: row.id }, 'channel secret does not open: is SECRET_KEY the same in every process?')
        await settle(tx, row, lease, tx`error = 'channel secret unreadable by a dispatcher (SECRET_KEY mismatch)', due_at = now() + interval '1 minute'`)
        return null
      }
      const built = await build(tx, row, recipient, settings)
      if ('error' in built) {
        if (await settle(tx, row, lease, tx`status = 'failed', error = ${built.error ?? 'not renderable'}, attempts = attempts + 1`)) ended = 'failed'
        return null
      }
      const [marked] = await tx<{ attempts: number }[]>`
        update notifications set sent_at = now(), attempts = attempts + 1, rendered = ${tx.json(built.rendered as never)},
          links = ${tx.array(built.links)}::text[], updated_at = now()
        where id = ${row.id} and lease_owner = ${lease.owner} and status = 'queued'
        returning attempts`
      if (!marked) return null // our lease ran out and another process has the row
      return { recipient, attempts: marked.attempts, settings, ...built }
    })
    if (ended) ctx.metrics?.outcome('message', ended, row.channel)
    if (ended === 'failed') ctx.metrics?.queueFailure(QUEUE_NAME)
    return prepared
  }

  /** Template (in the player's language when there is one) or inline content, rendered for the channel. */
  async function build(tx: dq.Sql, row: QueueRow, r: dq.Recipient, settings: ResolvedChannelSettings | undefined): Promise<
    { error: string } | { rendered: Prepared['rendered']; links: string[]; wire: Prepared['wire'] }
  > {
    if (!settings) return { error: `the ${row.channel} channel is not configured for the brand` }
    let subject: string | null
    let body: string
    if (row.template_id) {
      const [t] = await tx<{ subject: string | null; body: string }[]>`
        select coalesce(v.subject, t.subject) as subject, coalesce(v.body, t.body) as body
        from notification_templates t
        left join lateral (
          select subject, body from notification_templates v
          where v.brand_id = t.brand_id and v.name = t.name and v.channel = t.channel and v.active and v.locale = ${r.language ?? ''}
          order by v.updated_at desc limit 1) v on true
        where t.id = ${row.template_id}`
      if (!t) return { error: 'template not found' }
      subject = t.subject
      body = t.body
    } else {
      subject = row.content?.subject ?? null
      body = row.content?.body ?? ''
    }
    const urls = trackingUrls(base, tokens, row.id)
    const values: Record<string, unknown> = {
      external_id: r.external_id, email: r.email, phone: r.phone, name: r.name, language: r.language, currency: r.currency, country: r.country,
      ...(row.channel === 'email' ? { unsubscribe_url: urls.unsubscribe } : {}),
      ...row.payload,
    }
    const out = render({ channel: row.channel, subject, body, values })
    if (!out.ok) return { error: out.error }
    const rendered = { subject: out.subject, body: out.body }
    switch (row.channel) {
      case 'email': {
        const s = settings as Extract<ResolvedChannelSettings, { channel: 'email' }>
        const own = (url: string) => url.startsWith(`${base}/`)
        const links = s.trackClicks ? linksOf(out.body, own) : []
        let html = s.trackClicks ? rewriteLinks(out.body, urls.click, own) : out.body
        if (s.trackOpens) html = addOpenPixel(html, urls.open)
        return { rendered, links, wire: { html, text: htmlToText(out.body) } }
      }
      case 'push': {
        const link = typeof row.payload.url === 'string' && /^https?:\/\//.test(row.payload.url) ? row.payload.url : null
        return { rendered, links: link ? [link] : [], wire: { text: out.body, url: link ? urls.click(0) : null } }
      }
      case 'telegram':
        return { rendered, links: [], wire: { text: out.subject ? `<b>${escapeHtml(out.subject)}</b>\n${out.body}` : out.body } }
      case 'in_app':
        return { rendered, links: [], wire: { text: out.body } }
    }
  }

  async function callChannel(row: QueueRow, p: Prepared): Promise<Outcome> {
    const s = p.settings!
    switch (s.channel) {
      case 'email':
        return email.send({ brandId: row.brand_id, smtpUrl: s.smtpUrl, version: s.updatedAt.toISOString() }, {
          from: s.from, replyTo: s.replyTo, to: p.recipient.email!, subject: p.rendered.subject ?? '', html: p.wire.html!, text: p.wire.text,
          unsubscribeUrl: trackingUrls(base, tokens, row.id).unsubscribe, notificationId: row.id,
        })
      case 'telegram': {
        const chatId = p.recipient.telegram_chat_id!
        const out = await telegram.send(s, chatId, p.wire.text)
        if (out.blocked) await sql`update player_contacts set telegram_chat_id = null, updated_at = now() where player_id = ${row.player_id} and telegram_chat_id = ${chatId}`
        return out
      }
      case 'push': {
        const subs = await sql<PushTarget[]>`select id, endpoint, p256dh, auth from push_subscriptions where player_id = ${row.player_id} order by created_at`
        const payload = JSON.stringify({ notification_id: row.id, title: p.rendered.subject, body: p.rendered.body, url: p.wire.url ?? null })
        const outcomes = await Promise.all(subs.map(async (sub) => {
          const out = await push.send(s, sub, payload)
          if (out.gone) await sql`delete from push_subscriptions where id = ${sub.id}`
          return out
        }))
        if (outcomes.some((o) => o.kind === 'delivered')) return { kind: 'delivered' }
        const retry = outcomes.find((o) => o.kind === 'retry')
        if (retry) return retry
        return outcomes[0] ?? { kind: 'failed', error: 'push: no subscription left' }
      }
      case 'in_app':
        return { kind: 'delivered' }
    }
  }

  async function record(row: QueueRow, lease: Lease, p: Prepared, outcome: Outcome) {
    const published: { playerId: string; item: InboxItem }[] = []
    // What this attempt ended as (`retrying` when it will be tried again), reported to /metrics once committed.
    let ended: 'delivered' | 'bounced' | 'failed' | 'retrying' | undefined
    await sql.begin(async (tx) => {
      switch (outcome.kind) {
        case 'delivered': {
          const [done] = await tx<dq.NotificationRow[]>`
            update notifications set status = 'delivered', delivered_at = now(), error = null, lease_owner = null, updated_at = now()
            where id = ${row.id} and lease_owner = ${lease.owner} and status = 'queued'
            returning id, rendered, campaign_id, created_at, read_at`
          if (!done) return
          ended = 'delivered'
          await messageEvent(tx, 'message.delivered', row)
          if (row.channel === 'in_app') {
            const item = inboxItemOf(done)
            await inbox.announce(tx, row.player_id, item)
            published.push({ playerId: row.player_id, item })
          }
          return
        }
        case 'bounced':
          if (!(await settle(tx, row, lease, tx`status = 'bounced', error = ${outcome.error}`))) return
          ended = 'bounced'
          // The address stays undeliverable until the player's email changes.
          await tx`
            insert into player_contacts (player_id, tenant_id, brand_id, undeliverable_email)
            values (${row.player_id}, ${row.tenant_id}, ${row.brand_id}, ${p.recipient.email})
            on conflict (player_id) do update set undeliverable_email = excluded.undeliverable_email, updated_at = now()`
          await messageEvent(tx, 'message.bounced', row, { reason: outcome.error })
          return
        case 'failed':
          if (await settle(tx, row, lease, tx`status = 'failed', error = ${outcome.error}`)) ended = 'failed'
          return
        case 'retry': {
          if (p.attempts >= MAX_ATTEMPTS) {
            if (await settle(tx, row, lease, tx`status = 'failed', error = ${`${outcome.error} (after ${p.attempts} attempts)`}`)) ended = 'failed'
            return
          }
          const delaySec = Math.max(delays[p.attempts - 1] ?? delays[delays.length - 1] ?? 60, outcome.retryAfterSec ?? 0)
          // Not in flight any more: sent_at cleared so a waiting retry does not count against caps.
          if (await settle(tx, row, lease, tx`error = ${outcome.error}, sent_at = null, due_at = now() + ${delaySec} * interval '1 second'`)) ended = 'retrying'
        }
      }
    })
    if (ended) ctx.metrics?.outcome('message', ended, row.channel)
    // A channel call that did not deliver is a failed attempt of the queue (the loop counts only throws).
    if (ended && ended !== 'delivered') ctx.metrics?.queueFailure(QUEUE_NAME)
    inbox.publishLocal(published)
  }

  async function handle(row: QueueRow, lease: Lease) {
    const prepared = await prepare(row, lease)
    if (!prepared) return
    // The send is the irreversible step: make sure the lease still holds (extending it if needed).
    if (!(await confirmLease(sql, QUEUE, row.id, lease))) return
    let outcome: Outcome
    try {
      outcome = await callChannel(row, prepared)
    } catch (err) {
      outcome = { kind: 'retry', error: `${row.channel}: ${(err as Error).message}` }
    }
    await record(row, lease, prepared, outcome)
  }

  const loop = startWorkLoop<QueueRow>({
    name: QUEUE_NAME,
    sql,
    log,
    queue: QUEUE,
    keyOf: (row) => row.dispatch_key,
    handle,
    leaseMs: LEASE_MS,
    perKeyConcurrency: (key) => PER_KEY[key.slice(0, key.indexOf(':')) as Channel] ?? 4,
    globalConcurrency: 128,
    maxPerKey: 256,
    maxInMemory: 512,
    idleIntervalMs: 500,
    // Depth, oldest due message's age and attempts on /metrics (queue "delivery").
    metrics: ctx.metrics,
  })

  // Other processes' enqueues wake this one when their transaction commits (NOTIFY is transactional).
  let listener: postgres.Sql | undefined
  let unlisten: (() => Promise<void>) | undefined
  if (ctx.pg.kind !== 'pglite' && ctx.config.databaseUrl) {
    listener = postgres(ctx.config.databaseUrl, { max: 1, onnotice: () => {}, connection: { application_name: 'respin-delivery' } })
    const sub = await listener.listen(DELIVERY_CHANNEL, () => loop.wake())
    unlisten = () => sub.unlisten()
  }
  const engine: DeliveryEngine = {
    wake: () => loop.wake(),
    inbox,
    async stop() {
      await loop.stop()
      await unlisten?.()
      await listener?.end({ timeout: 2 })
      await inbox.close()
      email.close()
      await http.close()
    },
  }
  ctx.delivery = engine
  ctx.inbox = inbox
  return engine
}

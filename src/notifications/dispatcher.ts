// The delivery engine: the notifications table is the persistent queue, claimed by the shared work loop
// (src/engine/work-loop.ts: FOR UPDATE SKIP LOCKED + leases, so several API processes never send one
// message twice and a crashed process's messages are retried after the lease: at most one duplicate send
// after a crash mid-call, never a silent loss). Rows are keyed per brand and channel, each key with its
// own concurrency limit. Each message is checked again by the send rules right before its channel call
// (with the cap's in-flight mark, under a per-player lock), rendered, sent, and its outcome recorded with
// its message.* event in one transaction. An in-app message has no channel call (the inbox is this
// database): it is delivered in the transaction that checks it.
import type postgres from 'postgres'
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { listenerConnection } from '../db/postgres.ts'
import { createBatcher } from '../engine/batcher.ts'
import { confirmLease, startWorkLoop, type Lease, type QueueTable } from '../engine/work-loop.ts'
import { createOutboundHttp } from '../lib/outbound-http.ts'
import { createEmailChannel } from './channels/email.ts'
import type { Outcome } from './channels/outcome.ts'
import { createPushChannel, type PushTarget } from './channels/push.ts'
import { createTargetCache } from './channels/targets.ts'
import { createTelegramChannel } from './channels/telegram.ts'
import { lockSendGate } from '../lib/send-gate.ts'
import { checkSends } from './check.ts'
import * as dq from './delivery-queries.ts'
import { inboxItemOf, type InboxItem } from './engagement.ts'
import { messageEvent, messageEvents } from './events.ts'
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

/**
 * Messages in hand at once per brand and channel (an SMTP pool's connections, a bot's parallel calls). An
 * in-app delivery is only database work, done in batches: its limit is the batch size.
 */
const PER_KEY: Record<Channel, number> = { email: 64, telegram: 8, push: 16, in_app: 512 }
/**
 * Messages a brand's channel holds in memory while its calls fail (one at a time then): SMTP servers or bot
 * APIs hanging until their timeout would otherwise hold 64 slots and 256 messages each (email), and eight
 * of them every slot and all the memory the process's other brands share.
 */
const FAILING_KEY_HELD = 2
/** Messages per check or outcome transaction. */
const BATCH_SIZE = 256
/**
 * Email, Telegram and push calls end one by one: their outcomes wait this long to share a batch (email
 * bench: outcome batches of ~7 became ~20, PostgreSQL 380-395 -> 244-262 µs per email). Not the checks
 * before a send: a wait there idles the channel's connections (10 ms cut the email rate by 7 %).
 */
const LINGER_MS = 10
const LEASE_MS = 60_000
const CHANNEL_TIMEOUT_MS = 10_000

/** Templates read by one batch, by template id and language. */
type TemplateCache = Map<string, Promise<{ subject: string | null; body: string } | undefined>>

export interface DeliveryEngine extends BackgroundService {
  wake(): void
  inbox: InboxHub
  /** Set where an in-app message can be delivered in the transaction that enqueues it (see InAppNow). */
  inAppNow?: InAppNow
}

/** What build() reads of a message. */
type RenderRow = Pick<dq.NotificationRow, 'id' | 'channel' | 'template_id' | 'content' | 'payload'>

/**
 * In-app campaign sends delivered in the transaction that enqueues them (service.ts, enqueueMany): the
 * inbox is this database, so the check at enqueue (under the player's send gate, lib/send-gate.ts) is the check right before
 * "sending", and the message is stored once as delivered instead of queued, claimed and updated twice.
 * Offered only where announcing is transactional (NOTIFY on a PostgreSQL server): embedded PGlite
 * publishes after the dispatcher's own commit, so there every message goes through the queue.
 */
export interface InAppNow {
  /** Each message rendered for the inbox, or why it cannot be (the notification then fails). */
  render(tx: dq.Sql, items: (RenderRow & { brand_id: string; recipient: dq.Recipient })[]): Promise<({ rendered: { subject: string | null; body: string } } | { error: string })[]>
  /** Announces delivered messages to the inbox sockets of every process when `tx` commits. */
  announce(tx: dq.Sql, items: { playerId: string; item: InboxItem }[]): Promise<void>
}

interface Claimed {
  row: QueueRow
  lease: Lease
}

interface Prepared {
  recipient: dq.Recipient
  /** When the rules were checked (epoch ms): an email that waited too long after it is checked again. */
  checkedAt: number
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
  const email = createEmailChannel({ allowPrivate, maxCheckAgeMs: ctx.config.deliveryCheckMaxAgeMs })
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

  /**
   * The rules again for a batch of claimed messages, and for those to send the render and the in-flight
   * mark, in one transaction. One result per message: what to hand to its channel, or null (settled here:
   * suppressed, held, waiting, failed to render; or no longer ours).
   */
  async function prepareMany(items: Claimed[]): Promise<(Prepared | null)[]> {
    const now = ctx.clock()
    // Final statuses reached here (suppressed, failed to render, in-app delivered), reported to /metrics once committed.
    const ended: { channel: Channel; status: 'suppressed' | 'failed' | 'delivered' }[] = []
    // In-app messages delivered here, for this process's sockets once committed.
    const published: { playerId: string; item: InboxItem }[] = []
    const prepared = await sql.begin(async (tx) => {
      await lockSendGate(tx, [...new Set(items.filter((i) => i.row.class === 'marketing').map((i) => i.row.player_id))])
      const checked = await checkSends(tx, items.map(({ row }) => ({ id: row.id, playerId: row.player_id, brandId: row.brand_id, channel: row.channel, class: row.class, campaignId: row.campaign_id })), now, { inFlight: true })
      const checkedAt = Date.now()
      const out: (Prepared | null)[] = items.map(() => null)
      const settled: dq.CheckSettlement[] = []
      const toMark: { i: number; id: string; owner: string; rendered: Prepared['rendered']; links: string[] }[] = []
      const channelSettings = new Map<string, Promise<ResolvedChannelSettings | undefined>>()
      const templates: TemplateCache = new Map()
      for (let i = 0; i < items.length; i++) {
        const { row, lease } = items[i]!
        const { decision, recipient } = checked[i]!
        if (decision.action === 'suppress' || !recipient) {
          settled.push({ id: row.id, owner: lease.owner, channel: row.channel, suppressReason: decision.action === 'suppress' ? decision.reason : 'no_address' })
          continue
        }
        if (decision.action === 'wait') {
          // Its campaign is paused. Resuming makes the campaign's queued messages due at once
          // (campaigns/execution.ts); until then a look every few minutes costs nothing.
          settled.push({ id: row.id, owner: lease.owner, channel: row.channel, waitSec: 300 })
          continue
        }
        if (decision.action === 'hold') {
          // Quiet hours: held, then sent when they end (and checked again then).
          settled.push({ id: row.id, owner: lease.owner, channel: row.channel, holdUntil: decision.until })
          continue
        }
        const settingsKey = `${row.brand_id}:${row.channel}`
        if (!channelSettings.has(settingsKey)) {
          const loading = resolveChannelSettings(tx, ctx.secretBox, row.brand_id, row.channel)
          loading.catch(() => {}) // awaited below, per message
          channelSettings.set(settingsKey, loading)
        }
        let settings: ResolvedChannelSettings | undefined
        try {
          settings = await channelSettings.get(settingsKey)
        } catch (err) {
          // The sealed secret does not open here: this process has another SECRET_KEY than the one that
          // wrote it. Left for a process that can (or for this one once fixed), without using an attempt.
          log.error({ err, notificationId: row.id }, 'channel secret does not open: is SECRET_KEY the same in every process?')
          await settle(tx, row, lease, tx`error = 'channel secret unreadable by a dispatcher (SECRET_KEY mismatch)', due_at = now() + interval '1 minute'`)
          continue
        }
        const built = await build(tx, row, recipient, settings, templates)
        if ('error' in built) {
          if (await settle(tx, row, lease, tx`status = 'failed', error = ${built.error ?? 'not renderable'}, attempts = attempts + 1`)) ended.push({ channel: row.channel, status: 'failed' })
          continue
        }
        out[i] = { recipient, checkedAt, attempts: 0, settings, ...built }
        toMark.push({ i, id: row.id, owner: lease.owner, rendered: built.rendered, links: built.links })
      }
      for (const s of await dq.settleChecks(tx, settled)) if (s.status === 'suppressed') ended.push({ channel: s.channel, status: 'suppressed' })
      // In-app: the channel is this database, so the message is delivered here, in the transaction that
      // checked it (one row version and one transaction fewer than a channel call's mark and outcome).
      const inAppNow = toMark.filter((m) => items[m.i]!.row.channel === 'in_app')
      const toSend = toMark.filter((m) => items[m.i]!.row.channel !== 'in_app')
      if (inAppNow.length) {
        for (const m of inAppNow) out[m.i] = null
        const done = new Map((await dq.markInAppDelivered(tx, inAppNow)).map((r) => [r.id, r]))
        // Not among them: our lease ran out and another process has the row.
        const rows = inAppNow.filter((m) => done.has(m.id)).map((m) => items[m.i]!.row)
        await messageEvents(tx, 'message.delivered', rows)
        const inApp = rows.map((r) => ({ playerId: r.player_id, item: inboxItemOf(done.get(r.id)!) }))
        await inbox.announceMany(tx, inApp)
        published.push(...inApp)
        for (const r of rows) ended.push({ channel: r.channel, status: 'delivered' })
      }
      const marked = await dq.markInFlight(tx, toSend)
      for (const m of toSend) {
        const attempts = marked.get(m.id)
        // Not marked: our lease ran out and another process has the row.
        if (attempts === undefined) out[m.i] = null
        else out[m.i]!.attempts = attempts
      }
      return out
    })
    for (const e of ended) {
      ctx.metrics?.outcome('message', e.status, e.channel)
      if (e.status === 'failed') ctx.metrics?.queueFailure(QUEUE_NAME)
    }
    inbox.publishLocal(published)
    return prepared
  }

  /** Template (in the player's language when there is one) or inline content, rendered for the channel. */
  async function build(tx: dq.Sql, row: RenderRow, r: dq.Recipient, settings: ResolvedChannelSettings | undefined, templates: TemplateCache): Promise<
    { error: string } | { rendered: Prepared['rendered']; links: string[]; wire: Prepared['wire'] }
  > {
    if (!settings) return { error: `the ${row.channel} channel is not configured for the brand` }
    let subject: string | null
    let body: string
    if (row.template_id) {
      const templateKey = `${row.template_id}:${r.language ?? ''}`
      let loading = templates.get(templateKey)
      if (!loading) {
        // The template named, unless it is not in the player's language and an active template of the same
        // name and channel is: then the newest such variant. Names are not unique, so a template already in
        // the player's language is never swapped for another of its name.
        loading = tx<{ subject: string | null; body: string }[]>`
          select coalesce(v.subject, t.subject) as subject, coalesce(v.body, t.body) as body
          from notification_templates t
          left join lateral (
            select subject, body from notification_templates v
            where t.locale <> ${r.language ?? ''} and v.brand_id = t.brand_id and v.name = t.name and v.channel = t.channel and v.active
              and v.locale = ${r.language ?? ''}
            order by v.updated_at desc limit 1) v on true
          where t.id = ${row.template_id}`.then((rows) => rows[0])
        templates.set(templateKey, loading)
      }
      const t = await loading
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
          unsubscribeUrl: trackingUrls(base, tokens, row.id).unsubscribe, notificationId: row.id, checkedAt: p.checkedAt,
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
        // Delivered where it is checked (prepareMany): never handed to a channel call.
        return { kind: 'delivered' }
    }
  }

  /**
   * The outcomes of a batch of channel calls, each with its message.* event, in one transaction; the
   * deliveries (most of them) in three statements whatever their number.
   */
  async function recordMany(items: (Claimed & { prepared: Prepared; outcome: Outcome })[]): Promise<void[]> {
    // What each attempt ended as (`retrying` when it will be tried again), reported to /metrics once committed.
    const ended: { channel: Channel; status: 'delivered' | 'bounced' | 'failed' | 'retrying' }[] = []
    let rechecks = 0
    await sql.begin(async (tx) => {
      const delivered = items.filter((i) => i.outcome.kind === 'delivered')
      // In-app messages never get here: they are delivered where they are checked (prepareMany).
      const done = new Set(await dq.markDelivered(tx, delivered.map((i) => ({ id: i.row.id, owner: i.lease.owner }))))
      const rows = delivered.filter((i) => done.has(i.row.id)).map((i) => i.row)
      await messageEvents(tx, 'message.delivered', rows)
      for (const r of rows) ended.push({ channel: r.channel, status: 'delivered' })
      for (const { row, lease, prepared: p, outcome } of items) {
        switch (outcome.kind) {
          case 'delivered':
            continue
          case 'bounced':
            if (!(await settle(tx, row, lease, tx`status = 'bounced', error = ${outcome.error}`))) continue
            ended.push({ channel: row.channel, status: 'bounced' })
            // The address stays undeliverable until the player's email changes.
            await tx`
              insert into player_contacts (player_id, tenant_id, brand_id, undeliverable_email)
              values (${row.player_id}, ${row.tenant_id}, ${row.brand_id}, ${p.recipient.email})
              on conflict (player_id) do update set undeliverable_email = excluded.undeliverable_email, updated_at = now()`
            await messageEvent(tx, 'message.bounced', row, { reason: outcome.error })
            continue
          case 'failed':
            if (await settle(tx, row, lease, tx`status = 'failed', error = ${outcome.error}`)) ended.push({ channel: row.channel, status: 'failed' })
            continue
          case 'unsent':
            // Due at once, claimed and checked again; the attempt its in-flight mark counted is taken back.
            if (await settle(tx, row, lease, tx`sent_at = null, attempts = greatest(attempts - 1, 0), due_at = now()`)) rechecks++
            continue
          case 'retry': {
            if (p.attempts >= MAX_ATTEMPTS) {
              if (await settle(tx, row, lease, tx`status = 'failed', error = ${`${outcome.error} (after ${p.attempts} attempts)`}`)) ended.push({ channel: row.channel, status: 'failed' })
              continue
            }
            const delaySec = Math.max(delays[p.attempts - 1] ?? delays[delays.length - 1] ?? 60, outcome.retryAfterSec ?? 0)
            // Not in flight any more: sent_at cleared so a waiting retry does not count against caps.
            if (await settle(tx, row, lease, tx`error = ${outcome.error}, sent_at = null, due_at = now() + ${delaySec} * interval '1 second'`)) ended.push({ channel: row.channel, status: 'retrying' })
          }
        }
      }
    })
    for (const e of ended) {
      ctx.metrics?.outcome('message', e.status, e.channel)
      // A channel call that did not deliver is a failed attempt of the queue (the loop counts only throws).
      if (e.status !== 'delivered') ctx.metrics?.queueFailure(QUEUE_NAME)
    }
    if (rechecks) {
      log.debug({ rechecks }, 'delivery: emails whose check grew old waiting for SMTP go back to be checked again')
      loop.wake()
    }
    return items.map(() => undefined)
  }

  // In-app messages come in big claims and need nothing but these batches, so four run at once (their
  // transactions wait on PostgreSQL more than they use the CPU). The other channels' messages finish
  // their calls one by one: with one batch at a time, those that finish while it runs go together in the
  // next (with four, an email's outcome went in a transaction of ~3: one transaction per message), and
  // their outcomes linger LINGER_MS for more.
  const inAppPreparing = createBatcher<Claimed, Prepared | null>({ run: prepareMany, maxSize: BATCH_SIZE, concurrency: 4 })
  const preparing = createBatcher<Claimed, Prepared | null>({ run: prepareMany, maxSize: BATCH_SIZE, concurrency: 1 })
  const recording = createBatcher<Claimed & { prepared: Prepared; outcome: Outcome }, void>({ run: recordMany, maxSize: BATCH_SIZE, concurrency: 1, lingerMs: LINGER_MS })

  async function handle(row: QueueRow, lease: Lease) {
    const prepared = await (row.channel === 'in_app' ? inAppPreparing : preparing).add({ row, lease })
    if (!prepared) return
    // The send is the irreversible step: make sure the lease still holds (extending it if needed). The
    // loop keeps it until this returns, outcome written, however long an email waits for an SMTP connection.
    if (!(await confirmLease(sql, QUEUE, row.id, lease))) return
    let outcome: Outcome
    try {
      outcome = await callChannel(row, prepared)
    } catch (err) {
      outcome = { kind: 'retry', error: `${row.channel}: ${(err as Error).message}` }
    }
    // A call to retry (a timeout, a refused connection, an error status) slows its brand's channel down to
    // one call at a time; an answer of any kind from the other end (delivered, bounced, refused) ends that.
    if (outcome.kind === 'retry') loop.failed(row.dispatch_key)
    else if (outcome.kind !== 'unsent') loop.succeeded(row.dispatch_key)
    await recording.add({ row, lease, prepared, outcome })
  }

  const perKeyOf = (key: string) => PER_KEY[key.slice(0, key.indexOf(':')) as Channel] ?? 4
  const loop = startWorkLoop<QueueRow>({
    name: QUEUE_NAME,
    sql,
    log,
    queue: QUEUE,
    keyOf: (row) => row.dispatch_key,
    handle,
    leaseMs: LEASE_MS,
    perKeyConcurrency: perKeyOf,
    globalConcurrency: 1024,
    // Four times what a key may have in hand, at most 512: a dead bot or push service holds 32 or 64
    // messages in memory, not 512 of the 2,048 every brand and channel share.
    maxPerKey: (key) => Math.min(512, 4 * perKeyOf(key)),
    // A brand's channel whose last call failed (timed out, refused): one call at a time, two messages held.
    failingHeld: FAILING_KEY_HELD,
    maxInMemory: 2048,
    idleIntervalMs: 500,
    // Depth, oldest due message's age and attempts on /metrics (queue "delivery").
    metrics: ctx.metrics,
  })

  // Other processes' enqueues wake this one when their transaction commits (NOTIFY is transactional).
  let listener: postgres.Sql | undefined
  let unlisten: (() => Promise<void>) | undefined
  if (ctx.pg.kind !== 'pglite' && ctx.config.databaseUrl) {
    listener = listenerConnection(ctx.config.databaseUrl, 'respin-delivery')
    const sub = await listener.listen(DELIVERY_CHANNEL, () => loop.wake())
    unlisten = () => sub.unlisten()
  }
  const inAppNow: InAppNow | undefined = inbox.crossProcess
    ? {
        async render(tx, items) {
          const templates: TemplateCache = new Map()
          const settings = new Map<string, Promise<ResolvedChannelSettings | undefined>>()
          const out: Awaited<ReturnType<InAppNow['render']>> = []
          for (const item of items) {
            let loading = settings.get(item.brand_id)
            if (!loading) settings.set(item.brand_id, (loading = resolveChannelSettings(tx, ctx.secretBox, item.brand_id, 'in_app')))
            const built = await build(tx, item, item.recipient, await loading, templates)
            out.push('error' in built ? { error: built.error } : { rendered: built.rendered })
          }
          return out
        },
        announce: (tx, items) => inbox.announceMany(tx, items),
      }
    : undefined
  const engine: DeliveryEngine = {
    wake: () => loop.wake(),
    inbox,
    inAppNow,
    async stop() {
      await loop.stop()
      await inAppPreparing.flush()
      await preparing.flush()
      await recording.flush()
      await unlisten?.()
      await listener?.end({ timeout: 2 })
      await inbox.close()
      await email.close()
      await http.close()
    },
  }
  ctx.delivery = engine
  ctx.inbox = inbox
  return engine
}

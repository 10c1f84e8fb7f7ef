// Email over SMTP with nodemailer: one pooled transport per brand (rebuilt when its settings change),
// connecting to the address the URL policy checked (TLS still verifies the host name). A 5xx refusal of
// the recipient is a bounce; other failures are retried.
//
// The transports live on a worker thread of their own (email.worker.ts): building each MIME message and
// the SMTP exchanges were most of the dispatcher's event loop in the email bench (bench/RESULTS.md), and
// on the main thread they delayed every API request and the other channels. The dispatcher keeps the
// rules, rendering and outcomes; the worker only sends.
import nodemailer, { type Transporter } from 'nodemailer'
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js'
import { checkUrl, UrlPolicyError } from '../../lib/url-policy.ts'
import { createWorkerClient } from '../../workers/rpc.ts'
import { smtpTarget } from '../settings.ts'
import { withoutSecrets, type Outcome } from './outcome.ts'

export interface EmailMessage {
  from: string
  replyTo: string | null
  to: string
  subject: string
  html: string
  text: string
  unsubscribeUrl: string
  notificationId: string
  /** When its delivery rules were checked (epoch ms). */
  checkedAt: number
}

interface PooledTransport {
  version: string
  transport: Transporter<SMTPPool.SentMessageInfo>
}

export interface EmailBrand {
  brandId: string
  smtpUrl: string
  version: string
}

export interface SmtpOptions {
  allowPrivate: boolean
  maxConnections?: number
  /** A message checked longer ago than this when a connection frees for it is handed back unsent. */
  maxCheckAgeMs?: number
}

/** The SMTP senders themselves, on the thread that calls them (the worker's). */
export function createSmtpSender(opts: SmtpOptions) {
  const transports = new Map<string, Promise<PooledTransport>>()
  // Per brand, as many sends at once as the pool has connections; the rest wait here, in order, where
  // the age of their check can be looked at when their turn comes (nodemailer's own queue hides it).
  const maxConnections = opts.maxConnections ?? 5
  const gates = new Map<string, { running: number; waiting: (() => void)[] }>()
  const acquire = (brandId: string): Promise<void> => {
    let g = gates.get(brandId)
    if (!g) gates.set(brandId, (g = { running: 0, waiting: [] }))
    if (g.running < maxConnections) {
      g.running++
      return Promise.resolve()
    }
    return new Promise((resolve) => g.waiting.push(resolve))
  }
  const release = (brandId: string) => {
    const g = gates.get(brandId)!
    const next = g.waiting.shift()
    if (next) next() // the slot passes on
    else if (--g.running === 0) gates.delete(brandId)
  }

  async function build(smtpUrl: string, version: string): Promise<PooledTransport> {
    const t = smtpTarget(smtpUrl)
    const checked = await checkUrl(t.bare, { allowPrivate: opts.allowPrivate, schemes: ['smtp', 'smtps'] })
    const transport = nodemailer.createTransport({
      pool: true,
      maxConnections: opts.maxConnections ?? 5,
      maxMessages: Number.POSITIVE_INFINITY,
      host: checked.address,
      port: t.port,
      secure: t.secure,
      auth: t.user ? { user: t.user, pass: t.pass } : undefined,
      // The pinned address is what we connect to; certificates are still checked against the host name.
      tls: { servername: t.host },
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    } as SMTPPool.Options)
    return { version, transport }
  }

  async function transportFor(brandId: string, smtpUrl: string, version: string) {
    const current = transports.get(brandId)
    if (current) {
      const t = await current.catch(() => undefined)
      if (t && t.version === version) return t.transport
      transports.delete(brandId)
      t?.transport.close()
    }
    const pending = build(smtpUrl, version)
    transports.set(brandId, pending)
    pending.catch(() => transports.delete(brandId))
    return (await pending).transport
  }

  return {
    async send(brand: EmailBrand, m: EmailMessage): Promise<Outcome> {
      return withoutSecrets(await sendMail(brand, m), credentialsOf(brand.smtpUrl))
    },
    close() {
      for (const pending of transports.values()) pending.then((t) => t.transport.close()).catch(() => {})
      transports.clear()
    },
  }

  async function sendMail(brand: EmailBrand, m: EmailMessage): Promise<Outcome> {
    let transport
    try {
      transport = await transportFor(brand.brandId, brand.smtpUrl, brand.version)
    } catch (err) {
      return { kind: 'retry', error: err instanceof UrlPolicyError ? `smtp host refused: ${err.message}` : `smtp: ${(err as Error).message}` }
    }
    await acquire(brand.brandId)
    try {
      // Waited behind slow sends long enough that the player may have self-excluded or withdrawn
      // consent meanwhile: back to the dispatcher, to be checked again before it goes.
      if (Date.now() - m.checkedAt > (opts.maxCheckAgeMs ?? 10_000)) return { kind: 'unsent', reason: 'its check is too old' }
      const info = await transport.sendMail({
        from: m.from,
        to: m.to,
        replyTo: m.replyTo ?? undefined,
        subject: m.subject,
        html: m.html,
        text: m.text,
        headers: {
          // RFC 8058: a one-click POST to this URL unsubscribes; RFC 2369 wants it in angle brackets.
          'List-Unsubscribe': `<${m.unsubscribeUrl}>`,
          'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
          'X-Respin-Notification': m.notificationId,
        },
      })
      if (info.rejected?.length) return { kind: 'bounced', error: `smtp: recipient refused: ${info.response ?? ''}`.trim() }
      return { kind: 'delivered' }
    } catch (err) {
      const e = err as { responseCode?: number; command?: string; response?: string; message: string }
      if (e.responseCode && e.responseCode >= 500 && /RCPT/i.test(e.command ?? '')) {
        return { kind: 'bounced', error: `smtp ${e.responseCode}: ${e.response ?? e.message}` }
      }
      return { kind: 'retry', error: `smtp${e.responseCode ? ` ${e.responseCode}` : ''}: ${e.response ?? e.message}` }
    } finally {
      release(brand.brandId)
    }
  }
}

/** The user and password of an SMTP URL, as written and decoded: cut out of the errors a server's replies make. */
function credentialsOf(smtpUrl: string): string[] {
  const decoded = (x: string) => {
    try {
      return decodeURIComponent(x)
    } catch {
      return x
    }
  }
  try {
    const u = new URL(smtpUrl)
    return [u.username, u.password, decoded(u.username), decoded(u.password)]
  } catch {
    return []
  }
}

/** One send as the email worker gets it. */
export interface EmailSend {
  brand: EmailBrand
  message: EmailMessage
}

/** The email channel: createSmtpSender on a worker thread of its own (email.worker.ts). */
export function createEmailChannel(opts: SmtpOptions) {
  const worker = createWorkerClient<EmailSend, Outcome>({
    url: new URL('./email.worker.ts', import.meta.url),
    data: opts,
    // A send in flight when the worker went away: tried again later, by whichever process.
    onLost: (why) => ({ kind: 'retry', error: `smtp: email channel ${why}` }),
  })
  return {
    send: (brand: EmailBrand, message: EmailMessage): Promise<Outcome> => worker.call({ brand, message }),
    close: () => worker.close(),
  }
}

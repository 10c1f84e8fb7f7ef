// Shared by the delivery tests: players made through the events API (so consent, time zone and status
// come the way production gets them), and waiting for a notification to reach a status.
import { randomUUID } from 'node:crypto'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import WebSocket from 'ws'
import type { Harness, TestTenant } from '../helpers/harness.ts'

export async function ingest(h: Harness, tenant: TestTenant, events: Record<string, unknown>[]) {
  const res = await h.request('POST', '/events', {
    key: tenant.key,
    body: { events: events.map((e) => ({ event_id: randomUUID(), timestamp: new Date().toISOString(), payload: {}, ...e })) },
  })
  if (res.status !== 200) throw new Error(`events: ${res.status} ${res.text}`)
}

/** A registered player; `consent` lists channels granted by consent_update events. */
export async function makePlayer(
  h: Harness,
  tenant: TestTenant,
  o: { email?: string; timezone?: string; language?: string; consent?: string[]; status?: string; name?: string } = {},
): Promise<{ id: string; externalId: string }> {
  const externalId = `p-${randomUUID().slice(0, 8)}`
  await ingest(h, tenant, [
    { player_id: externalId, event_type: 'registration', payload: { email: o.email, timezone: o.timezone, language: o.language, name: o.name ?? 'Ada' } },
    ...(o.consent ?? []).map((channel) => ({ player_id: externalId, event_type: 'consent_update', payload: { channel, granted: true } })),
    ...(o.status ? [{ player_id: externalId, event_type: 'status_change', payload: { status: o.status } }] : []),
  ])
  const [row] = await h.app.ctx.sql<{ id: string }[]>`select id from players where brand_id = ${tenant.brand.id} and external_id = ${externalId}`
  return { id: row!.id, externalId }
}

export async function waitForStatus(h: Harness, tenant: TestTenant, id: string, statuses: string[], timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const res = await h.request('GET', `/notifications/${id}`, { key: tenant.key })
    if (statuses.includes(res.body.data?.status)) return res.body.data
    if (Date.now() > deadline) throw new Error(`notification ${id} still ${res.body.data?.status} (${res.text})`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export async function send(h: Harness, tenant: TestTenant, body: Record<string, unknown>) {
  const res = await h.request('POST', '/notifications/send', { key: tenant.key, body })
  if (res.status !== 202) throw new Error(`send: ${res.status} ${res.text}`)
  return res.body
}

/**
 * A player's inbox WebSocket (a `ws` client): `next()` is the next pushed message (those not yet asked
 * for wait in `messages`), refused after `ms`; the socket's opening fails with the HTTP status it got.
 */
export function openInboxSocket(h: Harness, token: string): Promise<{ ws: WebSocket; messages: any[]; next(ms?: number): Promise<any> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${h.origin.replace('http', 'ws')}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
    const messages: any[] = []
    const waiters: ((m: any) => void)[] = []
    ws.on('message', (raw) => {
      const m = JSON.parse(String(raw))
      const w = waiters.shift()
      if (w) w(m)
      else messages.push(m)
    })
    ws.on('open', () => resolve({
      ws,
      messages,
      next: (ms = 15_000) => messages.length ? Promise.resolve(messages.shift()) : new Promise((r, j) => {
        waiters.push(r)
        setTimeout(() => j(new Error('no message in time')), ms)
      }),
    }))
    ws.on('unexpected-response', (_req, res) => reject(new Error(`status ${res.statusCode}`)))
    ws.on('error', reject)
  })
}

export async function outboxOf(h: Harness, tenantId: string, prefix = 'message.') {
  return h.app.ctx.sql<{ event: string; data: any }[]>`
    select event, data from outbox where tenant_id = ${tenantId} and (event like ${prefix + '%'} or event = 'email.unsubscribed') order by id`
}

/**
 * A real SMTP server (smtp-server, any login accepted) keeping every message it receives, parsed, until the
 * test file ends. `mailsTo(address)`: the messages to one recipient.
 */
export async function startSmtpReceiver(t: { teardown(fn: () => Promise<void>): void }) {
  const mails: ParsedMail[] = []
  const smtp = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    // The app's pooled SMTP connections stay open until it closes: do not wait 30 s for them at teardown.
    closeTimeout: 100,
    onAuth(_auth, _session, cb) {
      cb(null, { user: 'u' })
    },
    onData(stream, _session, cb) {
      simpleParser(stream).then((m) => {
        mails.push(m)
        cb()
      }, cb)
    },
  })
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => smtp.close(() => resolve())))
  const port = (smtp.server.address() as { port: number }).port
  return { port, mails, mailsTo: (address: string) => mails.filter((m) => (m.to as { text: string }).text === address) }
}

// Fairness of message delivery across tenants: brands whose SMTP server hangs must not hold the
// dispatcher's slots (src/notifications/dispatcher.ts, startDelivery) so that another tenant's email waits
// for their timeout. A brand's channel is one key of the work loop (`email:<brand id>`). An email key
// may have 64 calls in hand and hold 256 rows in memory. The whole loop has 1,024 slots and 2,048 rows.
// After a call of a key ends in `retry`, the key gets one call at a time and holds two rows until a call
// succeeds (the work loop's failingHeld, src/engine/work-loop.ts), claimed apart from the other keys (claimDuePerKey).
//
// Email is the cheapest channel to overfill the loop with: 16 brands x 64 calls take all 1,024 slots.
// Telegram (8 per key) would need 128 brands and push (16 per key) 64. Each brand gets 128 emails: 64 in
// flight and 64 waiting in its mailbox, which start the moment the first 64 end, so without the fix the
// slots never come free between timeouts. 16 x 128 = 2,048 also fills the memory until the first timeouts.
//
// A hanging SMTP server accepts connections and never greets. nodemailer gives up after its 10 s
// greetingTimeout (channels/email.ts, not configurable): the pool's 5 connections per brand fail, and the
// calls queued behind them (their check older than DELIVERY_CHECK_MAX_AGE_MS, 10 s by default) come back
// unsent, to be claimed again. The quiet tenant's email goes out once every hanging brand has failed
// once. With the fix it takes a few hundred ms. Without it, it waits for the brands' next timeouts,
// ~10 s later.
import { randomUUID } from 'node:crypto'
import net from 'node:net'
import t from 'tap'
import { SMTPServer } from 'smtp-server'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { sleep, waitFor } from '../helpers/wait.ts'
import { makePlayer, send, waitForStatus } from './delivery-helpers.ts'

const HANGING_BRANDS = 16
const EMAILS_PER_BRAND = 128
/** nodemailer's greetingTimeout for a brand's SMTP pool (channels/email.ts). */
const SMTP_GREETING_TIMEOUT_MS = 10_000


// Retries an hour away: a failed email does not come back during the test.
const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', DELIVERY_RETRY_DELAYS: '3600,3600,3600,3600' } })

/** An SMTP server that accepts connections and never sends its greeting. */
async function startHangingSmtp() {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  /** Stops hanging: connections refused and the open ones closed, so the dispatcher's calls end at once. */
  const stop = () => {
    server.close()
    for (const s of sockets) s.destroy()
  }
  t.teardown(stop)
  return { port: (server.address() as net.AddressInfo).port, stop }
}

/** A working SMTP server (smtp-server): when each recipient's message was received. */
async function startSmtp() {
  const received = new Map<string, number>()
  // closeTimeout: the dispatcher's pooled connections stay open; close() would otherwise wait 30 s for them.
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    closeTimeout: 500,
    onData(stream, session, cb) {
      stream.resume()
      stream.on('end', () => {
        for (const r of session.envelope.rcptTo) received.set(r.address, Date.now())
        cb()
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { port: (server.server.address() as net.AddressInfo).port, received }
}

async function emailTenant(smtpUrl: string, address: string): Promise<{ tenant: TestTenant; playerId: string }> {
  const tenant = await h.createTenant()
  const res = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: smtpUrl, from: `News <news@${tenant.slug}.example>` } })
  if (res.status !== 200) throw new Error(`email settings: ${res.status} ${res.text}`)
  const player = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  return { tenant, playerId: player.id }
}

t.test(`${HANGING_BRANDS} brands whose SMTP server hangs do not stall another tenant's email`, async (t) => {
  const hanging = await startHangingSmtp()
  const smtp = await startSmtp()
  const sql = h.app.ctx.sql

  const noisy = await Promise.all(Array.from({ length: HANGING_BRANDS }, (_, i) => emailTenant(`smtp://127.0.0.1:${hanging.port}`, `noisy-${i}-${randomUUID().slice(0, 8)}@example.com`)))
  const quietAddress = `quiet-${randomUUID().slice(0, 8)}@example.com`
  const quiet = await emailTenant(`smtp://127.0.0.1:${smtp.port}`, quietAddress)
  const brandIds = noisy.map((n) => n.tenant.brand.id)
  t.teardown(async () => {
    // Nothing left for the dispatcher to retry while the app stops, and no connection left hanging.
    await sql`update notifications set status = 'failed', error = 'test over' where brand_id = any(${brandIds}::uuid[]) and status = 'queued'`
    hanging.stop()
  })

  // The noisy brands' emails queued straight into the table in one statement (like a campaign's backlog),
  // 128 per brand to one consented player each (no frequency caps by default).
  await sql`
    insert into notifications (tenant_id, brand_id, player_id, channel, status, class, content, payload)
    select n.tenant_id, n.brand_id, n.player_id, 'email', 'queued', 'marketing', ${sql.json({ subject: 'Promo', body: '<p>Hello</p>' })}, '{}'
    from unnest(${noisy.map((n) => n.tenant.id)}::uuid[], ${brandIds}::uuid[], ${noisy.map((n) => n.playerId)}::uuid[]) as n(tenant_id, brand_id, player_id),
         generate_series(1, ${EMAILS_PER_BRAND})`
  h.app.ctx.delivery?.wake()
  const queuedAt = Date.now()

  // Until every hanging brand's first call has failed: how many of their emails were being sent at once (at
  // most 1,024, the loop's slots).
  let mostInFlight = 0
  await waitFor('every hanging brand failed once', async () => {
    const [r] = await sql<{ failed: number; in_flight: number }[]>`
      select count(distinct brand_id) filter (where error is not null)::int as failed,
             count(*) filter (where sent_at is not null and error is null)::int as in_flight
      from notifications where brand_id = any(${brandIds}::uuid[]) and status = 'queued'`
    mostInFlight = Math.max(mostInFlight, r!.in_flight)
    return r!.failed === HANGING_BRANDS
  }, 30_000)
  const firstFailures = Date.now() - queuedAt
  t.equal(mostInFlight, 1024, 'the hanging brands took every slot until their first timeout')
  t.ok(firstFailures >= SMTP_GREETING_TIMEOUT_MS - 1000, `their calls failed by the greeting timeout (${firstFailures} ms)`)

  const started = Date.now()
  const sent = await send(h, quiet.tenant, { player_id: quiet.playerId, channel: 'email', payload: { subject: 'Your code', body: '<p>1234</p>' } })
  await waitFor("the quiet tenant's email", () => smtp.received.has(quietAddress), 20_000)
  const ms = smtp.received.get(quietAddress)! - started
  t.ok(ms < 3000, `received ${ms} ms after it was sent, not after the hanging brands' next ${SMTP_GREETING_TIMEOUT_MS / 1000} s timeout`)
  t.equal((await waitForStatus(h, quiet.tenant, sent.notification_id, ['delivered', 'failed'])).status, 'delivered')

  // Nor their memory: a failing brand is claimed apart, two emails at a time, while the general claim leaves
  // it out. (Without that, their backlogs, the oldest due rows, filled the 2,048 rows again within 0.6 s.)
  await sleep(1000)
  const [held] = await sql<{ n: number }[]>`
    select count(*)::int as n from notifications where brand_id = any(${brandIds}::uuid[]) and status = 'queued' and lease_owner is not null`
  t.ok(held!.n <= 2 * HANGING_BRANDS, `the hanging brands hold ${held!.n} emails, at most 2 each`)
})

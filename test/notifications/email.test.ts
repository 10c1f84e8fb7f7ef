// Email against a real SMTP server (smtp-server), each message read back with mailparser: multipart HTML
// + text, RFC 8058 headers, open pixel and click rewriting, tracking tokens, one-click unsubscribe,
// bounces (5xx to the recipient) and retries of transient refusals up to `failed`.
import t from 'tap'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import { startHarness } from '../helpers/harness.ts'
import { makePlayer, ingest, outboxOf, send, waitForStatus } from './delivery-helpers.ts'

// DELIVERY_CHECK_MAX_AGE_MS short: an email queued behind slow ones is checked again within the test's time.
const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', DELIVERY_RETRY_DELAYS: '0,0,0,0', DELIVERY_CHECK_MAX_AGE_MS: '1000' } })

const mails: ParsedMail[] = []
const rcptCalls = new Map<string, number>()
const smtp = new SMTPServer({
  // The dispatcher's pooled connections stay open: close() would wait its default 30 s for them.
  closeTimeout: 100,
  disabledCommands: ['STARTTLS'],
  authOptional: false,
  onAuth(auth, _session, cb) {
    if (auth.username === 'mailer' && auth.password === 's3cret-pw') return cb(null, { user: 'mailer' })
    // Like providers whose SMTP user is an API token: the refusal names it.
    if (auth.username?.startsWith('tok-')) return cb(new Error(`unknown server token ${auth.username} (password ${auth.password})`))
    cb(new Error('bad credentials'))
  },
  onRcptTo(address, _session, cb) {
    rcptCalls.set(address.address, (rcptCalls.get(address.address) ?? 0) + 1)
    if (address.address.startsWith('bounce')) return cb(Object.assign(new Error('5.1.1 no such user'), { responseCode: 550 }))
    if (address.address.startsWith('busy')) return cb(Object.assign(new Error('4.2.1 try later'), { responseCode: 451 }))
    cb()
  },
  onData(stream, session, cb) {
    // A slow server for `slow-*` recipients: each such message holds its connection for 3 s.
    const slow = session.envelope.rcptTo.some((r) => r.address.startsWith('slow-'))
    simpleParser(stream).then((m) => {
      mails.push(m)
      setTimeout(() => cb(), slow ? 3000 : 0)
    }, cb)
  },
})
await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => smtp.close(() => resolve())))
const smtpPort = (smtp.server.address() as { port: number }).port

async function emailTenant() {
  const tenant = await h.createTenant()
  const res = await h.request('PUT', '/settings/channels/email', {
    key: tenant.key,
    body: { smtp_url: `smtp://mailer:s3cret-pw@127.0.0.1:${smtpPort}`, from: 'Casino <news@casino.example>', reply_to: 'help@casino.example' },
  })
  if (res.status !== 200) throw new Error(res.text)
  return tenant
}

const mailTo = async (address: string) => {
  for (let i = 0; i < 200 && !mails.some((m) => (m.to as { text: string }).text === address); i++) await new Promise((r) => setTimeout(r, 50))
  return mails.find((m) => (m.to as { text: string }).text === address)!
}
const pathOf = (url: string) => new URL(url).pathname
/** A header exactly as sent (mailparser folds the List-* headers into one parsed `list` object). */
const rawHeader = (mail: ParsedMail, name: string) =>
  mail.headerLines.find((l) => l.key === name)?.line.slice(name.length + 1).replace(/\r?\n\s+/g, ' ').trim()
const unsubscribeUrlOf = (mail: ParsedMail) => /^<(.+)>$/.exec(rawHeader(mail, 'list-unsubscribe') ?? '')?.[1] ?? ''

t.test('settings keep the SMTP password write-only', async (t) => {
  const tenant = await emailTenant()
  const read = await h.request('GET', '/settings/channels', { key: tenant.key })
  t.equal(read.body.data.email.smtp_url, `smtp://mailer:***@127.0.0.1:${smtpPort}`)
  t.match(read.body.data.email, { from: 'Casino <news@casino.example>', reply_to: 'help@casino.example', track_opens: true, track_clicks: true })
  t.same([read.body.data.telegram, read.body.data.push, read.body.data.in_app], [null, null, null])
  t.notMatch(read.text, /s3cret-pw/)
  const [row] = await h.app.ctx.sql<{ secret: string; settings: unknown }[]>`select secret, settings from brand_channel_settings where brand_id = ${tenant.brand.id}`
  t.notMatch(row!.secret, /s3cret-pw/, 'sealed at rest')
  t.notMatch(JSON.stringify(row!.settings), /s3cret-pw/)
})

t.test('a marketing email: multipart, RFC 8058 headers, tracked links and pixel; opens and clicks fire once', async (t) => {
  const tenant = await emailTenant()
  const address = `ada-${Date.now()}@example.com`
  const player = await makePlayer(h, tenant, { email: address, consent: ['email'], name: 'Ada <3' })
  const tpl = await h.request('POST', '/notifications/templates', {
    key: tenant.key,
    body: { name: 'promo', channel: 'email', subject: 'Hello {{name}}', body: '<p>Hi {{ name }}, {{ offer | a bonus }}</p><a href="https://casino.example/promo?a=1&amp;b=2">Play</a> <a href="{{unsubscribe_url}}">unsubscribe</a>' },
  })
  t.same(tpl.body.data.variables, ['name', 'offer', 'unsubscribe_url'])
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', template_id: tpl.body.data.id })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['delivered', 'failed'])
  t.equal(n.status, 'delivered', n.error ?? '')
  const mail = await mailTo(address)
  t.equal(mail.subject, 'Hello Ada <3')
  t.equal((mail.from as { text: string }).text, '"Casino" <news@casino.example>')
  t.match(mail.html, /Hi Ada &lt;3, a bonus/)
  t.match(mail.text, /Hi Ada <3, a bonus/)
  t.match(mail.text, /Play \(https:\/\/casino\.example\/promo\?a=1&b=2\)/, 'the text part keeps the plain link')
  t.match(unsubscribeUrlOf(mail), /^http:\/\/localhost:\d+\/t\/u\/[\w-]+\.[\w-]+$/, 'at the root of PUBLIC_BASE_URL')
  t.equal(rawHeader(mail, 'list-unsubscribe-post'), 'List-Unsubscribe=One-Click')
  t.match(mail.headers.get('content-type'), { value: 'multipart/alternative' })
  const clickUrl = /href="([^"]*\/t\/c\/[^"]+)"/.exec(mail.html as string)?.[1]
  const pixelUrl = /<img src="([^"]*\/t\/o\/[^"]+)"/.exec(mail.html as string)?.[1]
  t.ok(clickUrl && pixelUrl, 'link rewritten and pixel added')
  t.match(mail.html, /href="[^"]*\/t\/u\//, 'the unsubscribe link is not click-tracked')

  const pixel = await fetch(h.origin + pathOf(pixelUrl!))
  t.equal(pixel.status, 200)
  t.equal(pixel.headers.get('content-type'), 'image/gif')
  t.equal((await pixel.arrayBuffer()).byteLength, 42)
  t.equal((await fetch(h.origin + pathOf(pixelUrl!))).status, 200, 'a reused pixel still answers')
  const click = await fetch(h.origin + pathOf(clickUrl!), { redirect: 'manual' })
  t.equal(click.status, 302)
  t.equal(click.headers.get('location'), 'https://casino.example/promo?a=1&b=2')
  t.equal((await fetch(h.origin + pathOf(clickUrl!), { redirect: 'manual' })).status, 302)
  t.equal((await fetch(`${h.origin}/api/v1${pathOf(clickUrl!)}`, { redirect: 'manual' })).status, 302, 'links sent before, under /api/v1, still work')
  const after = await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  t.ok(after.opened_at && after.clicked_at)
  const events = await outboxOf(h, tenant.id)
  t.same(events.map((e) => e.event), ['message.delivered', 'message.opened', 'message.clicked'], 'first open and first click once each')
  t.match(events[2]!.data, { notification_id: sent.notification_id, player_id: player.id, channel: 'email', campaign_id: null })

  // Forged, altered and foreign tokens are 404.
  const token = pathOf(clickUrl!).split('/').pop()!
  t.equal((await fetch(`${h.origin}/api/v1/t/c/${token.slice(0, -2)}xx`, { redirect: 'manual' })).status, 404, 'altered')
  t.equal((await fetch(`${h.origin}/api/v1/t/o/${token}.gif`)).status, 404, 'a click token is no open token')
  t.equal((await fetch(`${h.origin}/api/v1/t/u/${token}`)).status, 404, 'nor an unsubscribe token')
  t.equal((await fetch(`${h.origin}/api/v1/t/c/AAAA.BBBB`, { redirect: 'manual' })).status, 404, 'forged')
})

t.test('one-click unsubscribe: the GET page changes nothing, the POST withdraws consent once', async (t) => {
  const tenant = await emailTenant()
  const address = `uns-${Date.now()}@example.com`
  const player = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { subject: 'S', body: '<p>x</p>' } })
  await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  const mail = await mailTo(address)
  const url = h.origin + pathOf(unsubscribeUrlOf(mail))
  const page = await fetch(url)
  t.equal(page.status, 200)
  t.match(await page.text(), /<form method="post"/)
  t.equal((await h.request('GET', `/players/${player.id}`, { key: tenant.key })).body.data.profile.consent.email.granted, true, 'GET changed nothing')
  const post = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' })
  t.equal(post.status, 200)
  t.equal((await fetch(url, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200)
  t.equal((await h.request('GET', `/players/${player.id}`, { key: tenant.key })).body.data.profile.consent.email.granted, false)
  const events = (await outboxOf(h, tenant.id)).filter((e) => e.event === 'email.unsubscribed')
  t.equal(events.length, 1, 'fired once')
  t.match(events[0]!.data, { player_id: player.id, email: address, channel: 'email', notification_id: sent.notification_id })
  const later = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: player.id, channel: 'email', payload: { body: 'again' } } })
  t.equal(later.body.queued, false)
  t.match(later.body.data, { status: 'suppressed', reason: 'unsubscribed' })
  const transactional = await send(h, tenant, { player_id: player.id, channel: 'email', class: 'transactional', payload: { subject: 'Receipt', body: 'ok' } })
  t.equal((await waitForStatus(h, tenant, transactional.notification_id, ['delivered', 'failed'])).status, 'delivered', 'transactional still goes')
  // A consent_update granting email again lifts it.
  await ingest(h, tenant, [{ player_id: player.externalId, event_type: 'consent_update', payload: { channel: 'email', granted: true } }])
  const again = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { body: 'back' } })
  t.equal(again.queued, true)
  // The first message's link, clicked again after that grant, withdraws consent again (fired still once).
  t.equal((await fetch(url, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200)
  t.match((await h.request('GET', `/players/${player.id}`, { key: tenant.key })).body.data.profile.consent.email, { granted: false })
  t.equal((await outboxOf(h, tenant.id)).filter((e) => e.event === 'email.unsubscribed').length, 1, 'fired once per message')
  const after = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: player.id, channel: 'email', payload: { body: 'once more' } } })
  t.match(after.body.data, { status: 'suppressed', reason: 'unsubscribed' })
})

t.test('a 5xx refusal of the recipient is a bounce; the address stays undeliverable until it changes', async (t) => {
  const tenant = await emailTenant()
  const player = await makePlayer(h, tenant, { email: `bounce-${Date.now()}@example.com`, consent: ['email'] })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { subject: 'S', body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['bounced', 'delivered', 'failed'])
  t.equal(n.status, 'bounced')
  t.match(n.error, /550/)
  t.equal(n.attempts, 1)
  const bounced = (await outboxOf(h, tenant.id)).filter((e) => e.event === 'message.bounced')
  t.equal(bounced.length, 1)
  t.match(bounced[0]!.data, { notification_id: sent.notification_id, player_id: player.id, channel: 'email', reason: /550/ })
  const next = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: player.id, channel: 'email', class: 'transactional', payload: { body: 'x' } } })
  t.match(next.body.data, { status: 'suppressed', reason: 'undeliverable_address' })
  await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { email: `fixed-${Date.now()}@example.com` } })
  const fixed = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { body: 'x' } })
  t.equal((await waitForStatus(h, tenant, fixed.notification_id, ['delivered', 'failed', 'bounced'])).status, 'delivered', 'a changed address is tried')
})

t.test('transient refusals are retried up to 5 attempts, then failed', async (t) => {
  const tenant = await emailTenant()
  const address = `busy-${Date.now()}@example.com`
  const player = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['failed', 'delivered', 'bounced'], 30_000)
  t.equal(n.status, 'failed')
  t.equal(n.attempts, 5)
  t.match(n.error, /451.*after 5 attempts/)
  t.equal(rcptCalls.get(address), 5)
  t.equal(n.delivered_at, null)
})

t.test('an SMTP refusal that names the credentials does not put them in the stored error', async (t) => {
  const tenant = await h.createTenant()
  const put = await h.request('PUT', '/settings/channels/email', {
    key: tenant.key, body: { smtp_url: `smtp://tok-7f3a9c2e51:pw-84b1d6e0@127.0.0.1:${smtpPort}`, from: 'news@casino.example' },
  })
  t.equal(put.status, 200, put.text)
  const player = await makePlayer(h, tenant, { email: `tok-${Date.now()}@example.com`, consent: ['email'] })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['failed', 'delivered', 'bounced'], 30_000)
  t.match(n, { status: 'failed', error: /unknown server token \*\*\* \(password \*\*\*\)/ })
  const [row] = await h.app.ctx.sql<{ error: string }[]>`select error from notifications where id = ${sent.notification_id as string}`
  t.notMatch(row?.error ?? '', /7f3a9c2e51|84b1d6e0/, 'neither stored')
})

t.test('a send is not delivered when the brand has no email settings', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant, { email: `none-${Date.now()}@example.com`, consent: ['email'] })
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { body: 'x' } })
  const n = await waitForStatus(h, tenant, sent.notification_id, ['failed', 'delivered'])
  t.match(n, { status: 'failed', error: 'the email channel is not configured for the brand' })
})

t.test('an email that waited for a connection past its check is checked again: a player who self-excluded meanwhile gets nothing', async (t) => {
  const tenant = await emailTenant()
  const stamp = Date.now()
  const slow = await Promise.all([0, 1, 2, 3, 4].map((i) => makePlayer(h, tenant, { email: `slow-${i}-${stamp}@example.com`, consent: ['email'] })))
  const late = await makePlayer(h, tenant, { email: `late-${stamp}@example.com`, consent: ['email'] })
  const inFlight = async (ids: string[]) => {
    for (let i = 0; i < 200; i++) {
      const [row] = await h.app.ctx.sql<{ n: number }[]>`select count(*)::int as n from notifications where id = any(${ids}::uuid[]) and sent_at is not null`
      if (row!.n === ids.length) return
      await new Promise((r) => setTimeout(r, 25))
    }
    throw new Error('not in flight')
  }
  // The brand's five SMTP connections, each held 3 s by a slow message.
  const slowSends = await Promise.all(slow.map((p) => send(h, tenant, { player_id: p.id, channel: 'email', payload: { subject: 'S', body: 'slow' } })))
  await inFlight(slowSends.map((s) => s.notification_id))
  // Checked now, then waiting for a connection; meanwhile the player self-excludes.
  const queued = await send(h, tenant, { player_id: late.id, channel: 'email', payload: { subject: 'Promo', body: 'late' } })
  await inFlight([queued.notification_id])
  t.equal((await h.request('PATCH', `/players/${late.id}`, { key: tenant.key, body: { status: 'self_excluded' } })).status, 200)
  const n = await waitForStatus(h, tenant, queued.notification_id, ['suppressed', 'delivered', 'failed'])
  t.match(n, { status: 'suppressed', attempts: 0 }, 'checked again before it went: suppressed, no attempt counted')
  for (const s of slowSends) t.equal((await waitForStatus(h, tenant, s.notification_id, ['delivered', 'failed'])).status, 'delivered')
  t.notOk(mails.some((m) => (m.to as { text: string }).text === `late-${stamp}@example.com`), 'nothing reached the SMTP server for that player')
})

t.test('a link with characters a header cannot carry redirects percent-encoded, and the server lives on', async (t) => {
  const tenant = await emailTenant()
  const address = `intl-${Date.now()}@example.com`
  const player = await makePlayer(h, tenant, { email: address, consent: ['email'] })
  const body = '<a href="https://ru.wikipedia.org/wiki/Москва">city</a> <a href="https://casino.example/a&#10;b?q=–">odd</a>'
  const sent = await send(h, tenant, { player_id: player.id, channel: 'email', payload: { subject: 'S', body } })
  await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  const mail = await mailTo(address)
  const clicks = [...(mail.html as string).matchAll(/href="([^"]*\/t\/c\/[^"]+)"/g)].map((m) => m[1]!)
  t.equal(clicks.length, 2)
  const first = await fetch(h.origin + pathOf(clicks[0]!), { redirect: 'manual' })
  t.equal(first.status, 302)
  t.equal(first.headers.get('location'), 'https://ru.wikipedia.org/wiki/%D0%9C%D0%BE%D1%81%D0%BA%D0%B2%D0%B0')
  const second = await fetch(h.origin + pathOf(clicks[1]!), { redirect: 'manual' })
  t.equal(second.status, 302)
  t.equal(second.headers.get('location'), 'https://casino.example/ab?q=%E2%80%93', 'the newline dropped, the dash encoded')
  t.equal((await h.request('GET', '/health')).status, 200, 'still serving')
})

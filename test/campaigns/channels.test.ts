// Campaigns through a real delivery channel: email to a real SMTP server (smtp-server), each message read
// back with mailparser. A one-shot's, a triggered campaign's and a journey step's email reach the member's
// address with the template's subject and body rendered; members without consent or without an address
// get none (suppressed), and the campaign's in-app messages are delivered beside them.
import t from 'tap'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { ingest, makePlayer } from '../notifications/delivery-helpers.ts'
import { campaign, createCampaign, move, must, segment, sent, template, until } from './helpers.ts'

/** Every message the server accepted, with its envelope recipients. */
const mails: { rcpt: string[]; mail: ParsedMail }[] = []
const smtp = new SMTPServer({
  // The dispatcher's pooled connections stay open: close() would wait its default 30 s for them.
  closeTimeout: 100,
  disabledCommands: ['STARTTLS'],
  onAuth(auth, _session, cb) {
    if (auth.username === 'mailer' && auth.password === 'camp-pw') return cb(null, { user: 'mailer' })
    cb(new Error('bad credentials'))
  },
  onData(stream, session, cb) {
    const rcpt = session.envelope.rcptTo.map((r) => r.address)
    simpleParser(stream).then((mail) => {
      mails.push({ rcpt, mail })
      cb()
    }, cb)
  },
})
await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => smtp.close(() => resolve())))
const smtpPort = (smtp.server.address() as { port: number }).port

// Started after the SMTP server, so its teardown (the app and its SMTP connections) runs before the
// server's close, which waits for open connections (30 s otherwise). WEBHOOK_ALLOW_PRIVATE: the SMTP server
// listens on 127.0.0.1.
const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true', CAMPAIGN_ENGINE_POLL_MS: '200', INGEST_ACK_AFTER: 'postgres' } })
const ctx = h.app.ctx

async function emailTenant(): Promise<TestTenant> {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/channels/email', {
    key: tenant.key, body: { smtp_url: `smtp://mailer:camp-pw@127.0.0.1:${smtpPort}`, from: 'Casino <news@casino.example>' },
  }), 200)
  return tenant
}

const mailsTo = (address: string) => mails.filter((m) => m.rcpt.includes(address))
const address = (name: string) => `${name}-${process.pid}-${Date.now()}@example.com`

/** Waits until none of the campaign's notifications is queued. */
const settled = (campaignId: string) =>
  until(h, async () => (await ctx.sql`select 1 from notifications where campaign_id = ${campaignId} and status = 'queued'`).length === 0)

t.test("a one-shot's email reaches the consenting member's address over SMTP, rendered from the template", async (t) => {
  const tenant = await emailTenant()
  const ada = address('ada')
  const bob = address('bob')
  const pAda = await makePlayer(h, tenant, { email: ada, consent: ['email'], name: 'Ada' })
  const pBob = await makePlayer(h, tenant, { email: bob, name: 'Bob' }) // email is opt-in: no consent, no mail
  const pCy = await makePlayer(h, tenant, { consent: ['email'], name: 'Cy' }) // consent, but no address
  await ctx.stream!.idle()
  const emailTpl = await template(h, tenant, 'email', {
    name: 'spins', subject: 'Spins for {{ name }}', body: '<p>Hi {{ name }}, your {{ offer }} wait.</p>', variables: ['name', 'offer'],
  })
  const c = await createCampaign(h, tenant, {
    type: 'one_shot', channels: ['email', 'in_app'], target_segment_id: await segment(h, tenant),
    config: { payload: { offer: '50 spins' }, templates: { email: emailTpl, in_app: await template(h, tenant) } },
  })
  await move(h, tenant, c.id, 'running')
  await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed')
  await settled(c.id)

  const status = Object.fromEntries((await ctx.sql<{ player_id: string; channel: string; status: string; reason: string | null }[]>`
    select player_id, channel, status, reason from notifications where campaign_id = ${c.id}`).map((r) => [`${r.player_id}:${r.channel}`, [r.status, r.reason]]))
  t.same(status, {
    [`${pAda.id}:email`]: ['delivered', null],
    [`${pBob.id}:email`]: ['suppressed', 'no_consent'],
    [`${pCy.id}:email`]: ['suppressed', 'no_address'],
    [`${pAda.id}:in_app`]: ['delivered', null],
    [`${pBob.id}:in_app`]: ['delivered', null],
    [`${pCy.id}:in_app`]: ['delivered', null],
  }, 'email only where consent and an address are; in-app to all three')

  const received = mailsTo(ada)
  t.equal(received.length, 1, 'one email to the member, at her address')
  const mail = received[0]!.mail
  t.equal((mail.to as { text: string }).text, ada)
  t.equal((mail.from as { text: string }).text, '"Casino" <news@casino.example>')
  t.equal(mail.subject, 'Spins for Ada', "the template's subject, rendered")
  t.match(mail.html, /<p>Hi Ada, your 50 spins wait\.<\/p>/, "the template's body with the campaign's payload")
  t.match(mail.text, /Hi Ada, your 50 spins wait\./)
  t.equal(mailsTo(bob).length, 0, 'nothing to the member without consent')
  // The delivery reported as the campaign's.
  const [delivered] = await ctx.sql<{ data: any }[]>`
    select data from outbox where event = 'message.delivered' and data->>'campaign_id' = ${c.id} and data->>'channel' = 'email'`
  t.match(delivered?.data, { player_id: pAda.id, campaign_id: c.id, channel: 'email' })
  t.match((await campaign(h, tenant, c.id)).stats, { audience: 3, delivered: 4, suppressed: 2, sent: 4 })
})

t.test("a triggered campaign's and a journey step's emails reach the player over SMTP", async (t) => {
  const tenant = await emailTenant()
  const email = address('eve')
  const eve = await makePlayer(h, tenant, { email, consent: ['email'], name: 'Eve' })
  await ctx.stream!.idle()
  const tpl = (subject: string, body: string) => template(h, tenant, 'email', { name: subject, subject, body })
  const triggered = await createCampaign(h, tenant, {
    type: 'triggered', channels: ['email'],
    config: { templates: { email: await tpl('Thanks for the deposit, {{ name }}', '<p>Deposit bonus inside</p>') }, trigger: { event_type: 'deposit' } },
  })
  await move(h, tenant, triggered.id, 'running')
  const journey = await createCampaign(h, tenant, {
    type: 'journey', channels: ['email'],
    config: {
      trigger: { event_type: 'login' },
      steps: [{ id: 'welcome', type: 'send', channel: 'email', template_id: await tpl('Welcome back, {{ name }}', '<p>Your journey starts</p>') }],
    },
  })
  await move(h, tenant, journey.id, 'running')
  await ingest(h, tenant, [
    { player_id: eve.externalId, event_type: 'deposit', payload: { amount: 50, currency: 'EUR' } },
    { player_id: eve.externalId, event_type: 'login' },
  ])
  await ctx.stream!.idle()
  await until(h, async () => (await sent(h, journey.id)).length === 1)
  await settled(triggered.id)
  await settled(journey.id)
  t.same((await sent(h, triggered.id)).map((r) => r.status), ['delivered'])
  t.same((await sent(h, journey.id)).map((r) => [r.step, r.status]), [['welcome', 'delivered']])
  await until(h, async () => mailsTo(email).length === 2, 5000)
  const bySubject = new Map(mailsTo(email).map((m) => [m.mail.subject ?? '', m.mail]))
  t.same([...bySubject.keys()].sort(), ['Thanks for the deposit, Eve', 'Welcome back, Eve'], "each campaign's template subject, rendered")
  t.match(bySubject.get('Thanks for the deposit, Eve')?.html, /<p>Deposit bonus inside<\/p>/)
  t.match(bySubject.get('Welcome back, Eve')?.html, /<p>Your journey starts<\/p>/)
  t.ok([...bySubject.values()].every((m) => (m.to as { text: string }).text === email), "to the player's address")
})

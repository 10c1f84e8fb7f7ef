// Brand channel and delivery settings: validation naming each field, the URL policy on every outbound
// target (here with WEBHOOK_ALLOW_PRIVATE off), secrets write-only, scopes and brand/tenant isolation.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { makePlayer } from './delivery-helpers.ts'

const h = await startHarness(t)
const fields = (res: { body: any }) => (res.body.details?.errors ?? []).map((e: { field: string }) => e.field)

t.test('every outbound target passes the URL policy', async (t) => {
  const tenant = await h.createTenant()
  const smtp = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: 'smtp://u:p@127.0.0.1:25', from: 'a@b.example' } })
  t.equal(smtp.status, 400)
  t.same(fields(smtp), ['smtp_url'])
  const smtp6 = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: 'smtps://u:p@[::1]:465', from: 'a@b.example' } })
  t.same(fields(smtp6), ['smtp_url'])
  const decimal = await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: 'smtp://u:p@2130706433:25', from: 'a@b.example' } })
  t.same(fields(decimal), ['smtp_url'])
  for (const url of ['http://api.telegram.org', 'https://10.0.0.1', 'https://169.254.169.254', 'https://[::ffff:127.0.0.1]']) {
    const tg = await h.request('PUT', '/settings/channels/telegram', { key: tenant.key, body: { bot_token: '1:AAAAAAAAAAAAAAAA', api_base_url: url } })
    t.equal(tg.status, 400, url)
    t.same(fields(tg), ['api_base_url'], url)
  }
  const player = await makePlayer(h, tenant)
  const push = await h.request('POST', `/players/${player.id}/push-subscriptions`, {
    key: tenant.key,
    body: { endpoint: 'https://127.0.0.1/push/x', keys: { p256dh: `B${'A'.repeat(86)}`, auth: 'A'.repeat(22) } },
  })
  t.equal(push.status, 400)
  t.same(fields(push), ['endpoint'])
  // 2,048 characters, but ~6 KB as UTF-8: more than the unique index takes (it was a 500).
  const wide = await h.request('POST', `/players/${player.id}/push-subscriptions`, {
    key: tenant.key,
    body: { endpoint: `https://fcm.googleapis.com/fcm/send/${'推'.repeat(2000)}`, keys: { p256dh: `B${'A'.repeat(86)}`, auth: 'A'.repeat(22) } },
  })
  t.equal(wide.status, 400)
  t.same(fields(wide), ['endpoint'])
  const read = await h.request('GET', '/settings/channels', { key: tenant.key })
  t.same(read.body.data, { email: null, telegram: null, push: null, in_app: null }, 'nothing stored')
})

t.test('channel settings validation names the fields', async (t) => {
  const tenant = await h.createTenant()
  const cases: [string, string, unknown, string[]][] = [
    ['email', 'smtp_url scheme', { smtp_url: 'http://x', from: 'a@b.example' }, ['smtp_url']],
    ['email', 'from missing', { smtp_url: 'smtp://u:p@mail.example' }, ['from']],
    ['email', 'from malformed', { smtp_url: 'smtp://u:p@smtp.gmail.com:587', from: 'not an address' }, ['from']],
    ['telegram', 'token malformed', { bot_token: 'nope' }, ['bot_token']],
    ['push', 'subject scheme', { vapid_subject: 'http://x' }, ['vapid_subject']],
    ['push', 'one key only', { vapid_subject: 'mailto:a@b.example', vapid_public_key: 'B'.repeat(87) }, ['vapid_private_key']],
    ['in_app', 'retention range', { retention_days: 0 }, ['retention_days']],
  ]
  for (const [channel, label, body, expected] of cases) {
    const res = await h.request('PUT', `/settings/channels/${channel}`, { key: tenant.key, body })
    t.equal(res.status, 400, label)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.same(fields(res), expected, label)
  }
  t.equal((await h.request('PUT', '/settings/channels/sms', { key: tenant.key, body: {} })).status, 404)
  const inApp = await h.request('PUT', '/settings/channels/in_app', { key: tenant.key, body: {} })
  t.equal(inApp.status, 200)
  t.equal(inApp.body.data.retention_days, 90)
})

t.test('push keys are generated when omitted; the private key is never readable', async (t) => {
  const tenant = await h.createTenant()
  const res = await h.request('PUT', '/settings/channels/push', { key: tenant.key, body: { vapid_subject: 'https://casino.example' } })
  t.equal(res.status, 200)
  t.match(res.body.data.vapid_public_key, /^[A-Za-z0-9_-]{87}$/)
  t.notOk('vapid_private_key' in res.body.data)
  const [row] = await h.app.ctx.sql<{ secret: string }[]>`select secret from brand_channel_settings where brand_id = ${tenant.brand.id} and channel = 'push'`
  t.ok(row!.secret.length > 40, 'sealed at rest')
  const read = await h.request('GET', '/settings/channels', { key: tenant.key })
  t.same(Object.keys(read.body.data.push).sort(), ['updated_at', 'vapid_public_key', 'vapid_subject'])
})

t.test('delivery settings: defaults, whole-object PUT, validation', async (t) => {
  const tenant = await h.createTenant()
  const defaults = await h.request('GET', '/settings/delivery', { key: tenant.key })
  t.same(defaults.body.data, { frequency_caps: [], quiet_hours: null, consent_policy: { email: 'opt_in', telegram: 'opt_in', push: 'opt_out', in_app: 'opt_out' } })
  const body = { frequency_caps: [{ channel: 'any', max: 3, per: 'week' }], quiet_hours: { start: '22:00', end: '08:00', timezone: 'Europe/Rome' }, consent_policy: { push: 'opt_in' } }
  const put = await h.request('PUT', '/settings/delivery', { key: tenant.key, body })
  t.same(put.body.data, { ...body, consent_policy: { email: 'opt_in', telegram: 'opt_in', push: 'opt_in', in_app: 'opt_out' } })
  t.same((await h.request('GET', '/settings/delivery', { key: tenant.key })).body.data, put.body.data)
  const replaced = await h.request('PUT', '/settings/delivery', { key: tenant.key, body: { quiet_hours: null } })
  t.same(replaced.body.data.frequency_caps, [], 'a key left out takes its default')
  const bad: [unknown, string][] = [
    [{ quiet_hours: { start: '22:00', end: '08:00', timezone: 'Mars/Base' } }, 'quiet_hours.timezone'],
    [{ quiet_hours: { start: '25:00', end: '08:00', timezone: 'UTC' } }, 'quiet_hours.start'],
    [{ frequency_caps: [{ channel: 'sms', max: 1, per: 'day' }] }, 'frequency_caps.0.channel'],
    [{ frequency_caps: [{ channel: 'any', max: 1, per: 'month' }] }, 'frequency_caps.0.per'],
    [{ consent_policy: { email: 'maybe' } }, 'consent_policy.email'],
  ]
  for (const [b, field] of bad) {
    const res = await h.request('PUT', '/settings/delivery', { key: tenant.key, body: b })
    t.equal(res.status, 400, field)
    t.ok(fields(res).includes(field), `${field} named (got ${fields(res)})`)
  }
})

t.test('settings are per brand, tenants isolated, writes need full access', async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const other = await h.createTenant()
  await h.request('PUT', '/settings/channels/in_app', { key: tenant.key, body: { retention_days: 7 } })
  t.equal((await h.request('GET', '/settings/channels', { key: tenant.key, headers: { 'x-brand': second.slug } })).body.data.in_app, null)
  t.equal((await h.request('GET', '/settings/channels', { key: other.key })).body.data.in_app, null)
  t.equal((await h.request('GET', '/settings/channels', { key: other.key, headers: { 'x-brand': tenant.brand.id } })).status, 400, "another tenant's brand is unknown")
  // The body's brand hint (docs/tenancy.md), though no settings schema declares it.
  t.equal((await h.request('PUT', '/settings/channels/in_app', { key: tenant.key, body: { retention_days: 9, brand: second.slug } })).status, 200)
  t.equal((await h.request('GET', '/settings/channels', { key: tenant.key, headers: { 'x-brand': second.slug } })).body.data.in_app?.retention_days, 9, 'the hinted brand got it')
  t.equal((await h.request('GET', '/settings/channels', { key: tenant.key })).body.data.in_app?.retention_days, 7, 'the default brand kept its own')
  const ro = await tenant.createKey({ scopes: ['read'] })
  t.equal((await h.request('GET', '/settings/delivery', { key: ro.key })).status, 200)
  t.equal((await h.request('PUT', '/settings/delivery', { key: ro.key, body: {} })).status, 403)
  t.equal((await h.request('PUT', '/settings/channels/in_app', { key: ro.key, body: {} })).status, 403)
  t.equal((await h.request('GET', '/settings/delivery')).status, 401)
})

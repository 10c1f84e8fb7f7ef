// Templates and notification settings, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { makePlayer } from './delivery-helpers.ts'

const h = await startHarness(t)

t.test('templates', async (t) => {
  const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'

  async function createTemplate(tenant: TestTenant, body: Record<string, unknown> = {}, key = tenant.key) {
    const res = await h.request('POST', '/notifications/templates', {
      key,
      body: { name: 'Welcome', channel: 'email', body: 'Hello {{first_name}}', ...body },
    })
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`)
    return res.body.data
  }

  const fieldsOf = (body: any) => (body.details?.errors ?? []).map((e: { field: string }) => e.field)

  t.test('POST /notifications/templates creates an active template with defaults', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', '/notifications/templates', {
      key: tenant.key,
      body: { name: 'Welcome', channel: 'email', body: 'Hello {{first_name}}, here is {{ bonus_amount }}' },
    })
    t.equal(res.status, 201)
    const tpl = res.body.data
    t.match(tpl.id, /^[0-9a-f-]{36}$/)
    t.same(Object.keys(tpl).sort(), ['active', 'body', 'channel', 'created_at', 'id', 'locale', 'name', 'subject', 'updated_at', 'variables'])
    t.equal(tpl.name, 'Welcome')
    t.equal(tpl.channel, 'email')
    t.equal(tpl.locale, 'en', 'locale defaults to en')
    t.equal(tpl.subject, null)
    t.equal(tpl.body, 'Hello {{first_name}}, here is {{ bonus_amount }}')
    t.same(tpl.variables, ['first_name', 'bonus_amount'])
    t.equal(tpl.active, true)
    t.ok(!Number.isNaN(Date.parse(tpl.created_at)))
    const got = await h.request('GET', `/notifications/templates/${tpl.id}`, { key: tenant.key })
    t.equal(got.status, 200)
    t.same(got.body.data, tpl)
  })

  t.test('variables come from subject and body, united with declared variables', async (t) => {
    const tenant = await h.createTenant()
    const tpl = await createTemplate(tenant, {
      subject: '{{first_name}}, your {{offer}} awaits',
      body: 'Use code {{code}} before {{expiry}}. {{first_name}}',
      variables: ['code', 'unsubscribe_url'],
      locale: 'it',
    })
    t.same(tpl.variables, ['first_name', 'offer', 'code', 'expiry', 'unsubscribe_url'])
    t.equal(tpl.locale, 'it')
    t.equal(tpl.subject, '{{first_name}}, your {{offer}} awaits')

    const none = await createTemplate(tenant, { body: 'No placeholders here' })
    t.same(none.variables, [])
    const declaredOnly = await createTemplate(tenant, { body: 'plain', variables: ['a', 'a', 'b'] })
    t.same(declaredOnly.variables, ['a', 'b'], 'declared names are de-duplicated')
  })

  t.test('every channel and locale is accepted', async (t) => {
    const tenant = await h.createTenant()
    for (const channel of ['email', 'telegram', 'push', 'in_app']) {
      for (const locale of ['en', 'it', 'es']) {
        const tpl = await createTemplate(tenant, { channel, locale })
        t.equal(tpl.channel, channel)
        t.equal(tpl.locale, locale)
      }
    }
  })

  t.test('POST /notifications/templates validates its body', async (t) => {
    const tenant = await h.createTenant()
    const base = { name: 'X', channel: 'email', body: 'hi' }
    const cases: [string, unknown, string][] = [
      ['name missing', { channel: 'email', body: 'hi' }, 'name'],
      ['channel missing', { name: 'X', body: 'hi' }, 'channel'],
      ['body missing', { name: 'X', channel: 'email' }, 'body'],
      ['empty name', { ...base, name: '' }, 'name'],
      ['empty body', { ...base, body: '' }, 'body'],
      ['unknown channel', { ...base, channel: 'sms' }, 'channel'],
      ['unknown locale', { ...base, locale: 'fr' }, 'locale'],
      ['subject not a string', { ...base, subject: 12 }, 'subject'],
      ['variables not an array', { ...base, variables: 'name' }, 'variables'],
      ['variables not strings', { ...base, variables: ['ok', 3] }, 'variables.1'],
      ['body not a string', { ...base, body: 7 }, 'body'],
    ]
    for (const [label, body, field] of cases) {
      const res = await h.request('POST', '/notifications/templates', { key: tenant.key, body })
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST', label)
      t.ok(fieldsOf(res.body).includes(field), `${label}: names ${field} (got ${fieldsOf(res.body)})`)
    }
    const list = await h.request('GET', '/notifications/templates', { key: tenant.key })
    t.equal(list.body.total, 0, 'nothing was created')
  })

  t.test('GET /notifications/templates pages newest first with total', async (t) => {
    const tenant = await h.createTenant()
    const ids: string[] = []
    for (let i = 0; i < 23; i++) ids.push((await createTemplate(tenant, { name: `T${i}` })).id)
    const newestFirst = [...ids].reverse()
    const first = await h.request('GET', '/notifications/templates', { key: tenant.key })
    t.equal(first.status, 200)
    t.same(Object.keys(first.body).sort(), ['templates', 'total'])
    t.equal(first.body.total, 23)
    t.same(first.body.templates.map((x: any) => x.id), newestFirst.slice(0, 20), 'limit defaults to 20')
    const rest = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { limit: 5, offset: 20 } })
    t.same(rest.body.templates.map((x: any) => x.id), newestFirst.slice(20))
    t.equal(rest.body.total, 23)
    const beyond = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { offset: 23 } })
    t.same(beyond.body, { templates: [], total: 23 })
  })

  t.test('GET /notifications/templates validates its query', async (t) => {
    const tenant = await h.createTenant()
    const bad: Record<string, string | number>[] = [
      { limit: 0 },
      { limit: 101 },
      { offset: -1 },
      { channel: 'sms' },
      { active: 'maybe' },
    ]
    for (const query of bad) {
      const res = await h.request('GET', '/notifications/templates', { key: tenant.key, query })
      t.equal(res.status, 400, JSON.stringify(query))
      t.equal(res.body.code, 'BAD_REQUEST')
      t.ok(fieldsOf(res.body).includes(Object.keys(query)[0]!), `names ${Object.keys(query)[0]}`)
    }
    const ok = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { limit: 100, offset: 0 } })
    t.equal(ok.status, 200)
  })

  t.test('the list filters by channel and by active (default true)', async (t) => {
    const tenant = await h.createTenant()
    const email = await createTemplate(tenant, { channel: 'email' })
    const push = await createTemplate(tenant, { channel: 'push' })
    const gone = await createTemplate(tenant, { channel: 'push' })
    t.equal((await h.request('DELETE', `/notifications/templates/${gone.id}`, { key: tenant.key })).status, 200)

    const active = await h.request('GET', '/notifications/templates', { key: tenant.key })
    t.same(active.body.templates.map((x: any) => x.id), [push.id, email.id])
    t.equal(active.body.total, 2)
    const explicitTrue = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { active: true } })
    t.same(explicitTrue.body, active.body)
    const inactive = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { active: false } })
    t.same(inactive.body.templates.map((x: any) => x.id), [gone.id])
    t.equal(inactive.body.total, 1)
    t.equal(inactive.body.templates[0].active, false)
    const pushOnly = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { channel: 'push' } })
    t.same(pushOnly.body.templates.map((x: any) => x.id), [push.id])
    const inactivePush = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { channel: 'push', active: false } })
    t.same(inactivePush.body.templates.map((x: any) => x.id), [gone.id])
    const telegram = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { channel: 'telegram' } })
    t.same(telegram.body, { templates: [], total: 0 })
  })

  t.test('lists and creates act on the resolved brand', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const main = await createTemplate(tenant)
    const inSecond = await createTemplate(tenant, { brand: second.id })
    const mainList = await h.request('GET', '/notifications/templates', { key: tenant.key })
    t.same(mainList.body.templates.map((x: any) => x.id), [main.id])
    const secondList = await h.request('GET', '/notifications/templates', { key: tenant.key, headers: { 'x-brand': 'second' } })
    t.same(secondList.body.templates.map((x: any) => x.id), [inSecond.id])
    const unknown = await h.request('GET', '/notifications/templates', { key: tenant.key, query: { brand: 'nope' } })
    t.equal(unknown.status, 400)
    t.equal((await h.request('GET', `/notifications/templates/${inSecond.id}`, { key: tenant.key })).status, 200)
  })

  t.test('PATCH re-extracts variables when subject or body change', async (t) => {
    const tenant = await h.createTenant()
    const tpl = await createTemplate(tenant, { subject: 'Hi {{name}}', body: 'Code {{code}}', variables: ['extra'] })
    t.same(tpl.variables, ['name', 'code', 'extra'])

    const body = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: { body: 'Amount {{amount}}' } })
    t.equal(body.status, 200)
    t.equal(body.body.data.body, 'Amount {{amount}}')
    t.same(body.body.data.variables, ['name', 'amount', 'extra'], 'stale placeholders drop out; declared names stay')

    const subject = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: { subject: null } })
    t.equal(subject.body.data.subject, null)
    t.same(subject.body.data.variables, ['amount', 'extra'])

    const declared = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: { variables: ['x'] } })
    t.same(declared.body.data.variables, ['amount', 'x'], 'new declared names replace the old ones')

    const cleared = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: { variables: [] } })
    t.same(cleared.body.data.variables, ['amount'], 'placeholders always stay')

    const rename = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: { name: 'Renamed' } })
    t.same(rename.body.data.variables, ['amount'], 'other changes leave variables alone')
  })

  t.test('PATCH updates any field and keeps the rest', async (t) => {
    const tenant = await h.createTenant()
    const tpl = await createTemplate(tenant, { subject: 'S' })
    await new Promise((r) => setTimeout(r, 5))
    const res = await h.request('PATCH', `/notifications/templates/${tpl.id}`, {
      key: tenant.key,
      body: { name: 'Push version', channel: 'push', locale: 'es', active: false },
    })
    t.equal(res.status, 200)
    const u = res.body.data
    t.equal(u.name, 'Push version')
    t.equal(u.channel, 'push')
    t.equal(u.locale, 'es')
    t.equal(u.active, false)
    t.equal(u.subject, 'S')
    t.equal(u.body, tpl.body)
    t.same(u.variables, tpl.variables)
    t.equal(u.created_at, tpl.created_at)
    t.ok(Date.parse(u.updated_at) > Date.parse(tpl.updated_at))
    const reactivated = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: { active: true } })
    t.equal(reactivated.body.data.active, true)
    const noop = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body: {} })
    t.equal(noop.status, 200)
    t.same(noop.body.data, reactivated.body.data)
  })

  t.test('PATCH validates its body', async (t) => {
    const tenant = await h.createTenant()
    const tpl = await createTemplate(tenant)
    const cases: [string, unknown, string][] = [
      ['unknown channel', { channel: 'fax' }, 'channel'],
      ['unknown locale', { locale: 'de' }, 'locale'],
      ['empty body', { body: '' }, 'body'],
      ['body null', { body: null }, 'body'],
      ['active not boolean', { active: 'yes' }, 'active'],
      ['variables not strings', { variables: [1] }, 'variables.0'],
      ['empty name', { name: '' }, 'name'],
    ]
    for (const [label, body, field] of cases) {
      const res = await h.request('PATCH', `/notifications/templates/${tpl.id}`, { key: tenant.key, body })
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.ok(fieldsOf(res.body).includes(field), `${label}: names ${field} (got ${fieldsOf(res.body)})`)
    }
    const got = await h.request('GET', `/notifications/templates/${tpl.id}`, { key: tenant.key })
    t.same(got.body.data, tpl, 'nothing changed')
  })

  t.test('DELETE deactivates: the template stays readable with active false', async (t) => {
    const tenant = await h.createTenant()
    const tpl = await createTemplate(tenant)
    const res = await h.request('DELETE', `/notifications/templates/${tpl.id}`, { key: tenant.key })
    t.equal(res.status, 200)
    t.equal(res.body.data.id, tpl.id)
    t.equal(res.body.data.active, false)
    const got = await h.request('GET', `/notifications/templates/${tpl.id}`, { key: tenant.key })
    t.equal(got.status, 200)
    t.equal(got.body.data.active, false)
    const again = await h.request('DELETE', `/notifications/templates/${tpl.id}`, { key: tenant.key })
    t.equal(again.status, 200, 'deleting again is harmless')
    t.equal(again.body.data.active, false)
  })

  t.test('by-id routes: 404 for unknown ids, 400 for malformed ones', async (t) => {
    const tenant = await h.createTenant()
    for (const [method, body] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as [string, unknown?][]) {
      const unknown = await h.request(method, `/notifications/templates/${UNKNOWN_ID}`, { key: tenant.key, body })
      t.equal(unknown.status, 404, method)
      t.equal(unknown.body.code, 'NOT_FOUND')
      const malformed = await h.request(method, '/notifications/templates/abc', { key: tenant.key, body })
      t.equal(malformed.status, 404, method)
      t.equal(malformed.body.code, 'NOT_FOUND')
    }
  })

  t.test("another tenant's key gets 404, and its lists stay empty", async (t) => {
    const owner = await h.createTenant()
    const stranger = await h.createTenant()
    const tpl = await createTemplate(owner)
    for (const [method, body] of [['GET'], ['PATCH', { name: 'hijack' }], ['DELETE']] as [string, unknown?][]) {
      const res = await h.request(method, `/notifications/templates/${tpl.id}`, { key: stranger.key, body })
      t.equal(res.status, 404, method)
      t.equal(res.body.code, 'NOT_FOUND')
    }
    const list = await h.request('GET', '/notifications/templates', { key: stranger.key })
    t.same(list.body, { templates: [], total: 0 })
    const got = await h.request('GET', `/notifications/templates/${tpl.id}`, { key: owner.key })
    t.same(got.body.data, tpl, 'untouched')
  })

  t.test('a brand-pinned key sees and writes only its own brand', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = await tenant.createKey({ brand: second.id })
    const inMain = await createTemplate(tenant)
    for (const [method, body] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as [string, unknown?][]) {
      const res = await h.request(method, `/notifications/templates/${inMain.id}`, { key: pinned.key, body })
      t.equal(res.status, 404, method)
    }
    const own = await createTemplate(tenant, { brand: tenant.brand.slug }, pinned.key)
    const row = await h.app.ctx.sql<{ brand_id: string }[]>`select brand_id from notification_templates where id = ${own.id}`
    t.equal(row[0]!.brand_id, second.id, 'the pin wins over the body hint')
    const list = await h.request('GET', '/notifications/templates', { key: pinned.key, headers: { 'x-brand': tenant.brand.slug } })
    t.same(list.body.templates.map((x: any) => x.id), [own.id])
    t.equal((await h.request('PATCH', `/notifications/templates/${own.id}`, { key: pinned.key, body: { name: 'mine' } })).status, 200)
    t.equal((await h.request('GET', `/notifications/templates/${inMain.id}`, { key: tenant.key })).body.data.active, true)
  })

  t.test('a read-only key may read but not write', async (t) => {
    const tenant = await h.createTenant()
    const ro = await tenant.createKey({ scopes: ['read'] })
    const tpl = await createTemplate(tenant)
    t.equal((await h.request('GET', '/notifications/templates', { key: ro.key })).status, 200)
    t.equal((await h.request('GET', `/notifications/templates/${tpl.id}`, { key: ro.key })).status, 200)
    const writes: [string, string, unknown?][] = [
      ['POST', '/notifications/templates', { name: 'x', channel: 'email', body: 'b' }],
      ['PATCH', `/notifications/templates/${tpl.id}`, { name: 'y' }],
      ['DELETE', `/notifications/templates/${tpl.id}`],
    ]
    for (const [method, path, body] of writes) {
      const res = await h.request(method, path, { key: ro.key, body })
      t.equal(res.status, 403, `${method} ${path}`)
      t.equal(res.body.code, 'FORBIDDEN')
    }
    t.equal((await h.request('GET', '/notifications/templates')).status, 401, 'no key')
  })

  t.test('the OpenAPI document lists every template route', async (t) => {
    const res = await h.request('GET', '/openapi.json')
    const paths = res.body.paths
    t.same(Object.keys(paths['/api/v1/notifications/templates']).sort(), ['get', 'post'])
    t.same(Object.keys(paths['/api/v1/notifications/templates/{id}']).sort(), ['delete', 'get', 'patch'])
    t.ok(res.body.components.schemas.NotificationTemplate)
  })
})

// Brand channel and delivery settings: validation naming each field, the URL policy on every outbound
// target (here with WEBHOOK_ALLOW_PRIVATE off), secrets write-only, scopes and brand/tenant isolation.
t.test('settings', async (t) => {
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
})

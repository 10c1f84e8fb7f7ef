// Direct sends, the send rules, the in-app inbox, templates and notification settings, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { enqueueNotification, enqueueNotificationBatched, campaignDeliveryStats } from '../../src/notifications/service.ts'
import { startOfDay } from '../../src/lib/zoned-time.ts'
import { lockSendGate } from '../../src/lib/send-gate.ts'
import { ingest, makePlayer, send, waitForStatus, outboxOf, openInboxSocket } from './delivery-helpers.ts'
import { rawRequest } from '../helpers/raw-http.ts'

const h = await startHarness(t)

t.test('send', async (t) => {
  const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'

  /** The players API is another feature: insert the row directly. */
  async function makePlayer(tenant: TestTenant, brandId = tenant.brand.id): Promise<string> {
    const [row] = await h.app.ctx.sql<{ id: string }[]>`
    insert into players (tenant_id, brand_id, external_id)
    values (${tenant.id}, ${brandId}, ${`ext-${Math.random().toString(36).slice(2)}`}) returning id`
    return row!.id
  }

  async function makeTemplate(tenant: TestTenant, body: Record<string, unknown> = {}) {
    const res = await h.request('POST', '/notifications/templates', {
      key: tenant.key,
      body: { name: 'T', channel: 'email', subject: 'Hi {{name}}', body: 'Hello {{name}}', ...body },
    })
    if (res.status !== 201) throw new Error(res.text)
    return res.body.data
  }

  /** A send without a template carries its message in the payload. */
  const send = (key: string, body: Record<string, unknown>) =>
    h.request('POST', '/notifications/send', { key, body: body.template_id || body.payload !== undefined ? body : { ...body, payload: { body: 'Hello' } } })
  const fieldsOf = (body: any) => (body.details?.errors ?? []).map((e: { field: string }) => e.field)

  t.test('POST /notifications/send queues a notification and answers 202', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const tpl = await makeTemplate(tenant)
    await h.app.ctx.sql`insert into player_profiles (player_id, tenant_id, brand_id, consent) values (${playerId}, ${tenant.id}, ${tenant.brand.id}, ${h.app.ctx.sql.json({ email: { granted: true, at: '2026-01-01T00:00:00Z' } })}) on conflict (player_id) do update set consent = excluded.consent`
    await h.app.ctx.sql`update players set email = 'ada@example.com' where id = ${playerId}`
    const res = await send(tenant.key, { player_id: playerId, channel: 'email', template_id: tpl.id, payload: { name: 'Ada', nested: { n: 1 } } })
    t.equal(res.status, 202)
    t.same(Object.keys(res.body).sort(), ['data', 'notification_id', 'queued'])
    t.equal(res.body.queued, true)
    const n = res.body.data
    t.equal(res.body.notification_id, n.id)
    t.same(Object.keys(n).sort(), [
      'attempts', 'campaign_id', 'channel', 'class', 'clicked_at', 'created_at', 'delivered_at', 'error', 'id', 'opened_at', 'payload', 'player_id', 'reason',
      'scheduled_at', 'sent_at', 'status', 'template_id', 'tenant_id', 'updated_at',
    ])
    t.equal(n.class, 'marketing')
    t.equal(n.attempts, 0)
    t.equal(n.tenant_id, tenant.id)
    t.equal(n.player_id, playerId)
    t.equal(n.channel, 'email')
    t.equal(n.template_id, tpl.id)
    t.same(n.payload, { name: 'Ada', nested: { n: 1 } })
    t.equal(n.status, 'queued')
    t.ok(!Number.isNaN(Date.parse(n.scheduled_at)))
    t.ok(!Number.isNaN(Date.parse(n.created_at)))

    const rows = await h.app.ctx.sql<{ status: string; brand_id: string; template_id: string }[]>`
    select status, brand_id, template_id from notifications where id = ${n.id}`
    t.equal(rows.length, 1, 'the record is stored')
    // Delivery is asynchronous: the dispatcher may already have taken it (the brand has no email settings,
    // so it fails there; test/notifications/email.test.ts delivers for real).
    t.ok(['queued', 'failed'].includes(rows[0]!.status), rows[0]!.status)
    t.equal(rows[0]!.brand_id, tenant.brand.id)
  })

  t.test('a send without a template carries its body in the payload (required)', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const bare = await h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: playerId, channel: 'in_app' } })
    t.equal(bare.status, 400)
    t.ok(fieldsOf(bare.body).includes('payload.body'))
    const badSubject = await send(tenant.key, { player_id: playerId, channel: 'in_app', payload: { body: 'x', subject: 3 } })
    t.ok(fieldsOf(badSubject.body).includes('payload.subject'))
    for (const channel of ['email', 'telegram', 'push', 'in_app']) {
      const res = await send(tenant.key, { player_id: playerId, channel, payload: { subject: 'S', body: 'B' } })
      t.equal(res.status, 202, channel)
      t.equal(res.body.data.channel, channel)
      t.equal(res.body.data.template_id, null)
      t.same(res.body.data.payload, { subject: 'S', body: 'B' })
    }
    const count = await h.app.ctx.sql<{ n: number }[]>`select count(*)::int as n from notifications where player_id = ${playerId}`
    t.equal(count[0]!.n, 4)
  })

  t.test('POST /notifications/send validates its body', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const cases: [string, Record<string, unknown>, string][] = [
      ['player_id missing', { channel: 'email' }, 'player_id'],
      ['channel missing', { player_id: playerId }, 'channel'],
      ['player_id not a uuid', { player_id: 'ext-1', channel: 'email' }, 'player_id'],
      ['unknown channel', { player_id: playerId, channel: 'sms' }, 'channel'],
      ['template_id not a uuid', { player_id: playerId, channel: 'email', template_id: 'welcome' }, 'template_id'],
      ['payload not an object', { player_id: playerId, channel: 'email', payload: 'hi' }, 'payload'],
      ['payload an array', { player_id: playerId, channel: 'email', payload: [1] }, 'payload'],
    ]
    for (const [label, body, field] of cases) {
      const res = await send(tenant.key, body)
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.ok(fieldsOf(res.body).includes(field), `${label}: names ${field} (got ${fieldsOf(res.body)})`)
    }
    const count = await h.app.ctx.sql<{ n: number }[]>`select count(*)::int as n from notifications where tenant_id = ${tenant.id}`
    t.equal(count[0]!.n, 0, 'nothing was queued')
  })

  t.test('404 when the player or the template is not found in the tenant', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const othersPlayer = await makePlayer(other)
    const othersTemplate = await makeTemplate(other)

    const unknownPlayer = await send(tenant.key, { player_id: UNKNOWN_ID, channel: 'email' })
    t.equal(unknownPlayer.status, 404)
    t.equal(unknownPlayer.body.code, 'NOT_FOUND')
    const foreignPlayer = await send(tenant.key, { player_id: othersPlayer, channel: 'email' })
    t.equal(foreignPlayer.status, 404, "another tenant's player")
    const unknownTemplate = await send(tenant.key, { player_id: playerId, channel: 'email', template_id: UNKNOWN_ID })
    t.equal(unknownTemplate.status, 404)
    t.equal(unknownTemplate.body.code, 'NOT_FOUND')
    const foreignTemplate = await send(tenant.key, { player_id: playerId, channel: 'email', template_id: othersTemplate.id })
    t.equal(foreignTemplate.status, 404, "another tenant's template")

    const count = await h.app.ctx.sql<{ n: number }[]>`
    select count(*)::int as n from notifications where tenant_id in (${tenant.id}, ${other.id})`
    t.equal(count[0]!.n, 0, 'nothing was queued')
  })

  t.test('the template must be active and of the requested channel', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const pushTpl = await makeTemplate(tenant, { channel: 'push' })
    const mismatch = await send(tenant.key, { player_id: playerId, channel: 'email', template_id: pushTpl.id })
    t.equal(mismatch.status, 400)
    t.equal(mismatch.body.code, 'BAD_REQUEST')
    t.same(mismatch.body.details, { reason: 'CHANNEL_MISMATCH', channel: 'email', template_channel: 'push' })

    const gone = await makeTemplate(tenant)
    await h.request('DELETE', `/notifications/templates/${gone.id}`, { key: tenant.key })
    const inactive = await send(tenant.key, { player_id: playerId, channel: 'email', template_id: gone.id })
    t.equal(inactive.status, 400)
    t.same(inactive.body.details, { reason: 'TEMPLATE_INACTIVE', template_id: gone.id })
  })

  t.test('a tenant-wide key may send to a player of any of its brands', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const playerId = await makePlayer(tenant, second.id)
    const res = await send(tenant.key, { player_id: playerId, channel: 'push' })
    t.equal(res.status, 202)
    const rows = await h.app.ctx.sql<{ brand_id: string }[]>`select brand_id from notifications where id = ${res.body.notification_id}`
    t.equal(rows[0]!.brand_id, second.id, "the notification takes the player's brand")
    const mainTemplate = await makeTemplate(tenant, { channel: 'push' })
    const crossBrand = await send(tenant.key, { player_id: playerId, channel: 'push', template_id: mainTemplate.id })
    t.equal(crossBrand.status, 202, "a template of another of the tenant's brands may be used")
  })

  t.test("a brand-pinned key sends only to its brand's players, with its brand's templates", async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = await tenant.createKey({ brand: second.slug })
    const mainPlayer = await makePlayer(tenant)
    const ownPlayer = await makePlayer(tenant, second.id)
    const mainTemplate = await makeTemplate(tenant)

    const otherBrandPlayer = await send(pinned.key, { player_id: mainPlayer, channel: 'email' })
    t.equal(otherBrandPlayer.status, 404)
    const otherBrandTemplate = await send(pinned.key, { player_id: ownPlayer, channel: 'email', template_id: mainTemplate.id })
    t.equal(otherBrandTemplate.status, 404)
    const ok = await send(pinned.key, { player_id: ownPlayer, channel: 'email' })
    t.equal(ok.status, 202)
  })

  t.test('a read-only key cannot send; no key is 401', async (t) => {
    const tenant = await h.createTenant()
    const playerId = await makePlayer(tenant)
    const ro = await tenant.createKey({ scopes: ['read'] })
    const res = await send(ro.key, { player_id: playerId, channel: 'email' })
    t.equal(res.status, 403)
    t.equal(res.body.code, 'FORBIDDEN')
    const ingest = await tenant.createKey({ scopes: ['events:write'] })
    t.equal((await send(ingest.key, { player_id: playerId, channel: 'email' })).status, 403)
    t.equal((await h.request('POST', '/notifications/send', { body: { player_id: playerId, channel: 'email' } })).status, 401)
  })

  t.test('the OpenAPI document describes the send route with its 202 response', async (t) => {
    const res = await h.request('GET', '/openapi.json')
    const op = res.body.paths['/api/v1/notifications/send'].post
    t.ok(op.responses['202'], '202 documented')
    t.ok(op.responses['404'], '404 documented: player or template not found')
    t.ok(res.body.components.schemas.QueuedNotification)
    const { Validator } = await import('@seriousme/openapi-schema-validator')
    const result = await new Validator().validate(res.body)
    t.same(result.errors ?? [], [], 'the whole document still validates')
    t.equal(result.valid, true)
  })
})

// The send rules end to end (in-app, so no peer is needed): every suppression reason, transactional vs
// marketing, consent from consent_update events, caps counted in the player's zone, quiet hours holding
// a message and the re-check at dispatch, the campaign enqueue's idempotency.
t.test('send-rules', async (t) => {
  const trySend = (key: string, body: Record<string, unknown>) => h.request('POST', '/notifications/send', { key, body: { channel: 'in_app', payload: { body: 'x' }, ...body } })

  t.test('player status: marketing only to active players; transactional never to closed ones', async (t) => {
    const tenant = await h.createTenant()
    for (const status of ['self_excluded', 'suspended', 'closed']) {
      const p = await makePlayer(h, tenant, { status })
      const res = await trySend(tenant.key, { player_id: p.id })
      t.equal(res.status, 202)
      t.equal(res.body.queued, false, status)
      t.match(res.body.data, { status: 'suppressed', reason: status, class: 'marketing' })
      const tx = await trySend(tenant.key, { player_id: p.id, class: 'transactional' })
      if (status === 'closed') t.match(tx.body.data, { status: 'suppressed', reason: 'closed' })
      else t.equal((await waitForStatus(h, tenant, tx.body.notification_id, ['delivered', 'suppressed'])).status, 'delivered', `transactional to ${status}`)
    }
  })

  t.test('consent: from consent_update events, and the brand policy', async (t) => {
    const tenant = await h.createTenant()
    const p = await makePlayer(h, tenant)
    t.equal((await trySend(tenant.key, { player_id: p.id })).body.queued, true, 'in_app is opt-out by default')
    await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'consent_update', payload: { channel: 'in_app', granted: false } }])
    t.match((await trySend(tenant.key, { player_id: p.id })).body.data, { status: 'suppressed', reason: 'no_consent' })
    await ingest(h, tenant, [{ player_id: p.externalId, event_type: 'consent_update', payload: { channel: 'in_app', granted: true } }])
    t.equal((await trySend(tenant.key, { player_id: p.id })).body.queued, true)

    const q = await makePlayer(h, tenant, { email: 'q@example.com' })
    t.match((await trySend(tenant.key, { player_id: q.id, channel: 'email' })).body.data, { reason: 'no_consent' }, 'email is opt-in by default')
    const put = await h.request('PUT', '/settings/delivery', { key: tenant.key, body: { consent_policy: { in_app: 'opt_in' } } })
    t.equal(put.status, 200)
    t.same(put.body.data, { frequency_caps: [], quiet_hours: null, consent_policy: { email: 'opt_in', telegram: 'opt_in', push: 'opt_out', in_app: 'opt_in' } })
    t.match((await trySend(tenant.key, { player_id: q.id })).body.data, { reason: 'no_consent' })
  })

  t.test('no address: email without one, telegram without a chat id, push without a subscription', async (t) => {
    const tenant = await h.createTenant()
    const p = await makePlayer(h, tenant, { consent: ['email', 'telegram'] })
    for (const channel of ['email', 'telegram', 'push']) {
      t.match((await trySend(tenant.key, { player_id: p.id, channel })).body.data, { status: 'suppressed', reason: 'no_address' }, channel)
    }
  })

  t.test('a missing variable without fallback fails the message', async (t) => {
    const tenant = await h.createTenant()
    const p = await makePlayer(h, tenant)
    const sent = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'Code {{code}} for {{name}}' } })
    t.match(await waitForStatus(h, tenant, sent.notification_id, ['failed', 'delivered']), { status: 'failed', error: 'missing variable: code' })
  })

  t.test('the template in the player language is used when there is one', async (t) => {
    const tenant = await h.createTenant()
    const p = await makePlayer(h, tenant, { language: 'it' })
    const en = await h.request('POST', '/notifications/templates', { key: tenant.key, body: { name: 'welcome', channel: 'in_app', subject: 'Welcome', body: 'Hello {{name}}' } })
    await h.request('POST', '/notifications/templates', { key: tenant.key, body: { name: 'welcome', channel: 'in_app', locale: 'it', subject: 'Benvenuto', body: 'Ciao {{name}}' } })
    const sent = await send(h, tenant, { player_id: p.id, channel: 'in_app', template_id: en.body.data.id })
    await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
    const inbox = await h.request('GET', `/players/${p.id}/inbox`, { key: tenant.key })
    t.match(inbox.body.data[0], { subject: 'Benvenuto', body: 'Ciao Ada' })
  })

  t.test('frequency caps count marketing messages per day in the player zone', async (t) => {
    const tenant = await h.createTenant()
    await h.request('PUT', '/settings/delivery', { key: tenant.key, body: { frequency_caps: [{ channel: 'in_app', max: 2, per: 'day' }] } })
    const p = await makePlayer(h, tenant, { timezone: 'Asia/Tokyo' })
    // Delivered just before today's midnight in Tokyo: yesterday there, so it does not count today.
    const midnight = startOfDay(new Date(), 'Asia/Tokyo')
    await h.app.ctx.sql`
    insert into notifications (tenant_id, brand_id, player_id, channel, status, class, sent_at, delivered_at)
    values (${tenant.id}, ${tenant.brand.id}, ${p.id}, 'in_app', 'delivered', 'marketing', ${new Date(midnight.getTime() - 60_000)}, ${new Date(midnight.getTime() - 60_000)}),
           (${tenant.id}, ${tenant.brand.id}, ${p.id}, 'in_app', 'delivered', 'marketing', ${new Date(midnight.getTime() + 60_000)}, ${new Date(midnight.getTime() + 60_000)})`
    const first = await send(h, tenant, { player_id: p.id, channel: 'in_app', payload: { body: 'one' } })
    t.equal((await waitForStatus(h, tenant, first.notification_id, ['delivered', 'suppressed'])).status, 'delivered', 'one today so far: under the cap of 2')
    const second = await trySend(tenant.key, { player_id: p.id })
    t.match(second.body.data, { status: 'suppressed', reason: 'frequency_cap' })
    const tx = await trySend(tenant.key, { player_id: p.id, class: 'transactional' })
    t.equal(tx.body.queued, true, 'transactional is not capped')
    const put = await h.request('PUT', '/settings/delivery', { key: tenant.key, body: { frequency_caps: [{ channel: 'email', max: 1, per: 'week' }] } })
    t.equal(put.status, 200)
    t.equal((await trySend(tenant.key, { player_id: p.id })).body.queued, true, 'a cap of another channel does not apply')
  })

  t.test('messages due together are checked together: each one sent counts against the next', async (t) => {
    const tenant = await h.createTenant()
    await h.request('PUT', '/settings/delivery', { key: tenant.key, body: { frequency_caps: [{ channel: 'in_app', max: 2, per: 'day' }] } })
    const p = await makePlayer(h, tenant)
    // Queued straight into the table in one statement (as if enqueued while nothing was in flight), so the
    // dispatcher finds them due at once and checks them in one batch.
    const rows = await h.app.ctx.sql<{ id: string }[]>`
    insert into notifications (tenant_id, brand_id, player_id, channel, status, class, content, payload)
    select ${tenant.id}, ${tenant.brand.id}, ${p.id}, 'in_app', 'queued', 'marketing', ${h.app.ctx.sql.json({ body: 'hi' })}, '{}'
    from generate_series(1, 3)
    returning id`
    h.app.ctx.delivery?.wake()
    const ended = await Promise.all(rows.map((r) => waitForStatus(h, tenant, r.id, ['delivered', 'suppressed'])))
    t.same(ended.map((n) => n.status).sort(), ['delivered', 'delivered', 'suppressed'])
    t.equal(ended.find((n) => n.status === 'suppressed').reason, 'frequency_cap')
  })

  t.test('quiet hours hold a message; the re-check at dispatch stops it when the player self-excluded meanwhile', async (t) => {
    const tenant = await h.createTenant()
    const now = new Date()
    const hhmm = (d: Date) => d.toISOString().slice(11, 16)
    // A window around now, in UTC.
    await h.request('PUT', '/settings/delivery', {
      key: tenant.key,
      body: { quiet_hours: { start: hhmm(new Date(now.getTime() - 3600_000)), end: hhmm(new Date(now.getTime() + 3600_000)), timezone: 'UTC' } },
    })
    const held = await makePlayer(h, tenant)
    const free = await makePlayer(h, tenant)
    const a = await send(h, tenant, { player_id: held.id, channel: 'in_app', payload: { body: 'held' } })
    const b = await send(h, tenant, { player_id: free.id, channel: 'in_app', payload: { body: 'later' } })
    t.equal(a.data.status, 'queued')
    const until = Date.parse(a.data.scheduled_at)
    t.ok(until > now.getTime() + 3500_000 && until <= now.getTime() + 3600_000, 'scheduled_at says until when')
    await new Promise((r) => setTimeout(r, 700))
    t.equal((await waitForStatus(h, tenant, a.notification_id, ['queued'])).status, 'queued', 'still held')

    await ingest(h, tenant, [{ player_id: held.externalId, event_type: 'status_change', payload: { status: 'self_excluded' } }])
    // The quiet hours end: the settings drop them and the held messages come due.
    await h.request('PUT', '/settings/delivery', { key: tenant.key, body: {} })
    await h.app.ctx.sql`update notifications set due_at = now() where id in (${a.notification_id}, ${b.notification_id})`
    h.app.ctx.delivery?.wake()
    t.match(await waitForStatus(h, tenant, a.notification_id, ['suppressed', 'delivered']), { status: 'suppressed', reason: 'self_excluded', delivered_at: null })
    t.equal((await waitForStatus(h, tenant, b.notification_id, ['suppressed', 'delivered'])).status, 'delivered', 'the other one is sent when they end')
  })

  t.test('a status or consent change waits for a send being checked for that player, and a send after it sees it', { skip: !process.env.DATABASE_URL && 'needs a second connection (PostgreSQL server)' }, async (t) => {
    const tenant = await h.createTenant()
    const sql = h.app.ctx.sql
    const status = async (id: string) => (await sql<{ status: string }[]>`select status from players where id = ${id}`)[0]?.status
    const consent = async (id: string) => (await sql<{ c: unknown }[]>`select consent->'in_app'->'granted' as c from player_profiles where player_id = ${id}`)[0]?.c
    /** Runs `change` while a send's transaction holds the player's gate (lib/send-gate.ts); returns what it saw. */
    async function whileSending(playerId: string, change: () => Promise<{ status: number; text: string }>, committed: () => Promise<unknown>) {
      const send = await sql.reserve()
      try {
        await send`begin`
        await lockSendGate(send, [playerId])
        let settled = false
        const pending = change().finally(() => (settled = true))
        let waited = false
        for (let i = 0; i < 120 && !waited && !settled; i++) {
          waited = (await sql`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'advisory'`).length > 0
          if (!waited) await new Promise((r) => setTimeout(r, 25))
        }
        const during = await committed()
        await send`commit`
        const res = await pending
        return { waited, during, res, after: await committed() }
      } finally {
        send.release()
      }
    }
    const a = await makePlayer(h, tenant)
    const viaEvent = await whileSending(a.id, () => h.request('POST', '/events', { key: tenant.key, body: { events: [
      { event_id: `se-${a.id}`, player_id: a.externalId, event_type: 'status_change', payload: { status: 'self_excluded' } }] } }), () => status(a.id))
    t.match(viaEvent, { waited: true, during: 'active', res: { status: 200 }, after: 'self_excluded' }, 'status_change event: waited for the send, then applied')

    const b = await makePlayer(h, tenant)
    const viaApi = await whileSending(b.id, () => h.request('PATCH', `/players/${b.id}`, { key: tenant.key, body: { status: 'suspended' } }), () => status(b.id))
    t.match(viaApi, { waited: true, during: 'active', res: { status: 200 }, after: 'suspended' }, 'PATCH /players: waited for the send, then applied')

    const c = await makePlayer(h, tenant, { consent: ['in_app'] })
    const viaConsent = await whileSending(c.id, () => h.request('POST', '/events', { key: tenant.key, body: { events: [
      { event_id: `cu-${c.id}`, player_id: c.externalId, event_type: 'consent_update', payload: { channel: 'in_app', granted: false } }] } }), () => consent(c.id))
    t.match(viaConsent, { waited: true, during: true, res: { status: 200 }, after: false }, 'consent_update event: waited for the send, then applied')
    // The other side: a send checked after the change sees it.
    t.match((await trySend(tenant.key, { player_id: a.id })).body.data, { status: 'suppressed', reason: 'self_excluded' })
    t.match((await trySend(tenant.key, { player_id: c.id })).body.data, { status: 'suppressed', reason: 'no_consent' })

    // Events that change neither wait for nothing.
    const d = await makePlayer(h, tenant)
    const plain = await whileSending(d.id, () => h.request('POST', '/events', { key: tenant.key, body: { events: [
      { event_id: `bet-${d.id}`, player_id: d.externalId, event_type: 'bet', payload: { amount: 1, currency: 'EUR' } }] } }), () => status(d.id))
    t.match(plain, { waited: false, res: { status: 200 } }, 'a bet does not wait for sends')
  })

  t.test('enqueueNotification: idempotent per key inside a caller transaction; cancelled campaigns suppress; stats', async (t) => {
    const tenant = await h.createTenant()
    const p = await makePlayer(h, tenant)
    const sql = h.app.ctx.sql
    const [campaign] = await sql<{ id: string }[]>`
    insert into campaigns (tenant_id, brand_id, name, type, channels, status) values (${tenant.id}, ${tenant.brand.id}, 'c', 'one_shot', '{in_app}', 'running') returning id`
    const input = {
      tenantId: tenant.id, brandId: tenant.brand.id, playerId: p.id, channel: 'in_app' as const, content: { subject: 'S', body: 'B' },
      campaignId: campaign!.id, idempotencyKey: `${campaign!.id}:run1:${p.id}:step0:in_app`,
    }
    const first = await sql.begin((tx) => enqueueNotification(tx, h.app.ctx, input))
    const second = await sql.begin((tx) => enqueueNotification(tx, h.app.ctx, input))
    t.equal(first.created, true)
    t.equal(second.created, false)
    t.equal(second.notification.id, first.notification.id)
    const rolledBack = await sql.begin(async (tx) => {
      await enqueueNotification(tx, h.app.ctx, { ...input, idempotencyKey: 'rolled-back' })
      throw new Error('abort')
    }).catch(() => 'aborted')
    t.equal(rolledBack, 'aborted')
    t.equal((await sql`select 1 from notifications where idempotency_key = 'rolled-back'`).length, 0, 'nothing outside the caller transaction')

    const delivered = await waitForStatus(h, tenant, first.notification.id, ['delivered'])
    t.equal(delivered.campaign_id, campaign!.id)
    const [event] = await sql<{ data: any }[]>`select data from outbox where tenant_id = ${tenant.id} and event = 'message.delivered'`
    t.match(event!.data, { notification_id: first.notification.id, campaign_id: campaign!.id, campaign_send_id: first.notification.id })

    await sql`update campaigns set status = 'cancelled' where id = ${campaign!.id}`
    const cancelled = await enqueueNotification(sql, h.app.ctx, { ...input, idempotencyKey: 'after-cancel' })
    t.match(cancelled.notification, { status: 'suppressed', reason: 'campaign_cancelled' })
    t.match(await campaignDeliveryStats(sql, campaign!.id), { delivered: 1, suppressed: 1, queued: 0 })
    const listed = await h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: campaign!.id } })
    t.equal(listed.body.data.length, 2)
  })

  t.test('single sends arriving together are enqueued together, each with its own result and the rules applied to it', async (t) => {
    const tenant = await h.createTenant()
    const active = await Promise.all(Array.from({ length: 4 }, () => makePlayer(h, tenant)))
    const excluded = await makePlayer(h, tenant, { status: 'self_excluded' })
    const calls = [...active, excluded, active[0]!].map((p, i) => ({ p, i }))
    const input = (p: { id: string }, body: string, idempotencyKey?: string) =>
      ({ tenantId: tenant.id, brandId: tenant.brand.id, playerId: p.id, channel: 'in_app' as const, content: { body }, idempotencyKey })
    // Called in one turn of the event loop: one batch, one transaction.
    const res = await Promise.all([
      ...calls.map(({ p, i }) => enqueueNotificationBatched(h.app.ctx.sql, h.app.ctx, input(p, `m${i}`))),
      enqueueNotificationBatched(h.app.ctx.sql, h.app.ctx, input(active[1]!, 'k1', 'same-key')),
      enqueueNotificationBatched(h.app.ctx.sql, h.app.ctx, input(active[1]!, 'k2', 'same-key')),
    ])
    t.same(res.map((r) => r.queued), [true, true, true, true, false, true, true, true], 'the self-excluded player suppressed, the others queued')
    t.match(res[4]!.notification, { player_id: excluded.id, status: 'suppressed', reason: 'self_excluded' })
    t.equal(new Set(res.slice(0, calls.length).map((r) => r.notification.id)).size, calls.length, 'one notification per call')
    const rows = await h.app.ctx.sql<{ id: string; player_id: string; content: { body: string } }[]>`
    select id, player_id, content from notifications where tenant_id = ${tenant.id}`
    t.equal(rows.length, calls.length + 1)
    for (const [k, { p }] of calls.entries()) {
      const row = rows.find((x) => x.id === res[k]!.notification.id)
      t.same([row?.player_id, row?.content.body], [p.id, `m${k}`], `call ${k} got its own notification`)
    }
    t.same([res[6]!.created, res[7]!.created], [true, false], 'one idempotency key, one notification')
    t.equal(res[7]!.notification.id, res[6]!.notification.id)
    for (const r of res.filter((x) => x.queued)) await waitForStatus(h, tenant, r.notification.id, ['delivered'])
  })
})

// inbox: In-app: stored in the inbox, pushed over the inbox WebSocket (a `ws` client), read (first read = open),
// listed with cursors, tokens checked, tenants isolated.
t.test('inbox', async (t) => {
  t.test('an in-app message is delivered to the inbox and pushed to the open socket', async (t) => {
    const tenant = await h.createTenant()
    const player = await makePlayer(h, tenant, { name: 'Ada' })
    const tok = await h.request('POST', `/players/${player.id}/inbox/token`, { key: tenant.key })
    t.equal(tok.status, 201)
    t.ok(Date.parse(tok.body.data.expires_at) > Date.now() + 14 * 60_000)
    const socket = await openInboxSocket(h, tok.body.data.token)
    t.teardown(() => socket.ws.close())

    const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { subject: 'Hi {{name}}', body: 'Welcome <{{ bonus | a gift }}>' } })
    t.equal(sent.queued, true)
    const pushed = await socket.next()
    t.equal(pushed.type, 'message')
    t.match(pushed.data, { id: sent.notification_id, subject: 'Hi Ada', body: 'Welcome <a gift>', campaign_id: null, read_at: null })

    const n = await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
    t.ok(n.delivered_at && n.sent_at)
    t.equal(n.attempts, 1)
    const inbox = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
    t.same(inbox.body.data.map((i: any) => i.id), [sent.notification_id])
    t.same(Object.keys(inbox.body.data[0]).sort(), ['body', 'campaign_id', 'created_at', 'id', 'read_at', 'subject'])

    const read = await h.request('POST', `/players/${player.id}/inbox/${sent.notification_id}/read`, { key: tenant.key })
    t.equal(read.status, 200)
    t.ok(read.body.data.read_at)
    const again = await h.request('POST', `/players/${player.id}/inbox/${sent.notification_id}/read`, { key: tenant.key })
    t.equal(again.body.data.read_at, read.body.data.read_at, 'the first read stays')
    const after = await h.request('GET', `/notifications/${sent.notification_id}`, { key: tenant.key })
    t.ok(after.body.data.opened_at, 'the first read counts as the open')
    const unread = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { unread: true } })
    t.same(unread.body.data, [])

    const events = await outboxOf(h, tenant.id)
    t.same(events.map((e) => e.event), ['message.delivered'], 'no message.opened for in-app')
    t.match(events[0]!.data, { notification_id: sent.notification_id, player_id: player.id, channel: 'in_app' })
  })

  t.test('inbox paging with cursors, newest first', async (t) => {
    const tenant = await h.createTenant()
    const player = await makePlayer(h, tenant)
    const ids: string[] = []
    for (let i = 0; i < 3; i++) ids.push((await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: `m${i}` } })).notification_id)
    for (const id of ids) await waitForStatus(h, tenant, id, ['delivered'])
    const p1 = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 2 } })
    t.same(p1.body.data.map((i: any) => i.body), ['m2', 'm1'])
    const p2 = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 2, cursor: p1.body.next_cursor } })
    t.same(p2.body.data.map((i: any) => i.body), ['m0'])
    t.equal(p2.body.next_cursor, null)
    const forged = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { cursor: 'x.y' } })
    t.equal(forged.status, 400)
    const list = await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, limit: 2 } })
    t.same(list.body.data.map((n: any) => n.id), [ids[2], ids[1]])
    const rest = await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, limit: 2, cursor: list.body.next_cursor } })
    t.same(rest.body.data.map((n: any) => n.id), [ids[0]])
    const byStatus = await h.request('GET', '/notifications', { key: tenant.key, query: { status: 'delivered', channel: 'in_app' } })
    t.equal(byStatus.body.data.length, 3)
    const bad = await h.request('GET', '/notifications', { key: tenant.key, query: { status: 'sent' } })
    t.equal(bad.status, 400)

    // A cursor is a position in the list it came from only: another player's inbox, another filter, another tenant: 400.
    const other = await makePlayer(h, tenant)
    const elsewhere = await h.request('GET', `/players/${other.id}/inbox`, { key: tenant.key, query: { limit: 2, cursor: p1.body.next_cursor } })
    t.equal(elsewhere.status, 400, "one player's inbox cursor in another's")
    t.equal((await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 2, unread: true, cursor: p1.body.next_cursor } })).status, 400, 'with another filter')
    t.equal((await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, status: 'delivered', limit: 2, cursor: list.body.next_cursor } })).status, 400, 'a list cursor with another filter')
    const stranger = await h.createTenant()
    t.equal((await h.request('GET', '/notifications', { key: stranger.key, query: { player_id: player.id, limit: 2, cursor: list.body.next_cursor } })).status, 400, "another tenant's cursor")
  })

  t.test('paging never skips rows created in the same millisecond', async (t) => {
    const tenant = await h.createTenant()
    const player = await makePlayer(h, tenant)
    const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'first' } })
    await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
    // Four copies of it, 100 µs apart within one millisecond: every page boundary falls inside that millisecond.
    await h.app.ctx.sql`
      insert into notifications (tenant_id, brand_id, player_id, channel, class, status, rendered, delivered_at, created_at, updated_at)
      select tenant_id, brand_id, player_id, channel, class, status, jsonb_build_object('subject', null, 'body', 'copy ' || i), delivered_at,
        date_trunc('milliseconds', now()) + i * interval '100 microseconds', now()
      from notifications, generate_series(1, 4) as i where id = ${sent.notification_id}`
    const seen: string[] = []
    for (let cursor: string | undefined, pages = 0; pages < 10; pages++) {
      const page = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key, query: { limit: 1, ...(cursor ? { cursor } : {}) } })
      t.equal(page.status, 200)
      seen.push(...page.body.data.map((i: any) => i.body))
      if (!page.body.next_cursor) break
      cursor = page.body.next_cursor
    }
    t.same(seen, ['copy 4', 'copy 3', 'copy 2', 'copy 1', 'first'])
    const listed: string[] = []
    for (let cursor: string | undefined, pages = 0; pages < 10; pages++) {
      const page = await h.request('GET', '/notifications', { key: tenant.key, query: { player_id: player.id, limit: 2, ...(cursor ? { cursor } : {}) } })
      listed.push(...page.body.data.map((n: any) => n.id))
      if (!page.body.next_cursor) break
      cursor = page.body.next_cursor
    }
    t.equal(new Set(listed).size, 5, 'the list too: every row once')
  })

  t.test('GET /notifications lists the resolved brand only', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const inMain = await makePlayer(h, tenant)
    const [row] = await h.app.ctx.sql<{ id: string }[]>`
      insert into players (tenant_id, brand_id, external_id) values (${tenant.id}, ${second.id}, 'in-second') returning id`
    await h.app.ctx.sql`insert into player_profiles (player_id, tenant_id, brand_id) values (${row!.id}, ${tenant.id}, ${second.id})`
    const a = await send(h, tenant, { player_id: inMain.id, channel: 'in_app', payload: { body: 'main' } })
    const b = await send(h, tenant, { player_id: row!.id, channel: 'in_app', payload: { body: 'second' } })
    const ids = async (opts: { headers?: Record<string, string>; query?: Record<string, string> }, key = tenant.key) =>
      (await h.request('GET', '/notifications', { key, ...opts })).body.data.map((n: { id: string }) => n.id)
    t.same(await ids({}), [a.notification_id], 'the default brand')
    t.same(await ids({ headers: { 'x-brand': 'second' } }), [b.notification_id], 'x-brand')
    t.same(await ids({ query: { brand: second.id } }), [b.notification_id], 'brand query')
    const pinned = await tenant.createKey({ brand: second.slug })
    t.same(await ids({ query: { brand: tenant.brand.slug } }, pinned.key), [b.notification_id], 'a pinned key: its brand whatever the hint')
  })

  t.test('marketing leaves the inbox of a player who self-excludes; transactional messages stay', async (t) => {
    const tenant = await h.createTenant()
    const player = await makePlayer(h, tenant)
    const promo = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'promo' } })
    const receipt = await send(h, tenant, { player_id: player.id, channel: 'in_app', class: 'transactional', payload: { body: 'receipt' } })
    for (const s of [promo, receipt]) await waitForStatus(h, tenant, s.notification_id, ['delivered'])
    const before = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
    t.same(before.body.data.map((i: any) => i.body).sort(), ['promo', 'receipt'])

    const patched = await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { status: 'self_excluded' } })
    t.equal(patched.status, 200)
    const after = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
    t.same(after.body.data.map((i: any) => i.body), ['receipt'])
    t.equal((await h.request('POST', `/players/${player.id}/inbox/${promo.notification_id}/read`, { key: tenant.key })).status, 404, 'nor can it be read')
    t.equal((await h.request('POST', `/players/${player.id}/inbox/${receipt.notification_id}/read`, { key: tenant.key })).status, 200)

    await h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body: { status: 'active' } })
    const back = await h.request('GET', `/players/${player.id}/inbox`, { key: tenant.key })
    t.same(back.body.data.map((i: any) => i.body).sort(), ['promo', 'receipt'], 'shown again once active')
  })

  t.test('socket tokens: forged or foreign are refused; a socket only hears its own player', async (t) => {
    const tenant = await h.createTenant()
    const a = await makePlayer(h, tenant)
    const b = await makePlayer(h, tenant)
    await t.rejects(openInboxSocket(h, 'nope'), /401/)
    const tokA = (await h.request('POST', `/players/${a.id}/inbox/token`, { key: tenant.key })).body.data.token
    await t.rejects(openInboxSocket(h, `${tokA}x`), /401/)
    const socket = await openInboxSocket(h, tokA)
    t.teardown(() => socket.ws.close())
    const toB = await send(h, tenant, { player_id: b.id, channel: 'in_app', payload: { body: 'for b' } })
    const toA = await send(h, tenant, { player_id: a.id, channel: 'in_app', payload: { body: 'for a' } })
    await waitForStatus(h, tenant, toB.notification_id, ['delivered'])
    const got = await socket.next()
    t.equal(got.data.id, toA.notification_id)
    t.equal(socket.messages.length, 0)
  })

  t.test('a frame over the size limit closes that socket only; the process and other sockets live on', async (t) => {
    const tenant = await h.createTenant()
    const player = await makePlayer(h, tenant)
    const token = (await h.request('POST', `/players/${player.id}/inbox/token`, { key: tenant.key })).body.data.token
    const other = await openInboxSocket(h, token)
    t.teardown(() => other.ws.close())
    const rude = await openInboxSocket(h, token)
    rude.ws.on('error', () => {})
    const closed = new Promise<number>((resolve) => rude.ws.on('close', (code) => resolve(code)))
    rude.ws.send('x'.repeat(5000))
    t.ok(await closed, 'the sender\'s socket is closed')
    t.equal((await h.request('GET', '/health/live')).status, 200, 'the process lives on')
    const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'still here' } })
    t.equal((await other.next()).data.id, sent.notification_id, 'the other socket still hears its player')
  })

  t.test('tenant isolation on the inbox, notification and contact routes', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant()
    const player = await makePlayer(h, tenant)
    const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'x' } })
    await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
    const k = other.key
    t.equal((await h.request('GET', `/notifications/${sent.notification_id}`, { key: k })).status, 404)
    t.same((await h.request('GET', '/notifications', { key: k, query: { player_id: player.id } })).body.data, [])
    t.equal((await h.request('GET', `/players/${player.id}/inbox`, { key: k })).status, 404)
    t.equal((await h.request('POST', `/players/${player.id}/inbox/${sent.notification_id}/read`, { key: k })).status, 404)
    t.equal((await h.request('POST', `/players/${player.id}/inbox/token`, { key: k })).status, 404)
    t.equal((await h.request('PUT', `/players/${player.id}/telegram`, { key: k, body: { chat_id: '1' } })).status, 404)
    t.equal((await h.request('DELETE', `/players/${player.id}/telegram`, { key: k })).status, 404)
    t.equal((await h.request('GET', `/players/${player.id}/push-subscriptions`, { key: k })).status, 404)
    const otherPlayer = await makePlayer(h, other)
    t.equal((await h.request('POST', `/players/${otherPlayer.id}/inbox/${sent.notification_id}/read`, { key: k })).status, 404, "another tenant's message id")
  })

  t.test('an upgrade request with a target no URL parser takes is a 400, and the server lives on', async (t) => {
    for (const target of ['//example.com:99999/', '//%zz/']) {
      const res = await rawRequest(h.app.port, [`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`], { waitMs: 3000 })
      t.equal(res.statuses[0], 400, target)
    }
    t.equal((await h.request('GET', '/health')).status, 200, 'still serving')
  })
})

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

// The audit trail: every admin call writes a row (actor, action, before/after with secrets masked, time,
// request id) in the transaction of its change; GET /admin/audit pages it newest first, per tenant.
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { actorOf, maskSecrets, MASK, recordAudit } from '../../src/audit/service.ts'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } })

const audit = (query: Record<string, string | number> = {}) => h.request('GET', '/admin/audit', { key: h.adminKey, query })

t.test('admin changes are audited with before/after, secrets masked', async (t) => {
  const tenant = await h.createTenant()
  const key = await tenant.createKey({ name: 'audited' })
  const renamed = await fetch(`${h.origin}/api/v1/admin/brands/${tenant.brand.id}`, {
    method: 'PATCH',
    headers: { 'x-api-key': h.adminKey, 'content-type': 'application/json', 'x-request-id': 'audit-req-1' },
    body: JSON.stringify({ name: 'Renamed' }),
  })
  t.equal(renamed.status, 200)
  t.equal((await h.admin('DELETE', `/keys/${key.id}`)).status, 200)
  const mapping = { rules: [{ match: 'dep*', type: 'deposit' }], default_action: 'accept' }
  t.equal((await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, mapping)).status, 200)
  t.equal((await h.admin('GET', `/tenants/${tenant.id}/keys`)).status, 200)

  const res = await audit({ tenant_id: tenant.id, limit: 200 })
  t.equal(res.status, 200)
  const rows = res.body.data as { action: string; actor: string; tenant_id: string; before: any; after: any; request_id: string; target: any; created_at: string }[]
  t.ok(rows.every((r) => r.tenant_id === tenant.id && r.actor === 'admin'), 'only this tenant, actor admin')
  t.same(rows.map((r) => r.action).reverse(), [
    'adminCreateTenant', 'adminCreateBrand', 'adminCreateKey', 'adminCreateKey', 'adminUpdateBrand', 'adminRevokeKey', 'adminSetEventMapping', 'adminListKeys',
  ])
  const created = rows.find((r) => r.action === 'adminCreateKey' && r.after.name === 'audited')
  t.equal(created?.after.key, MASK, 'the key shown once is masked in the trail')
  t.notOk(JSON.stringify(res.body).includes(key.key), 'the key never appears')
  t.equal(created?.before, null)
  const rename = rows.find((r) => r.action === 'adminUpdateBrand')
  t.match(rename, { before: { name: 'main' }, after: { name: 'Renamed' }, request_id: 'audit-req-1', target: { type: 'brand', id: tenant.brand.id } })
  const revoke = rows.find((r) => r.action === 'adminRevokeKey')
  t.match(revoke, { before: { id: key.id, revoked_at: null }, target: { type: 'api_key', id: key.id } })
  t.type(revoke?.after.revoked_at, 'string')
  t.match(rows.find((r) => r.action === 'adminSetEventMapping'), { before: { rules: [] }, after: mapping })
  t.ok(rows.every((r) => !Number.isNaN(Date.parse(r.created_at)) && typeof r.request_id === 'string'))
})

t.test('a refused change writes nothing; reads of the trail are audited too', async (t) => {
  const missing = randomUUID()
  t.equal((await h.admin('PATCH', `/brands/${missing}`, { name: 'x' })).status, 404)
  await fetch(`${h.origin}/api/v1/admin/audit?limit=1`, { headers: { 'x-api-key': h.adminKey, 'x-request-id': 'audit-read-1' } })
  const all = (await audit({ limit: 200 })).body.data as { action: string; request_id: string; target: { id: string } | null }[]
  t.notOk(all.some((r) => r.target?.id === missing), 'no row for a change that did not happen')
  t.match(all.find((r) => r.request_id === 'audit-read-1'), { action: 'adminListAudit' }, 'the read itself is audited')
})

t.test('cursor paging and errors', async (t) => {
  const tenant = await h.createTenant() // 4 rows: tenant, brand, key + ...
  await h.admin('GET', `/tenants/${tenant.id}/keys`)
  const seen: string[] = []
  let cursor: string | undefined
  for (let page = 0; page < 10; page++) {
    const res = await audit({ tenant_id: tenant.id, limit: 2, ...(cursor ? { cursor } : {}) })
    t.equal(res.status, 200)
    seen.push(...(res.body.data as { id: string }[]).map((r) => r.id))
    cursor = res.body.next_cursor ?? undefined
    if (!cursor) break
  }
  t.equal(seen.length, 4)
  t.equal(new Set(seen).size, 4, 'no row twice')
  t.same([...seen].sort((a, b) => Number(b) - Number(a)), seen, 'newest first')
  t.equal((await audit({ cursor: 'forged.cursor' })).body.code, 'BAD_REQUEST')
  t.equal((await audit({ tenant_id: 'nope' })).status, 400)
  t.equal((await audit({ limit: 201 })).status, 400)
  t.equal((await h.request('GET', '/admin/audit', { key: tenant.key })).status, 403, 'operator keys cannot read it')
})

t.test('recordAudit for operator routes: actor key id, secrets masked at any depth', async (t) => {
  const tenant = await h.createTenant()
  const keyId = randomUUID()
  await h.app.ctx.sql.begin(async (tx) => {
    await recordAudit(tx, {
      ...actorOf({ principal: { keyId, tenantId: tenant.id, brandId: null, scopes: [], expiresAt: null } }),
      action: 'updateWebhook',
      target: { type: 'webhook', id: 'w1' },
      before: { url: 'https://a.example', secret: 'whsec_old' },
      after: { url: 'https://b.example', secret: 'whsec_new', config: { smtp: { password: 'p', host: 'h' }, bot_token: 't' } },
      requestId: 'r-1',
    })
  })
  const [row] = (await audit({ tenant_id: tenant.id, limit: 50 })).body.data.filter((r: { action: string }) => r.action === 'updateWebhook')
  t.match(row, {
    actor: 'key',
    actor_key_id: keyId,
    before: { url: 'https://a.example', secret: MASK },
    after: { secret: MASK, config: { smtp: { password: MASK, host: 'h' }, bot_token: MASK } },
  })
  t.same(maskSecrets({ api_key: 'k', list: [{ token: 'x' }], secret: null }), { api_key: MASK, list: [{ token: MASK }], secret: null })
})

t.test('channel and delivery settings changes are audited with secrets masked or absent', async (t) => {
  const tenant = await h.createTenant()
  const key = await tenant.createKey({ name: 'settings' })
  const put = (path: string, body: Record<string, unknown>) => h.request('PUT', path, { key: key.key, body })
  t.equal((await put('/settings/channels/email', { smtp_url: 'smtp://mailer:first-pw-1@127.0.0.1:2525', from: 'a@casino.example' })).status, 200)
  t.equal((await put('/settings/channels/email', { smtp_url: 'smtp://mailer:second-pw-2@127.0.0.1:2526', from: 'b@casino.example' })).status, 200)
  t.equal((await put('/settings/channels/telegram', { bot_token: '123456:bot-secret-3', api_base_url: 'http://127.0.0.1:9' })).status, 200)
  const push = await put('/settings/channels/push', { vapid_subject: 'mailto:ops@casino.example' })
  t.equal(push.status, 200, push.text)
  t.equal((await put('/settings/delivery', { frequency_caps: [{ channel: 'email', max: 3, per: 'day' }] })).status, 200)
  const rows = (await audit({ tenant_id: tenant.id, limit: 50 })).body.data as { action: string; actor_key_id: string; before: any; after: any; target: { type: string; id: string } }[]
  const email = rows.filter((r) => r.action === 'putEmailChannelSettings')
  t.equal(email.length, 2)
  t.match(email[0], {
    actor_key_id: key.id, target: { type: 'brand_channel_settings', id: `${tenant.brand.id}:email` },
    before: { smtp_url: 'smtp://mailer:***@127.0.0.1:2525', from: 'a@casino.example' }, after: { smtp_url: 'smtp://mailer:***@127.0.0.1:2526', from: 'b@casino.example' },
  })
  t.notOk(email[1]?.before, 'the first write has no before')
  t.match(rows.find((r) => r.action === 'putTelegramChannelSettings'), { after: { api_base_url: 'http://127.0.0.1:9' } })
  t.match(rows.find((r) => r.action === 'putPushChannelSettings'), { after: { vapid_subject: 'mailto:ops@casino.example' } })
  t.match(rows.find((r) => r.action === 'putDeliverySettings'), { target: { type: 'brand_delivery_settings', id: tenant.brand.id }, after: { frequency_caps: [{ channel: 'email', max: 3, per: 'day' }] } })
  const text = JSON.stringify(rows)
  for (const secret of ['first-pw-1', 'second-pw-2', 'bot-secret-3']) t.notOk(text.includes(secret), `${secret} not in the trail`)
  const [stored] = await h.app.ctx.sql<{ secret: string }[]>`select secret from brand_channel_settings where brand_id = ${tenant.brand.id} and channel = 'push'`
  t.notOk(text.includes(h.app.ctx.secretBox.open(stored!.secret)), 'nor the VAPID private key')
  t.same(maskSecrets({ url: 'smtps://u:p4ss@h:465', plain: 'https://example.com/a:b@c' }), { url: 'smtps://u:***@h:465', plain: 'https://example.com/a:b@c' })
})

t.test('webhook changes by an operator key are audited, the secret never', async (t) => {
  const tenant = await h.createTenant()
  const key = await tenant.createKey({ name: 'ops' })
  const created = await h.request('POST', '/webhooks', { key: key.key, body: { url: 'http://127.0.0.1:9/hook', events: ['player.created'] } })
  t.equal(created.status, 201, created.text)
  const id = created.body.data.id as string
  const secret = created.body.data.secret as string
  t.equal((await h.request('PATCH', `/webhooks/${id}`, { key: key.key, body: { events: ['player.updated'], rotate_secret: true } })).status, 200)
  t.equal((await h.request('DELETE', `/webhooks/${id}`, { key: key.key })).status, 200)
  const res = await audit({ tenant_id: tenant.id, limit: 50 })
  const rows = (res.body.data as { action: string; actor: string; actor_key_id: string; before: any; after: any; target: { type: string } | null }[]).filter((r) => r.target?.type === 'webhook')
  t.same(rows.map((r) => r.action), ['deleteWebhook', 'updateWebhook', 'createWebhook'])
  t.ok(rows.every((r) => r.actor === 'key' && r.actor_key_id === key.id), 'the operator key is the actor')
  t.match(rows[1], { before: { events: ['player.created'] }, after: { events: ['player.updated'], secret_rotated: true } })
  t.match(rows[0], { before: { id }, after: null })
  t.notOk(JSON.stringify(res.body).includes(secret), 'no signing secret in the trail')
})

// Adversarial checks of campaign execution against contract-engines §3/§4 and docs/campaigns.md:
// responsible gaming on the paths the other files leave out (a delayed trigger's send after the player
// self-excluded or withdrew consent, a journey whose player is suspended through PATCH /players, a
// transactional campaign to a closed player), triggers on another brand's events, end_at passing before
// the engine's visit, frequency caps across campaigns, the hold-out, and template values in campaign sends.
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { campaign, createCampaign, move, must, segment, sent, template, until } from './helpers.ts'

// The engine only moves when a test drives it (round / until): nothing happens behind the test's back.
const h = await startHarness(t, { env: { CAMPAIGN_ENGINE_POLL_MS: '3600000', INGEST_ACK_AFTER: 'postgres' } })
const ctx = h.app.ctx
ctx.campaigns!.wake = () => {}
let n = 0
const eventId = () => `adv-${process.pid}-${++n}`

async function event(tenant: TestTenant, player: string, type: string, payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  await must(h.request('POST', '/events', { key: tenant.key, body: { player_id: player, event_type: type, event_id: eventId(), timestamp: new Date().toISOString(), payload, ...extra } }), 200)
  await ctx.stream!.idle()
}

const idOf = async (brandId: string, external: string) =>
  (await ctx.sql<{ id: string }[]>`select id from players where brand_id = ${brandId} and external_id = ${external}`)[0]!.id

const notes = (campaignId: string) =>
  ctx.sql<{ id: string; player_id: string; status: string; reason: string | null; delivered_at: Date | null; class: string }[]>`
    select id, player_id, status, reason, delivered_at, class from notifications where campaign_id = ${campaignId} order by created_at`

const participants = async (tenant: TestTenant, campaignId: string) =>
  (await must(h.request('GET', `/campaigns/${campaignId}/participants`, { key: tenant.key }), 200)).data as any[]

const inboxOf = async (tenant: TestTenant, playerId: string) =>
  (await must(h.request('GET', `/players/${playerId}/inbox`, { key: tenant.key }), 200)).data as any[]

async function triggered(tenant: TestTenant, config: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const c = await createCampaign(h, tenant, {
    type: 'triggered',
    config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' }, ...config },
    ...extra,
  })
  await move(h, tenant, c.id, 'running')
  return c
}

t.test('a delayed trigger send: a player who self-excludes (PATCH) or withdraws consent during the delay gets nothing', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant, { delay_seconds: 1 })
  for (const p of ['excl', 'muted', 'ok']) await event(tenant, p, 'registration')
  for (const p of ['excl', 'muted', 'ok']) await event(tenant, p, 'deposit', { amount: 10, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 0, 'held for the delay')
  const ids = { excl: await idOf(tenant.brand.id, 'excl'), muted: await idOf(tenant.brand.id, 'muted'), ok: await idOf(tenant.brand.id, 'ok') }
  await must(h.request('PATCH', `/players/${ids.excl}`, { key: tenant.key, body: { status: 'self_excluded' } }), 200)
  await event(tenant, 'muted', 'consent_update', { channel: 'in_app', granted: false })
  await until(h, async () => (await notes(c.id)).length === 3 && (await notes(c.id)).every((r) => r.status !== 'queued'), 10_000)
  const by = new Map((await notes(c.id)).map((r) => [r.player_id, r]))
  t.match(by.get(ids.excl), { status: 'suppressed', reason: 'self_excluded', delivered_at: null })
  t.match(by.get(ids.muted), { status: 'suppressed', reason: 'no_consent', delivered_at: null })
  t.match(by.get(ids.ok), { status: 'delivered' })
  t.same(await inboxOf(tenant, ids.excl), [], 'nothing in the self-excluded inbox')
  t.same(await inboxOf(tenant, ids.muted), [], 'nothing in the muted inbox')
})

t.test('a transactional triggered campaign reaches a self-excluded player but never a closed one', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant, { class: 'transactional' })
  for (const [p, status] of [['se', 'self_excluded'], ['cl', 'closed'], ['su', 'suspended']] as const) {
    await event(tenant, p, 'registration')
    await event(tenant, p, 'status_change', { status })
    await event(tenant, p, 'deposit', { amount: 10, currency: 'EUR' })
  }
  await until(h, async () => (await notes(c.id)).length === 3 && (await notes(c.id)).every((r) => r.status !== 'queued'), 10_000)
  const by = new Map((await notes(c.id)).map((r) => [r.player_id, r]))
  t.match(by.get(await idOf(tenant.brand.id, 'cl')), { status: 'suppressed', reason: 'closed', class: 'transactional' })
  t.match(by.get(await idOf(tenant.brand.id, 'se')), { status: 'delivered', class: 'transactional' })
  t.match(by.get(await idOf(tenant.brand.id, 'su')), { status: 'delivered', class: 'transactional' })
})

t.test("a trigger fires only on its own brand's events, even for a player with the same external id", async (t) => {
  const tenant = await h.createTenant()
  const other = await tenant.createBrand('other')
  const c = await triggered(tenant)
  // The same external id in the other brand is another player.
  await event(tenant, 'twin', 'deposit', { amount: 10, currency: 'EUR' }, { brand: other.slug })
  t.equal((await sent(h, c.id)).length, 0, "the other brand's deposit enrolls nobody")
  t.equal((await campaign(h, tenant, c.id)).stats.audience, 0)
  await event(tenant, 'twin', 'deposit', { amount: 10, currency: 'EUR' })
  const rows = await sent(h, c.id)
  t.same(rows.map((r) => r.player_id), [await idOf(tenant.brand.id, 'twin')], "its own brand's deposit does")
})

t.test('a journey player suspended through PATCH /players leaves it at once and is not messaged after reactivation', async (t) => {
  const tenant = await h.createTenant()
  for (const p of ['stay', 'away']) await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: p, metadata: { j: true } } }), 201)
  const [hello, later] = [await template(h, tenant), await template(h, tenant)]
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: { steps: [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 1, next: 'later' },
      { id: 'later', type: 'send', channel: 'in_app', template_id: later, next: null },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  const ids = { stay: await idOf(tenant.brand.id, 'stay'), away: await idOf(tenant.brand.id, 'away') }
  await until(h, async () => (await sent(h, c.id)).length === 2)
  t.ok((await participants(tenant, c.id)).every((p) => p.status === 'waiting'), 'both waiting')

  await must(h.request('PATCH', `/players/${ids.away}`, { key: tenant.key, body: { status: 'suspended' } }), 200)
  const status = async () => Object.fromEntries((await participants(tenant, c.id)).map((p) => [p.player_id, p.status]))
  // contract-engines §4: "a player who stops being active leaves a marketing journey".
  t.equal((await status())[ids.away], 'exited', 'left the journey at once')
  // Back to active before the wait ends: having left, it is not messaged again.
  await must(h.request('PATCH', `/players/${ids.away}`, { key: tenant.key, body: { status: 'active' } }), 200)
  await until(h, async () => (await participants(tenant, c.id)).find((p) => p.player_id === ids.stay)?.status === 'completed', 10_000)
  await ctx.campaigns!.round()
  const steps = (await sent(h, c.id)).filter((r) => r.player_id === ids.away).map((r) => r.step)
  t.same(steps, ['hello'], 'no step after it left')
  t.same((await sent(h, c.id)).filter((r) => r.player_id === ids.stay).map((r) => r.step), ['hello', 'later'], 'the other player completes')
})

t.test('a journey send to a player who withdrew in-app consent mid-journey is suppressed, never in the inbox', async (t) => {
  const tenant = await h.createTenant()
  await event(tenant, 'jc', 'registration')
  const [hello, later] = [await template(h, tenant, 'in_app', { name: 'jc-hello' }), await template(h, tenant, 'in_app', { name: 'jc-later', body: 'second' })]
  const c = await createCampaign(h, tenant, {
    type: 'journey', config: { trigger: { event_type: 'login' }, steps: [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 1, next: 'later' },
      { id: 'later', type: 'send', channel: 'in_app', template_id: later, next: null },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  await event(tenant, 'jc', 'login')
  const id = await idOf(tenant.brand.id, 'jc')
  await until(h, async () => (await sent(h, c.id)).length === 1)
  await event(tenant, 'jc', 'consent_update', { channel: 'in_app', granted: false })
  await until(h, async () => (await participants(tenant, c.id))[0]?.status === 'completed', 10_000)
  const rows = await notes(c.id)
  t.equal(rows.length, 2)
  t.match(rows[1], { status: 'suppressed', reason: 'no_consent', delivered_at: null })
  t.notOk((await inboxOf(tenant, id)).some((i) => i.body === 'second'), 'the second step never reached the inbox')
})

t.test('end_at: an event stored after end_at enrolls nobody, even before the engine has visited the campaign', async (t) => {
  const tenant = await h.createTenant()
  const endAt = new Date(Date.now() + 1500)
  const c = await triggered(tenant, {}, { schedule: { end_at: endAt.toISOString() } })
  await event(tenant, 'before', 'deposit', { amount: 10, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 1, 'enrolled before end_at')
  await new Promise((r) => setTimeout(r, Math.max(0, endAt.getTime() - Date.now()) + 200))
  await event(tenant, 'after', 'deposit', { amount: 10, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 1, 'nobody enrolled after end_at')
  await ctx.campaigns!.round()
  t.equal((await campaign(h, tenant, c.id)).status, 'completed')
  await event(tenant, 'later', 'deposit', { amount: 10, currency: 'EUR' })
  const later = await idOf(tenant.brand.id, 'later')
  t.notOk((await sent(h, c.id)).some((r) => r.player_id === later), 'a completed campaign enrolls nobody')
})

t.test('frequency cap "any": two campaigns on one event deliver one marketing message; a transactional one does not count', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { frequency_caps: [{ channel: 'any', max: 1, per: 'day' }] } }), 200)
  const receipt = await triggered(tenant, { class: 'transactional' })
  const a = await triggered(tenant)
  const b = await triggered(tenant)
  await event(tenant, 'capped', 'deposit', { amount: 10, currency: 'EUR' })
  await until(h, async () => (await Promise.all([receipt, a, b].map((c) => notes(c.id)))).flat().every((r) => r.status !== 'queued') && (await notes(b.id)).length === 1, 10_000)
  t.equal((await notes(receipt.id))[0]!.status, 'delivered', 'transactional delivered')
  const marketing = [...(await notes(a.id)), ...(await notes(b.id))]
  t.same(marketing.map((r) => r.status).sort(), ['delivered', 'suppressed'], 'one marketing message through the cap')
  t.equal(marketing.find((r) => r.status === 'suppressed')!.reason, 'frequency_cap')
  // A direct marketing send on the same day is capped too.
  const direct = await must(h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: marketing[0]!.player_id, channel: 'in_app', payload: { body: 'x' } } }), 202)
  t.match(direct.data, { status: 'suppressed', reason: 'frequency_cap' })
})

t.test('template values in a campaign send: payload first, then the player; a missing one fails only that message', async (t) => {
  const tenant = await h.createTenant()
  await event(tenant, 'named', 'registration', { name: 'Ada <b>' })
  await event(tenant, 'anon', 'registration')
  const c = await triggered(tenant, {
    payload: { offer: '10 & 20 spins' },
    templates: { in_app: await template(h, tenant, 'in_app', { name: 'values', subject: 'Hi {{ name | friend }}', body: '{{offer}} for {{ name }} ({{ country | n/a }})' }) },
  })
  await event(tenant, 'named', 'deposit', { amount: 10, currency: 'EUR' })
  await event(tenant, 'anon', 'deposit', { amount: 10, currency: 'EUR' })
  await until(h, async () => (await notes(c.id)).length === 2 && (await notes(c.id)).every((r) => r.status !== 'queued'), 10_000)
  const named = await idOf(tenant.brand.id, 'named')
  const anon = await idOf(tenant.brand.id, 'anon')
  const by = new Map((await notes(c.id)).map((r) => [r.player_id, r]))
  t.equal(by.get(named)!.status, 'delivered')
  t.match(await inboxOf(tenant, named), [{ subject: 'Hi Ada <b>', body: '10 & 20 spins for Ada <b> (n/a)' }], 'in-app is stored as written (not HTML)')
  const failed = await must(h.request('GET', `/notifications/${by.get(anon)!.id}`, { key: tenant.key }), 200)
  t.match(failed.data, { status: 'failed', error: 'missing variable: name' })
  t.same(await inboxOf(tenant, anon), [])
})

t.test('the hold-out of a triggered campaign gets nothing, on every event, and is counted once', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant, { control_group_percent: 50 })
  const players = Array.from({ length: 24 }, (_, i) => `h${i}`)
  for (const p of players) await event(tenant, p, 'deposit', { amount: 10, currency: 'EUR' })
  for (const p of players) await event(tenant, p, 'deposit', { amount: 10, currency: 'EUR' })
  const arms = await ctx.sql<{ player_id: string; control: boolean }[]>`select distinct player_id, control from campaign_audience where campaign_id = ${c.id}`
  const control = new Set(arms.filter((a) => a.control).map((a) => a.player_id))
  t.ok(control.size > 0 && control.size < players.length, `both arms (${control.size} held out)`)
  t.equal(new Set(arms.map((a) => a.player_id)).size, arms.length, 'a player is in one arm on every run')
  const rows = await sent(h, c.id)
  t.notOk(rows.some((r) => control.has(r.player_id)), 'no message to a held-out player')
  t.equal(rows.length, 2 * (players.length - control.size), 'two messages per treated player')
  const stats = (await campaign(h, tenant, c.id)).stats
  t.equal(stats.audience, players.length)
  t.equal(stats.control, control.size)
})

t.test('a campaign renders the template it names, not a newer template that shares its name and locale', async (t) => {
  const tenant = await h.createTenant()
  await event(tenant, 'reader', 'registration', { language: 'en' })
  // Template names are not unique: an operator makes a second "promo" (same channel, same locale) for another campaign.
  const mine = await template(h, tenant, 'in_app', { name: 'promo', subject: 'Old', body: 'the offer of campaign A' })
  const c = await triggered(tenant, { templates: { in_app: mine } })
  await template(h, tenant, 'in_app', { name: 'promo', subject: 'New', body: 'the offer of campaign B' })
  await event(tenant, 'reader', 'deposit', { amount: 10, currency: 'EUR' })
  await until(h, async () => (await notes(c.id)).length === 1 && (await notes(c.id))[0]!.status !== 'queued', 10_000)
  const inbox = await inboxOf(tenant, await idOf(tenant.brand.id, 'reader'))
  // contract-engines §3 Rendering: the player's language picks the template of that locale, "else the given
  // template"; the given one is already in the player's locale.
  t.match(inbox, [{ body: 'the offer of campaign A' }], 'the named template')
})

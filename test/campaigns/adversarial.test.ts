// Campaigns, adversarial: the engine's paths and the journeys', under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { campaign, createCampaign, move, must, segment, sent, template, until, bulkPlayers, fieldsOf } from './helpers.ts'
import { createHash } from 'node:crypto'

const h = await startHarness(t, { env: { CAMPAIGN_ENGINE_POLL_MS: '3600000', INGEST_ACK_AFTER: 'postgres' } })

// Adversarial checks of campaign execution against contract-engines §3/§4 and docs/campaigns.md:
// responsible gaming on the paths the other files leave out (a delayed trigger's send after the player
// self-excluded or withdrew consent, a journey whose player is suspended through PATCH /players, a
// transactional campaign to a closed player), triggers on another brand's events, end_at passing before
// the engine's visit, frequency caps across campaigns, the hold-out, and template values in campaign sends.
t.test('adversarial', async (t) => {
  // The engine only moves when a test drives it (round / until): nothing happens behind the test's back.

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
})

// Adversarial checks of journeys and triggered campaigns (contract-engines §1 and §4, docs/campaigns.md
// "Execution"), where journeys.test.ts, triggered.test.ts and adversarial{,-2}.test.ts do not go: every step
// type in one graph listed out of order and looping back through a wait_for_event, the wait_for_event
// deadline (just before, just after, an in-time event applied late by the stream, event times outside the
// wait), campaigns the engine starts at start_at, events stored while paused but applied after the resume,
// a 100-step journey, exits while paused, cancel mid-wait, the participants route's limits, hold-out and
// conversions inside a journey, a second brand, a template deactivated mid-run, duplicate trigger events,
// and triggers on mapped event types.
t.test('adversarial-journeys', async (t) => {
  // The engine only moves when a test drives it (round / until); the clock is real time (events' received_at
  // is the ingesting process's Date.now(), compared with the engine's clock, so a fake clock would skew them).

  const ctx = h.app.ctx
  ctx.campaigns!.wake = () => {}
  const round = () => ctx.campaigns!.round()
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
  let n = 0
  const eventId = () => `advj-${process.pid}-${++n}`

  const post = (tenant: TestTenant, player: string, type: string, payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    must(h.request('POST', '/events', { key: tenant.key, body: { player_id: player, event_type: type, event_id: eventId(), timestamp: new Date().toISOString(), payload, ...extra } }), 200)

  async function event(tenant: TestTenant, player: string, type: string, payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
    const res = await post(tenant, player, type, payload, extra)
    await ctx.stream!.idle()
    return res
  }

  const idOf = async (brandId: string, external: string) =>
    (await ctx.sql<{ id: string }[]>`select id from players where brand_id = ${brandId} and external_id = ${external}`)[0]!.id

  const player = async (tenant: TestTenant, external: string, body: Record<string, unknown> = {}) =>
    (await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: external, ...body } }), 201)).data.id as string

  async function participants(tenant: TestTenant, campaignId: string, query: Record<string, string | number> = {}, key = tenant.key) {
    return (await must(h.request('GET', `/campaigns/${campaignId}/participants`, { key, query }), 200)) as { data: any[]; next_cursor: string | null }
  }

  const statusOf = async (tenant: TestTenant, campaignId: string): Promise<Record<string, any>> =>
    Object.fromEntries((await participants(tenant, campaignId, { limit: 100 })).data.map((p) => [p.player_id, p]))

  /** Steps sent per player (from the exactly-once key), in send order. */
  async function stepsOf(campaignId: string): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>()
    for (const r of await sent(h, campaignId)) out.set(r.player_id, [...(out.get(r.player_id) ?? []), r.step])
    return out
  }

  /** A journey's waits are over now (in the database's time, which the work loop compares with). */
  const elapse = (campaignId: string) =>
    ctx.sql`update campaign_participants set wake_at = now() - interval '1 second' where campaign_id = ${campaignId} and status = 'waiting'`

  async function journey(tenant: TestTenant, steps: unknown[], config: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<string> {
    const c = await createCampaign(h, tenant, { type: 'journey', config: { steps, ...config }, ...extra })
    await move(h, tenant, c.id, 'running')
    return c.id
  }

  /** The arm docs/campaigns.md fixes: md5("<campaign>:<player>"), first 32 bits mod 10,000 < percent × 100. */
  const heldOut = (campaignId: string, playerId: string, percent: number) =>
    createHash('md5').update(`${campaignId}:${playerId}`).digest().readUInt32BE(0) % 10_000 < percent * 100

  /**
   * A lagging event stream (the documented p50 lag is ~1 s): `posting` stores events while the stream is not
   * woken, then the campaigns' rows of the tenant are held back. Returns how many rows it held (0 when the
   * stream's own 500 ms poll took them first: the caller tries again).
   */
  async function hold(tenant: TestTenant, posting: () => Promise<unknown>): Promise<number> {
    const stream = ctx.stream!
    const wake = stream.wake
    stream.wake = () => {}
    try {
      await posting()
    } finally {
      stream.wake = wake
    }
    return (await ctx.sql`update event_stream set available_at = now() + interval '1 hour' where consumer = 'campaigns' and tenant_id = ${tenant.id} and failed_at is null`).count
  }

  async function release(tenant: TestTenant) {
    await ctx.sql`update event_stream set available_at = now() where consumer = 'campaigns' and tenant_id = ${tenant.id}`
    await ctx.stream!.idle()
  }

  // The first ingest of a process opens the event store: done here, not inside a test's timing.
  await post(await h.createTenant(), 'warm-up', 'login')

  // ---------------------------------------------------------------------------------------------------------

  t.test('every step type in one graph, listed out of order, looping back through a wait_for_event', async (t) => {
    const tenant = await h.createTenant()
    const ids = {
      vip: await player(tenant, 'vip', { metadata: { j: true, vip: true } }),
      payer: await player(tenant, 'payer', { metadata: { j: true, vip: true } }),
      plain: await player(tenant, 'plain', { metadata: { j: true, vip: false } }),
      quitter: await player(tenant, 'quitter', { metadata: { j: true, vip: true } }),
    }
    const [hello, reminder, gift] = [await template(h, tenant), await template(h, tenant), await template(h, tenant)]
    // §4: "the first is the entry"; the others in any order. The loop dep? → reminder → breathe → dep? goes
    // through a wait and a wait_for_event, so it is allowed (docs/campaigns.md: only a loop "made only of
    // sends and branches" is refused).
    const c = await journey(tenant, [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'dep?' },
      { id: 'gift', type: 'send', channel: 'in_app', template_id: gift, next: null },
      { id: 'vip?', type: 'branch', condition: { field: 'metadata.vip', op: 'eq', value: true }, then: 'gift', else: null },
      { id: 'reminder', type: 'send', channel: 'in_app', template_id: reminder, next: 'breathe' },
      { id: 'breathe', type: 'wait', seconds: 1, next: 'dep?' },
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 10 }], timeout_seconds: 600, on_event: 'vip?', on_timeout: 'reminder' },
    ], { trigger: { event_type: 'login' } }, { target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }) })
    await round()
    // Everyone also logs in (the trigger): already in, nobody enters twice.
    for (const p of Object.keys(ids)) await event(tenant, p, 'login')
    await round()
    let st = await statusOf(tenant, c)
    t.equal(Object.keys(st).length, 4, 'one participant per player, by segment and by trigger')
    t.ok(Object.values(st).every((p) => p.status === 'waiting' && p.step === 'dep?'), 'all at the wait_for_event')

    await event(tenant, 'plain', 'deposit', { amount: 25, currency: 'EUR' }) // on_event → branch else → end
    await event(tenant, 'payer', 'deposit', { amount: 5, currency: 'EUR' }) // below the filter: still waiting
    await round()
    st = await statusOf(tenant, c)
    t.match(st[ids.plain], { status: 'completed' }, 'on_event, branch else: ended')
    t.match(st[ids.payer], { status: 'waiting', step: 'dep?' }, 'a deposit the filter refuses moves nothing')

    // The timeout: reminder, then the wait, then back at the wait_for_event; twice around the loop.
    await elapse(c)
    await round()
    st = await statusOf(tenant, c)
    t.ok([ids.vip, ids.payer, ids.quitter].every((id) => st[id].status === 'waiting' && st[id].step === 'breathe'), 'on_timeout: reminder sent, now in the wait')
    // The quitter self-excludes (status_change) and comes back: it left the journey for good.
    await event(tenant, 'quitter', 'status_change', { status: 'self_excluded' })
    t.match((await statusOf(tenant, c))[ids.quitter], { status: 'exited' }, 'self-excluded: exited at once')
    await event(tenant, 'quitter', 'status_change', { status: 'active' })
    for (let lap = 0; lap < 3; lap++) {
      await elapse(c)
      await round()
    }
    st = await statusOf(tenant, c)
    t.match(st[ids.vip], { status: 'waiting', step: 'dep?' }, 'around the loop a second time, back at the wait_for_event')
    t.match(st[ids.quitter], { status: 'exited' }, 'back to active, still out')

    await event(tenant, 'vip', 'deposit', { amount: 30, currency: 'EUR' })
    await event(tenant, 'payer', 'deposit', { amount: 25, currency: 'EUR' })
    await event(tenant, 'quitter', 'deposit', { amount: 25, currency: 'EUR' })
    await round()
    st = await statusOf(tenant, c)
    t.same(Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, st[id].status])), { vip: 'completed', payer: 'completed', plain: 'completed', quitter: 'exited' })
    const s = await stepsOf(c)
    // §4: "At most one notification per (campaign, run, player, step, channel)", the run being the entry:
    // the reminder reached twice is sent once.
    t.same(s.get(ids.vip), ['hello', 'reminder', 'gift'])
    t.same(s.get(ids.payer), ['hello', 'reminder', 'gift'])
    t.same(s.get(ids.plain), ['hello'])
    t.same(s.get(ids.quitter), ['hello', 'reminder'], 'nothing after it left')
    await until(h, async () => (await sent(h, c)).every((r) => r.status !== 'queued'), 10_000)
    const rows = await sent(h, c)
    t.match((await campaign(h, tenant, c)).stats, { audience: 4, control: 0, sent: rows.length, delivered: rows.length, suppressed: 0, failed: 0 })
  })

  t.test('wait_for_event: an event shortly before the deadline takes on_event, one shortly after it on_timeout', async (t) => {
    const tenant = await h.createTenant()
    const [thanks, nudge] = [await template(h, tenant), await template(h, tenant)]
    const c = await journey(tenant, [
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'thanks', on_timeout: 'nudge' },
      { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
      { id: 'nudge', type: 'send', channel: 'in_app', template_id: nudge, next: null },
    ], { trigger: { event_type: 'login' } })
    await event(tenant, 'before', 'login')
    await event(tenant, 'after', 'login')
    await round()
    const ids = { before: await idOf(tenant.brand.id, 'before'), after: await idOf(tenant.brand.id, 'after') }
    // They reached the step earlier: 'before' 570 s ago (30 s left), 'after' 601 s ago (timed out, and the
    // engine has not looked at it yet).
    await ctx.sql`update campaign_participants set updated_at = now() - interval '570 seconds', wake_at = now() + interval '30 seconds' where player_id = ${ids.before}`
    await ctx.sql`update campaign_participants set updated_at = now() - interval '601 seconds', wake_at = now() - interval '1 second' where player_id = ${ids.after}`
    await ctx.sql`update campaign_participants set lease_owner = null where campaign_id = ${c}`
    await event(tenant, 'before', 'deposit', { amount: 10, currency: 'EUR' })
    await event(tenant, 'after', 'deposit', { amount: 10, currency: 'EUR' })
    t.match((await statusOf(tenant, c))[ids.after], { status: 'waiting', step: 'dep?' }, 'too late for on_event')
    await round()
    const s = await stepsOf(c)
    t.same(s.get(ids.before), ['thanks'], 'in time: on_event')
    t.same(s.get(ids.after), ['nudge'], 'too late: on_timeout')
  })

  t.test('wait_for_event: an event received before the deadline but applied after the engine took the timeout', async (t) => {
    // docs/campaigns.md: an event "received after the player reached the step and before timeout_seconds ran
    // out ... moves it to on_event, even when the stream applies it later; otherwise on_timeout".
    const tenant = await h.createTenant()
    const [thanks, nudge] = [await template(h, tenant), await template(h, tenant)]
    const c = await journey(tenant, [
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 3, on_event: 'thanks', on_timeout: 'nudge' },
      { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
      { id: 'nudge', type: 'send', channel: 'in_app', template_id: nudge, next: null },
    ], { trigger: { event_type: 'login' } })
    for (let i = 0; i < 4; i++) await post(tenant, `l${i}`, 'login')
    await ctx.stream!.idle()
    await round()
    let held = 0
    let who = ''
    for (let i = 0; i < 4 && !held; i++) {
      who = `l${i}`
      held = await hold(tenant, () => post(tenant, who, 'deposit', { amount: 50, currency: 'EUR' }))
    }
    t.equal(held, 1, 'the deposit waits in the stream')
    const id = await idOf(tenant.brand.id, who)
    const [row] = await ctx.sql<{ received_at: Date }[]>`select received_at from event_stream where consumer = 'campaigns' and tenant_id = ${tenant.id}`
    const [p] = await ctx.sql<{ updated_at: Date; wake_at: Date; status: string }[]>`select updated_at, wake_at, status from campaign_participants where player_id = ${id}`
    t.equal(p!.status, 'waiting')
    t.ok(row!.received_at.getTime() < p!.updated_at.getTime() + 3000, 'received before the deadline')
    await sleep(Math.max(0, p!.updated_at.getTime() + 3000 - Date.now()) + 200)
    await round() // the engine's visit after the deadline
    await release(tenant)
    await round()
    t.same((await stepsOf(c)).get(id), ['thanks'], 'the in-time deposit wins')
  })

  t.test("wait_for_event: an event whose own time falls outside the wait does not end it", async (t) => {
    // §1: "An event counts in the period, window and tournament of its own event_time." A deposit timestamped
    // three hours before the player reached the step (a late import) or three hours after its 10-minute
    // timeout is not a deposit made during the wait.
    const tenant = await h.createTenant()
    const [thanks, nudge] = [await template(h, tenant), await template(h, tenant)]
    const c = await journey(tenant, [
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'thanks', on_timeout: 'nudge' },
      { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
      { id: 'nudge', type: 'send', channel: 'in_app', template_id: nudge, next: null },
    ], { trigger: { event_type: 'login' } })
    await event(tenant, 'old', 'login')
    await event(tenant, 'future', 'login')
    await round()
    await event(tenant, 'old', 'deposit', { amount: 50, currency: 'EUR' }, { timestamp: new Date(Date.now() - 3 * 3_600_000).toISOString() })
    await event(tenant, 'future', 'deposit', { amount: 50, currency: 'EUR' }, { timestamp: new Date(Date.now() + 3 * 3_600_000).toISOString() })
    await round()
    const st = await statusOf(tenant, c)
    const ids = { old: await idOf(tenant.brand.id, 'old'), future: await idOf(tenant.brand.id, 'future') }
    t.match(st[ids.old], { status: 'waiting', step: 'dep?' }, 'a deposit of three hours before the wait')
    t.match(st[ids.future], { status: 'waiting', step: 'dep?' }, 'a deposit dated after the timeout')
    t.same([...(await stepsOf(c)).keys()], [], 'nobody thanked')
  })

  t.test('campaigns the engine starts at start_at react to the events that follow at once', async (t) => {
    // §4: "start_at ... at that time the campaign becomes running"; "triggered: while running, each matching
    // event stored after it started enrolls its player"; a journey's players "later, when trigger is set, by event".
    const tenant = await h.createTenant()
    const startAt = new Date(Date.now() + 2500)
    const trig = await createCampaign(h, tenant, { type: 'triggered', schedule: { start_at: startAt.toISOString() }, config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' } } })
    const jour = await createCampaign(h, tenant, { type: 'journey', schedule: { start_at: startAt.toISOString() }, config: { trigger: { event_type: 'deposit' }, steps: [{ id: 'w', type: 'wait', seconds: 3600 }] } })
    await move(h, tenant, trig.id, 'scheduled')
    await move(h, tenant, jour.id, 'scheduled')
    await event(tenant, 'early', 'login') // the brand's traffic before the start
    await sleep(Math.max(0, startAt.getTime() - Date.now()) + 200)
    await round()
    t.equal((await campaign(h, tenant, trig.id)).status, 'running')
    t.equal((await campaign(h, tenant, jour.id)).status, 'running')
    await event(tenant, 'payer', 'deposit', { amount: 10, currency: 'EUR' })
    await round()
    const payer = await idOf(tenant.brand.id, 'payer')
    t.same((await sent(h, trig.id)).map((r) => r.player_id), [payer], 'the triggered campaign enrolled the deposit')
    t.same((await participants(tenant, jour.id)).data.map((p) => p.player_id), [payer], 'the journey entered the player')
  })

  t.test('events stored while paused enroll nobody, even when the stream applies them after the resume', async (t) => {
    // §4: "paused sends nothing new (held sends wait; events stored while paused enroll nobody)".
    const tenant = await h.createTenant()
    const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' } } })
    await move(h, tenant, trig.id, 'running')
    const jour = await journey(tenant, [{ id: 'w', type: 'wait', seconds: 3600 }], { trigger: { event_type: 'deposit' } })
    await event(tenant, 'first', 'deposit', { amount: 10, currency: 'EUR' })
    await move(h, tenant, trig.id, 'paused')
    await move(h, tenant, jour, 'paused')
    let held = 0
    for (let i = 0; i < 4 && !held; i++) held = await hold(tenant, () => post(tenant, `paused${i}`, 'deposit', { amount: 50, currency: 'EUR' }))
    t.equal(held, 1, 'the deposit stored while paused waits in the stream')
    await move(h, tenant, trig.id, 'running')
    await move(h, tenant, jour, 'running')
    await release(tenant)
    await round()
    const first = await idOf(tenant.brand.id, 'first')
    t.same((await sent(h, trig.id)).map((r) => r.player_id), [first], 'only the deposit stored while running enrolled')
    t.same((await participants(tenant, jour)).data.map((p) => p.player_id), [first], 'only the deposit stored while running entered')
  })

  t.test('a journey of 100 steps (the documented maximum) that never waits completes in one advance', async (t) => {
    // docs/campaigns.md: "journey steps: 1..100"; "next: null ... ends the journey for that player".
    const tenant = await h.createTenant()
    const tpl = await template(h, tenant)
    const steps: unknown[] = Array.from({ length: 99 }, (_, i) => ({ id: `b${i}`, type: 'branch', condition: { field: 'status', op: 'eq', value: 'active' }, then: i === 98 ? 'last' : `b${i + 1}`, else: null }))
    steps.push({ id: 'last', type: 'send', channel: 'in_app', template_id: tpl, next: null })
    const c = await journey(tenant, steps, { trigger: { event_type: 'login' } })
    await event(tenant, 'long', 'login')
    await round()
    const id = await idOf(tenant.brand.id, 'long')
    t.same((await stepsOf(c)).get(id), ['last'], 'the last step sent')
    t.match((await statusOf(tenant, c))[id], { status: 'completed', step: null }, 'and the journey ended')
  })

  t.test('while paused: exits take effect at once, an in-time event waits for the resume, nothing is sent; then cancel mid-wait', async (t) => {
    const tenant = await h.createTenant()
    const ids: Record<string, string> = {}
    for (const p of ['a', 'b', 'c', 'd']) ids[p] = await player(tenant, p, { metadata: { j: true } })
    const [hello, thanks] = [await template(h, tenant), await template(h, tenant)]
    const c = await journey(tenant, [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'dep?' },
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'thanks', on_timeout: null },
      { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
    ], {}, { target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }) })
    await round()
    t.equal((await sent(h, c)).length, 4)
    await move(h, tenant, c, 'paused')
    // a: self-excluded by an event, b: suspended through the API; both come back to active while paused.
    await event(tenant, 'a', 'status_change', { status: 'self_excluded' })
    await must(h.request('PATCH', `/players/${ids.b}`, { key: tenant.key, body: { status: 'suspended' } }), 200)
    let st = await statusOf(tenant, c)
    t.match(st[ids.a!], { status: 'exited' }, 'status_change exits a paused journey at once')
    t.match(st[ids.b!], { status: 'exited' }, 'PATCH /players exits a paused journey at once')
    await event(tenant, 'a', 'status_change', { status: 'active' })
    await must(h.request('PATCH', `/players/${ids.b}`, { key: tenant.key, body: { status: 'active' } }), 200)
    // c deposits in time while paused: §4 "While paused nothing advances; a wait that ends meanwhile continues on resume".
    await event(tenant, 'c', 'deposit', { amount: 20, currency: 'EUR' })
    await round()
    t.equal((await sent(h, c)).length, 4, 'nothing sent while paused')
    await move(h, tenant, c, 'running')
    await event(tenant, 'a', 'deposit', { amount: 20, currency: 'EUR' })
    await event(tenant, 'b', 'deposit', { amount: 20, currency: 'EUR' })
    await round()
    let s = await stepsOf(c)
    t.same(s.get(ids.c!), ['hello', 'thanks'], 'the deposit made while paused: on_event after the resume')
    t.same(s.get(ids.a!), ['hello'], 'a left for good')
    t.same(s.get(ids.b!), ['hello'], 'b left for good')
    st = await statusOf(tenant, c)
    t.same(Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, st[id].status])), { a: 'exited', b: 'exited', c: 'completed', d: 'waiting' })

    // Cancelled while d waits for its deposit: it leaves, and its deposit changes nothing.
    await must(h.request('DELETE', `/campaigns/${c}`, { key: tenant.key }), 200)
    t.match((await statusOf(tenant, c))[ids.d!], { status: 'exited' }, 'cancel: the waiting player exits')
    await event(tenant, 'd', 'deposit', { amount: 20, currency: 'EUR' })
    await elapse(c)
    await round()
    s = await stepsOf(c)
    t.same(s.get(ids.d!), ['hello'], 'nothing after the cancel')
    t.same((await participants(tenant, c, { status: 'waiting' })).data, [], 'nobody waiting in a cancelled journey')
    t.match((await campaign(h, tenant, c)).stats, { audience: 4, sent: 5 })
  })

  t.test('GET /campaigns/{id}/participants: default page of 20, entry order across pages, bad parameters in the error shape', async (t) => {
    const tenant = await h.createTenant()
    await bulkPlayers(h, tenant, 25, 'pp')
    const c = await journey(tenant, [{ id: 'w', type: 'wait', seconds: 3600 }], {}, { target_segment_id: await segment(h, tenant) })
    await round()
    const first = await participants(tenant, c)
    t.equal(first.data.length, 20, 'limit defaults to 20')
    t.ok(first.next_cursor)
    const second = await participants(tenant, c, { cursor: first.next_cursor! })
    t.equal(second.data.length, 5)
    t.equal(second.next_cursor, null)
    const all = [...first.data, ...second.data]
    t.equal(new Set(all.map((p) => p.player_id)).size, 25, 'each participant once')
    const order = all.map((p) => `${p.entered_at}`)
    t.same(order, [...order].sort(), 'entry order')
    t.ok(all.every((p) => p.status === 'waiting' && p.step === 'w'))
    // docs/campaigns.md: status one of the four, limit 1..100; the cursor signed. docs/errors.md: the error body.
    const cursor = first.next_cursor!
    const tampered = cursor.slice(0, -2) + (cursor.at(-2) === 'A' ? 'B' : 'A') + cursor.at(-1)
    for (const [label, query] of [
      ['unknown status', { status: 'sleeping' }],
      ['limit 0', { limit: 0 }],
      ['limit 101', { limit: 101 }],
      ['limit not a number', { limit: 'ten' }],
      ['cursor not a cursor', { cursor: 'not-a-cursor' }],
      ['cursor altered', { cursor: tampered }],
    ] as const) {
      const res = await h.request('GET', `/campaigns/${c}/participants`, { key: tenant.key, query })
      t.equal(res.status, 400, label)
      t.match(res.body, { error: String, code: 'BAD_REQUEST', request_id: String }, `${label}: the error shape`)
    }
    // Empty for other types (docs/campaigns.md); 404 for a campaign that is not there.
    const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' } } })
    t.same(await participants(tenant, trig.id), { data: [], next_cursor: null })
    const missing = await h.request('GET', '/campaigns/00000000-0000-4000-8000-000000000000/participants', { key: tenant.key })
    t.equal(missing.status, 404)
    t.equal(missing.body.code, 'NOT_FOUND')
    t.match((await campaign(h, tenant, c)).stats, { audience: 25, control: 0, sent: 0 })
  })

  t.test("a journey's hold-out and conversions: the wait_for_event's event converts, a suppressed message converts nothing", async (t) => {
    const tenant = await h.createTenant()
    const names = Array.from({ length: 16 }, (_, i) => `h${i}`)
    for (const p of names) await player(tenant, p, { metadata: { j: true } })
    const [hello, thanks] = [await template(h, tenant), await template(h, tenant)]
    const c = await createCampaign(h, tenant, {
      type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
      config: { control_group_percent: 50, conversion: { event_type: 'deposit', within_hours: 1 }, steps: [
        { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'dep?' },
        { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'thanks', on_timeout: null },
        { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
      ] },
    })
    const ids = new Map<string, string>()
    for (const p of names) ids.set(p, await idOf(tenant.brand.id, p))
    const control = names.filter((p) => heldOut(c.id, ids.get(p)!, 50))
    const treated = names.filter((p) => !control.includes(p))
    t.ok(control.length >= 1 && treated.length >= 3, `both arms (${control.length} held out)`)
    // One treated player withdrew in-app consent before the start: its hello is suppressed, never delivered.
    const muted = treated[0]!
    await event(tenant, muted, 'consent_update', { channel: 'in_app', granted: false })
    await move(h, tenant, c.id, 'running')
    await round()
    await until(h, async () => (await sent(h, c.id)).every((r) => r.status !== 'queued'), 10_000)
    t.same((await participants(tenant, c.id, { limit: 100 })).data.map((p) => p.player_id).sort(), treated.map((p) => ids.get(p)!).sort(), 'the treated arm only')
    // In one batch: the muted player, two treated players and one held-out player deposit (twice for one).
    const depositors = [muted, treated[1]!, treated[2]!, control[0]!]
    const body = { events: [...depositors, treated[1]!].map((p) => ({ player_id: p, event_type: 'deposit', event_id: eventId(), payload: { amount: 20, currency: 'EUR' } })) }
    await must(h.request('POST', '/events', { key: tenant.key, body }), 200)
    await ctx.stream!.idle()
    await round()
    await until(h, async () => (await sent(h, c.id)).every((r) => r.status !== 'queued'), 10_000)
    const s = await stepsOf(c.id)
    for (const p of [muted, treated[1]!, treated[2]!]) t.same(s.get(ids.get(p)!), ['hello', 'thanks'], `${p}: on_event`)
    t.notOk(s.has(ids.get(control[0]!)!), 'the held-out player is messaged nothing')
    const conversions = await ctx.sql<{ player_id: string; control: boolean }[]>`select player_id, control from campaign_conversions where campaign_id = ${c.id}`
    // §4: "a player who was delivered a message and then does that event within the window counts once in converted".
    t.same(conversions.filter((r) => !r.control).map((r) => r.player_id).sort(), [ids.get(treated[1]!), ids.get(treated[2]!)].sort(), 'the muted player (nothing delivered) does not convert')
    t.same(conversions.filter((r) => r.control).map((r) => r.player_id), [ids.get(control[0]!)])
    const rows = await sent(h, c.id)
    const count = (st: string) => rows.filter((r) => r.status === st).length
    t.match((await campaign(h, tenant, c.id)).stats, {
      audience: names.length, control: control.length, converted: 2, control_converted: 1,
      delivered: count('delivered'), suppressed: count('suppressed'), sent: count('delivered'),
    })
    t.equal(count('suppressed'), 2, "the muted player's two messages")
    const fired = await ctx.sql<{ data: any }[]>`select data from outbox where event = 'player.converted' and data->>'campaign_id' = ${c.id}`
    t.equal(fired.length, 2, 'player.converted once per treated conversion')
  })

  t.test('a journey of a second brand: entered, moved and listed only through that brand', async (t) => {
    const tenant = await h.createTenant()
    const b2 = await tenant.createBrand('second')
    const inB2 = { headers: { 'x-brand': b2.slug } }
    const tpl = (await must(h.request('POST', '/notifications/templates', { key: tenant.key, ...inB2, body: { name: 't', channel: 'in_app', body: 'Hi' } }), 201)).data.id
    const seg = (await must(h.request('POST', '/segments', { key: tenant.key, ...inB2, body: { name: 's', type: 'dynamic', rules: { field: 'metadata.vip', op: 'eq', value: true } } }), 201)).data.id
    const c = (await must(h.request('POST', '/campaigns', { key: tenant.key, ...inB2, body: { name: 'b2', type: 'journey', channels: ['in_app'], target_segment_id: seg, config: { trigger: { event_type: 'login' }, steps: [
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'hi', on_timeout: null },
      { id: 'hi', type: 'send', channel: 'in_app', template_id: tpl, next: null },
    ] } } }), 201)).data
    await move(h, tenant, c.id, 'running')
    // The same external id in both brands: two players.
    await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'twin', metadata: { vip: true } } }), 201)
    await must(h.request('POST', '/players', { key: tenant.key, ...inB2, body: { external_id: 'twin', metadata: { vip: true } } }), 201)
    await event(tenant, 'twin', 'login')
    t.equal((await participants(tenant, c.id)).data.length, 0, "the default brand's login enters nobody")
    await event(tenant, 'twin', 'login', {}, { brand: b2.slug })
    const twin2 = await idOf(b2.id, 'twin')
    t.same((await participants(tenant, c.id)).data.map((p) => p.player_id), [twin2])
    await round()
    await event(tenant, 'twin', 'deposit', { amount: 10, currency: 'EUR' })
    await round()
    t.match((await statusOf(tenant, c.id))[twin2], { status: 'waiting', step: 'dep?' }, "the default brand's deposit moves nothing")
    await event(tenant, 'twin', 'deposit', { amount: 10, currency: 'EUR' }, { brand: b2.slug })
    await round()
    t.same((await stepsOf(c.id)).get(twin2), ['hi'])
    const pinnedMain = await tenant.createKey({ brand: tenant.brand.slug })
    const pinnedB2 = await tenant.createKey({ brand: b2.slug })
    t.equal((await h.request('GET', `/campaigns/${c.id}/participants`, { key: pinnedMain.key })).status, 404, "another brand's key: 404")
    t.equal((await participants(tenant, c.id, {}, pinnedB2.key)).data.length, 1)
    t.match((await campaign(h, tenant, c.id)).stats, { audience: 1 })
  })

  t.test('a template deactivated mid-journey: the journey neither stalls nor errs; an edit of the running campaign names it', async (t) => {
    const tenant = await h.createTenant()
    const [hello, later] = [await template(h, tenant), await template(h, tenant)]
    const steps = [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 3600, next: 'later' },
      { id: 'later', type: 'send', channel: 'in_app', template_id: later, next: null },
    ]
    const c = await journey(tenant, steps, { trigger: { event_type: 'login' } })
    await event(tenant, 'x', 'login')
    await round()
    await must(h.request('DELETE', `/notifications/templates/${later}`, { key: tenant.key }), 200)
    // docs/campaigns.md: "A PATCH of a scheduled, running or paused campaign is checked the same way".
    const edit = await h.request('PATCH', `/campaigns/${c}`, { key: tenant.key, body: { config: { trigger: { event_type: 'login' }, steps } } })
    t.equal(edit.status, 400)
    t.same(fieldsOf(edit.body), ['config.steps.2.template_id'])
    await elapse(c)
    await round()
    await until(h, async () => (await sent(h, c)).length === 2 && (await sent(h, c)).every((r) => r.status !== 'queued'), 10_000)
    const id = await idOf(tenant.brand.id, 'x')
    t.match((await statusOf(tenant, c))[id], { status: 'completed' }, 'the participant is not stuck at the step')
    t.ok((await sent(h, c)).every((r) => ['delivered', 'suppressed', 'failed'].includes(r.status)), 'every message reached a final status')
    const res = await h.request('GET', `/campaigns/${c}`, { key: tenant.key })
    t.equal(res.status, 200)
  })

  t.test('duplicate trigger events: one entry, one enrolment; max_per_player does not re-enter a journey', async (t) => {
    const tenant = await h.createTenant()
    const tpl = await template(h, tenant)
    const c = await journey(tenant, [{ id: 'hi', type: 'send', channel: 'in_app', template_id: tpl, next: null }], { trigger: { event_type: 'login' }, max_per_player: 3 })
    const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'login' }, max_per_player: 2 } })
    await move(h, tenant, trig.id, 'running')
    const e1 = eventId()
    const e2 = eventId()
    const batch = (ids: string[]) => ({ events: ids.map((event_id) => ({ player_id: 'dup', event_type: 'login', event_id })) })
    const first = await must(h.request('POST', '/events', { key: tenant.key, body: batch([e1, e1, e2]) }), 200)
    t.match(first, { received: 3, stored: 2, deduped: 1 })
    const again = await must(h.request('POST', '/events', { key: tenant.key, body: batch([e1, e2]) }), 200)
    t.match(again, { received: 2, stored: 0, deduped: 2 })
    await ctx.stream!.idle()
    await round()
    await event(tenant, 'dup', 'login')
    await event(tenant, 'dup', 'login')
    await round()
    const id = await idOf(tenant.brand.id, 'dup')
    t.equal((await participants(tenant, c)).data.length, 1, 'one journey entry whatever max_per_player')
    t.same((await stepsOf(c)).get(id), ['hi'])
    t.equal((await sent(h, trig.id)).length, 2, 'the triggered campaign: two distinct events, then the cap')
  })

  t.test('triggers and wait_for_event read a mapped event type and its mapped fields (§1)', async (t) => {
    const tenant = await h.createTenant()
    // contract.md: the mapping's `type` is the type stored, `fields` the canonical fields derived.
    await must(h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'dep_ok', type: 'deposit', fields: { amount: 'payload.amt', currency: 'payload.cur' } }] }), 200)
    const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 10 }] } } })
    await move(h, tenant, trig.id, 'running')
    const c = await journey(tenant, [
      { id: 'dep?', type: 'wait_for_event', event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 100 }, { field: 'currency', op: 'eq', value: 'eur' }], timeout_seconds: 600, on_event: 'hi', on_timeout: null },
      { id: 'hi', type: 'send', channel: 'in_app', template_id: await template(h, tenant), next: null },
    ], { trigger: { event_type: 'login' } })
    await event(tenant, 'm', 'login')
    await round()
    await event(tenant, 'm', 'dep_ok', { amt: 5, cur: 'EUR' })
    t.equal((await sent(h, trig.id)).length, 0, 'amount 5: no trigger')
    await event(tenant, 'm', 'dep_ok', { amt: 50, cur: 'EUR' })
    t.equal((await sent(h, trig.id)).length, 1, 'amount 50: triggered')
    await round()
    t.equal((await sent(h, c)).length, 0, 'below the step filter: still waiting')
    await event(tenant, 'm', 'dep_ok', { amt: '150.50', cur: 'EUR' })
    await round()
    t.same([...(await stepsOf(c)).values()], [['hi']], 'the mapped deposit of 150.50 EUR ended the wait')
  })

  t.test('an edit of a running journey that removes the step players wait at does not report them as having completed it', async (t) => {
    // docs/campaigns.md: "A PATCH of a scheduled, running or paused campaign is checked the same way ..., so an
    // edit cannot break a running campaign"; §4 participants' `completed` is a player who went through the
    // journey. Here the player never reached 'bye'. Either answer is sound: the edit refused (400 naming
    // config.steps) with the player still waiting, or the player taken out of the journey (exited).
    const tenant = await h.createTenant()
    const [hello, bye] = [await template(h, tenant), await template(h, tenant)]
    const steps = [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 3600, next: 'bye' },
      { id: 'bye', type: 'send', channel: 'in_app', template_id: bye, next: null },
    ]
    const c = await journey(tenant, steps, { trigger: { event_type: 'login' } })
    await event(tenant, 'x', 'login')
    await round()
    const id = await idOf(tenant.brand.id, 'x')
    t.match((await statusOf(tenant, c))[id], { status: 'waiting', step: 'pause' })
    // The wait renamed: 'pause' is gone.
    const renamed = [{ ...steps[0], next: 'pause-2' }, { ...steps[1], id: 'pause-2' }, steps[2]]
    const edit = await h.request('PATCH', `/campaigns/${c}`, { key: tenant.key, body: { config: { trigger: { event_type: 'login' }, steps: renamed } } })
    await elapse(c)
    await round()
    const p = (await statusOf(tenant, c))[id]
    if (edit.status === 400) {
      t.ok(fieldsOf(edit.body).some((f) => f.startsWith('config.steps')), 'the refusal names config.steps')
      t.match(p, { status: 'waiting', step: 'pause' })
    } else {
      t.equal(edit.status, 200)
      t.not(p.status, 'completed', `the player who never reached 'bye' is not reported completed (got ${p.status})`)
    }
  })

  t.test('a player who is not active does not spend the one entry of a marketing journey: entered once active again', async (t) => {
    // docs/campaigns.md: a journey is entered "once per player and campaign", and "a marketing journey keeps
    // only active players". A self-excluded player's trigger enters nobody, so the entry is still there later.
    const tenant = await h.createTenant()
    const hello = await template(h, tenant)
    const c = await journey(tenant, [{ id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: null }], { trigger: { event_type: 'login' } })
    await event(tenant, 'rg', 'status_change', { status: 'self_excluded', reason: 'rg' })
    await event(tenant, 'rg', 'login')
    await round()
    t.same(Object.keys(await statusOf(tenant, c)), [], 'not entered while self-excluded')
    await event(tenant, 'rg', 'status_change', { status: 'active', reason: 'lifted' })
    await event(tenant, 'rg', 'login')
    await round()
    const id = await idOf(tenant.brand.id, 'rg')
    t.match((await statusOf(tenant, c))[id], { status: 'completed' }, 'entered, and through the journey, once active')
    t.same((await stepsOf(c)).get(id), ['hello'], 'its message once')
  })
})

// Adversarial checks of campaign execution, part 2 (contract-engines §4, docs/campaigns.md "Execution"):
// journeys (wait_for_event against other players', other brands' and other tenants' events, events before
// the player reached the step and after its timeout, branches on the player as it is now, entry from the
// segment and by trigger giving one state per player, no re-entry), recurring campaigns on an injected
// clock (cron in an odd-offset IANA zone, members at each tick, ticks while paused, end_at), pause /
// resume / cancel of held sends and journeys, the hold-out of journeys and recurring ticks, conversions,
// stats against participants and notifications, the participants listing, validation on start, and
// status moves of an engine-completed campaign.
import { createHash } from 'node:crypto'
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { campaign, createCampaign, fieldsOf, move, must, segment, sent, template, until } from './helpers.ts'

// The engine only moves when a test drives it (round / until). The clock is real time unless a test sets
// `fake` (recurring schedules), and always restored.
let fake: Date | null = null
const h = await startHarness(t, { clock: () => fake ?? new Date(), env: { CAMPAIGN_ENGINE_POLL_MS: '3600000', INGEST_ACK_AFTER: 'postgres' } })
const ctx = h.app.ctx
ctx.campaigns!.wake = () => {}
const round = () => ctx.campaigns!.round()
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/**
 * Time passes for a campaign's pending waits: a journey's waits and a trigger's delays are due now (in the
 * database's time, which the engine's queues compare with), instead of the test sleeping them out.
 */
async function elapse(campaignId: string) {
  await ctx.sql`update campaign_participants set wake_at = now() - interval '1 second' where campaign_id = ${campaignId} and status = 'waiting'`
  await ctx.sql`update campaign_runs set due_at = now() - interval '1 second' where campaign_id = ${campaignId} and state = 'selected' and lease_owner is null`
}
let n = 0
const eventId = () => `adv2-${process.pid}-${++n}`

async function event(tenant: TestTenant, player: string, type: string, payload: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  await must(h.request('POST', '/events', { key: tenant.key, body: { player_id: player, event_type: type, event_id: eventId(), timestamp: new Date().toISOString(), payload, ...extra } }), 200)
  await ctx.stream!.idle()
}

const idOf = async (brandId: string, external: string) =>
  (await ctx.sql<{ id: string }[]>`select id from players where brand_id = ${brandId} and external_id = ${external}`)[0]?.id

async function participants(tenant: TestTenant, campaignId: string, query: Record<string, string | number> = {}, key = tenant.key) {
  return (await must(h.request('GET', `/campaigns/${campaignId}/participants`, { key, query }), 200)) as { data: any[]; next_cursor: string | null }
}

/** Steps sent per player (from the exactly-once key), in send order. */
async function stepsOf(campaignId: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>()
  for (const r of await sent(h, campaignId)) out.set(r.player_id, [...(out.get(r.player_id) ?? []), r.step])
  return out
}

const statusOf = async (tenant: TestTenant, campaignId: string): Promise<Record<string, any>> =>
  Object.fromEntries((await participants(tenant, campaignId, { limit: 100 })).data.map((p) => [p.player_id, p]))

const outbox = (event: string, campaignId: string) =>
  ctx.sql<{ data: any }[]>`select data from outbox where event = ${event} and data->>'campaign_id' = ${campaignId}`

/** The arm docs/campaigns.md fixes: md5("<campaign>:<player>"), first 32 bits mod 10,000 < percent × 100. */
const heldOut = (campaignId: string, playerId: string, percent: number) =>
  createHash('md5').update(`${campaignId}:${playerId}`).digest().readUInt32BE(0) % 10_000 < percent * 100

const player = async (tenant: TestTenant, external: string, body: Record<string, unknown> = {}) =>
  (await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: external, ...body } }), 201)).data.id as string

// ---------------------------------------------------------------------------------------------------------
// Journeys

t.test("wait_for_event: moved only by this player's own event, stored after it reached the step", async (t) => {
  const tenant = await h.createTenant()
  const second = await tenant.createBrand('second')
  const stranger = await h.createTenant()
  const [hello, thanks] = [await template(h, tenant), await template(h, tenant)]
  const steps = [
    { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'deposit?' },
    { id: 'deposit?', type: 'wait_for_event', event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 10 }], timeout_seconds: 600, on_event: 'thanks', on_timeout: null },
    { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
  ]
  const c = await createCampaign(h, tenant, { type: 'journey', config: { trigger: { event_type: 'login' }, steps } })
  await move(h, tenant, c.id, 'running')
  // Another tenant runs the same journey for its own player of the same external id.
  const theirs = await createCampaign(h, stranger, { type: 'journey', config: { trigger: { event_type: 'login' }, steps: [
    { id: 'deposit?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'thanks', on_timeout: null },
    { id: 'thanks', type: 'send', channel: 'in_app', template_id: await template(h, stranger), next: null },
  ] } })
  await move(h, stranger, theirs.id, 'running')

  await event(tenant, 'waiter', 'login')
  await event(stranger, 'waiter', 'login')
  // 'early' deposits before it enters the journey: that deposit is not the one the step waits for.
  await event(tenant, 'early', 'deposit', { amount: 50, currency: 'EUR' })
  await event(tenant, 'early', 'login')
  await round()
  const ids = { waiter: (await idOf(tenant.brand.id, 'waiter'))!, early: (await idOf(tenant.brand.id, 'early'))! }
  let st = await statusOf(tenant, c.id)
  t.match(st[ids.waiter], { status: 'waiting', step: 'deposit?' })
  t.match(st[ids.early], { status: 'waiting', step: 'deposit?' })

  // Deposits that are not the waiter's: another player, the same external id in another brand and in
  // another tenant, and the waiter's own event of another type.
  await event(tenant, 'someone', 'deposit', { amount: 50, currency: 'EUR' })
  await event(tenant, 'waiter', 'deposit', { amount: 50, currency: 'EUR' }, { brand: second.slug })
  await event(stranger, 'waiter', 'deposit', { amount: 50, currency: 'EUR' })
  await event(tenant, 'waiter', 'login')
  await round()
  st = await statusOf(tenant, c.id)
  t.match(st[ids.waiter], { status: 'waiting', step: 'deposit?' }, "others' deposits do not move the waiter")
  t.match(st[ids.early], { status: 'waiting', step: 'deposit?' }, 'a deposit before the player entered does not move it')
  t.equal(Object.keys(st).length, 2, 'nobody else entered: the stranger tenant and the other brand have their own players')
  t.same((await stepsOf(theirs.id)).get((await idOf(stranger.brand.id, 'waiter'))!), ['thanks'], "the other tenant's journey saw its own player's deposit")

  await event(tenant, 'waiter', 'deposit', { amount: 50, currency: 'EUR' })
  await round()
  st = await statusOf(tenant, c.id)
  t.match(st[ids.waiter], { status: 'completed' })
  t.match(st[ids.early], { status: 'waiting', step: 'deposit?' })
  const s = await stepsOf(c.id)
  t.same(s.get(ids.waiter), ['hello', 'thanks'])
  t.same(s.get(ids.early), ['hello'])

  // docs/campaigns.md (where §4 is silent): entry is "once per player and campaign"; a completed player's
  // next login does not enter it again.
  await event(tenant, 'waiter', 'login')
  await round()
  t.same((await stepsOf(c.id)).get(ids.waiter), ['hello', 'thanks'], 'no second entry after completing')
  t.equal((await participants(tenant, c.id)).data.length, 2)
})

/**
 * Stream lag (the documented p50 is ~1 s): events posted by `post` stay unconsumed by the campaigns'
 * consumer while `meanwhile` runs, then it takes them. (If the stream's own poll wins the race for them
 * first, the lag is simply shorter.)
 */
async function withStreamLag(tenant: TestTenant, post: () => Promise<unknown>, meanwhile: () => Promise<unknown>) {
  const stream = ctx.stream!
  const wake = stream.wake
  stream.wake = () => {}
  try {
    await post()
    await ctx.sql`update event_stream set available_at = now() + interval '1 hour' where consumer = 'campaigns' and tenant_id = ${tenant.id}`
    await meanwhile()
    await ctx.sql`update event_stream set available_at = now() where consumer = 'campaigns' and tenant_id = ${tenant.id}`
  } finally {
    stream.wake = wake
  }
  await stream.idle()
}

t.test('wait_for_event behind a lagging stream: a deposit stored before the player entered the journey does not count', async (t) => {
  const tenant = await h.createTenant()
  const id = await player(tenant, 'lag', { metadata: { j: true } })
  // Another running campaign reacts to deposits, so the deposit is on the campaigns' stream.
  const other = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' } } })
  await move(h, tenant, other.id, 'running')
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: { steps: [
      { id: 'deposit?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 600, on_event: 'thanks', on_timeout: null },
      { id: 'thanks', type: 'send', channel: 'in_app', template_id: await template(h, tenant), next: null },
    ] },
  })
  await withStreamLag(
    tenant,
    () => must(h.request('POST', '/events', { key: tenant.key, body: { player_id: 'lag', event_type: 'deposit', event_id: eventId(), payload: { amount: 50, currency: 'EUR' } } }), 200),
    async () => {
      // The journey starts after the deposit was stored; the player enters and reaches the wait.
      await move(h, tenant, c.id, 'running')
      await round()
    },
  )
  await round()
  t.match((await statusOf(tenant, c.id))[id], { status: 'waiting', step: 'deposit?' }, 'still waiting for a deposit of its own time in the journey')
  t.same((await stepsOf(c.id)).get(id), undefined, 'no thanks for a deposit made before the journey began')
  t.same((await sent(h, other.id)).map((r) => r.player_id), [id], 'the lagging deposit was consumed (the other campaign reacted)')
})

let lateOutcome: string[] | undefined
t.test('wait_for_event at its timeout: the player takes exactly one way out', async (t) => {
  const tenant = await h.createTenant()
  const [thanks, nudge] = [await template(h, tenant), await template(h, tenant)]
  const c = await createCampaign(h, tenant, { type: 'journey', config: { trigger: { event_type: 'login' }, steps: [
    { id: 'deposit?', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 1, on_event: 'thanks', on_timeout: 'nudge' },
    { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
    { id: 'nudge', type: 'send', channel: 'in_app', template_id: nudge, next: null },
  ] } })
  await move(h, tenant, c.id, 'running')
  await event(tenant, 'late', 'login')
  await event(tenant, 'later', 'login')
  await round()
  t.equal((await participants(tenant, c.id, { status: 'waiting' })).data.length, 2)
  await sleep(1300)
  // 'late' deposits after its timeout ran out but before the engine looked at it; 'later' after the
  // engine took the timeout.
  await event(tenant, 'late', 'deposit', { amount: 50, currency: 'EUR' })
  await round()
  await event(tenant, 'later', 'deposit', { amount: 50, currency: 'EUR' })
  await round()
  const s = await stepsOf(c.id)
  const ids = { late: (await idOf(tenant.brand.id, 'late'))!, later: (await idOf(tenant.brand.id, 'later'))! }
  t.same(s.get(ids.later), ['nudge'], 'timed out: the deposit after it moves nothing')
  lateOutcome = s.get(ids.late)
  t.equal(lateOutcome?.length, 1, 'one way out, never both')
  t.ok(Object.values(await statusOf(tenant, c.id)).every((p) => p.status === 'completed'))
})

t.test('wait_for_event: an event stored after the timeout ran out is too late for on_event', async (t) => {
  t.comment(`late: ${JSON.stringify(lateOutcome)}`)
  t.same(lateOutcome, ['nudge'], 'the timeout passed before the deposit: on_timeout')
})

t.test('a branch reads the player as it is when the branch is reached, both ways', async (t) => {
  const tenant = await h.createTenant()
  const ids = {
    stays: await player(tenant, 'stays', { metadata: { j: true, tier: 'gold' } }),
    drops: await player(tenant, 'drops', { metadata: { j: true, tier: 'gold' } }),
    moves: await player(tenant, 'moves', { metadata: { j: true, tier: 'none' } }),
    plain: await player(tenant, 'plain', { metadata: { j: true, tier: 'none' } }),
  }
  const [gold, plain] = [await template(h, tenant), await template(h, tenant)]
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: { steps: [
      { id: 'breathe', type: 'wait', seconds: 1, next: 'gold?' },
      { id: 'gold?', type: 'branch', condition: { any: [{ field: 'metadata.tier', op: 'eq', value: 'gold' }, { field: 'country', op: 'eq', value: 'IT' }] }, then: 'gold', else: 'plain' },
      { id: 'gold', type: 'send', channel: 'in_app', template_id: gold, next: null },
      { id: 'plain', type: 'send', channel: 'in_app', template_id: plain, next: null },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  await round()
  t.equal((await participants(tenant, c.id, { status: 'waiting' })).data.length, 4, 'all four entered from the segment and wait')
  // While they wait: one leaves the rule (metadata, shallow-merged), one enters it through its profile.
  await must(h.request('PATCH', `/players/${ids.drops}`, { key: tenant.key, body: { metadata: { tier: 'silver' } } }), 200)
  await event(tenant, 'moves', 'profile_update', { country: 'IT' })
  await elapse(c.id)
  await round()
  t.equal((await participants(tenant, c.id, { status: 'completed' })).data.length, 4)
  const s = await stepsOf(c.id)
  t.same(s.get(ids.stays), ['gold'], 'then')
  t.same(s.get(ids.drops), ['plain'], 'left the rule during the wait: else')
  t.same(s.get(ids.moves), ['gold'], 'joined the rule through its profile during the wait: then')
  t.same(s.get(ids.plain), ['plain'], 'else')
})

t.test('entered from the segment and by trigger: one state and one message per player, no re-entry', async (t) => {
  const tenant = await h.createTenant()
  const ids = { s1: await player(tenant, 's1', { metadata: { j: true } }), s2: await player(tenant, 's2', { metadata: { j: true } }) }
  const [hello, bye] = [await template(h, tenant), await template(h, tenant)]
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: { trigger: { event_type: 'login' }, steps: [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 1, next: 'bye' },
      { id: 'bye', type: 'send', channel: 'in_app', template_id: bye, next: null },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  // Before the engine has entered the start's audience, s1 also enters by trigger; an outsider's login
  // enters nobody (the segment is checked for trigger entries too).
  await event(tenant, 's1', 'login')
  await event(tenant, 'outsider', 'login')
  await round()
  await event(tenant, 's1', 'login')
  await round()
  let listed = (await participants(tenant, c.id)).data
  t.same(listed.map((p) => p.player_id).sort(), [ids.s1, ids.s2].sort(), 'one participant per player; the outsider is not in the segment')
  t.same((await sent(h, c.id)).map((r) => r.step), ['hello', 'hello'], 'hello once each')

  // s2 leaves (self-exclusion), comes back and logs in: it left the journey and does not enter again.
  await must(h.request('PATCH', `/players/${ids.s2}`, { key: tenant.key, body: { status: 'self_excluded' } }), 200)
  await must(h.request('PATCH', `/players/${ids.s2}`, { key: tenant.key, body: { status: 'active' } }), 200)
  await event(tenant, 's2', 'login')
  await elapse(c.id)
  await round()
  await event(tenant, 's1', 'login')
  await round()
  listed = (await participants(tenant, c.id)).data
  t.equal(listed.length, 2)
  t.match(Object.fromEntries(listed.map((p) => [p.player_id, p.status])), { [ids.s1]: 'completed', [ids.s2]: 'exited' })
  const s = await stepsOf(c.id)
  t.same(s.get(ids.s1), ['hello', 'bye'])
  t.same(s.get(ids.s2), ['hello'])
  t.equal((await campaign(h, tenant, c.id)).stats.audience, 2, 'audience: two players, whichever way they entered')
})

t.test("a journey's hold-out: never entered nor messaged, by segment or trigger; both arms' conversions", async (t) => {
  const tenant = await h.createTenant()
  const names = Array.from({ length: 16 }, (_, i) => `h${i}`)
  for (const p of names) await player(tenant, p, { metadata: { j: true } })
  const hello = await template(h, tenant)
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: {
      trigger: { event_type: 'login' }, control_group_percent: 50, conversion: { event_type: 'deposit', within_hours: 24 },
      steps: [{ id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: null }],
    },
  })
  await move(h, tenant, c.id, 'running')
  await round()
  const ids = new Map<string, string>()
  for (const p of names) ids.set(p, (await idOf(tenant.brand.id, p))!)
  const control = names.filter((p) => heldOut(c.id, ids.get(p)!, 50))
  const treated = names.filter((p) => !control.includes(p))
  t.ok(control.length > 0 && treated.length > 0, `both arms (${control.length} held out)`)
  // Everyone logs in too: a held-out player is not entered by its trigger either.
  for (const p of names) await event(tenant, p, 'login')
  await round()
  const listed = (await participants(tenant, c.id, { limit: 100 })).data
  t.same(listed.map((p) => p.player_id).sort(), treated.map((p) => ids.get(p)!).sort(), 'the treated arm only, once each')
  const rows = await sent(h, c.id)
  t.same(rows.map((r) => r.player_id).sort(), treated.map((p) => ids.get(p)!).sort(), 'one message per treated player, none to the hold-out')
  await until(h, async () => (await sent(h, c.id)).every((r) => r.status === 'delivered'), 10_000)

  // One player of each arm deposits.
  await event(tenant, treated[0]!, 'deposit', { amount: 20, currency: 'EUR' })
  await event(tenant, control[0]!, 'deposit', { amount: 20, currency: 'EUR' })
  await event(tenant, treated[0]!, 'deposit', { amount: 30, currency: 'EUR' })
  const stats = (await campaign(h, tenant, c.id)).stats
  t.match(stats, { audience: names.length, control: control.length, converted: 1, control_converted: 1, delivered: treated.length, sent: treated.length })
  // §4: the treated conversion fires player.converted with campaign_id, once (the second deposit counts no more).
  const fired = (await outbox('player.converted', c.id)).filter((f) => f.data.player_id === ids.get(treated[0]!))
  t.equal(fired.length, 1, 'player.converted once for the treated player')
  t.match(fired[0]?.data, { player_id: ids.get(treated[0]!), campaign_id: c.id })
})

// ---------------------------------------------------------------------------------------------------------
// Transactional journeys; pause, resume, cancel; message counters

t.test('a transactional journey keeps a suspended player and still never messages a closed one', async (t) => {
  const tenant = await h.createTenant()
  const ids = { sus: await player(tenant, 'sus', { metadata: { j: true } }), cl: await player(tenant, 'cl', { metadata: { j: true } }) }
  const [hello, later] = [await template(h, tenant), await template(h, tenant)]
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: { class: 'transactional', steps: [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 60, next: 'later' },
      { id: 'later', type: 'send', channel: 'in_app', template_id: later, next: null },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  await round()
  await must(h.request('PATCH', `/players/${ids.sus}`, { key: tenant.key, body: { status: 'suspended' } }), 200)
  await must(h.request('PATCH', `/players/${ids.cl}`, { key: tenant.key, body: { status: 'closed' } }), 200)
  // §4: "a player who stops being active leaves a *marketing* journey"; §3: transactional messages skip
  // consent, caps and quiet hours and "still never go to a closed player".
  t.match((await statusOf(tenant, c.id))[ids.sus], { status: 'waiting', step: 'pause' }, 'the suspended player stays in a transactional journey')
  await elapse(c.id)
  await round()
  t.same((await stepsOf(c.id)).get(ids.sus), ['hello', 'later'], 'and gets the next step')
  await until(h, async () => (await sent(h, c.id)).every((r) => r.status !== 'queued'), 10_000)
  const rows = await sent(h, c.id)
  t.ok(rows.filter((r) => r.player_id === ids.sus).every((r) => r.status === 'delivered'), 'delivered to the suspended player')
  t.notOk(rows.some((r) => r.player_id === ids.cl && r.step === 'later' && r.status === 'delivered'), 'nothing more delivered to the closed player')
})

t.test('a running campaign whose template was deactivated can still be paused', async (t) => {
  const tenant = await h.createTenant()
  const tpl = await template(h, tenant)
  const c = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' } } })
  await move(h, tenant, c.id, 'running')
  await must(h.request('DELETE', `/notifications/templates/${tpl}`, { key: tenant.key }), 200)
  const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'paused' } })
  t.equal(res.status, 200, `pause: ${res.text}`)
  // Resuming is a move to running: that one is validated (§4).
  const resume = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } })
  t.equal(resume.status, 400)
  t.ok(fieldsOf(resume.body).includes('config.templates.in_app'))
})

t.test('a running campaign whose template was deactivated can still be cancelled', async (t) => {
  const tenant = await h.createTenant()
  const tpl = await template(h, tenant)
  const c = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' } } })
  await move(h, tenant, c.id, 'running')
  await must(h.request('DELETE', `/notifications/templates/${tpl}`, { key: tenant.key }), 200)
  const res = await h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key })
  t.equal(res.status, 200, res.text)
  t.equal(res.body.data?.status, 'cancelled')
})

t.test('message counters count notifications, one per channel; audience counts the player once', async (t) => {
  const tenant = await h.createTenant()
  await player(tenant, 'two', { email: 'two@example.com' })
  const c = await createCampaign(h, tenant, {
    type: 'triggered', channels: ['in_app', 'email'],
    config: { templates: { in_app: await template(h, tenant), email: await template(h, tenant, 'email') }, trigger: { event_type: 'deposit' } },
  })
  await move(h, tenant, c.id, 'running')
  await event(tenant, 'two', 'deposit', { amount: 10, currency: 'EUR' })
  await until(h, async () => (await sent(h, c.id)).length === 2 && (await sent(h, c.id)).every((r) => r.status !== 'queued'), 10_000)
  const rows = await sent(h, c.id)
  t.same(rows.map((r) => r.channel).sort(), ['email', 'in_app'])
  // Email is opt-in by default (§3 consent_policy) and the player never consented: suppressed.
  t.match(rows.find((r) => r.channel === 'email'), { status: 'suppressed' })
  t.match(rows.find((r) => r.channel === 'in_app'), { status: 'delivered' })
  t.match((await campaign(h, tenant, c.id)).stats, { audience: 1, control: 0, sent: 1, delivered: 1, suppressed: 1, failed: 0, bounced: 0, opened: 0, clicked: 0 })
})

t.test('pause holds a delayed trigger send and journey entries; resume sends it; cancel ends a journey', async (t) => {
  const tenant = await h.createTenant()
  const trig = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' }, delay_seconds: 1 } })
  await move(h, tenant, trig.id, 'running')
  const [hello, later] = [await template(h, tenant), await template(h, tenant)]
  const j = await createCampaign(h, tenant, { type: 'journey', config: { trigger: { event_type: 'login' }, steps: [
    { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
    { id: 'pause', type: 'wait', seconds: 1, next: 'later' },
    { id: 'later', type: 'send', channel: 'in_app', template_id: later, next: null },
  ] } })
  await move(h, tenant, j.id, 'running')
  await event(tenant, 'held', 'deposit', { amount: 10, currency: 'EUR' })
  await event(tenant, 'inside', 'login')
  await round()
  t.equal((await sent(h, trig.id)).length, 0, 'the trigger send waits out its delay')
  t.equal((await sent(h, j.id)).length, 1)

  await move(h, tenant, trig.id, 'paused')
  await move(h, tenant, j.id, 'paused')
  // Stored while paused: enters nobody, not even after the resume.
  await event(tenant, 'pausedlogin', 'login')
  await elapse(trig.id)
  await elapse(j.id)
  await round()
  t.equal((await sent(h, trig.id)).length, 0, 'the delay ran out while paused: still held')
  t.equal((await sent(h, j.id)).length, 1, 'the wait ran out while paused: nothing sent')

  await move(h, tenant, trig.id, 'running')
  await round()
  t.same((await sent(h, trig.id)).map((r) => r.player_id), [await idOf(tenant.brand.id, 'held')], 'resumed: the held send goes')
  await move(h, tenant, j.id, 'running')
  // Cancelled before the engine looked again: the rest of the journey is dropped.
  await must(h.request('DELETE', `/campaigns/${j.id}`, { key: tenant.key }), 200)
  await round()
  t.same((await sent(h, j.id)).map((r) => r.step), ['hello'], 'nothing after the cancel')
  const listed = (await participants(tenant, j.id)).data
  t.same(listed.map((p) => p.player_id), [await idOf(tenant.brand.id, 'inside')], 'the login while paused entered nobody')
  t.equal(listed[0]?.status, 'exited', 'the cancelled journey holds nobody waiting')
  await event(tenant, 'afterwards', 'login')
  await round()
  t.equal((await participants(tenant, j.id)).data.length, 1, 'a cancelled journey enters nobody')
  const res = await h.request('PATCH', `/campaigns/${j.id}`, { key: tenant.key, body: { status: 'running' } })
  t.equal(res.status, 400)
  t.match(res.body, { code: 'BAD_REQUEST', details: { from: 'cancelled', to: 'running', allowed: [] } })
})

// ---------------------------------------------------------------------------------------------------------
// Recurring, on the injected clock

t.test('recurring in Asia/Kathmandu (+05:45): the members at each tick, no tick while paused, end_at completes it', async (t) => {
  t.teardown(() => {
    fake = null
  })
  // Days before the real time: the delivery takes a message when its due time has come in the database's time.
  const day = (d: number) => new Date(Date.now() - (10 - d) * 86_400_000).toISOString().slice(0, 10)
  const at = (d: number, hm: string) => {
    fake = new Date(`${day(d)}T${hm}Z`)
  }
  at(0, '00:00:00')
  const tenant = await h.createTenant()
  const ids: Record<string, string> = {}
  for (const p of ['a', 'b', 'c', 'd', 'e', 'f']) ids[p] = await player(tenant, p, { metadata: { r: p !== 'f' } })
  const c = await createCampaign(h, tenant, {
    type: 'recurring', target_segment_id: await segment(h, tenant, { field: 'metadata.r', op: 'eq', value: true }),
    // 09:45 in Kathmandu is 04:00 UTC (in UTC the same cron would tick at 09:45).
    schedule: { cron: '45 9 * * *', timezone: 'Asia/Kathmandu', end_at: `${day(4)}T06:00:00Z` },
    config: { templates: { in_app: await template(h, tenant) }, control_group_percent: 50 },
  })
  await move(h, tenant, c.id, 'running')
  const runs = async () => (await ctx.sql<{ run_key: string }[]>`select run_key from campaign_runs where campaign_id = ${c.id} order by run_key`).map((r) => r.run_key)
  const tickOf = (d: number) => `tick:${day(d)}T04:00:00.000Z`
  const audienceOf = async (d: number) => (await ctx.sql<{ player_id: string; control: boolean }[]>`
    select a.player_id, a.control from campaign_audience a join campaign_runs r on r.id = a.run_id
    where r.campaign_id = ${c.id} and r.run_key = ${tickOf(d)}`)

  at(0, '03:59:59')
  await round()
  t.same(await runs(), [], 'no tick before 04:00 UTC')
  at(0, '04:00:00')
  await round()
  t.same(await runs(), [tickOf(0)], 'the first tick at 09:45 Kathmandu')
  at(0, '09:45:00')
  await round()
  t.same(await runs(), [tickOf(0)], 'none at 09:45 UTC')

  // Day 1: paused over the tick, with the engine looking while paused; day 2: paused over the tick, the
  // engine not looking until after the resume. Neither tick is sent late.
  at(1, '03:00:00')
  await move(h, tenant, c.id, 'paused')
  at(1, '04:00:30')
  await round()
  at(1, '05:00:00')
  await move(h, tenant, c.id, 'running')
  await round()
  at(2, '03:00:00')
  await move(h, tenant, c.id, 'paused')
  at(2, '04:30:00')
  await move(h, tenant, c.id, 'running')
  await round()
  t.same(await runs(), [tickOf(0)], 'no run for the ticks while paused')

  // Day 3: the segment changed: d leaves, f joins.
  await must(h.request('PATCH', `/players/${ids.d}`, { key: tenant.key, body: { metadata: { r: false } } }), 200)
  await must(h.request('PATCH', `/players/${ids.f}`, { key: tenant.key, body: { metadata: { r: true } } }), 200)
  at(3, '04:00:00')
  await round()
  t.same(await runs(), [tickOf(0), tickOf(3)])
  const first = await audienceOf(0)
  const third = await audienceOf(3)
  t.same(first.map((a) => a.player_id).sort(), ['a', 'b', 'c', 'd', 'e'].map((p) => ids[p]).sort(), 'tick 1: the members then')
  t.same(third.map((a) => a.player_id).sort(), ['a', 'b', 'c', 'e', 'f'].map((p) => ids[p]).sort(), 'tick 3: the members then')
  // The arm is a function of campaign and player: the same on every tick, as the documented hash says.
  t.ok([...first, ...third].every((a) => a.control === heldOut(c.id, a.player_id, 50)), 'arms by md5(campaign:player)')
  const treatedTicks = [...first, ...third].filter((a) => !a.control).map((a) => a.player_id).sort()
  const rows = await sent(h, c.id)
  t.same(rows.map((r) => r.player_id).sort(), treatedTicks, 'one message per treated member per tick, none to the hold-out')
  const stats = (await campaign(h, tenant, c.id)).stats
  const distinctControl = new Set([...first, ...third].filter((a) => a.control).map((a) => a.player_id))
  t.equal(stats.control, distinctControl.size, 'control counts held-out players')

  at(4, '04:00:00')
  await round()
  t.equal((await runs()).length, 3, 'day 4 ticks before end_at')
  at(4, '06:00:00')
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'completed', 'end_at completed it')
  t.match((await outbox('campaign.completed', c.id)).map((r) => r.data.reason), ['end_at'])
  at(5, '04:00:00')
  await round()
  t.equal((await runs()).length, 3, 'no tick after completion')
})

t.test('a recurring campaign scheduled to start at 09:00 with a 09:00 cron runs that first tick', async (t) => {
  t.teardown(() => {
    fake = null
  })
  const day = new Date(Date.now() - 2 * 86_400_000).toISOString().slice(0, 10)
  fake = new Date(`${day}T08:00:00Z`)
  const tenant = await h.createTenant()
  await player(tenant, 'x')
  const c = await createCampaign(h, tenant, {
    type: 'recurring', target_segment_id: await segment(h, tenant),
    schedule: { cron: '0 9 * * *', start_at: `${day}T09:00:00Z` }, config: { templates: { in_app: await template(h, tenant) } },
  })
  await move(h, tenant, c.id, 'scheduled')
  fake = new Date(`${day}T08:59:59Z`)
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'scheduled')
  // §4: at start_at the campaign becomes running; recurring runs "at each cron tick while running". The
  // engine's visit comes a few seconds after 09:00, as it does on a poll.
  fake = new Date(`${day}T09:00:03Z`)
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'running')
  const runs = (await ctx.sql<{ run_key: string }[]>`select run_key from campaign_runs where campaign_id = ${c.id}`).map((r) => r.run_key)
  t.same(runs, [`tick:${day}T09:00:00.000Z`], 'the 09:00 tick of the first day runs')
  t.equal((await sent(h, c.id)).length, 1)
  await must(h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key }), 200)
})

t.test('a scheduled campaign cancelled before its start_at never starts; one scheduled and left selects the members at start_at', async (t) => {
  t.teardown(() => {
    fake = null
  })
  const day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10)
  fake = new Date(`${day}T08:00:00Z`)
  const tenant = await h.createTenant()
  const early = await player(tenant, 'early', { metadata: { s: true } })
  const leaver = await player(tenant, 'leaver', { metadata: { s: true } })
  const seg = await segment(h, tenant, { field: 'metadata.s', op: 'eq', value: true })
  const tpl = await template(h, tenant)
  const body = { type: 'one_shot', target_segment_id: seg, schedule: { start_at: `${day}T09:00:00Z` }, config: { templates: { in_app: tpl } } }
  const dropped = await createCampaign(h, tenant, body)
  const kept = await createCampaign(h, tenant, body)
  await move(h, tenant, dropped.id, 'scheduled')
  await move(h, tenant, kept.id, 'scheduled')
  t.equal((await must(h.request('DELETE', `/campaigns/${dropped.id}`, { key: tenant.key }), 200)).data.status, 'cancelled')
  // Between scheduling and start_at the segment changes.
  const joiner = await player(tenant, 'joiner', { metadata: { s: true } })
  await must(h.request('PATCH', `/players/${leaver}`, { key: tenant.key, body: { metadata: { s: false } } }), 200)
  fake = new Date(`${day}T09:00:01Z`)
  await round()
  t.equal((await campaign(h, tenant, dropped.id)).status, 'cancelled', 'the cancelled one stays cancelled')
  t.equal((await sent(h, dropped.id)).length, 0, 'and sends nothing')
  t.equal((await campaign(h, tenant, kept.id)).status, 'completed')
  t.same((await sent(h, kept.id)).map((r) => r.player_id).sort(), [early, joiner].sort(), 'the members at start_at, not at scheduling')
})

// ---------------------------------------------------------------------------------------------------------
// One-shot: conversions, stats against notifications, terminal moves

t.test('a one-shot: stats agree with its notifications, an in-app read counts as opened, both arms convert', async (t) => {
  const tenant = await h.createTenant()
  const names = Array.from({ length: 20 }, (_, i) => `o${i}`)
  for (const p of names) await player(tenant, p, { status: p === 'o0' ? 'self_excluded' : 'active' })
  const c = await createCampaign(h, tenant, {
    type: 'one_shot', target_segment_id: await segment(h, tenant),
    config: { templates: { in_app: await template(h, tenant) }, control_group_percent: 40, conversion: { event_type: 'deposit', within_hours: 1 } },
  })
  await move(h, tenant, c.id, 'running')
  await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed')
  await until(h, async () => (await sent(h, c.id)).every((r) => r.status !== 'queued'), 10_000)
  const ids = new Map<string, string>()
  for (const p of names) ids.set(p, (await idOf(tenant.brand.id, p))!)
  const control = names.filter((p) => heldOut(c.id, ids.get(p)!, 40))
  const treated = names.filter((p) => !control.includes(p))
  t.ok(control.length > 0 && treated.length > 1, `both arms (${control.length} held out)`)

  const listed = (await must(h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: c.id, limit: 100 } }), 200)).data as any[]
  t.same(listed.map((x) => x.player_id).sort(), treated.map((p) => ids.get(p)!).sort(), 'a notification per treated member')
  const count = (status: string) => listed.filter((x) => x.status === status).length
  let stats = (await campaign(h, tenant, c.id)).stats
  t.match(stats, { audience: names.length, control: control.length, delivered: count('delivered'), suppressed: count('suppressed'), failed: 0, bounced: 0 })
  t.equal(stats.sent, count('delivered'), 'sent: delivered + bounced + failed')
  t.equal(stats.suppressed, treated.includes('o0') ? 1 : 0, 'only the self-excluded member suppressed')

  // A treated player reads it (the in-app open), converts, converts again; a held-out player converts; a
  // suppressed player's deposit converts nothing.
  const reader = treated.find((p) => p !== 'o0')!
  const note = listed.find((x) => x.player_id === ids.get(reader))!
  await must(h.request('POST', `/players/${ids.get(reader)}/inbox/${note.id}/read`, { key: tenant.key }), 200)
  await event(tenant, reader, 'deposit', { amount: 20, currency: 'EUR' })
  await event(tenant, reader, 'deposit', { amount: 20, currency: 'EUR' })
  const heldConverter = control.find((p) => p !== 'o0')!
  await event(tenant, heldConverter, 'deposit', { amount: 20, currency: 'EUR' })
  // o0 (self-excluded): suppressed if treated, so it converts nothing; held out, its window runs all the same.
  await event(tenant, 'o0', 'deposit', { amount: 20, currency: 'EUR' })
  // Another tenant's player of a treated member's external id deposits: not our player, no conversion.
  const stranger = await h.createTenant()
  await event(stranger, treated.find((p) => p !== 'o0' && p !== reader)!, 'deposit', { amount: 20, currency: 'EUR' })
  stats = (await campaign(h, tenant, c.id)).stats
  t.match(stats, { opened: 1, clicked: 0, converted: 1, control_converted: control.includes('o0') ? 2 : 1 })
  const fired = await outbox('player.converted', c.id)
  t.same(fired.filter((f) => f.data.player_id === ids.get(reader)).length, 1, 'player.converted once, with campaign_id, for the treated conversion')
  t.notOk(fired.some((f) => f.data.player_id === ids.get('o0') && !control.includes('o0')), 'none for a suppressed (never delivered) player')

  // Completed by the engine: terminal.
  for (const to of ['paused', 'running', 'cancelled']) {
    const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: to } })
    t.equal(res.status, 400, `completed → ${to}`)
    t.match(res.body.details, { from: 'completed', to, allowed: [] })
  }
  t.equal((await h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key })).status, 400)
})

// ---------------------------------------------------------------------------------------------------------
// Participants listing

t.test('GET /campaigns/{id}/participants: shape, status filter, cursor through pages, visibility', async (t) => {
  const tenant = await h.createTenant()
  for (let i = 0; i < 7; i++) await player(tenant, `q${i}`, { metadata: { j: true, stop: i % 3 === 0 } })
  const hello = await template(h, tenant)
  const c = await createCampaign(h, tenant, {
    type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }),
    config: { steps: [
      { id: 'stop?', type: 'branch', condition: { field: 'metadata.stop', op: 'eq', value: true }, then: null, else: 'hello' },
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'long' },
      { id: 'long', type: 'wait', seconds: 3600, next: null },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  await round()
  const all = await participants(tenant, c.id)
  t.equal(all.data.length, 7)
  t.equal(all.next_cursor, null)
  for (const p of all.data) {
    t.same(Object.keys(p).sort(), ['entered_at', 'player_id', 'status', 'step', 'updated_at'])
    t.ok(['completed', 'waiting'].includes(p.status))
    t.ok(Date.parse(p.updated_at) >= Date.parse(p.entered_at), 'updated_at not before entered_at')
  }
  t.equal(all.data.filter((p) => p.status === 'completed').length, 3, 'q0, q3, q6 ended at the branch')
  t.ok(all.data.filter((p) => p.status === 'waiting').every((p) => p.step === 'long'), 'the others wait at the long wait')

  // Pages of 2 through the 4 waiting ones, with the filter: each once, then null.
  const seen: string[] = []
  let cursor: string | null = null
  for (let page = 0; page < 5; page++) {
    const res: { data: any[]; next_cursor: string | null } = await participants(tenant, c.id, { status: 'waiting', limit: 2, ...(cursor ? { cursor } : {}) })
    t.ok(res.data.every((p) => p.status === 'waiting'))
    seen.push(...res.data.map((p) => p.player_id))
    cursor = res.next_cursor
    if (!cursor) break
  }
  t.equal(seen.length, 4)
  t.equal(new Set(seen).size, 4, 'no player twice across pages')
  t.same(seen, all.data.filter((p) => p.status === 'waiting').map((p) => p.player_id), 'entry order, as the unfiltered list')
  // A cursor belongs to its campaign.
  const other = await createCampaign(h, tenant, { type: 'journey', target_segment_id: await segment(h, tenant, { field: 'metadata.j', op: 'eq', value: true }), config: { steps: [{ id: 'w', type: 'wait', seconds: 3600 }] } })
  await move(h, tenant, other.id, 'running')
  await round()
  const first = await participants(tenant, c.id, { limit: 1 })
  t.equal((await h.request('GET', `/campaigns/${other.id}/participants`, { key: tenant.key, query: { limit: 1, cursor: first.next_cursor! } })).status, 400, "another campaign's cursor is refused")
  // A read-only key reads it; a key pinned to another brand of the tenant, and another tenant, do not see it.
  const reader = await tenant.createKey({ scopes: ['read'] })
  t.equal((await participants(tenant, c.id, {}, reader.key)).data.length, 7)
  await tenant.createBrand('elsewhere')
  const pinned = await tenant.createKey({ brand: 'elsewhere' })
  t.equal((await h.request('GET', `/campaigns/${c.id}/participants`, { key: pinned.key })).status, 404, 'a key pinned to another brand: 404')
  const stranger = await h.createTenant()
  t.equal((await h.request('GET', `/campaigns/${c.id}/participants`, { key: stranger.key })).status, 404)
  // The stats agree with the listing: seven entered, four messaged.
  t.match((await campaign(h, tenant, c.id)).stats, { audience: 7, control: 0 })
  t.equal((await sent(h, c.id)).length, 4)
})

// ---------------------------------------------------------------------------------------------------------
// Validation on start

t.test('moving to running refuses what the run could not do, naming each field (journey steps, conversion, references)', async (t) => {
  const tenant = await h.createTenant()
  const other = await h.createTenant()
  const seg = await segment(h, tenant)
  const inApp = await template(h, tenant)
  const email = await template(h, tenant, 'email')
  const inactive = await template(h, tenant)
  await must(h.request('DELETE', `/notifications/templates/${inactive}`, { key: tenant.key }), 200)
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['journey step template of another channel, and an inactive one', { type: 'journey', target_segment_id: seg, config: { steps: [
      { id: 'a', type: 'send', channel: 'in_app', template_id: email, next: 'b' },
      { id: 'b', type: 'send', channel: 'in_app', template_id: inactive },
    ] } }, ['config.steps.0.template_id', 'config.steps.1.template_id']],
    ['wait_for_event without timeout, with a bad filter', { type: 'journey', target_segment_id: seg, config: { steps: [
      { id: 'w', type: 'wait_for_event', event_type: 'deposit', filters: [{ field: 'colour', op: 'eq', value: 1 }], on_event: null, on_timeout: null },
    ] } }, ['config.steps.0.timeout_seconds', 'config.steps.0.filters.0.field']],
    ['journey trigger with a bad operator', { type: 'journey', config: { trigger: { event_type: 'login', filters: [{ field: 'country', op: 'like', value: 'IT' }] }, steps: [
      { id: 'w', type: 'wait', seconds: 5 },
    ] } }, ['config.trigger.filters.0.op']],
    ['journey with neither segment nor trigger', { type: 'journey', config: { steps: [{ id: 'w', type: 'wait', seconds: 5 }] } }, ['target_segment_id']],
    ['conversion without event_type, zero window', { type: 'one_shot', target_segment_id: seg, config: { templates: { in_app: inApp }, conversion: { within_hours: 0 } } }, ['config.conversion.event_type', 'config.conversion.within_hours']],
    ['a template for a channel the campaign does not use', { type: 'one_shot', target_segment_id: seg, config: { templates: { in_app: inApp, email } } }, ['config.templates.email']],
    ['negative hold-out', { type: 'one_shot', target_segment_id: seg, config: { templates: { in_app: inApp }, control_group_percent: -1 } }, ['config.control_group_percent']],
  ]
  for (const [label, body, fields] of cases) {
    const c = await createCampaign(h, tenant, body)
    const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } })
    t.equal(res.status, 400, label)
    t.equal(res.body.code, 'BAD_REQUEST', label)
    for (const f of fields) t.ok(fieldsOf(res.body).includes(f), `${label}: names ${f} (got ${fieldsOf(res.body)})`)
    t.equal((await campaign(h, tenant, c.id)).status, 'draft', `${label}: still a draft`)
  }
  // A journey step's template that became another tenant's (behind the API's back) is unknown at the start.
  const c = await createCampaign(h, tenant, { type: 'journey', target_segment_id: seg, config: { steps: [{ id: 'a', type: 'send', channel: 'in_app', template_id: inApp }] } })
  await ctx.sql`update campaigns set config = ${ctx.sql.json({ steps: [{ id: 'a', type: 'send', channel: 'in_app', template_id: await template(h, other) }] })} where id = ${c.id}`
  const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } })
  t.equal(res.status, 400)
  t.same(fieldsOf(res.body), ['config.steps.0.template_id'])
  // Another tenant's key cannot move it at all.
  t.equal((await h.request('PATCH', `/campaigns/${c.id}`, { key: other.key, body: { status: 'running' } })).status, 404)
})

// Journeys end to end: entry from the segment at the start and by trigger, send → wait → wait_for_event
// (the event before the timeout, and the timeout) → branch on a segment rule (both ways), a player who
// self-excludes mid-journey leaves it and gets nothing more, and GET /campaigns/{id}/participants.
import t from 'tap'
import { advanceParticipant } from '../../src/campaigns/journeys.ts'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { createCampaign, move, must, segment, sent, template, until } from './helpers.ts'

const h = await startHarness(t, { env: { CAMPAIGN_ENGINE_POLL_MS: '100', INGEST_ACK_AFTER: 'postgres' } })
const ctx = h.app.ctx
let n = 0

async function event(tenant: TestTenant, player: string, type: string, payload: Record<string, unknown> = {}) {
  await must(h.request('POST', '/events', { key: tenant.key, body: { player_id: player, event_type: type, event_id: `j-${process.pid}-${++n}`, timestamp: new Date().toISOString(), payload } }), 200)
  await ctx.stream!.idle()
}

const idOf = async (tenant: TestTenant, external: string) =>
  (await ctx.sql<{ id: string }[]>`select id from players where brand_id = ${tenant.brand.id} and external_id = ${external}`)[0]!.id

async function participants(tenant: TestTenant, campaignId: string, query: Record<string, string | number> = {}) {
  return (await must(h.request('GET', `/campaigns/${campaignId}/participants`, { key: tenant.key, query }), 200)) as { data: any[]; next_cursor: string | null }
}

t.test('journey paths: event before the timeout, timeout then branch both ways, self-exclusion exits', async (t) => {
  const tenant = await h.createTenant()
  // Group a waits for the event (a long timeout: a slow machine cannot miss it); group b times out.
  for (const [id, vip, group] of [['pays', false, 'a'], ['excluded', true, 'a'], ['vip', true, 'b'], ['plain', false, 'b']] as const) {
    await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: id, metadata: { vip, group } } }), 201)
  }
  const [hello, thanks, offer] = [await template(h, tenant), await template(h, tenant), await template(h, tenant)]
  const journey = async (group: string, timeout: number) => {
    const c = await createCampaign(h, tenant, {
      type: 'journey',
      target_segment_id: await segment(h, tenant, { field: 'metadata.group', op: 'eq', value: group }),
      config: { steps: [
        { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'breathe' },
        { id: 'breathe', type: 'wait', seconds: 1, next: 'deposit?' },
        { id: 'deposit?', type: 'wait_for_event', event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 10 }], timeout_seconds: timeout, on_event: 'thanks', on_timeout: 'vip?' },
        { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks, next: null },
        { id: 'vip?', type: 'branch', condition: { field: 'metadata.vip', op: 'eq', value: true }, then: 'offer', else: null },
        { id: 'offer', type: 'send', channel: 'in_app', template_id: offer },
      ] },
    })
    await move(h, tenant, c.id, 'running')
    return c.id as string
  }
  const a = await journey('a', 600)
  const b = await journey('b', 2)
  const ids = { pays: await idOf(tenant, 'pays'), vip: await idOf(tenant, 'vip'), plain: await idOf(tenant, 'plain'), excluded: await idOf(tenant, 'excluded') }
  await until(h, async () => (await sent(h, a)).length === 2 && (await sent(h, b)).length >= 2)
  t.same(new Set((await sent(h, a)).map((r) => r.step)), new Set(['hello']), 'everyone got hello')
  const listed = await participants(tenant, a)
  t.equal(listed.data.length, 2)
  t.ok(listed.data.every((p) => p.status === 'waiting' && ['breathe', 'deposit?'].includes(p.step)), 'waiting')

  // Mid-journey, a player self-excludes.
  await event(tenant, 'excluded', 'status_change', { status: 'self_excluded' })
  t.match((await participants(tenant, a)).data.find((x) => x.player_id === ids.excluded), { status: 'exited' }, 'the self-excluded player left at once')
  // The payer deposits at the wait_for_event step (before its timeout).
  await until(h, async () => (await participants(tenant, a)).data.some((x) => x.player_id === ids.pays && x.step === 'deposit?'), 10_000)
  // The self-excluded player deposits too, after the wait that both entered together (they would now be at
  // the wait_for_event step, as the payer is): still in the journey, this would send 'thanks'.
  await new Promise((r) => setTimeout(r, 200))
  await event(tenant, 'excluded', 'deposit', { amount: 25, currency: 'EUR' })
  await event(tenant, 'pays', 'deposit', { amount: 5, currency: 'EUR' }) // below the filter: still waiting
  t.equal((await participants(tenant, a, { status: 'waiting' })).data.length, 1, 'a deposit the filter refuses moves nothing')
  await event(tenant, 'pays', 'deposit', { amount: 25, currency: 'EUR' })
  await until(h, async () => (await participants(tenant, a, { status: 'completed' })).data.some((x) => x.player_id === ids.pays), 30_000)
  await until(h, async () => (await participants(tenant, b, { status: 'completed' })).data.length === 2, 30_000)

  const steps = async (campaignId: string) => {
    const byPlayer = new Map<string, string[]>()
    for (const r of await sent(h, campaignId)) byPlayer.set(r.player_id, [...(byPlayer.get(r.player_id) ?? []), r.step])
    return byPlayer
  }
  const sa = await steps(a)
  const sb = await steps(b)
  t.same(sa.get(ids.pays), ['hello', 'thanks'], 'the event before the timeout: on_event')
  t.same(sb.get(ids.vip), ['hello', 'offer'], 'timeout, branch then')
  t.same(sb.get(ids.plain), ['hello'], 'timeout, branch else (ends)')
  await new Promise((r) => setTimeout(r, 500))
  await ctx.campaigns!.round()
  // Read again after the wait and the round: nothing more for the self-excluded player, not even a suppressed send.
  t.same((await steps(a)).get(ids.excluded), ['hello'], 'the self-excluded player got nothing more')
  const status = Object.fromEntries((await participants(tenant, a)).data.map((p) => [p.player_id, p.status]))
  t.same(status, { [ids.excluded]: 'exited', [ids.pays]: 'completed' })

  // Pagination: signed cursor, entry order, bound to its filter.
  const first = await participants(tenant, b, { limit: 1 })
  t.equal(first.data.length, 1)
  t.ok(first.next_cursor)
  const second = await participants(tenant, b, { limit: 1, cursor: first.next_cursor! })
  t.equal(second.data.length, 1)
  t.equal(second.next_cursor, null)
  t.same(new Set([...first.data, ...second.data].map((p) => p.player_id)), new Set([ids.vip, ids.plain]))
  const wrong = await h.request('GET', `/campaigns/${b}/participants`, { key: tenant.key, query: { limit: 1, cursor: first.next_cursor!, status: 'exited' } })
  t.equal(wrong.status, 400, 'a cursor is bound to its filter')
})

t.test('a trigger enters players by event, once; paused journeys hold their players', async (t) => {
  const tenant = await h.createTenant()
  const a = await template(h, tenant)
  const b = await template(h, tenant)
  const c = await createCampaign(h, tenant, {
    type: 'journey',
    config: {
      trigger: { event_type: 'registration' },
      steps: [
        { id: 'welcome', type: 'send', channel: 'in_app', template_id: a, next: 'later' },
        { id: 'later', type: 'wait', seconds: 1, next: 'tip' },
        { id: 'tip', type: 'send', channel: 'in_app', template_id: b },
      ],
    },
  })
  await move(h, tenant, c.id, 'running')
  await event(tenant, 'newbie', 'registration', { country: 'IT' })
  await event(tenant, 'newbie', 'registration', { country: 'IT' })
  await until(h, async () => (await sent(h, c.id)).length === 1)
  await move(h, tenant, c.id, 'paused')
  await new Promise((r) => setTimeout(r, 1500))
  await ctx.campaigns!.round()
  t.equal((await sent(h, c.id)).length, 1, 'the wait ended while paused: nothing sent')
  await move(h, tenant, c.id, 'running')
  await until(h, async () => (await sent(h, c.id)).length === 2)
  t.same((await sent(h, c.id)).map((r) => r.step), ['welcome', 'tip'])
  const p = await participants(tenant, c.id)
  t.equal(p.data.length, 1, 'entered once')
  t.equal(p.data[0].status, 'completed')
})

t.test('one batch of events: entries, waits met, and exits applied together as one at a time would', async (t) => {
  const tenant = await h.createTenant()
  const thanks = await template(h, tenant)
  const c = await createCampaign(h, tenant, {
    type: 'journey',
    config: {
      trigger: { event_type: 'registration' },
      steps: [
        { id: 'deposit?', type: 'wait_for_event', event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 10 }], timeout_seconds: 600, on_event: 'thanks', on_timeout: null },
        { id: 'thanks', type: 'send', channel: 'in_app', template_id: thanks },
      ],
    },
  })
  await move(h, tenant, c.id, 'running')
  const batch = async (events: [string, string, Record<string, unknown>][]) => {
    const body = { events: events.map(([player_id, event_type, payload]) => ({ player_id, event_type, payload, event_id: `jb-${process.pid}-${++n}` })) }
    await must(h.request('POST', '/events', { key: tenant.key, body }), 200)
    await ctx.stream!.idle()
  }
  const players = ['b1', 'b2', 'b3', 'b4']
  await batch(players.map((p) => [p, 'registration', {}]))
  await until(h, async () => (await participants(tenant, c.id, { status: 'waiting' })).data.length === 4)
  await new Promise((r) => setTimeout(r, 1100)) // events stored after the players reached the wait
  await batch([
    ['b1', 'deposit', { amount: 25, currency: 'EUR' }],
    ['b2', 'deposit', { amount: 5, currency: 'EUR' }],
    ['b3', 'status_change', { status: 'self_excluded' }],
    ['b2', 'deposit', { amount: 30, currency: 'EUR' }],
    ['b3', 'deposit', { amount: 25, currency: 'EUR' }],
    ['b5', 'registration', {}],
    ['b5', 'deposit', { amount: 25, currency: 'EUR' }],
  ])
  const ids = Object.fromEntries(await Promise.all([...players, 'b5'].map(async (p) => [await idOf(tenant, p), p])))
  await until(h, async () => (await sent(h, c.id)).length === 2)
  await until(h, async () => (await participants(tenant, c.id, { status: 'waiting' })).data.length === 2)
  const status = Object.fromEntries((await participants(tenant, c.id)).data.map((p) => [ids[p.player_id], p.status]))
  t.same(status, { b1: 'completed', b2: 'completed', b3: 'exited', b4: 'waiting', b5: 'waiting' }, 'b5 entered with the batch: its deposit came before its wait')
  t.same((await sent(h, c.id)).map((r) => ids[r.player_id]).sort(), ['b1', 'b2'])
})

t.test('a claim that stalled past its lease advances nothing: the newer claim does, once', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'slow', metadata: { group: 'stale' } } }), 201)
  const [hello, later] = [await template(h, tenant), await template(h, tenant)]
  const c = await createCampaign(h, tenant, {
    type: 'journey',
    target_segment_id: await segment(h, tenant, { field: 'metadata.group', op: 'eq', value: 'stale' }),
    config: { steps: [
      { id: 'hello', type: 'send', channel: 'in_app', template_id: hello, next: 'pause' },
      { id: 'pause', type: 'wait', seconds: 3600, next: 'later' },
      { id: 'later', type: 'send', channel: 'in_app', template_id: later },
    ] },
  })
  await move(h, tenant, c.id, 'running')
  await until(h, async () => (await participants(tenant, c.id)).data.some((p) => p.status === 'waiting' && p.step === 'pause'))
  const [p] = await ctx.sql<{ id: string }[]>`select id from campaign_participants where campaign_id = ${c.id}`
  // The wait is over and claim A took the row; A stalled past its lease and claim B took it again.
  await ctx.sql`update campaign_participants set wake_at = now() + interval '1 minute', lease_owner = 'claim-b' where id = ${p!.id}`
  await advanceParticipant(ctx, p!.id, { owner: 'claim-a' })
  t.same((await sent(h, c.id)).map((s) => s.step), ['hello'], 'the stale claim sent nothing')
  t.match((await participants(tenant, c.id)).data[0], { status: 'waiting', step: 'pause' }, 'nor moved the player')
  await advanceParticipant(ctx, p!.id, { owner: 'claim-b' })
  t.same((await sent(h, c.id)).map((s) => s.step), ['hello', 'later'], 'the current claim ends the wait')
  await advanceParticipant(ctx, p!.id, { owner: 'claim-b' })
  t.same((await sent(h, c.id)).map((s) => s.step), ['hello', 'later'], 'and a repeat of it changes nothing')
})

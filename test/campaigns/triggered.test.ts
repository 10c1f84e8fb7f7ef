// Triggered campaigns end to end: POST /events → the event stream → enrolment → an in-app notification.
// Filters, events before the start, duplicates, max_per_player, the target segment at that moment, pause,
// delay_seconds, and conversions for both arms (only within the window after a delivered message, or after
// the hold-out) with player.converted carrying campaign_id.
import t from 'tap'
import WebSocket from 'ws'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { campaign, createCampaign, move, must, segment, sent, template, until } from './helpers.ts'

const h = await startHarness(t, { env: { CAMPAIGN_ENGINE_POLL_MS: '200', INGEST_ACK_AFTER: 'postgres' } })
const ctx = h.app.ctx
let n = 0
const eventId = () => `ev-${process.pid}-${++n}`

async function event(tenant: TestTenant, player: string, type: string, payload: Record<string, unknown> = {}, id = eventId(), at = new Date()) {
  const res = await must(h.request('POST', '/events', { key: tenant.key, body: { player_id: player, event_type: type, event_id: id, timestamp: at.toISOString(), payload } }), 200)
  await ctx.stream!.idle()
  return res
}

const playerId = async (tenant: TestTenant, external: string) =>
  (await ctx.sql<{ id: string }[]>`select id from players where brand_id = ${tenant.brand.id} and external_id = ${external}`)[0]!.id

async function triggered(tenant: TestTenant, config: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const c = await createCampaign(h, tenant, {
    type: 'triggered',
    config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 50 }] }, ...config },
    ...extra,
  })
  await move(h, tenant, c.id, 'running')
  return c
}

t.test('a matching event sends at once; others, and events before the start, do not', async (t) => {
  const tenant = await h.createTenant()
  await event(tenant, 'early', 'deposit', { amount: 100, currency: 'EUR' })
  const c = await triggered(tenant)
  await event(tenant, 'early', 'login')
  await event(tenant, 'small', 'deposit', { amount: 10, currency: 'EUR' })
  await event(tenant, 'big', 'deposit', { amount: 100, currency: 'EUR' })
  const rows = await sent(h, c.id)
  t.equal(rows.length, 1)
  t.equal(rows[0]!.player_id, await playerId(tenant, 'big'))
  t.equal(rows[0]!.channel, 'in_app')
  t.equal((await campaign(h, tenant, c.id)).stats.audience, 1)
  const [lane] = await ctx.sql<{ bulk: boolean; dispatch_key: string }[]>`select bulk, dispatch_key from notifications where campaign_id = ${c.id}`
  t.same(lane, { bulk: false, dispatch_key: `in_app:${tenant.brand.id}` }, 'a trigger is real-time: not in the bulk lane')
})

t.test('in-app trigger messages: on the inbox socket once, within the caps, a failed render recorded', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('PUT', '/settings/delivery', { key: tenant.key, body: { frequency_caps: [{ channel: 'in_app', max: 1, per: 'day' }] } }), 200)
  // Two campaigns on one trigger compete for the one message a day; a third's template cannot render.
  const hello = await template(h, tenant, 'in_app', { name: 'hello', body: 'Hello {{ name | there }}' })
  const twins = [await triggered(tenant, { templates: { in_app: hello } }), await triggered(tenant, { templates: { in_app: hello } })]
  const broken = await triggered(tenant, { templates: { in_app: await template(h, tenant, 'in_app', { name: 'broken', body: 'Hi {{ nickname }}' }) }, class: 'transactional' })
  await event(tenant, 'sock', 'login')
  const player = await playerId(tenant, 'sock')
  const token = (await must(h.request('POST', `/players/${player}/inbox/token`, { key: tenant.key }), 201)).data.token
  const pushed: any[] = []
  const ws = new WebSocket(`${h.origin.replace('http', 'ws')}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
  ws.on('message', (raw) => pushed.push(JSON.parse(String(raw))))
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
  t.teardown(() => ws.close())

  await event(tenant, 'sock', 'deposit', { amount: 100, currency: 'EUR' })
  const all = async () => (await Promise.all([...twins, broken].map((c) => sent(h, c.id)))).flat()
  await until(h, async () => (await all()).every((r) => r.status !== 'queued') && pushed.length > 0)
  const twinRows = (await Promise.all(twins.map((c) => sent(h, c.id)))).flat()
  t.same(twinRows.map((r) => r.status).sort(), ['delivered', 'suppressed'], 'the cap lets one of the two through')
  const delivered = twinRows.find((r) => r.status === 'delivered')!
  const [n] = await ctx.sql<{ attempts: number; sent_at: Date | null; delivered_at: Date | null; reason: string | null }[]>`
    select attempts, sent_at, delivered_at, reason from notifications where id = ${delivered.notification_id}`
  t.ok(n!.sent_at && n!.delivered_at)
  t.equal(n!.attempts, 1)
  const [suppressed] = await ctx.sql<{ reason: string }[]>`select reason from notifications where id = ${twinRows.find((r) => r.status === 'suppressed')!.notification_id}`
  t.equal(suppressed!.reason, 'frequency_cap')
  const [failed] = await ctx.sql<{ status: string; error: string }[]>`select n.status, n.error from notifications n where n.campaign_id = ${broken.id}`
  t.same(failed, { status: 'failed', error: 'missing variable: nickname' })

  await new Promise((r) => setTimeout(r, 300))
  t.equal(pushed.length, 1, 'one message on the socket')
  t.match(pushed[0], { type: 'message', data: { id: delivered.notification_id, body: 'Hello there', read_at: null } })
  const inbox = (await must(h.request('GET', `/players/${player}/inbox`, { key: tenant.key }), 200)).data
  t.same(inbox, [pushed[0].data], 'the inbox holds what the socket was sent')
  const events = await ctx.sql<{ data: any }[]>`select data from outbox where event = 'message.delivered' and data->>'notification_id' = ${delivered.notification_id}`
  t.equal(events.length, 1, 'message.delivered once')
  t.equal(events[0]!.data.campaign_id, delivered.notification_id === twinRows[0]!.notification_id ? twins[0]!.id : twins[1]!.id)
})

t.test('a duplicate event enrolls once; max_per_player caps enrolments', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant, { max_per_player: 2 })
  const id = eventId()
  await event(tenant, 'p1', 'deposit', { amount: 60, currency: 'EUR' }, id)
  await event(tenant, 'p1', 'deposit', { amount: 60, currency: 'EUR' }, id)
  t.equal((await sent(h, c.id)).length, 1, 'the duplicate (same event_id) sent nothing')
  await event(tenant, 'p1', 'deposit', { amount: 70, currency: 'EUR' })
  await event(tenant, 'p1', 'deposit', { amount: 80, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 2, 'at most 2 per player')
  await event(tenant, 'p2', 'deposit', { amount: 80, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 3, 'another player has places of its own')
})

t.test('one batch of events: every player enrolled once per place, the earliest events take the places', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'b-vip0', metadata: { vip: true } } }), 201)
  const seg = await segment(h, tenant, { field: 'metadata.vip', op: 'eq', value: true })
  const capped = await triggered(tenant, { max_per_player: 2 })
  const once = await triggered(tenant, { max_per_player: 1 }, { target_segment_id: seg })
  const vips = Array.from({ length: 20 }, (_, i) => `b-vip${i}`)
  for (const v of vips.slice(1)) await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: v, metadata: { vip: true } } }), 201)
  // One request, so the stream applies these events together: 3 deposits per VIP, 2 per other player,
  // a small one first for each (it matches no trigger), and one player enrolled before the batch.
  await event(tenant, 'b-vip0', 'deposit', { amount: 100, currency: 'EUR' })
  const events = []
  for (const p of [...vips, 'b-plain0', 'b-plain1']) {
    events.push({ player_id: p, event_type: 'deposit', event_id: eventId(), payload: { amount: 10, currency: 'EUR' } })
    for (let k = 0; k < (p.startsWith('b-vip') ? 3 : 2); k++) events.push({ player_id: p, event_type: 'deposit', event_id: eventId(), payload: { amount: 60 + k, currency: 'EUR' } })
  }
  await must(h.request('POST', '/events', { key: tenant.key, body: { events } }), 200)
  await ctx.stream!.idle()
  const perPlayer = async (c: string) => {
    const rows = await ctx.sql<{ external_id: string; n: number }[]>`
      select p.external_id, count(*)::int as n from notifications n join players p on p.id = n.player_id where n.campaign_id = ${c} group by 1`
    return Object.fromEntries(rows.map((r) => [r.external_id, r.n]))
  }
  const capCounts = await perPlayer(capped.id)
  t.equal(Object.keys(capCounts).length, 22, 'every player reached')
  t.ok(Object.values(capCounts).every((n) => n === 2), 'two messages each, never more')
  const onceCounts = await perPlayer(once.id)
  t.same(Object.keys(onceCounts).sort(), [...vips].sort(), 'only the segment, the player enrolled before included')
  t.ok(Object.values(onceCounts).every((n) => n === 1))
  // The places went to the earliest matching events: for b-vip5, the 60 and the 61 deposits.
  const runs = await ctx.sql<{ run_key: string }[]>`
    select r.run_key from campaign_runs r join campaign_audience a on a.run_id = r.id
    where r.campaign_id = ${capped.id} and a.player_id = ${await playerId(tenant, 'b-vip5')} order by r.run_key`
  const ids = events.filter((e) => e.player_id === 'b-vip5' && e.payload.amount >= 60).map((e) => `event:${e.event_id}`)
  t.same(runs.map((r) => r.run_key), ids.slice(0, 2).sort())
  t.equal((await ctx.sql`select 1 from campaign_enrolments where campaign_id = ${capped.id} and count > 2`).length, 0)
})

t.test('the target segment is checked when the event arrives', async (t) => {
  const tenant = await h.createTenant()
  await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'vip', metadata: { vip: true } } }), 201)
  await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'plain' } }), 201)
  const seg = await segment(h, tenant, { field: 'metadata.vip', op: 'eq', value: true })
  const c = await triggered(tenant, {}, { target_segment_id: seg })
  await event(tenant, 'plain', 'deposit', { amount: 100, currency: 'EUR' })
  await event(tenant, 'vip', 'deposit', { amount: 100, currency: 'EUR' })
  const rows = await sent(h, c.id)
  t.same(rows.map((r) => r.player_id), [await playerId(tenant, 'vip')])
  // Joining the segment later makes the next event count.
  await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'plain', metadata: { vip: true } } }), 201)
  await event(tenant, 'plain', 'deposit', { amount: 100, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 2)
})

t.test('events while paused enroll nobody; after resume they do', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant)
  await move(h, tenant, c.id, 'paused')
  await event(tenant, 'p1', 'deposit', { amount: 100, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 0)
  await move(h, tenant, c.id, 'running')
  await event(tenant, 'p1', 'deposit', { amount: 100, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 1)
})

t.test('a pause forgets the pauses that ended over a week ago (no span list growing for the campaign\'s life)', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant)
  const day = 24 * 3600_000
  const iso = (ago: number) => new Date(Date.now() - ago).toISOString()
  const old: [string, string] = [iso(9 * day), iso(8 * day)]
  const recent: [string, string] = [iso(2 * day), iso(1 * day)]
  await ctx.sql`update campaigns set paused_spans = ${ctx.sql.json([old, recent])} where id = ${c.id}`
  await move(h, tenant, c.id, 'paused')
  const [row] = await ctx.sql<{ paused_spans: [string, string | null][] }[]>`select paused_spans from campaigns where id = ${c.id}`
  t.equal(row!.paused_spans.length, 2, 'the old span dropped, the recent one and the new one kept')
  t.same(row!.paused_spans[0], recent)
  t.equal(row!.paused_spans[1]![1], null, 'the new pause is open')
  await event(tenant, 'p1', 'deposit', { amount: 100, currency: 'EUR' })
  await move(h, tenant, c.id, 'running')
  await event(tenant, 'p1', 'deposit', { amount: 100, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 1, 'the event during the pause enrolled nobody, the one after did')
})

t.test('delay_seconds holds the send; cancel drops a held one', async (t) => {
  const tenant = await h.createTenant()
  const c = await triggered(tenant, { delay_seconds: 1 })
  await event(tenant, 'p1', 'deposit', { amount: 100, currency: 'EUR' })
  t.equal((await sent(h, c.id)).length, 0, 'not yet')
  await until(h, async () => (await sent(h, c.id)).length === 1, 10_000)
  t.pass('sent after the delay')

  const c2 = await triggered(tenant, { delay_seconds: 2 })
  await event(tenant, 'p2', 'deposit', { amount: 100, currency: 'EUR' })
  await must(h.request('DELETE', `/campaigns/${c2.id}`, { key: tenant.key }), 200)
  await new Promise((r) => setTimeout(r, 2500))
  await ctx.campaigns!.round()
  t.equal((await sent(h, c2.id)).length, 0, 'the held send was dropped')
})

/** Events as POST /events batches of up to 100 (the API's limit), in order, then the stream idle. */
async function batch(tenant: TestTenant, events: { player: string; type: string; payload?: Record<string, unknown>; at?: Date }[]) {
  for (let i = 0; i < events.length; i += 100) {
    const body = { events: events.slice(i, i + 100).map((e) => ({ player_id: e.player, event_type: e.type, event_id: eventId(), timestamp: (e.at ?? new Date()).toISOString(), payload: e.payload ?? {} })) }
    await must(h.request('POST', '/events', { key: tenant.key, body }), 200)
  }
  await ctx.stream!.idle()
}

t.test('conversions: counted once per player in each arm, only within the window after a delivered message', async (t) => {
  const tenant = await h.createTenant()
  const c = await createCampaign(h, tenant, {
    type: 'triggered',
    config: {
      templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'login' },
      control_group_percent: 50, conversion: { event_type: 'deposit', within_hours: 1 },
    },
  })
  await move(h, tenant, c.id, 'running')
  // Four groups, each large enough that both arms of every group are filled but for odds of 2^-33 per group
  // (the arm is a hash of campaign and player: random here). `conv` deposits within the window; `late` only
  // 2 h after its message (past within_hours: 1), `early` only before it; `muted` withdrew in-app consent,
  // so its treated members' messages are suppressed, never delivered, and their deposits convert nothing.
  const G = 34
  const group = (name: string) => Array.from({ length: G }, (_, i) => `${name}${i}`)
  const groups = { conv: group('conv'), late: group('late'), early: group('early'), muted: group('muted') }
  const all = Object.values(groups).flat()
  await batch(tenant, groups.muted.map((p) => ({ player: p, type: 'consent_update', payload: { channel: 'in_app', granted: false } })))
  await batch(tenant, all.map((p) => ({ player: p, type: 'login' })))

  const ids = new Map((await ctx.sql<{ id: string; external_id: string }[]>`select id, external_id from players where brand_id = ${tenant.brand.id}`).map((r) => [r.external_id, r.id]))
  const arms = new Map((await ctx.sql<{ player_id: string; control: boolean }[]>`select player_id, control from campaign_audience where campaign_id = ${c.id}`).map((a) => [a.player_id, a.control]))
  t.equal(arms.size, all.length, 'every player enrolled once')
  const arm = (names: string[], control: boolean) => names.filter((p) => arms.get(ids.get(p)!) === control).map((p) => ids.get(p)!)
  for (const [name, names] of Object.entries(groups)) {
    t.ok(arm(names, true).length > 0 && arm(names, false).length > 0, `${name}: both arms populated (${arm(names, true).length} of ${G} held out)`)
  }
  // The treated arm's messages as the delivery records them: in-app delivered at once, the muted suppressed.
  await until(h, async () => (await ctx.sql`select 1 from notifications where campaign_id = ${c.id} and status = 'queued'`).length === 0)
  const outcome = new Map((await ctx.sql<{ player_id: string; status: string; reason: string | null; delivered_at: Date | null }[]>`
    select player_id, status, reason, delivered_at from notifications where campaign_id = ${c.id}`).map((r) => [r.player_id, r]))
  t.same([...outcome.keys()].sort(), all.map((p) => ids.get(p)!).filter((id) => !arms.get(id)).sort(), 'one message per treated player, none to the hold-out')
  const mutedTreated = arm(groups.muted, false)
  t.ok(mutedTreated.every((id) => outcome.get(id)!.status === 'suppressed' && outcome.get(id)!.reason === 'no_consent' && outcome.get(id)!.delivered_at === null), 'the muted treated: never delivered')
  t.ok([...outcome].filter(([id]) => !mutedTreated.includes(id)).every(([, r]) => r.status === 'delivered' && r.delivered_at), 'the others: delivered')

  // conv: a few players one event at a time, the rest in one batch (two conversions of a player applied together).
  for (const p of groups.conv.slice(0, 4)) {
    await event(tenant, p, 'deposit', { amount: 20, currency: 'EUR' })
    await event(tenant, p, 'deposit', { amount: 30, currency: 'EUR' })
  }
  const now = Date.now()
  await batch(tenant, [
    ...groups.conv.slice(4).flatMap((p) => [20, 30].map((amount) => ({ player: p, type: 'deposit', payload: { amount, currency: 'EUR' } }))),
    ...groups.late.map((p) => ({ player: p, type: 'deposit', payload: { amount: 20, currency: 'EUR' }, at: new Date(now + 2 * 3_600_000) })),
    ...groups.early.map((p) => ({ player: p, type: 'deposit', payload: { amount: 20, currency: 'EUR' }, at: new Date(now - 10 * 60_000) })),
    ...groups.muted.map((p) => ({ player: p, type: 'deposit', payload: { amount: 20, currency: 'EUR' } })),
  ])
  // Single events too, past the window and before the message, for players of both arms.
  for (const p of [groups.late[0]!, groups.early[0]!]) {
    await event(tenant, p, 'deposit', { amount: 40, currency: 'EUR' }, undefined, new Date(p.startsWith('late') ? now + 90 * 60_000 : now - 60_000))
  }

  const conversions = await ctx.sql<{ player_id: string; control: boolean }[]>`select player_id, control from campaign_conversions where campaign_id = ${c.id}`
  const converted = conversions.filter((r) => !r.control).map((r) => r.player_id).sort()
  const controlConverted = conversions.filter((r) => r.control).map((r) => r.player_id).sort()
  t.same(converted, arm(groups.conv, false).sort(), 'treated: only deposits within the window after a delivered message convert')
  // The hold-out's window starts when it was held out, whatever its consent: muted control members count.
  t.same(controlConverted, [...arm(groups.conv, true), ...arm(groups.muted, true)].sort(), 'held out: only deposits within the window after the hold-out convert')
  const stats = (await campaign(h, tenant, c.id)).stats
  t.equal(stats.converted, arm(groups.conv, false).length, 'each treated player once')
  t.equal(stats.control_converted, arm(groups.conv, true).length + arm(groups.muted, true).length, 'each held-out player once')
  t.equal(stats.audience, all.length)
  t.equal(stats.control, all.filter((p) => arms.get(ids.get(p)!)).length)
  const fired = await ctx.sql<{ data: any }[]>`select data from outbox where event = 'player.converted' and data->>'campaign_id' = ${c.id}`
  t.same(fired.map((f) => f.data.player_id).sort(), converted, 'player.converted once per treated conversion')
  t.ok(fired.every((f) => f.data.campaign_id === c.id))
})

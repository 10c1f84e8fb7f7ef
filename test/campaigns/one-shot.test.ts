// One-shot campaigns and the control group, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { processRun } from '../../src/campaigns/execution.ts'
import { startHarness } from '../helpers/harness.ts'
import { bulkPlayers, campaign, createCampaign, move, must, players, segment, sent, template, until } from './helpers.ts'
import { isControl } from '../../src/campaigns/control-group.ts'

const h = await startHarness(t, { env: { CAMPAIGN_ENGINE_POLL_MS: '3600000' } })

// One-shot campaigns end to end over HTTP: the audience is the segment at the start (a later member gets
// nothing), one notification per player and channel through the delivery rules (a self-excluded member
// is counted suppressed), pause / resume / cancel (messages still queued at the cancel end suppressed),
// and stats.
t.test('one-shot', async (t) => {
  const ctx = h.app.ctx
  // The tests drive the engine themselves: no wake-up after a status change.
  ctx.campaigns!.wake = () => {}

  /** A running in-app one-shot to a segment of `players` players, and its run. */
  async function startedOneShot(players: number) {
    const tenant = await h.createTenant()
    await bulkPlayers(h, tenant, players)
    const c = await createCampaign(h, tenant, { type: 'one_shot', target_segment_id: await segment(h, tenant), config: { templates: { in_app: await template(h, tenant) } } })
    await move(h, tenant, c.id, 'running')
    const run = (await ctx.sql<{ id: string }[]>`select id from campaign_runs where campaign_id = ${c.id}`)[0]!.id
    return { tenant, c, run }
  }

  const stopAfter = (n: number) => {
    let calls = 0
    return () => calls++ >= n
  }

  t.test('a one-shot messages the segment as it was at the start, once per channel, and completes', async (t) => {
    const tenant = await h.createTenant()
    const ids = await players(h, tenant, 4, (i) => ({ metadata: { vip: i < 3 }, status: i === 2 ? 'self_excluded' : 'active' }))
    const seg = await segment(h, tenant, { field: 'metadata.vip', op: 'eq', value: true })
    const c = await createCampaign(h, tenant, {
      type: 'one_shot', channels: ['in_app', 'email'], target_segment_id: seg,
      config: { templates: { in_app: await template(h, tenant, 'in_app'), email: await template(h, tenant, 'email') } },
    })
    await move(h, tenant, c.id, 'running')
    // Joins the segment after the start: not in the audience.
    await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: 'late', metadata: { vip: true } } }), 201)
    await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed')
    const rows = await sent(h, c.id)
    t.equal(rows.length, 6, '3 members × 2 channels')
    t.same(new Set(rows.map((r) => r.player_id)), new Set(ids.slice(0, 3)))
    const inApp = rows.filter((r) => r.channel === 'in_app')
    t.same(inApp.filter((r) => r.status === 'suppressed').map((r) => r.player_id), [ids[2]], 'in-app: only the self-excluded member is suppressed')
    const notes = await ctx.sql<{ player_id: string; channel: string; reason: string | null; campaign_id: string; class: string }[]>`
    select player_id, channel, reason, campaign_id, class from notifications where campaign_id = ${c.id}`
    t.equal(notes.find((n) => n.player_id === ids[2] && n.channel === 'in_app')!.reason, 'self_excluded')
    t.ok(notes.every((n) => n.class === 'marketing' && n.campaign_id === c.id))
    const lanes = await ctx.sql<{ bulk: boolean; dispatch_key: string; channel: string; brand_id: string }[]>`
    select bulk, dispatch_key, channel, brand_id from notifications where campaign_id = ${c.id}`
    t.ok(lanes.every((n) => n.bulk && n.dispatch_key === `${n.channel}:${n.brand_id}:bulk`), "the bulk lane: its own dispatch key, beside real-time sends")
    t.ok(notes.filter((n) => n.channel === 'email').every((n) => n.reason !== null), 'email is opt-in by default: all suppressed')
    const stats = (await campaign(h, tenant, c.id)).stats
    t.equal(stats.audience, 3)
    t.equal(stats.control, 0)
    t.equal(stats.suppressed, 4, '1 in-app + 3 email')
    // Another round sends nothing more.
    await ctx.campaigns!.round()
    t.equal((await sent(h, c.id)).length, 6)
  })

  t.test("the campaign's payload reaches the template's placeholders and the stored notification as an object", async (t) => {
    const tenant = await h.createTenant()
    const [id] = await players(h, tenant, 1)
    const c = await createCampaign(h, tenant, {
      type: 'one_shot', target_segment_id: await segment(h, tenant),
      config: { payload: { offer: '50 spins' }, templates: { in_app: await template(h, tenant, 'in_app', { body: 'Your {{ offer }} wait', variables: ['offer'] }) } },
    })
    await move(h, tenant, c.id, 'running')
    await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed')
    const [row] = await sent(h, c.id)
    const note = await must(h.request('GET', `/notifications/${row!.notification_id}`, { key: tenant.key }), 200)
    t.same(note.data.payload, { offer: '50 spins' })
    await until(h, async () => (await ctx.sql`select 1 from notifications where id = ${row!.notification_id} and status = 'delivered'`).length === 1)
    const inbox = await must(h.request('GET', `/players/${id}/inbox`, { key: tenant.key }), 200)
    t.equal(inbox.data[0]?.body, 'Your 50 spins wait')
  })

  t.test('pause holds the rest of the audience, resume continues where it stopped, nobody twice', async (t) => {
    const { tenant, c, run } = await startedOneShot(300)
    await processRun(ctx, run, stopAfter(1), 100) // one chunk of 100 (the audience was selected by the start)
    // With a shared PostgreSQL, other test files' engines may have run chunks of this run too.
    await move(h, tenant, c.id, 'paused')
    const atPause = (await sent(h, c.id)).length
    t.ok(atPause >= 100, `${atPause} enqueued before the pause`)
    await ctx.campaigns!.round()
    await processRun(ctx, run) // even asked directly, a paused campaign sends nothing
    await new Promise((r) => setTimeout(r, 300))
    t.equal((await sent(h, c.id)).length, atPause, 'nothing new while paused')
    t.equal((await campaign(h, tenant, c.id)).status, 'paused')
    await move(h, tenant, c.id, 'running')
    await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed')
    const rows = await sent(h, c.id)
    t.equal(rows.length, 300)
    t.equal(new Set(rows.map((r) => r.player_id)).size, 300, 'each player once')
  })

  t.test('messages already queued when the campaign pauses wait for the resume, then go out checked again', async (t) => {
    const { tenant, c, run } = await startedOneShot(300)
    await processRun(ctx, run, stopAfter(1), 100)
    await until(h, async () => (await sent(h, c.id)).filter((r) => r.status === 'delivered').length >= 10)
    await move(h, tenant, c.id, 'paused')
    // Ten as the pause found them: queued and due (the dispatcher is fast enough to have sent them all).
    const held = (await sent(h, c.id)).filter((r) => r.status === 'delivered').slice(0, 10).map((r) => r.notification_id)
    const states = async () => ctx.sql<{ status: string; waiting: boolean }[]>`
    select status, due_at > now() + interval '4 minutes' as waiting from notifications where id = any(${held}::uuid[])`
    await ctx.sql`update notifications set status = 'queued', sent_at = null, delivered_at = null, attempts = 0, due_at = now(), lease_owner = null where id = any(${held}::uuid[])`
    ctx.delivery!.wake()
    await until(h, async () => (await states()).every((r) => r.status === 'queued' && r.waiting))
    t.pass('the dispatcher looked at the ten and let them wait')
    await new Promise((r) => setTimeout(r, 300))
    t.ok((await states()).every((r) => r.status === 'queued'), 'none of them sent while paused')
    await move(h, tenant, c.id, 'running')
    await until(h, async () => (await states()).every((r) => r.status === 'delivered'), 5000)
    t.pass('after the resume they went out at once, not minutes later')
    await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed')
  })

  t.test('cancel drops what is pending: queued messages end suppressed (campaign_cancelled), no more are sent', async (t) => {
    const { tenant, c, run } = await startedOneShot(300)
    await processRun(ctx, run, stopAfter(1), 100)
    await until(h, async () => (await sent(h, c.id)).filter((r) => r.status === 'delivered').length >= 10)
    // Ten still queued at the cancel, as messages the dispatcher holds (a paused campaign's, quiet hours'):
    // due later, no dispatcher's lease. (The dispatcher is fast enough to have sent them all.)
    const held = (await sent(h, c.id)).filter((r) => r.status === 'delivered').slice(0, 10).map((r) => r.notification_id)
    await ctx.sql`
    update notifications set status = 'queued', sent_at = null, delivered_at = null, attempts = 0, due_at = now() + interval '1 hour', lease_owner = null
    where id = any(${held}::uuid[])`
    const heldStates = async () => ctx.sql<{ status: string; reason: string | null }[]>`select status, reason from notifications where id = any(${held}::uuid[])`
    t.same((await heldStates()).map((r) => r.status), Array(10).fill('queued'), 'ten queued before the cancel')
    const cancelled = await must(h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key }), 200)
    t.equal(cancelled.data.status, 'cancelled')
    // At once (the cancel's own transaction), not when the dispatcher would next look at them.
    t.same(await heldStates(), Array(10).fill({ status: 'suppressed', reason: 'campaign_cancelled' }), 'the ten queued ones: suppressed, campaign_cancelled')
    const atCancel = (await sent(h, c.id)).length
    t.ok(atCancel >= 100, `${atCancel} enqueued before the cancel`)
    await ctx.campaigns!.round()
    await processRun(ctx, run)
    await new Promise((r) => setTimeout(r, 300))
    const rows = await sent(h, c.id)
    t.equal(rows.length, atCancel, 'no chunk after the cancel')
    // One a dispatcher held at the cancel is settled by it (delivered, or suppressed by its re-check).
    await until(h, async () => (await ctx.sql`select 1 from notifications where campaign_id = ${c.id} and status = 'queued'`).length === 0)
    const reasons = await ctx.sql<{ status: string; reason: string | null; n: number }[]>`
    select status, reason, count(*)::int as n from notifications where campaign_id = ${c.id} and status <> 'delivered' group by 1, 2`
    t.same(reasons, [{ status: 'suppressed', reason: 'campaign_cancelled', n: reasons[0]?.n }], `every undelivered one: suppressed, campaign_cancelled (${JSON.stringify(reasons)})`)
    t.ok(reasons[0]!.n >= held.length, 'the held ones among them')
    t.equal((await ctx.sql`select 1 from notifications where id = any(${held}::uuid[]) and (delivered_at is not null or sent_at is not null)`).length, 0, 'none of the held ones went out after')
    const stats = (await campaign(h, tenant, c.id)).stats
    t.equal(stats.audience, 300)
    t.ok(stats.suppressed >= held.length, `${stats.suppressed} suppressed`)
    t.equal(stats.suppressed + stats.delivered, atCancel)
  })

  t.test('GET /campaigns/{id}/participants: 404 across tenants, empty for a one-shot, 400 on a bad cursor', async (t) => {
    const tenant = await h.createTenant()
    const other = await h.createTenant()
    const c = await createCampaign(h, tenant, { type: 'one_shot' })
    const res = await h.request('GET', `/campaigns/${c.id}/participants`, { key: tenant.key })
    t.equal(res.status, 200)
    t.same(res.body, { data: [], next_cursor: null })
    t.equal((await h.request('GET', `/campaigns/${c.id}/participants`, { key: other.key })).status, 404)
    t.equal((await h.request('GET', `/campaigns/${c.id}/participants`, { key: tenant.key, query: { cursor: 'forged' } })).status, 400)
    t.equal((await h.request('GET', `/campaigns/${c.id}/participants`, { key: tenant.key, query: { status: 'sleeping' } })).status, 400)
  })
})

// The hold-out: on 10,000 players its share is within tolerance of control_group_percent and none of it
// is messaged; on a run carried to completion every other player is messaged exactly once. (The 10k run
// is cut after two chunks: enqueueing 9,000 messages through the delivery rules one by one would take
// minutes on the embedded store; the selection, which decides the arms, is the full 10k.)
t.test('control-group', async (t) => {
  const ctx = h.app.ctx

  const arms = async (campaignId: string) =>
    (await ctx.sql<{ control: number; treated: number; messaged_control: number; messaged: number; notifications: number }[]>`
    select count(*) filter (where control)::int as control, count(*) filter (where not control)::int as treated,
           (select count(*) from notifications n join campaign_audience a on a.player_id = n.player_id and a.campaign_id = n.campaign_id
             where n.campaign_id = ${campaignId} and a.control)::int as messaged_control,
           (select count(distinct player_id) from notifications where campaign_id = ${campaignId})::int as messaged,
           (select count(*) from notifications where campaign_id = ${campaignId})::int as notifications
    from campaign_audience where campaign_id = ${campaignId}`)[0]!

  t.test('10% hold-out on 10,000 players: share within tolerance, none of them messaged', async (t) => {
    const tenant = await h.createTenant()
    await bulkPlayers(h, tenant, 10_000)
    const c = await createCampaign(h, tenant, {
      type: 'one_shot', target_segment_id: await segment(h, tenant),
      config: { templates: { in_app: await template(h, tenant) }, control_group_percent: 10 },
    })
    ctx.campaigns!.wake = () => {} // this test drives the run
    await move(h, tenant, c.id, 'running')
    const run = (await ctx.sql<{ id: string }[]>`select id from campaign_runs where campaign_id = ${c.id}`)[0]!.id
    let chunks = 0
    await processRun(ctx, run, () => chunks++ >= 2, 200)
    await must(h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key }), 200)
    const a = await arms(c.id)
    // Binomial(10000, 0.1): sd = 30; ±150 is five of them.
    t.ok(Math.abs(a.control - 1000) <= 150, `control ${a.control} within 1000 ± 150`)
    t.equal(a.control + a.treated, 10_000)
    t.equal(a.messaged_control, 0, 'no control player messaged')
    t.ok(a.messaged >= 400, `${a.messaged} treated players messaged before the cancel`)
    const stats = (await campaign(h, tenant, c.id)).stats
    t.equal(stats.audience, 10_000)
    t.equal(stats.control, a.control)
    // The arm of a player is a function of (campaign, player): the same in JavaScript and in SQL.
    const sample = await ctx.sql<{ player_id: string; control: boolean }[]>`select player_id, control from campaign_audience where campaign_id = ${c.id}`
    t.ok(sample.every((r) => isControl(c.id, r.player_id, 10) === r.control), 'JS and SQL hashes agree on all 10,000')
  })

  t.test('a 20% hold-out carried to completion: every other player messaged once, no control player', async (t) => {
    const tenant = await h.createTenant()
    await bulkPlayers(h, tenant, 600)
    const c = await createCampaign(h, tenant, {
      type: 'one_shot', target_segment_id: await segment(h, tenant),
      config: { templates: { in_app: await template(h, tenant) }, control_group_percent: 20 },
    })
    await move(h, tenant, c.id, 'running')
    await until(h, async () => (await campaign(h, tenant, c.id)).status === 'completed', 150_000)
    const a = await arms(c.id)
    t.ok(a.control > 60 && a.control < 180, `control ${a.control} of 600`)
    t.equal(a.messaged_control, 0, 'no control player messaged')
    t.equal(a.messaged, a.treated, 'every other player messaged')
    t.equal(a.notifications, a.treated, '... once')
  })
})

// Schedule transitions with an injected clock: start_at moves a scheduled campaign to running, end_at
// completes a running one, a recurring campaign ticks by its cron in its time zone — once on the day
// the clocks spring forward over its 02:30 (and once on the day they fall back) — and a tick's in-app
// messages are delivered to the members' inboxes.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { nextTick } from '../../src/campaigns/schedule.ts'
import { campaign, createCampaign, move, players, segment, sent, template } from './helpers.ts'

let now = new Date('2027-03-26T12:00:00Z')
const h = await startHarness(t, { clock: () => now, env: { CAMPAIGN_ENGINE_POLL_MS: '3600000' } })
const round = () => h.app.ctx.campaigns!.round()
const at = (iso: string) => {
  now = new Date(iso)
}

const outboxOf = (campaignId: string, event: string) =>
  h.app.ctx.sql<{ data: any }[]>`select data from outbox where event = ${event} and data->>'campaign_id' = ${campaignId}`

t.test('start_at starts a scheduled one-shot, which completes once all are enqueued', async (t) => {
  at('2027-03-26T12:00:00Z')
  const tenant = await h.createTenant()
  await players(h, tenant, 3)
  const c = await createCampaign(h, tenant, {
    type: 'one_shot', target_segment_id: await segment(h, tenant),
    schedule: { start_at: '2027-03-26T13:00:00Z' }, config: { templates: { in_app: await template(h, tenant) } },
  })
  t.equal((await move(h, tenant, c.id, 'scheduled')).status, 'scheduled')
  at('2027-03-26T12:59:59Z')
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'scheduled', 'not before start_at')
  t.equal((await sent(h, c.id)).length, 0)
  at('2027-03-26T13:00:00Z')
  await round()
  const done = await campaign(h, tenant, c.id)
  t.equal(done.status, 'completed', 'started at start_at and completed once the 3 players were enqueued')
  t.equal((await sent(h, c.id)).length, 3)
  t.equal(done.stats.audience, 3)
  const completed = await outboxOf(c.id, 'campaign.completed')
  t.equal(completed.length, 1, 'campaign.completed fired once')
  t.equal(completed[0]!.data.reason, 'all_enqueued')
})

t.test('end_at completes a running campaign', async (t) => {
  at('2027-03-26T12:00:00Z')
  const tenant = await h.createTenant()
  const c = await createCampaign(h, tenant, {
    type: 'triggered', schedule: { start_at: '2027-03-26T13:00:00Z', end_at: '2027-03-27T13:00:00Z' },
    config: { templates: { in_app: await template(h, tenant) }, trigger: { event_type: 'deposit' } },
  })
  await move(h, tenant, c.id, 'scheduled')
  at('2027-03-26T14:00:00Z')
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'running')
  at('2027-03-27T12:59:00Z')
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'running')
  at('2027-03-27T13:00:01Z')
  await round()
  t.equal((await campaign(h, tenant, c.id)).status, 'completed')
  const completed = await outboxOf(c.id, 'campaign.completed')
  t.equal(completed.length, 1)
  t.equal(completed[0]!.data.reason, 'end_at')
})

t.test('a recurring 02:30 Europe/Rome campaign ticks once a day, also on the spring-forward day', async (t) => {
  at('2027-03-26T12:00:00Z')
  const tenant = await h.createTenant()
  await players(h, tenant, 2)
  const c = await createCampaign(h, tenant, {
    type: 'recurring', target_segment_id: await segment(h, tenant),
    schedule: { cron: '30 2 * * *', timezone: 'Europe/Rome', end_at: '2027-03-30T00:00:00Z' },
    config: { templates: { in_app: await template(h, tenant) } },
  })
  await move(h, tenant, c.id, 'running')
  // Walk the clock in 10-minute steps over the change of 28 March 2027 (02:00 CET → 03:00 CEST). The
  // dates lie ahead of the real time, so engines of other processes on a shared database leave them alone.
  for (let ms = now.getTime(); ms <= Date.parse('2027-03-30T00:10:00Z'); ms += 10 * 60_000) {
    now = new Date(ms)
    await round()
  }
  const runs = await h.app.ctx.sql<{ run_key: string }[]>`select run_key from campaign_runs where campaign_id = ${c.id} order by run_key`
  t.same(runs.map((r) => r.run_key), [
    'tick:2027-03-27T01:30:00.000Z', // 02:30 CET
    'tick:2027-03-28T01:30:00.000Z', // 02:30 does not exist that night: once, at 03:30 CEST
    'tick:2027-03-29T00:30:00.000Z', // 02:30 CEST
  ])
  t.equal((await sent(h, c.id)).length, 6, 'each tick messaged both members once')
  t.equal((await campaign(h, tenant, c.id)).status, 'completed', 'end_at completed it')
})

t.test("a recurring tick's in-app messages are delivered to the members' inboxes", async (t) => {
  // Days before the real time: the delivery dispatcher takes a message when its due time (the clock's
  // time at the enqueue) has come in the database's time, so the test clock must not lie ahead of it.
  const day = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10)
  at(`${day}T11:50:00Z`)
  const tenant = await h.createTenant()
  const ids = await players(h, tenant, 2)
  const c = await createCampaign(h, tenant, {
    type: 'recurring', target_segment_id: await segment(h, tenant),
    schedule: { cron: '0 12 * * *' }, config: { templates: { in_app: await template(h, tenant, 'in_app', { body: 'Daily spins' }) } },
  })
  await move(h, tenant, c.id, 'running')
  at(`${day}T11:59:59Z`)
  await round()
  t.equal((await sent(h, c.id)).length, 0, 'not before the tick')
  at(`${day}T12:00:00Z`)
  await round()
  const runs = await h.app.ctx.sql<{ run_key: string }[]>`select run_key from campaign_runs where campaign_id = ${c.id}`
  t.same(runs.map((r) => r.run_key), [`tick:${day}T12:00:00.000Z`])
  t.equal((await sent(h, c.id)).length, 2, 'the tick enqueued a message per member')
  const deadline = Date.now() + 15_000
  while ((await sent(h, c.id)).some((r) => r.status === 'queued') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  const rows = await sent(h, c.id)
  t.same(rows.map((r) => r.status), ['delivered', 'delivered'], 'both delivered by the delivery dispatcher')
  t.same(new Set(rows.map((r) => r.player_id)), new Set(ids))
  for (const id of ids) {
    const inbox = (await h.request('GET', `/players/${id}/inbox`, { key: tenant.key })).body.data
    t.match(inbox, [{ body: 'Daily spins', campaign_id: c.id }], 'in the inbox')
  }
  t.equal((await outboxOf(c.id, 'message.delivered')).length, 2, 'message.delivered for each')
  t.match((await campaign(h, tenant, c.id)).stats, { audience: 2, delivered: 2, sent: 2 })
  // Stopped, so the later tests' clock (in 2027) ticks it no more.
  await h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key })
})

t.test('cron in a time zone: the autumn change runs a daily 02:30 once', async (t) => {
  const s = { cron: '30 2 * * *', timezone: 'Europe/Rome' }
  const ticks: string[] = []
  let d = new Date('2026-10-23T12:00:00Z')
  for (let i = 0; i < 3; i++) ticks.push((d = nextTick(s, d)).toISOString())
  t.same(ticks, ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'])
  // The default zone is UTC.
  t.equal(nextTick({ cron: '0 9 * * 1' }, new Date('2026-03-27T12:00:00Z')).toISOString(), '2026-03-30T09:00:00.000Z')
})

// The hold-out: on 10,000 players its share is within tolerance of control_group_percent and none of it
// is messaged; on a run carried to completion every other player is messaged exactly once. (The 10k run
// is cut after two chunks: enqueueing 9,000 messages through the delivery rules one by one would take
// minutes on the embedded store; the selection, which decides the arms, is the full 10k.)
import t from 'tap'
import { isControl } from '../../src/campaigns/control-group.ts'
import { processRun } from '../../src/campaigns/execution.ts'
import { startHarness } from '../helpers/harness.ts'
import { bulkPlayers, campaign, createCampaign, move, must, segment, template, until } from './helpers.ts'

const h = await startHarness(t, { env: { CAMPAIGN_ENGINE_POLL_MS: '3600000' } })
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

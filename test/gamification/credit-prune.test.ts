// The round credits (what a counted bet or win added, for its rollback) are pruned after 7 days, by the
// engine's timer at most once a minute: older credits only cost space.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'

let now = Date.now()
const h = await startHarness(t, { clock: () => new Date(now) })
const sql = h.app.ctx.sql

t.test('credits older than 7 days go, at most once a minute; recent ones stay', async (t) => {
  const tenant = await h.createTenant()
  const player = (await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'pruned' } })).body.data.id as string
  const credit = (round: string, ageMs: number) => sql`
    insert into gamification_round_credits (target_id, player_id, round_id, kind, amount, created_at)
    values (gen_random_uuid(), ${player}, ${round}, 'bet', 1, ${new Date(now - ageMs)})`
  const rounds = async () => (await sql<{ round_id: string }[]>`select round_id from gamification_round_credits where player_id = ${player} order by round_id`).map((r) => r.round_id)
  const DAY = 86_400_000
  await credit('old-1', 8 * DAY)
  await credit('recent', 6 * DAY)
  now += 61_000
  await h.app.ctx.gamification!.tick()
  t.same(await rounds(), ['recent'], 'the old credit pruned')
  await credit('old-2', 8 * DAY)
  await h.app.ctx.gamification!.tick()
  t.same(await rounds(), ['old-2', 'recent'], 'not looked at again within the minute')
  now += 61_000
  await h.app.ctx.gamification!.tick()
  t.same(await rounds(), ['recent'])
})

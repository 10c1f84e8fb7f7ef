import t from 'tap'
import { startSegmentRecompute } from '../../src/segments/recompute.ts'
import { startHarness } from '../helpers/harness.ts'

const h = await startHarness(t)
const sql = h.app.ctx.sql

async function waitFor<T>(fn: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const until = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v !== undefined) return v
    if (Date.now() > until) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 100))
  }
}

t.test('the background recompute fills player_count on its interval and stops cleanly', async (t) => {
  const tenant = await h.createTenant()
  await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'a' } })
  await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'b' } })
  const seg = (await h.request('POST', '/segments', { key: tenant.key, body: { name: 'all', type: 'dynamic' } })).body.data
  t.equal(seg.player_count, null, 'not computed at creation')

  const service = startSegmentRecompute(h.app.ctx, { intervalMs: 200 })
  t.teardown(() => service.stop())
  const count = await waitFor(async () => {
    const got = (await h.request('GET', `/segments/${seg.id}`, { key: tenant.key })).body.data
    return got.player_count ?? undefined
  })
  t.equal(count, 2)
  const events = await sql`select data from outbox where tenant_id = ${tenant.id} and event = 'segment.recomputed'`
  t.equal(events.length, 1)
  t.match(events[0]!.data, { segment_id: seg.id, player_count: 2 })

  // Two concurrent services (two processes) never double-emit.
  const twin = startSegmentRecompute(h.app.ctx, { intervalMs: 200 })
  await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'c' } })
  await waitFor(async () => {
    const got = (await h.request('GET', `/segments/${seg.id}`, { key: tenant.key })).body.data
    return got.player_count === 3 ? true : undefined
  })
  await new Promise((r) => setTimeout(r, 600))
  await twin.stop()
  await service.stop()
  const after = await sql`select data from outbox where tenant_id = ${tenant.id} and event = 'segment.recomputed' order by id`
  t.equal(after.length, 2)
  t.match(after[1]!.data, { player_count: 3, previous_player_count: 2 })
})

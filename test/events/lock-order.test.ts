// Two ingestion groups writing the same players at once, each in its own transaction on a PostgreSQL
// server (PGlite runs one transaction at a time: nothing to interleave there). Every statement of a group
// must lock the players, then their profiles, in one global order, or two groups deadlock (40P01): one
// is rolled back and retried, the ingestion stalls for deadlock_timeout. Pinned here for the currency
// switch (sql/0260), which locks before the profiles' update.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { switchCurrencies, updateProfiles } from '../../src/events/queries.ts'
import type { PlayerColumns } from '../../src/events/transform.ts'

if (!process.env.DATABASE_URL) {
  t.pass('skipped: needs DATABASE_URL (concurrent transactions on a PostgreSQL server)')
} else {
  const h = await startHarness(t)
  const sql = h.app.ctx.sql
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  /** A group's profile columns for these external ids: one event each, nothing else. */
  const columns = (tenantId: string, brandId: string, externalIds: string[], currency: (string | null)[]): PlayerColumns => {
    const n = externalIds.length
    const none = () => Array(n).fill(null)
    return {
      tenant_id: Array(n).fill(tenantId), brand_id: Array(n).fill(brandId), external_id: externalIds, email: none(), phone: none(),
      language: none(), currency, country: none(), name: none(), timezone: none(), device: none(), os: none(), browser: none(),
      platform: none(), first_seen: Array(n).fill(Date.now()), last_seen: Array(n).fill(Date.now()), last_login: none(),
      event_count: Array(n).fill(1), money: none(), consent: none(), first_deposit_at: none(), first_deposit_amount: none(),
      first_deposit_currency: none(), last_deposit_at: none(),
    }
  }

  t.test("a group switching one player's currency and a group touching the same players: no deadlock", async (t) => {
    const tenant = await h.createTenant()
    for (const ext of ['x1', 'x2']) t.equal((await h.request('POST', '/players', { key: tenant.key, body: { external_id: ext } })).status, 201)
    // A before B in player id order: the switching group names B only, the other both.
    const [a, b] = (await sql<{ external_id: string }[]>`select external_id from players where tenant_id = ${tenant.id} order by id`).map((r) => r.external_id)
    const brand = tenant.brand.id
    const errors: unknown[] = []
    const switching = sql.begin(async (tx) => {
      await switchCurrencies(tx as never, [brand, brand], [a!, b!], [brand], [b!], ['USD'])
      await sleep(300) // the other group takes its first lock meanwhile
      await updateProfiles(tx as never, [null, null], columns(tenant.id, brand, [a!, b!], [null, 'USD']))
    }).catch((err: unknown) => errors.push(err))
    await sleep(100)
    const other = sql.begin(async (tx) => {
      await updateProfiles(tx as never, [null, null], columns(tenant.id, brand, [a!, b!], [null, null]))
    }).catch((err: unknown) => errors.push(err))
    await Promise.all([switching, other])
    t.same(errors.map((e) => (e as { code?: string }).code ?? String(e)), [], 'both groups commit')
    const [row] = await sql<{ currency: string; n: number }[]>`
      select pp.currency, pp.event_count::int as n from player_profiles pp join players p on p.id = pp.player_id
      where p.tenant_id = ${tenant.id} and p.external_id = ${b!}`
    t.same(row, { currency: 'USD', n: 2 }, 'switched, and both groups counted')
  })
}

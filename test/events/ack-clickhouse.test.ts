// INGEST_ACK_AFTER=clickhouse (the default): the events are committed to the spool with the profiles,
// inserted into ClickHouse before the 200, and their spool row is deleted afterwards. A row whose insert
// never happened (the process died after the commit) is inserted by the next flush, exactly once.
import t from 'tap'
import type { Spool } from '../../src/events/spool.ts'
import { transformGroup } from '../../src/events/transform.ts'
import { startHarness } from '../helpers/harness.ts'
import { ev, post, storedCount } from './helpers.ts'

// The periodic flusher stays out of the way (an hour): only the tests flush.
const h = await startHarness(t, { env: { INGEST_ACK_AFTER: 'clickhouse', INGEST_FLUSH_INTERVAL_MS: '3600000' } })
const sql = h.app.ctx.sql
const spool = () => h.app.ctx.ingest?.spool as Spool
const sink = h.app.ctx.ch.sinkId
const spoolRows = async () => Number((await sql<{ n: string }[]>`select count(*) as n from event_spool where sink = ${sink}`)[0]?.n)

t.test('a 200 means in ClickHouse and in the profiles; the spool row is gone soon after', async (t) => {
  const tenant = await h.createTenant()
  const res = await post(h, tenant.key, { events: [ev({ player_id: 'ack1', event_type: 'deposit', payload: { amount: 40, currency: 'EUR' } }), ev({ player_id: 'ack2' })] })
  t.equal(res.status, 200, res.text)
  t.match(res.body, { stored: 2, deduped: 0 })
  t.equal(await storedCount(h, tenant.id), 2, 'in ClickHouse before the answer')
  const [profile] = await sql<{ deposit_total: string }[]>`
    select pp.deposit_total from player_profiles pp join players p on p.id = pp.player_id
    where p.tenant_id = ${tenant.id} and p.external_id = 'ack1'`
  t.equal(Number(profile?.deposit_total), 40)
  for (let i = 0; i < 100 && (await spoolRows()) > 0; i++) await new Promise((r) => setTimeout(r, 20))
  t.equal(await spoolRows(), 0, 'the spool row is deleted once inserted')
  t.equal(spool().backlog(), 0)
})

t.test('a committed row whose insert never ran is inserted by the next flush, and a late insert stores nothing twice', async (t) => {
  const tenant = await h.createTenant()
  const body = Buffer.from(JSON.stringify({ events: [ev(), ev(), ev()] }))
  const { rows, rowCount } = transformGroup({
    tenantIds: [tenant.id], bodies: body, bounds: Int32Array.of(0, body.length), brandIds: [tenant.brand.id], mappingKeys: ['0'],
    receivedAt: [Date.now()], keep: new Uint8Array(3).fill(1), mappings: { '0': { rules: [] } }, seqBase: Date.now() * 1024,
  })
  // What a process does before it dies between its commit and its insert.
  let batch: string | undefined
  await sql.begin(async (tx) => {
    batch = await spool().append(tx, rows, rowCount, 'rowbinary', true)
  })
  t.ok(batch, 'claimed under a batch of its own')
  t.equal(await storedCount(h, tenant.id), 0)
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 3, 'the flush inserted it')
  t.equal(await spoolRows(), 0)
  // A process that was only slow, not dead, inserts it after all: the batch's token drops the repeat.
  await spool().insertNow(batch as string, rows, rowCount)
  t.equal(await storedCount(h, tenant.id), 3, 'still once')
})

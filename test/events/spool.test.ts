// INGEST_ACK_AFTER=postgres: events are acknowledged once spooled in PostgreSQL with the profiles, and
// reach ClickHouse exactly once through the flusher, also when a flush is interrupted.
import { inflateRawSync } from 'node:zlib'
import t from 'tap'
import { EVENT_COLUMNS, EVENT_LAYOUT } from '../../src/events/event-rows.ts'
import { createSpool, type Spool } from '../../src/events/spool.ts'
import { transformGroup } from '../../src/events/transform.ts'
import { startHarness } from '../helpers/harness.ts'
import { ev, post, storedCount } from './helpers.ts'

// Flushes only when a test asks (the interval is an hour).
const h = await startHarness(t, { env: { INGEST_ACK_AFTER: 'postgres', INGEST_FLUSH_INTERVAL_MS: '3600000' } })
const sql = h.app.ctx.sql
const spool = () => h.app.ctx.ingest?.spool as Spool
const sink = h.app.ctx.ch.sinkId
const spooled = async () => Number((await sql<{ n: string }[]>`select coalesce(sum(row_count), 0) as n from event_spool where sink = ${sink}`)[0]?.n)

t.test('a 200 means spooled with the profiles; a flush moves the events to ClickHouse once', async (t) => {
  const tenant = await h.createTenant()
  const events = [ev({ player_id: 'sp1', event_type: 'deposit', payload: { amount: 25, currency: 'EUR' } }), ev({ player_id: 'sp2' })]
  const res = await post(h, tenant.key, { events })
  t.equal(res.status, 200, res.text)
  t.match(res.body, { received: 2, stored: 2, deduped: 0 })
  t.equal(await storedCount(h, tenant.id), 0, 'not in ClickHouse yet')
  t.ok((await spooled()) >= 2, 'in the spool')
  const encodings = await sql<{ encoding: string }[]>`select distinct encoding from event_spool where sink = ${sink} and row_count = 2`
  t.same(encodings.map((e) => e.encoding), ['rowbinary'], 'a small group is spooled uncompressed')
  const [profile] = await sql<{ deposit_total: string }[]>`
    select pp.deposit_total from player_profiles pp join players p on p.id = pp.player_id
    where p.tenant_id = ${tenant.id} and p.external_id = 'sp1'`
  t.equal(Number(profile?.deposit_total), 25, 'the profile is already updated')
  t.equal(spool().backlog() >= 2, true)

  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 2)
  t.equal(await spooled(), 0, 'the spool is empty after a flush')
  t.equal(spool().backlog(), 0)

  // Deduped whether the original is spooled or already flushed.
  t.match((await post(h, tenant.key, { events })).body, { stored: 0, deduped: 2 })
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 2)
})

t.test('a flush interrupted after its ClickHouse insert is redone without storing twice', async (t) => {
  const tenant = await h.createTenant()
  const res = await post(h, tenant.key, { events: Array.from({ length: 80 }, (_, i) => ev({ player_id: `r${i}` })) })
  t.equal(res.status, 200, res.text)
  // What a flusher does before it dies between the insert and the delete: claim the rows as a batch,
  // insert them with the batch's token.
  const [claimed] = await sql<{ batch: string }[]>`
    with b as (select nextval('event_spool_batch_seq') as batch)
    update event_spool set batch = b.batch, claimed_at = now() - interval '1 minute' from b
    where sink = ${sink} and event_spool.batch is null returning b.batch`
  const batch = (claimed as { batch: string }).batch
  const parts = await sql<{ rows: Buffer; encoding: string }[]>`select rows, encoding from event_spool where batch = ${batch} order by id`
  t.ok(parts.length > 0 && parts.every((p) => p.encoding === 'rowbinary-deflate'), 'the workers spool a large group compressed')
  const payload = Buffer.concat(parts.map((p) => (p.encoding === 'rowbinary-deflate' ? inflateRawSync(p.rows) : p.rows)))
  await h.app.ctx.ch.insertRowBinary('events', EVENT_COLUMNS, payload, { dedupeToken: `respin-spool-${batch}` })
  t.equal(await storedCount(h, tenant.id), 80, 'the interrupted insert landed')

  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 80, 'the redo was dropped by its deduplication token')
  t.equal(await spooled(), 0)
})

t.test('a flush interrupted before its ClickHouse insert is redone', async (t) => {
  const tenant = await h.createTenant()
  t.equal((await post(h, tenant.key, { events: Array.from({ length: 7 }, () => ev()) })).status, 200)
  await sql`
    with b as (select nextval('event_spool_batch_seq') as batch)
    update event_spool set batch = b.batch, claimed_at = now() - interval '1 minute' from b
    where sink = ${sink} and event_spool.batch is null`
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 7)
})

t.test('a batch claimed a moment ago by a flusher that died is flushed before anything relies on ClickHouse', async (t) => {
  // A process killed mid-flush and restarted at once: its last batch is claimed but not old enough to look
  // abandoned. The startup flush and every flush a dedupe verification asks for must still move it, or a
  // retry of those acknowledged events is stored again (CI caught this in the crash test, test/events/crash.ts).
  const tenant = await h.createTenant()
  const events = Array.from({ length: 5 }, () => ev())
  t.equal((await post(h, tenant.key, { events })).status, 200)
  await sql`
    with b as (select nextval('event_spool_batch_seq') as batch)
    update event_spool set batch = b.batch, claimed_at = now() from b
    where sink = ${sink} and event_spool.batch is null`
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 5, 'in ClickHouse once the flush resolves')
  t.equal(await spooled(), 0)
  t.match((await post(h, tenant.key, { events })).body, { stored: 0, deduped: 5 })
})

t.test('a group spanning more than 100 months is flushed (no partition limit per insert)', async (t) => {
  const tenant = await h.createTenant()
  // ClickHouse refuses inserts touching more than 100 partitions by default; a spooled group is already
  // acknowledged, so its flush must not be refused for that.
  const events = Array.from({ length: 101 }, (_, m) => ev({ timestamp: new Date(Date.UTC(2001, m, 15)).toISOString() }))
  const res = await post(h, tenant.key, { events: events.slice(0, 100) })
  t.equal(res.status, 200, res.text)
  t.equal((await post(h, tenant.key, events[100])).status, 200)
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 101)
})

t.test('a group whose profile update fails is rolled back with its spooled events, then written once', async (t) => {
  // The group's statements and COMMIT go out pipelined: a player deleted behind the writer's cache makes
  // the profile update fail, which must roll back the spool insert sent with it.
  const tenant = await h.createTenant()
  t.equal((await post(h, tenant.key, { events: [ev({ player_id: 'gone', event_id: 'g-1' })] })).status, 200)
  await sql`delete from players where tenant_id = ${tenant.id} and external_id = 'gone'`
  const res = await post(h, tenant.key, { events: [ev({ player_id: 'gone', event_id: 'g-2' }), ev({ player_id: 'other', event_id: 'g-3' })] })
  t.equal(res.status, 200, res.text)
  t.equal(res.body.stored, 2)
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 3, 'each event once: the failed attempt left nothing in the spool')
  const [p] = await sql<{ event_count: number }[]>`
    select pp.event_count from players pl join player_profiles pp on pp.player_id = pl.id
    where pl.tenant_id = ${tenant.id} and pl.external_id = 'gone'`
  t.equal(Number(p?.event_count), 1, 're-created with the new event only')
})

t.test('health shows the spool backlog; a full spool fails the check and refuses events', async (t) => {
  const tenant = await h.createTenant()
  t.equal((await post(h, tenant.key, { events: [ev(), ev(), ev()] })).status, 200)
  const health = await h.request('GET', '/health')
  t.equal(health.status, 200, health.text)
  t.equal(health.body.checks.ingest_spool.status, 'ok')
  t.ok(health.body.checks.ingest_spool.backlog >= 3, `backlog ${health.body.checks.ingest_spool.backlog}`)

  // A spool with a limit of 3 events, over the same stores: full once 3 are waiting.
  const { createSpool } = await import('../../src/events/spool.ts')
  const small = createSpool({ sql, ch: h.app.ctx.ch, log: h.app.ctx.log, intervalMs: 3_600_000, maxBacklog: 3 })
  t.equal(small.full(), false)
  const other = await h.createTenant()
  const body = Buffer.from(JSON.stringify({ events: [ev(), ev(), ev()] }))
  const { rows, rowCount } = transformGroup({
    tenantIds: [other.id], bodies: body, bounds: Int32Array.of(0, body.length), brandIds: [other.brand.id], mappingKeys: ['0'],
    receivedAt: [Date.now()], keep: new Uint8Array(3).fill(1), mappings: { '0': { rules: [] } }, seqBase: Date.now() * 1024,
  })
  await sql.begin((tx) => small.append(tx, rows, rowCount))
  t.equal(small.full(), true)
  await small.flush()
  t.equal(small.full(), false, 'the flush brings the backlog back to what is really waiting')
  t.equal(await storedCount(h, other.id), 3)
  await spool().flush()
})

t.test('the flusher vacuums the spool, so flushed rows leave no growing dead space behind', async (t) => {
  const { createSpool } = await import('../../src/events/spool.ts')
  const tenant = await h.createTenant()
  // ~300 events per group: ~120 KB of RowBinary, stored out of line (TOAST) like real batches.
  const body = Buffer.from(JSON.stringify({ events: Array.from({ length: 100 }, () => ev({ payload: { note: 'x'.repeat(200) } })) }))
  const group = () =>
    transformGroup({
      tenantIds: [tenant.id, tenant.id, tenant.id], bodies: Buffer.concat([body, body, body]), bounds: Int32Array.of(0, body.length, body.length, 2 * body.length, 2 * body.length, 3 * body.length),
      brandIds: [tenant.brand.id, tenant.brand.id, tenant.brand.id], mappingKeys: ['0', '0', '0'], receivedAt: [Date.now(), Date.now(), Date.now()],
      keep: new Uint8Array(300).fill(1), mappings: { '0': { rules: [] } }, seqBase: Date.now() * 1024,
    })
  const toastBytes = async () => Number((await sql<{ n: string }[]>`select pg_relation_size(reltoastrelid) as n from pg_class where relname = 'event_spool'`)[0]?.n)
  const vacuums = async () => Number((await sql<{ n: string }[]>`select vacuum_count as n from pg_stat_user_tables where relname = 'event_spool'`)[0]?.n)
  const vacuumsBefore = await vacuums()
  const flusher = createSpool({ sql, ch: h.app.ctx.ch, log: h.app.ctx.log, intervalMs: 20, maxBacklog: 1e9, vacuumEveryMs: 0 })
  flusher.start()
  t.teardown(() => flusher.stop())
  const round = async () => {
    for (let i = 0; i < 10; i++) {
      const { rows, rowCount } = group()
      await sql.begin((tx) => flusher.append(tx, rows, rowCount))
    }
    // Flushed, then vacuumed (or given up after 5 s: a spool that never vacuums fails below).
    const deadline = Date.now() + 5_000
    const vacuumed = (await vacuums()) + 1
    while (((await spooled()) > 0 || (await vacuums()) < vacuumed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  }
  await round()
  const oneRound = await toastBytes()
  t.ok(oneRound > 1_000_000, `one round spools ${oneRound} bytes out of line`)
  for (let i = 0; i < 5; i++) await round()
  t.ok((await vacuums()) >= vacuumsBefore + 6, 'vacuumed after the flushes')
  const after = await toastBytes()
  t.ok(after < 2.5 * oneRound, `six rounds take ${after} bytes, one took ${oneRound}: the space is reused`)
  t.equal(await storedCount(h, tenant.id), 6 * 10 * 300)
})

t.test('a group ClickHouse refuses as malformed is set aside; the rest of its batch and later flushes go on', async (t) => {
  const tenant = await h.createTenant()
  // A row ClickHouse refuses as soon as it reaches it, whatever follows: two UUIDs, then an event_id whose
  // length says 4 GiB (TOO_LARGE_STRING_SIZE). The same refusal at every attempt. (A row cut short would
  // not do: the parser reads on into the next group's bytes, and once in a few hundred batches that
  // misaligned read ends exactly at the end and "succeeds".) Spooled between two good groups, and in a
  // batch with them that a dead flusher claimed.
  const poisonRow = Buffer.concat([Buffer.alloc(32, 1), Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f])])
  const poison = async () =>
    sql`insert into event_spool (sink, writer, rows, row_count, layout) values (${sink}, gen_random_uuid(), ${poisonRow}, 1, ${EVENT_LAYOUT})`
  t.teardown(() => sql`delete from event_spool where sink = ${sink} and quarantined_at is not null`)
  t.equal((await post(h, tenant.key, { events: [ev(), ev()] })).status, 200)
  await poison()
  t.equal((await post(h, tenant.key, { events: [ev(), ev(), ev()] })).status, 200)
  await sql`
    with b as (select nextval('event_spool_batch_seq') as batch)
    update event_spool set batch = b.batch, claimed_at = now() - interval '1 minute' from b
    where sink = ${sink} and event_spool.batch is null`
  await poison()
  t.equal((await post(h, tenant.key, ev())).status, 200)

  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 6, 'every good group reached ClickHouse')
  const aside = await sql<{ row_count: number; error: string }[]>`
    select row_count, error from event_spool where sink = ${sink} and quarantined_at is not null`
  t.equal(aside.length, 2, 'only the two bad groups are set aside')
  // Refused by the flusher's own RowBinary reader (it numbers the rows' seq before the insert, src/events/
  // event-rows.ts setSeqs) or by ClickHouse: either way for its bytes, every time.
  t.ok(aside.every((r) => /Code: 131\.|setSeqs: /.test(r.error)), aside.map((r) => r.error).join('; '))
  t.equal(spool().backlog(), 0)
  t.equal(spool().quarantined(), 2)
  const health = await h.request('GET', '/health')
  t.equal(health.status, 200, 'set-aside events do not fail the health check')
  t.match(health.body.checks.ingest_spool, { status: 'ok', backlog: 0, quarantined: 2 })

  // Later traffic flows past them; the operator's requeue (sql/0018) sends them round again, and they are
  // set aside again rather than blocking anything.
  t.equal((await post(h, tenant.key, { events: [ev(), ev()] })).status, 200)
  await sql`update event_spool set batch = null, claimed_at = null, quarantined_at = null, error = null where quarantined_at is not null`
  await spool().flush()
  t.equal(await storedCount(h, tenant.id), 8)
  t.equal(spool().quarantined(), 2)
})

t.test('only data errors count as a refusal; an unreachable ClickHouse is a failure to retry', async (t) => {
  const { isDataRefusal } = await import('../../src/db/clickhouse.ts')
  const chdbError = await h.app.ctx.ch.query('SELECT toUInt8(\'not a number\')').then(() => undefined, (err: unknown) => err)
  t.equal(isDataRefusal(chdbError), true, String(chdbError))
  t.equal(isDataRefusal(Object.assign(new Error('Cannot read all data'), { code: '33', type: 'CANNOT_READ_ALL_DATA' })), true, 'server client error')
  t.equal(isDataRefusal(Object.assign(new Error('Too many parts'), { code: '252', type: 'TOO_MANY_PARTS' })), false)
  t.equal(isDataRefusal(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8123'), { code: 'ECONNREFUSED' })), false)
  t.equal(isDataRefusal(new Error('Code: 241. DB::Exception: Memory limit exceeded')), false)
  t.equal(isDataRefusal(Object.assign(new Error('invalid input syntax'), { code: '00033' })), false, 'a SQLSTATE is no ClickHouse code')
})

t.test('flushes asked for while another runs share the next one instead of queueing one each', async (t) => {
  const tenant = await h.createTenant()
  // A second spool on the same sink: its SQL counted by flush (the first statement of each), its first
  // ClickHouse insert held until released.
  let flushes = 0
  const countingSql = new Proxy(sql, {
    apply(target, self, args) {
      if (Array.isArray(args[0]) && String(args[0][0]).includes('select distinct batch from event_spool')) flushes++
      return Reflect.apply(target, self, args)
    },
  })
  const ch = h.app.ctx.ch
  let held = false
  let release = () => {}
  const gate = new Promise<void>((r) => (release = r))
  const heldCh = {
    ...ch,
    async insertRowBinary(...args: Parameters<typeof ch.insertRowBinary>) {
      if (!held) {
        held = true
        await gate
      }
      return ch.insertRowBinary(...args)
    },
  }
  const other = createSpool({ sql: countingSql, ch: heldCh, log: h.app.ctx.log, intervalMs: 3_600_000, maxBacklog: 1_000_000 })
  t.equal((await post(h, tenant.key, { events: [ev()] })).status, 200)
  const first = other.flush('all')
  while (!held) await new Promise((r) => setTimeout(r, 5))
  t.equal((await post(h, tenant.key, { events: [ev()] })).status, 200)
  const later = [other.flush('all'), other.flush('others'), other.flush('all')]
  release()
  await Promise.all([first, ...later])
  t.equal(flushes, 2, 'the running flush and one shared by the three asked for meanwhile')
  t.equal(await storedCount(h, tenant.id), 2, 'the event spooled meanwhile was moved by the shared flush')
  t.equal(await spooled(), 0)
})

t.test('rows spooled before extra_fields (layout 1) still reach ClickHouse, beside new rows in the same flush', async (t) => {
  const tenant = await h.createTenant()
  // A row as an earlier version spooled it: the same RowBinary without the last column. A login has no
  // extra fields, so its row ends with extra_fields' empty string, one zero byte.
  t.equal((await post(h, tenant.key, { events: [ev({ player_id: 'old1', event_type: 'login' })] })).status, 200)
  const [old] = await sql<{ id: string; rows: Buffer; layout: number }[]>`select id::text, rows, layout from event_spool where sink = ${sink} and batch is null`
  t.equal(old?.layout, 2, 'new rows are spooled as layout 2')
  t.equal(old?.rows.at(-1), 0, 'ending with an empty extra_fields')
  await sql`update event_spool set rows = ${(old as { rows: Buffer }).rows.subarray(0, -1)}, layout = 1 where id = ${(old as { id: string }).id}`
  t.equal((await post(h, tenant.key, { events: [ev({ player_id: 'new1', event_type: 'registration', payload: { email: 'new1@example.com', timezone: 'Europe/Rome' } })] })).status, 200)
  await spool().flush()
  t.equal(await spooled(), 0, 'both moved, none set aside')
  const rows = await h.app.ctx.ch.query<{ player_id: string; extra_fields: string }>(
    'SELECT player_id, extra_fields FROM events WHERE tenant_id = {t:UUID} ORDER BY player_id', { t: tenant.id })
  t.same(rows, [
    { player_id: 'new1', extra_fields: '{"email":"new1@example.com","timezone":"Europe/Rome"}' },
    { player_id: 'old1', extra_fields: '' },
  ])
})

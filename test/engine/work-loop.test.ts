// The lease-based work loop over a real PostgreSQL table (PGlite embedded, or the server in DATABASE_URL).
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import t from 'tap'
import { claimDue, confirmLease, startTicker, startWorkLoop, type QueueTable } from '../../src/engine/work-loop.ts'
import { createLogger } from '../../src/lib/log.ts'
import { startHarness } from '../helpers/harness.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const log = createLogger('silent')

interface Job {
  id: number
  k: string
  n: number
}

t.test('work loop', async (t) => {
  const h = await startHarness(t)
  const sql = h.app.ctx.sql
  const name = `test_queue_${randomBytes(4).toString('hex')}`
  await sql`create table ${sql(name)} (id serial primary key, k text not null, n int not null, due timestamptz not null default now(), owner text, done_by text[] not null default '{}', done boolean not null default false)`
  t.teardown(() => sql`drop table if exists ${sql(name)}`)
  const queue: QueueTable = { table: name, keyColumn: 'k', dueColumn: 'due', ownerColumn: 'owner', where: (s) => s`not done` }
  const notDone = async () => (await sql<{ left: number }[]>`select count(*)::int as left from ${sql(name)} where not done`)[0]!.left
  /** Waits (up to ~6 s) until every row of the table is done. */
  const untilAllDone = async () => {
    for (let i = 0; i < 300 && (await notDone()) > 0; i++) await sleep(20)
  }

  t.test('rows are claimed when due, leased, and done exactly once over two loops', async (t) => {
    await sql`insert into ${sql(name)} (k, n) select 'key' || (i % 7), i from generate_series(1, 300) i`
    await sql`insert into ${sql(name)} (k, n, due) values ('later', 0, now() + interval '1 hour')`
    // In server mode the second loop has connections of its own, as another process would.
    const other = process.env.DATABASE_URL ? postgres(process.env.DATABASE_URL, { max: 4, onnotice: () => {} }) : sql
    t.teardown(() => (other !== sql ? other.end() : undefined))
    const make = (s: typeof sql, who: string) =>
      startWorkLoop<Job>({
        name: who,
        sql: s,
        log,
        queue,
        leaseMs: 30_000,
        idleIntervalMs: 20,
        globalConcurrency: 8,
        keyOf: (row) => row.k,
        async handle(row, lease) {
          await sleep(1)
          await s`update ${s(name)} set done = true, done_by = done_by || ${who}::text where id = ${row.id} and owner = ${lease.owner}`
        },
      })
    const loops = [make(sql, 'a'), make(other, 'b')]
    for (let i = 0; i < 500; i++) {
      const left = (await sql<{ left: number }[]>`select count(*)::int as left from ${sql(name)} where not done and k <> 'later'`)[0]!.left
      if (left === 0) break
      await sleep(20)
    }
    await Promise.all(loops.map((l) => l.stop()))
    const rows = await sql<{ n: number; done_by: string[] }[]>`select n, done_by from ${sql(name)} where k <> 'later'`
    t.equal(rows.length, 300)
    t.ok(rows.every((r) => r.done_by.length === 1), 'each row done once')
    const byA = rows.filter((r) => r.done_by[0] === 'a').length
    t.ok(byA > 0 && byA < 300 || !process.env.DATABASE_URL, `shared: a did ${byA}, b did ${300 - byA}`)
    const [later] = await sql<{ done: boolean; owner: string | null }[]>`select done, owner from ${sql(name)} where k = 'later'`
    t.same(later, { done: false, owner: null }, 'a row not yet due is left alone')
    await sql`delete from ${sql(name)}`
  })

  t.test('a row whose worker died is retried after the lease; the stale claim can no longer confirm', async (t) => {
    await sql`insert into ${sql(name)} (k, n) values ('crash', 1)`
    const [first] = await claimDue<Job & { owner: string }>(sql, queue, { limit: 10, leaseMs: 300, owner: 'dead-process:1' })
    t.equal(first!.n, 1)
    t.same(await claimDue(sql, queue, { limit: 10, leaseMs: 300, owner: 'x:1' }), [], 'leased: not claimable')
    await sleep(400)
    const [again] = await claimDue<Job>(sql, queue, { limit: 10, leaseMs: 30_000, owner: 'alive:1' })
    t.equal(again!.id, first!.id, 'claimable again after the lease')
    const stale = { owner: 'dead-process:1', claimedAt: Date.now() - 1000, leaseMs: 300 }
    t.equal(await confirmLease(sql, queue, first!.id, stale), false, 'the old claim is told it lost the row')
    const fresh = { owner: 'alive:1', claimedAt: Date.now() - 20_000, leaseMs: 30_000 }
    t.equal(await confirmLease(sql, queue, first!.id, fresh), true)
    await sql`delete from ${sql(name)}`
  })

  t.test('a lease held while a side effect is in flight outlives its length; released, it runs out', async (t) => {
    await sql`insert into ${sql(name)} (k, n) values ('slow', 1)`
    const [row] = await claimDue<Job & { owner: string }>(sql, queue, { limit: 10, leaseMs: 300, owner: 'slow-sender:1' })
    const lease = { owner: 'slow-sender:1', claimedAt: Date.now(), leaseMs: 300 }
    // A send that needs more than the lease left: confirmLease with what it needs extends it first.
    t.equal(await confirmLease(sql, queue, row!.id, lease, 1_000), true)
    t.equal(lease.leaseMs, 1_000, 'extended to what the send needs')
    await sql`update ${sql(name)} set due = now(), owner = null where id = ${row!.id}`

    // A loop whose handler takes four times its lease: the loop keeps renewing the lease while it runs.
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let started!: () => void
    const running = new Promise<void>((r) => (started = r))
    const loop = startWorkLoop<Job>({
      name: 'slow-handler', sql, log, queue, leaseMs: 300, idleIntervalMs: 10_000, keyOf: (r) => r.k,
      async handle() {
        started()
        await gate
      },
    })
    t.teardown(() => loop.stop())
    loop.wake()
    await running
    for (let i = 0; i < 6; i++) {
      await sleep(200)
      t.same(await claimDue(sql, queue, { limit: 10, leaseMs: 300, owner: 'other:1' }), [], `held at ${(i + 1) * 200} ms (lease 300 ms)`)
    }
    release()
    await sleep(450)
    const [again] = await claimDue<Job>(sql, queue, { limit: 10, leaseMs: 30_000, owner: 'other:2' })
    t.equal(again?.id, row!.id, 'released: claimable once the lease runs out')
    await loop.stop()
    await sql`delete from ${sql(name)}`
  })

  /** A loop whose rows of key 'busy' are stuck until release(), holding at most 2 rows of a key. */
  const busyKeyLoop = (loopName: string, idleIntervalMs: number) => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const handled: string[] = []
    const loop = startWorkLoop<Job>({
      name: loopName,
      sql,
      log,
      queue,
      leaseMs: 30_000,
      idleIntervalMs,
      maxPerKey: 2,
      keyOf: (row) => row.k,
      async handle(row, lease) {
        handled.push(row.k)
        if (row.k === 'busy') await gate
        await sql`update ${sql(name)} set done = true where id = ${row.id} and owner = ${lease.owner}`
      },
    })
    return { loop, handled, release }
  }

  t.test('keys held to their per-key maximum are left out of claims', async (t) => {
    await sql`insert into ${sql(name)} (k, n) select 'busy', i from generate_series(1, 20) i`
    await sql`insert into ${sql(name)} (k, n) values ('quiet', 1)`
    const { loop, handled, release } = busyKeyLoop('gate', 20)
    for (let i = 0; i < 200 && !handled.includes('quiet'); i++) await sleep(10)
    t.ok(handled.includes('quiet'), 'the quiet key ran while the busy one was stuck')
    const held = (await sql<{ held: number }[]>`select count(*)::int as held from ${sql(name)} where k = 'busy' and owner is not null`)[0]!.held
    t.ok(held <= 21, `busy rows claimed: ${held}`)
    release()
    await untilAllDone()
    await loop.stop()
    t.equal(await notDone(), 0)
  })
  t.test('a wake put off after a claim that found only saturated keys still runs, soon', async (t) => {
    await sql`insert into ${sql(name)} (k, n) select 'busy', i from generate_series(1, 20) i`
    // Idle polls a minute apart: only a wake can bring the next claim within the test.
    const { loop, handled, release } = busyKeyLoop('starved', 60_000)
    t.teardown(() => {
      release()
      return loop.stop()
    })
    for (let i = 0; i < 200 && !handled.length; i++) await sleep(10)
    await sleep(30)
    t.ok(loop.pool.size >= 2, 'the busy key holds at least its maximum, stuck')
    // A claim now leaves 'busy' out and finds nothing; the wake right after it is put off, not lost.
    loop.wake()
    await sleep(20)
    await sql`insert into ${sql(name)} (k, n) values ('late', 1)`
    loop.wake()
    const woke = performance.now()
    for (let i = 0; i < 300 && !handled.includes('late'); i++) await sleep(5)
    t.ok(handled.includes('late'), 'the late key ran')
    t.ok(performance.now() - woke < 1000, 'within the put-off wake, not the idle interval')
    release()
    await untilAllDone()
    await loop.stop()
    await sql`delete from ${sql(name)}`
  })
  t.test('a failing key: one call at a time and its backlog handed back; normal again after a success, or when long quiet', async (t) => {
    let mode: 'fail' | 'ok' | 'silent' = 'fail'
    let running = 0
    let most = 0
    const loop: ReturnType<typeof startWorkLoop<Job>> = startWorkLoop<Job>({
      name: 'failing',
      sql,
      log,
      queue,
      leaseMs: 30_000,
      idleIntervalMs: 10,
      perKeyConcurrency: 4,
      maxPerKey: 8,
      failingHeld: 2,
      failingTimes: { idleMs: 20, idleMaxMs: 40, forgetMs: 150 },
      keyOf: (row) => row.k,
      async handle(row, lease) {
        most = Math.max(most, ++running)
        await sleep(15)
        running--
        // The call's result, as a dispatcher reports it (silent: no answer either way, like an unsent row).
        if (mode === 'fail') loop.failed(row.k)
        else if (mode === 'ok') loop.succeeded(row.k)
        await sql`update ${sql(name)} set done = true where id = ${row.id} and owner = ${lease.owner}`
      },
    })
    t.teardown(() => loop.stop())
    const batch = async (n: number) => {
      await sql`insert into ${sql(name)} (k, n) select 'dead', i from generate_series(1, ${n}) i`
      loop.wake()
      await untilAllDone()
    }
    await batch(4)
    t.equal(most, 4, 'a healthy key runs its concurrency')
    // It failed: from now on one call at a time; what it held beyond 2 went back to the table.
    most = 0
    await batch(12)
    t.equal(most, 1, 'failing: one call at a time')
    mode = 'ok'
    await batch(1)
    most = 0
    await batch(12)
    t.equal(most, 4, 'a success gives the key its concurrency back')
    mode = 'fail'
    await batch(2)
    mode = 'silent'
    // Nothing due and nothing in hand for longer than failingForgetMs: forgotten, without any success.
    await sleep(300)
    most = 0
    await batch(12)
    t.equal(most, 4, 'a failing key long quiet is forgotten')
    await loop.stop()
    t.equal(await notDone(), 0)
    await sql`delete from ${sql(name)}`
  })
  t.test('whenRoom calls a waiting producer once, when a held row is done', async (t) => {
    await sql`insert into ${sql(name)} (k, n) values ('busy', 1)`
    const { loop, handled, release } = busyKeyLoop('room', 20)
    t.teardown(() => {
      release()
      return loop.stop()
    })
    for (let i = 0; i < 200 && !handled.length; i++) await sleep(10)
    let called = 0
    const waiter = () => void called++
    loop.whenRoom(waiter)
    loop.whenRoom(waiter)
    await sleep(30)
    t.equal(called, 0, 'not while the row is held')
    release()
    await untilAllDone()
    await sleep(20)
    t.equal(called, 1, 'once, registered twice')
    await loop.stop()
    await sql`delete from ${sql(name)}`
  })
  t.test('rows inserted already leased under a reservation are run without a claim, within the same bounds', async (t) => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const handled: { id: number; owner: string }[] = []
    const loop = startWorkLoop<Job>({
      name: 'adopt',
      sql,
      log,
      queue,
      leaseMs: 30_000,
      idleIntervalMs: 20,
      globalConcurrency: 2,
      maxPerKey: 2,
      maxInMemory: 3,
      keyOf: (row) => row.k,
      async handle(row, lease) {
        await gate
        handled.push({ id: row.id, owner: lease.owner })
        await sql`update ${sql(name)} set done = true where id = ${row.id} and owner = ${lease.owner}`
      },
    })
    t.teardown(() => {
      release()
      return loop.stop()
    })
    const r = loop.reserve()
    const takes = ['a', 'a', 'a', 'b', 'b'].map((k) => ({ k, leased: r.take(k) }))
    t.same(takes.map((x) => x.leased), [true, true, false, true, false], 'two per key, three in all')
    t.match(r.token, new RegExp(`^${loop.owner}:`))
    const rows = await sql<Job[]>`
      insert into ${sql(name)} (k, n, owner, due)
      select k, i, case when leased = 'y' then ${r.token} end, case when leased = 'y' then now() + interval '30 seconds' else now() end
      from unnest(${takes.map((x) => x.k)}::text[], ${takes.map((x) => (x.leased ? 'y' : 'n'))}::text[]) with ordinality as x(k, leased, i)
      returning id, k, n, owner`
    loop.adopt(rows.filter((row) => (row as Job & { owner: string | null }).owner !== null), r)
    t.equal(loop.pool.size, 3, 'the adopted rows are in the pool')
    release()
    await untilAllDone()
    await loop.stop()
    t.equal(handled.length, 5, 'every row done once: the three adopted and the two claimed')
    t.equal(new Set(handled.map((h) => h.id)).size, 5)
    t.equal(handled.filter((h) => h.owner === r.token).length, 3, 'the adopted rows ran under the reservation\'s token')
    await sql`delete from ${sql(name)}`
  })
})

t.test('ticker: a wake while idle runs a step at once; wakes during a step gather behind coalesceMs', async (t) => {
  const started: number[] = []
  let release: (() => void) | undefined
  const ticker = startTicker({
    name: 'coalesce-test',
    log,
    idleIntervalMs: 60_000,
    coalesceMs: 1000,
    async step() {
      started.push(performance.now())
      if (started.length === 2) await new Promise<void>((r) => (release = r))
      return false
    },
  })
  t.teardown(() => ticker.stop())
  await sleep(50) // the first step ran at start; now idle
  const woken = performance.now()
  ticker.wake()
  await sleep(100)
  t.equal(started.length, 2, 'woken while idle: a step at once')
  t.ok(started[1]! - woken < 500, 'without waiting for the idle interval or the pause')
  // Many wakes while that step runs: one more step, after the pause.
  for (let i = 0; i < 20; i++) ticker.wake()
  const released = performance.now()
  release!()
  await sleep(300)
  t.equal(started.length, 2, 'not yet: the wakes are gathered')
  await sleep(1200)
  t.equal(started.length, 3, 'one step for twenty wakes')
  t.ok(started[2]! - released >= 990, 'after coalesceMs')
})

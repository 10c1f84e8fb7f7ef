// kill -9 in the middle of a one-shot, restart on the same stores: the run resumes where it stopped, and
// every member of the audience has exactly one notification (nobody twice, nobody missed). With a shared
// PostgreSQL (DATABASE_URL), also two API processes running the same campaigns at once: nobody twice.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import postgres from 'postgres'
import t from 'tap'
import { call, makeTenant, spawnServer, type Child } from '../events/helpers.ts'

// Ten chunks of 1,000: enough that the kill, right after the first commits, lands mid-run (chunks go
// three at a time, ~100 ms each).
const PLAYERS = 10_000

async function registerPlayers(origin: string, key: string, n: number, prefix: string): Promise<void> {
  // Four batches at a time, as a client streaming them would.
  const starts = Array.from({ length: Math.ceil(n / 100) }, (_, k) => k * 100)
  const send = async (i: number) => {
    const events = Array.from({ length: Math.min(100, n - i) }, (_, j) => ({
      player_id: `${prefix}${i + j}`, event_type: 'registration', event_id: `${prefix}-reg-${i + j}`, timestamp: new Date().toISOString(), payload: { country: 'IT' },
    }))
    const res = await call(origin, 'POST', '/events', key, { events })
    if (res.status !== 200) throw new Error(`events: ${res.status} ${JSON.stringify(res.body)}`)
  }
  for (let k = 0; k < starts.length; k += 4) await Promise.all(starts.slice(k, k + 4).map(send))
}

async function oneShot(origin: string, key: string): Promise<string> {
  const tpl = await call(origin, 'POST', '/notifications/templates', key, { name: 'hi', channel: 'in_app', body: 'Hello' })
  const seg = await call(origin, 'POST', '/segments', key, { name: 'all', type: 'dynamic', rules: { field: 'country', op: 'eq', value: 'IT' } })
  const c = await call(origin, 'POST', '/campaigns', key, {
    name: 'big', type: 'one_shot', channels: ['in_app'], target_segment_id: seg.body.data.id, config: { templates: { in_app: tpl.body.data.id } },
  })
  if (c.status !== 201) throw new Error(`campaign: ${JSON.stringify(c.body)}`)
  return c.body.data.id
}

async function waitFor(check: () => Promise<boolean>, ms: number, what: string, everyMs = 100): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/** Rows from the servers' PostgreSQL once they have stopped: DATABASE_URL's, or the PGlite directory. */
async function query<T>(dataDir: string, text: string, params: unknown[]): Promise<T[]> {
  if (process.env.DATABASE_URL) {
    const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      return (await sql.unsafe(text, params as never[])) as unknown as T[]
    } finally {
      await sql.end()
    }
  }
  const db = await PGlite.create(join(dataDir, 'postgres'))
  try {
    return (await db.query<T>(text, params)).rows
  } finally {
    await db.close()
  }
}

const SENDS = `
  select count(*)::int as notifications, count(distinct n.player_id)::int as players,
         (select count(*)::int from campaign_audience a where a.campaign_id = $1) as audience,
         count(distinct n.idempotency_key)::int as keys
  from notifications n where n.campaign_id = $1`

t.test('kill -9 during a one-shot: resumed after restart, nobody twice, nobody missed', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-campaign-crash-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const env = { DATA_DIR: dataDir, RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'postgres', CAMPAIGN_ENGINE_POLL_MS: '200' }
  let server: Child = await spawnServer(env)
  const tenant = await makeTenant(server.origin, server.adminKey)
  await registerPlayers(server.origin, tenant.key, PLAYERS, 'crash')
  const id = await oneShot(server.origin, tenant.key)
  const started = await call(server.origin, 'PATCH', `/campaigns/${id}`, tenant.key, { status: 'running' })
  t.equal(started.status, 200)
  // Kill it once the first chunk (1,000 of the audience, one transaction) is committed.
  await waitFor(async () => (await call(server.origin, 'GET', `/notifications?campaign_id=${id}&limit=1`, tenant.key)).body.data.length > 0, 60_000, 'the first chunk', 10)
  server.proc.kill('SIGKILL')
  await server.exited
  const [mid] = await query<{ notifications: number; audience: number }>(dataDir, SENDS, [id])
  t.equal(mid!.audience, PLAYERS, 'the audience was selected at the start')
  t.ok(mid!.notifications > 0 && mid!.notifications < PLAYERS, `killed mid-run: ${mid!.notifications} of ${PLAYERS} enqueued`)

  server = await spawnServer({ ...env, ADMIN_KEY: server.adminKey })
  await waitFor(async () => (await call(server.origin, 'GET', `/campaigns/${id}`, tenant.key)).body.data.status === 'completed', 300_000, 'completion after the restart')
  server.proc.kill('SIGTERM')
  t.equal(await server.exited, 0, 'clean shutdown')
  const [end] = await query<{ notifications: number; players: number; keys: number }>(dataDir, SENDS, [id])
  t.same(end, { notifications: PLAYERS, players: PLAYERS, audience: PLAYERS, keys: PLAYERS }, 'exactly one notification per member')
})

t.test('two API processes run the same campaigns: nobody twice', { skip: process.env.DATABASE_URL ? false : 'needs a shared PostgreSQL (DATABASE_URL); embedded PGlite belongs to one process' }, async (t) => {
  const env = { RATE_LIMIT_INGEST_PER_MIN: '0', INGEST_ACK_AFTER: 'postgres', CAMPAIGN_ENGINE_POLL_MS: '100' }
  const dirs = [mkdtempSync(join(tmpdir(), 'respin-two-a-')), mkdtempSync(join(tmpdir(), 'respin-two-b-'))]
  t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))
  const a = await spawnServer({ ...env, DATA_DIR: dirs[0] })
  const b = await spawnServer({ ...env, DATA_DIR: dirs[1], ADMIN_KEY: a.adminKey })
  t.teardown(() => {
    a.proc.kill('SIGKILL')
    b.proc.kill('SIGKILL')
  })
  const tenant = await makeTenant(a.origin, a.adminKey)
  await registerPlayers(a.origin, tenant.key, 1500, 'two')
  const oneShotId = await oneShot(a.origin, tenant.key)
  const tpl = await call(b.origin, 'POST', '/notifications/templates', tenant.key, { name: 'dep', channel: 'in_app', body: 'Thanks' })
  const trig = await call(b.origin, 'POST', '/campaigns', tenant.key, {
    name: 'on deposit', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl.body.data.id }, trigger: { event_type: 'deposit' } },
  })
  t.equal((await call(b.origin, 'PATCH', `/campaigns/${trig.body.data.id}`, tenant.key, { status: 'running' })).status, 200)
  t.equal((await call(a.origin, 'PATCH', `/campaigns/${oneShotId}`, tenant.key, { status: 'running' })).status, 200)
  // The same deposits through both processes at once (duplicates of each other).
  const deposits = Array.from({ length: 50 }, (_, i) => ({ player_id: `two${i}`, event_type: 'deposit', event_id: `two-dep-${i}`, timestamp: new Date().toISOString(), payload: { amount: 10, currency: 'EUR' } }))
  await Promise.all([a, b].map((s) => call(s.origin, 'POST', '/events', tenant.key, { events: deposits })))
  await waitFor(async () => (await call(b.origin, 'GET', `/campaigns/${oneShotId}`, tenant.key)).body.data.status === 'completed', 300_000, 'the one-shot')
  await waitFor(async () => (await call(a.origin, 'GET', `/campaigns/${trig.body.data.id}`, tenant.key)).body.data.stats.audience === 50, 60_000, 'the triggered sends')
  await new Promise((r) => setTimeout(r, 1000))
  const [one] = await query<{ notifications: number; players: number; audience: number; keys: number }>('', SENDS, [oneShotId])
  t.same(one, { notifications: 1500, players: 1500, audience: 1500, keys: 1500 }, 'one-shot: one notification per member')
  const [tr] = await query<{ notifications: number; players: number }>('', SENDS, [trig.body.data.id])
  t.equal(tr!.notifications, 50, 'triggered: one per deposit')
  t.equal(tr!.players, 50)
})

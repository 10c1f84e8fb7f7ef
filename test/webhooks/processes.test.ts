// The dispatcher across real processes (`src/main.ts`, what `npm start` runs): two processes share the
// queue without sending anything twice, and a process killed with -9 in the middle of an attempt leaves
// that delivery to be retried after its lease, delivered once more at most.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { call, makeTenant, spawnServer, type Child } from '../events/helpers.ts'
import { sleep, startReceiver, waitFor } from './helpers.ts'

const tempDir = (t: { teardown(fn: () => unknown): void }) => {
  const dir = mkdtempSync(join(tmpdir(), 'respin-wh-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}
const stop = async (child: Child) => {
  if (child.proc.exitCode === null) child.proc.kill('SIGTERM')
  await child.exited
}

t.test('kill -9 mid-attempt: the delivery is retried after its lease, sent once more at most', async (t) => {
  const rx = await startReceiver(t)
  const env = { DATA_DIR: tempDir(t), WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '2000' }
  let server = await spawnServer(env)
  t.teardown(() => stop(server))
  const tenant = await makeTenant(server.origin, server.adminKey)
  let hold = true
  rx.on('/hook', (_r, res) => {
    if (hold) return // never answers: the attempt is in flight when the process dies
    res.end('ok')
  })
  const created = await call(server.origin, 'POST', '/webhooks', tenant.key, { url: rx.url('/hook'), events: ['player.created'] })
  t.equal(created.status, 201)
  const endpointId = created.body.data.id as string
  await call(server.origin, 'POST', '/players', tenant.key, { external_id: 'crash-1' })
  await waitFor('first attempt in flight', () => rx.at('/hook').length === 1)
  server.proc.kill('SIGKILL')
  await server.exited
  hold = false
  server = await spawnServer({ ...env, ADMIN_KEY: server.adminKey })
  const restartedAt = Date.now()
  const delivered = await waitFor('retried after the lease', async () => {
    const res = await call(server.origin, 'GET', `/webhooks/${endpointId}/deliveries`, tenant.key)
    const d = res.body.data[0]
    return d?.status === 'successful' && d
  }, 60_000)
  // The lease (timeout 2 s + 5 s) began before the kill, so the retry comes at most a lease and a poll
  // interval after the restart; the margin is for a busy machine.
  t.ok(Date.now() - restartedAt < 20_000, `retried ${Date.now() - restartedAt} ms after the restart`)
  const received = rx.at('/hook')
  t.equal(received.length, 2, 'the interrupted attempt and one retry')
  t.equal(received[0]!.headers['webhook-id'], received[1]!.headers['webhook-id'], 'same delivery')
  t.equal(received[1]!.headers['webhook-id'], delivered.id)
  await sleep(1000)
  t.equal(rx.at('/hook').length, 2, 'nothing more')
})

t.test('two processes share the queue: every delivery sent exactly once', { skip: !process.env.DATABASE_URL && 'needs a PostgreSQL server (embedded PGlite serves one process)' }, async (t) => {
  const rx = await startReceiver(t)
  const secretKey = randomBytes(32).toString('hex')
  const common = { WEBHOOK_ALLOW_PRIVATE: 'true', SECRET_KEY: secretKey, RATE_LIMIT_INGEST_PER_MIN: '0' }
  const a = await spawnServer({ ...common, DATA_DIR: tempDir(t) })
  t.teardown(() => stop(a))
  const b = await spawnServer({ ...common, DATA_DIR: tempDir(t), ADMIN_KEY: a.adminKey })
  t.teardown(() => stop(b))
  const tenant = await makeTenant(a.origin, a.adminKey)
  // A little latency per request, so that both processes have attempts in flight at once.
  for (const p of ['/one', '/two', '/three']) rx.on(p, (_r, res) => setTimeout(() => res.end('ok'), 5))
  for (const p of ['/one', '/two', '/three']) {
    const res = await call(p === '/two' ? b.origin : a.origin, 'POST', '/webhooks', tenant.key, { url: rx.url(p), events: ['player.created'] })
    t.equal(res.status, 201)
  }
  const players = 150
  for (let i = 0; i < players; i += 50) {
    // Events reach both processes: both fan out and both dispatch.
    const origin = (i / 50) % 2 ? b.origin : a.origin
    const events = Array.from({ length: 50 }, (_, j) => ({ player_id: `mp-${i + j}`, event_type: 'login', event_id: `mp-${i + j}-${Date.now()}` }))
    const res = await call(origin, 'POST', '/events', tenant.key, { events })
    t.equal(res.status, 200)
  }
  await waitFor('every delivery', () => rx.received.length >= players * 3, 60_000)
  await sleep(1500)
  const ids = rx.received.map((r) => r.headers['webhook-id'] as string)
  t.equal(ids.length, players * 3, 'one request per delivery')
  t.equal(new Set(ids).size, players * 3, 'no delivery sent twice')
  for (const p of ['/one', '/two', '/three']) {
    t.equal(new Set(rx.at(p).map((r) => r.json.data.external_id)).size, players, `${p} got each player once`)
  }
})

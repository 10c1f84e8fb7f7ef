// The queue across processes: two API processes on one PostgreSQL deliver every message exactly once
// (server mode), and a message leased by a process that died is delivered after its lease (both modes).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { enqueueNotification } from '../../src/notifications/service.ts'
import { startHarness } from '../helpers/harness.ts'
import { makePlayer, waitForStatus } from './delivery-helpers.ts'
import { spawnServer } from '../helpers/processes.ts'

const h = await startHarness(t) // on a server: this file's own database (harness.ts), shared with the child below
const servers = !!process.env.DATABASE_URL

t.test('a message leased by a dead process is delivered after the lease, once', async (t) => {
  const tenant = await h.createTenant()
  const p = await makePlayer(h, tenant)
  const sql = h.app.ctx.sql
  // What a process that died mid-send leaves behind: the row claimed (leased for 2 more seconds), marked
  // as being sent, first attempt used.
  const [row] = await sql<{ id: string }[]>`
    insert into notifications (tenant_id, brand_id, player_id, channel, content, status, attempts, sent_at, lease_owner, due_at)
    values (${tenant.id}, ${tenant.brand.id}, ${p.id}, 'in_app', '{"body": "x"}', 'queued', 1, now(), 'dead-process:1', now() + interval '2 seconds')
    returning id`
  const notification = { id: row!.id }
  h.app.ctx.delivery?.wake()
  await new Promise((r) => setTimeout(r, 1000))
  t.equal((await waitForStatus(h, tenant, notification.id, ['queued', 'delivered'])).status, 'queued', 'left alone while leased')
  const n = await waitForStatus(h, tenant, notification.id, ['delivered'], 20_000)
  t.ok(Date.parse(n.delivered_at) - Date.parse(n.created_at) >= 1500, 'taken over after the lease ran out')
  t.equal(n.attempts, 2, 'sent again once: the one duplicate a crash mid-send may cost')
  const events = await sql`select 1 from outbox where event = 'message.delivered' and data->>'notification_id' = ${notification.id}`
  t.equal(events.length, 1)
})

t.test('two processes on one database deliver each message once', { skip: servers ? false : 'embedded PGlite serves one process' }, async (t) => {
  // The second API process: src/main.ts in a child (one chDB per process).
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-second-'))
  const { proc: child, port } = await spawnServer({ DATA_DIR: dataDir, ADMIN_KEY: h.adminKey, SECRET_KEY: 'respin-tests-shared-secret-box-key-0123456789' })
  t.teardown(() => {
    child.kill('SIGTERM')
    rmSync(dataDir, { recursive: true, force: true })
  })
  const tenant = await h.createTenant()
  const players = await Promise.all(Array.from({ length: 10 }, () => makePlayer(h, tenant)))
  const ids: string[] = []
  // Enqueued through both processes (the child through its HTTP API); either dispatcher may claim any.
  for (let i = 0; i < 200; i++) {
    const player = players[i % 10]!.id
    if (i % 2) {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/notifications/send`, {
        method: 'POST', headers: { 'x-api-key': tenant.key, 'content-type': 'application/json' },
        body: JSON.stringify({ player_id: player, channel: 'in_app', payload: { body: `m${i}` } }),
      })
      ids.push(((await res.json()) as { notification_id: string }).notification_id)
    } else {
      const r = await enqueueNotification(h.app.ctx.sql, h.app.ctx, { tenantId: tenant.id, brandId: tenant.brand.id, playerId: player, channel: 'in_app', content: { body: `m${i}` } })
      ids.push(r.notification.id)
    }
  }
  const sql = h.app.ctx.sql
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from notifications where id = any(${ids}::uuid[]) and status = 'delivered'`
    if (row!.n === ids.length) break
    await new Promise((r) => setTimeout(r, 100))
  }
  const delivered = await sql<{ id: string; attempts: number }[]>`select id, attempts from notifications where id = any(${ids}::uuid[]) and status = 'delivered'`
  t.equal(delivered.length, 200)
  t.ok(delivered.every((d) => d.attempts === 1), 'each sent once')
  const events = await sql<{ id: string; n: number }[]>`
    select data->>'notification_id' as id, count(*)::int as n from outbox
    where event = 'message.delivered' and data->>'notification_id' = any(${ids}::text[]) group by 1`
  t.equal(events.length, 200)
  t.ok(events.every((e) => e.n === 1), 'one message.delivered each')
})

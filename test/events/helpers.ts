// Shared helpers of the ingestion tests.
import type { Harness } from '../helpers/harness.ts'
import { call } from '../helpers/processes.ts'

// The API process helpers moved to test/helpers/processes.ts; re-exported for the files that import them here.
export { call, spawnServer, type Child } from '../helpers/processes.ts'

let counter = 0
export const uid = (prefix = 'e') => `${prefix}-${process.pid}-${Date.now().toString(36)}-${(counter++).toString(36)}`

export function post(h: Harness, key: string, body: unknown, opts: { query?: Record<string, string>; headers?: Record<string, string> } = {}) {
  return h.request('POST', '/events', { key, body, ...opts })
}

/** Rows stored in ClickHouse for a tenant (optionally one event_id). */
export async function storedCount(h: Harness, tenantId: string, where = '', params: Record<string, unknown> = {}): Promise<number> {
  const rows = await h.app.ctx.ch.query<{ c: string | number }>(
    `SELECT count() AS c FROM events WHERE tenant_id = {t:UUID} ${where}`,
    { t: tenantId, ...params },
  )
  return Number(rows[0]?.c ?? 0)
}

export const ev = (over: Record<string, unknown> = {}) => ({
  player_id: 'p1',
  event_type: 'login',
  event_id: uid(),
  timestamp: new Date().toISOString(),
  ...over,
})

import { type ChildProcess, spawn } from 'node:child_process'
import { createServer } from 'node:net'

/** Rows and distinct event ids of a full scan of GET /export/events: what an operator's sync sees. */
export async function exportedEvents(origin: string, key: string): Promise<{ rows: number; unique: number }> {
  const ids = new Set<string>()
  let rows = 0
  let cursor = ''
  for (;;) {
    const res = await call(origin, 'GET', `/export/events?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, key)
    if (res.status !== 200) throw new Error(`export answered ${res.status}: ${JSON.stringify(res.body)}`)
    const page = res.body as { data: { event_id: string }[]; next_cursor: string | null }
    if (!page.data.length) return { rows, unique: ids.size }
    rows += page.data.length
    for (const r of page.data) ids.add(r.event_id)
    cursor = page.next_cursor ?? cursor
  }
}

/** A tenant with a default brand and a full-access key, created through the admin API of `origin`. */
export async function makeTenant(origin: string, adminKey: string): Promise<{ id: string; key: string; brandId: string }> {
  const n = uid('t').toLowerCase()
  const tenant = await call(origin, 'POST', '/admin/tenants', adminKey, { name: n, slug: n })
  const brand = await call(origin, 'POST', `/admin/tenants/${tenant.body.data.id}/brands`, adminKey, { name: 'main', slug: 'main' })
  const key = await call(origin, 'POST', `/admin/tenants/${tenant.body.data.id}/keys`, adminKey, { name: 'k' })
  return { id: tenant.body.data.id, key: key.body.data.key, brandId: brand.body.data.id }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

/** A private redis-server; by default it keeps nothing, `persistIn` keeps every write in an append-only file there. */
export function startRedis(port: number, persistIn?: string): Promise<ChildProcess> {
  const persistence = persistIn ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', persistIn] : ['--appendonly', 'no']
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence], { stdio: ['ignore', 'pipe', 'ignore'] })
  return new Promise((resolve, reject) => {
    proc.stdout?.on('data', (d: Buffer) => d.toString().includes('Ready to accept') && resolve(proc))
    proc.on('error', reject)
  })
}

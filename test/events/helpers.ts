// Shared helpers of the ingestion tests.
import type { Harness } from '../helpers/harness.ts'

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

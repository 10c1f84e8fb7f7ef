// Shared helpers of the gamification engine's tests: definitions over HTTP, events through POST /events,
// waiting until the event stream has applied them, reading a player's profile and the outbox.
import type { Harness, TestTenant } from '../helpers/harness.ts'

let n = 0
export const eid = () => `g-${process.pid}-${Date.now().toString(36)}-${(n++).toString(36)}`

export function engineHelpers(h: Harness) {
  const sql = h.app.ctx.sql
  async function create(tenant: TestTenant, path: string, body: Record<string, unknown>) {
    const res = await h.request('POST', path, { key: tenant.key, body })
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`)
    return res.body.data
  }
  /** Sends events (each gets an event_id unless given) and waits until the stream applied them. */
  async function send(tenant: TestTenant, events: Record<string, unknown>[]) {
    const res = await h.request('POST', '/events', { key: tenant.key, body: { events: events.map((e) => ({ event_id: eid(), ...e })) } })
    if (res.status !== 200) throw new Error(`events: ${res.status} ${res.text}`)
    await settle()
    return res.body
  }
  async function settle() {
    await h.app.ctx.stream!.idle()
  }
  async function playerId(tenant: TestTenant, externalId: string, brandId = tenant.brand.id): Promise<string> {
    const [row] = await sql<{ id: string }[]>`select id from players where brand_id = ${brandId} and external_id = ${externalId}`
    if (!row) throw new Error(`no player ${externalId}`)
    return row.id
  }
  async function profile(tenant: TestTenant, externalId: string) {
    const id = await playerId(tenant, externalId)
    const res = await h.request('GET', `/gamification/player/${id}`, { key: tenant.key })
    if (res.status !== 200) throw new Error(`profile: ${res.status} ${res.text}`)
    return res.body.data
  }
  async function mission(tenant: TestTenant, externalId: string, missionId: string) {
    const p = await profile(tenant, externalId)
    return p.active_missions.find((m: { mission_id: string }) => m.mission_id === missionId)
  }
  async function outbox(tenant: TestTenant, event?: string) {
    return sql<{ event: string; data: Record<string, any> }[]>`
      select event, data from outbox where tenant_id = ${tenant.id} ${event ? sql`and event = ${event}` : sql``} order by id`
  }
  async function state(playerUuid: string, missionId: string) {
    const [row] = await sql<{ value: string; stage: number; completions: number; period_start: Date | null }[]>`
      select value, stage, completions, period_start from player_missions where player_id = ${playerUuid} and mission_id = ${missionId}`
    return row
  }
  return { sql, create, send, settle, playerId, profile, mission, outbox, state }
}

export const at = (iso: string | number | Date) => new Date(iso).toISOString()

// Shared set-up of the campaign execution tests: templates, segments, players, and reading what a
// campaign enqueued.
import type { Harness, TestTenant } from '../helpers/harness.ts'

export async function must(p: Promise<{ status: number; body: any; text: string }>, status: number): Promise<any> {
  const res = await p
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`)
  return res.body
}

export async function template(h: Harness, tenant: TestTenant, channel = 'in_app', over: Record<string, unknown> = {}): Promise<string> {
  const b = await must(h.request('POST', '/notifications/templates', { key: tenant.key, body: { name: `t-${channel}`, channel, subject: 'Hi', body: 'Hello', ...over } }), 201)
  return b.data.id
}

export async function segment(h: Harness, tenant: TestTenant, rules: Record<string, unknown> = {}, type = 'dynamic'): Promise<string> {
  const b = await must(h.request('POST', '/segments', { key: tenant.key, body: { name: 'seg', type, rules } }), 201)
  return b.data.id
}

/** Players created through the API; returns their ids in order. */
export async function players(h: Harness, tenant: TestTenant, n: number, over: (i: number) => Record<string, unknown> = () => ({})): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    const b = await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: `p${i}`, email: `p${i}@example.com`, ...over(i) } }), 201)
    ids.push(b.data.id)
  }
  return ids
}

/** Many players at once, straight into the table (the API path is tested elsewhere). */
export async function bulkPlayers(h: Harness, tenant: TestTenant, n: number, prefix = 'bulk'): Promise<void> {
  await h.app.ctx.sql`
    insert into players (tenant_id, brand_id, external_id, email)
    select ${tenant.id}, ${tenant.brand.id}, ${prefix} || g, ${prefix} || g || '@example.com' from generate_series(1, ${n}) g`
  await h.app.ctx.sql`
    insert into player_profiles (player_id, tenant_id, brand_id)
    select id, tenant_id, brand_id from players where brand_id = ${tenant.brand.id} and external_id like ${prefix + '%'}
    on conflict do nothing`
}

export async function createCampaign(h: Harness, tenant: TestTenant, body: Record<string, unknown>): Promise<any> {
  return (await must(h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'c', channels: ['in_app'], ...body } }), 201)).data
}

export async function move(h: Harness, tenant: TestTenant, id: string, status: string): Promise<any> {
  return (await must(h.request('PATCH', `/campaigns/${id}`, { key: tenant.key, body: { status } }), 200)).data
}

/**
 * Notifications the campaign enqueued: one row per (player, channel, step). The step is read from the
 * exactly-once key, campaign:<campaign>:<run>:<player>:<step>:<channel> (src/campaigns/sends.ts).
 */
export async function sent(h: Harness, campaignId: string): Promise<{ player_id: string; channel: string; step: string; status: string; notification_id: string }[]> {
  const rows = await h.app.ctx.sql<{ player_id: string; channel: string; key: string; status: string; notification_id: string }[]>`
    select n.player_id, n.channel, n.idempotency_key as key, n.status, n.id as notification_id
    from notifications n where n.campaign_id = ${campaignId} order by n.created_at`
  return rows.map(({ key, ...r }) => {
    const prefix = `campaign:${campaignId}:`
    if (!key.startsWith(prefix) || !key.endsWith(`:${r.channel}`)) throw new Error(`not a campaign send key: ${key}`)
    const [, , , step] = /^([^:]+):([^:]+):(.*)$/s.exec(key.slice(prefix.length, -(r.channel.length + 1)))!
    return { ...r, step: step! }
  })
}

export async function campaign(h: Harness, tenant: TestTenant, id: string): Promise<any> {
  return (await must(h.request('GET', `/campaigns/${id}`, { key: tenant.key }), 200)).data
}

/** Runs the engine until `check` holds (or fails after `ms`). */
export async function until(h: Harness, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  for (;;) {
    await h.app.ctx.campaigns!.round()
    if (await check()) return
    if (Date.now() > end) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 50))
  }
}

export const fieldsOf = (body: any): string[] => (body.details?.errors ?? []).map((e: { field: string }) => e.field)

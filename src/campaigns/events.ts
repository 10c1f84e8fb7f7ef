// The campaigns' consumer of the event stream (src/engine/event-stream.ts, docs/engines.md): triggered
// campaigns' enrolments, journeys' trigger entries and wait_for_event, players leaving marketing journeys
// when their status stops being active, and conversions. Everything is written on the stream's
// transaction, so an event's effect and its consumption commit together (exactly once in effect).
import type { ReservedSql, TransactionSql } from 'postgres'
import type { AppContext } from '../context.ts'
import type { Sql as Pool } from '../db/postgres.ts'
import type { StreamConsumer, StreamEvent } from '../engine/event-stream.ts'
import { matchesFilter, type EventCondition } from '../lib/event-filter.ts'
import { insertOutbox } from '../lib/outbox.ts'
import { memberCondition } from '../segments/queries.ts'
import { controlPercentOf, isControl } from './control-group.ts'
import { firstStepId, templateFor, type EngineCampaign } from './execution.ts'
import type { Sql } from './queries.ts'
import { enqueueCampaignSends, type SendDeps } from './sends.ts'

type Tx = TransactionSql | ReservedSql

export const CONSUMER_NAME = 'campaigns'
/** Conversions are looked for in campaigns that ended at most this long ago (the longest window). */
const CONVERSION_LOOKBACK = '366 days'

interface Filter {
  event_type: string
  filters?: EventCondition[]
}

interface StepDef {
  id: string
  type: string
  event_type?: string
  filters?: EventCondition[]
  on_event?: string | null
}

const isMarketing = (c: Pick<EngineCampaign, 'config'>) => c.config.class !== 'transactional'

/** Campaigns of these brands whose rules could react to an event now. */
async function reactiveCampaigns(sql: Sql, brandIds: string[]): Promise<EngineCampaign[]> {
  return sql<EngineCampaign[]>`
    select id, tenant_id, brand_id, status, type, channels, target_segment_id, schedule, config, started_at, next_tick_at
    from campaigns
    where brand_id = any(${brandIds}::uuid[])
      and (
        (status in ('running', 'paused') and (type in ('triggered', 'journey') or config ? 'conversion'))
        or (status in ('completed', 'cancelled') and config ? 'conversion' and updated_at > now() - ${CONVERSION_LOOKBACK}::interval)
      )`
}

/** The event types each brand's campaigns could react to (the stream's cheap pre-test). */
export function interestOf(campaigns: EngineCampaign[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>()
  const add = (brandId: string, type: unknown) => {
    if (typeof type !== 'string') return
    let set = out.get(brandId)
    if (!set) out.set(brandId, (set = new Set()))
    set.add(type)
  }
  for (const c of campaigns) {
    const conv = c.config.conversion as { event_type?: string } | undefined
    if (conv) add(c.brand_id, conv.event_type)
    if (c.status !== 'running' && c.status !== 'paused') continue
    const trigger = c.config.trigger as Filter | undefined
    if (c.type === 'triggered' && trigger) add(c.brand_id, trigger.event_type)
    if (c.type === 'journey') {
      if (trigger) add(c.brand_id, trigger.event_type)
      for (const s of (c.config.steps as StepDef[] | undefined) ?? []) if (s.type === 'wait_for_event') add(c.brand_id, s.event_type)
      add(c.brand_id, 'status_change')
    }
  }
  return out
}

/** Whether the player is in the campaign's target segment now (true when it has none). */
async function inSegment(tx: Sql, c: EngineCampaign, playerId: string, now: Date): Promise<boolean> {
  if (!c.target_segment_id) return true
  const [seg] = await tx<{ type: 'dynamic' | 'static'; rules: Record<string, unknown> }[]>`
    select type, rules from segments where id = ${c.target_segment_id} and tenant_id = ${c.tenant_id} and brand_id = ${c.brand_id}`
  if (!seg) return false
  const [hit] = await tx<{ ok: boolean }[]>`
    select true as ok from players p left join player_profiles pp on pp.player_id = p.id
    where p.id = ${playerId} and p.brand_id = ${c.brand_id} and ${memberCondition(tx, seg, now)}`
  return !!hit
}

/** max_per_player: takes one place atomically; false when the player has used them all. */
async function takePlace(tx: Sql, c: EngineCampaign, playerId: string): Promise<boolean> {
  const max = typeof c.config.max_per_player === 'number' ? c.config.max_per_player : null
  if (max === null) return true
  const [row] = await tx<{ count: number }[]>`
    insert into campaign_enrolments (campaign_id, player_id, count) values (${c.id}, ${playerId}, 1)
    on conflict (campaign_id, player_id) do update set count = campaign_enrolments.count + 1
      where campaign_enrolments.count < ${max}
    returning count`
  return !!row
}

/** A triggered campaign's enrolment: one run keyed by the event; sent now, or after delay_seconds. */
async function enrol(tx: Sql, deps: SendDeps, c: EngineCampaign, e: StreamEvent, playerId: string, now: Date): Promise<void> {
  if (!(await inSegment(tx, c, playerId, now))) return
  if (!(await takePlace(tx, c, playerId))) return
  const delay = typeof c.config.delay_seconds === 'number' ? c.config.delay_seconds : 0
  const control = isControl(c.id, playerId, controlPercentOf(c.config))
  const [run] = await tx<{ id: string }[]>`
    insert into campaign_runs (campaign_id, tenant_id, brand_id, run_key, state, due_at)
    values (${c.id}, ${c.tenant_id}, ${c.brand_id}, ${`event:${e.eventId ?? `stream:${e.id}`}`}, 'selected', ${new Date(now.getTime() + delay * 1000)})
    on conflict (campaign_id, run_key) do nothing
    returning id`
  if (!run) return // the same event enrolled before
  await tx`
    insert into campaign_audience (run_id, player_id, campaign_id, control, enqueued, selected_at)
    values (${run.id}, ${playerId}, ${c.id}, ${control}, ${delay === 0 && !control}, ${now})`
  if (control) {
    await tx`update campaign_runs set state = 'done' where id = ${run.id}`
    return
  }
  if (delay === 0) {
    // Sent at once, on the stream's transaction: the trigger's latency is the stream's.
    await enqueueCampaignSends(tx, deps, c, run.id, '', c.channels.map((channel) => ({ playerId, channel, templateId: templateFor(c, channel)! })))
    await tx`update campaign_runs set state = 'done' where id = ${run.id}`
  }
}

/** A journey entry by trigger (once per player and campaign). */
async function enterJourney(tx: Sql, c: EngineCampaign, playerId: string, now: Date): Promise<void> {
  if (!(await inSegment(tx, c, playerId, now))) return
  if (isControl(c.id, playerId, controlPercentOf(c.config))) {
    await holdOut(tx, c, playerId, now)
    return
  }
  await tx`
    insert into campaign_participants (campaign_id, tenant_id, brand_id, player_id, step, status, wake_at, entered_at, updated_at)
    values (${c.id}, ${c.tenant_id}, ${c.brand_id}, ${playerId}, ${firstStepId(c)}, 'active', ${now}, ${now}, ${now})
    on conflict (campaign_id, player_id) do nothing`
}

/** A control member entering by event: recorded in the audience of the campaign's 'entries' run. */
async function holdOut(tx: Sql, c: EngineCampaign, playerId: string, now: Date): Promise<void> {
  const [run] = await tx<{ id: string }[]>`
    insert into campaign_runs (campaign_id, tenant_id, brand_id, run_key, state, due_at)
    values (${c.id}, ${c.tenant_id}, ${c.brand_id}, 'entries', 'done', ${now})
    on conflict (campaign_id, run_key) do update set updated_at = now()
    returning id`
  await tx`
    insert into campaign_audience (run_id, player_id, campaign_id, control, enqueued, selected_at)
    values (${run!.id}, ${playerId}, ${c.id}, true, false, ${now}) on conflict do nothing`
}

/** A waiting participant whose wait_for_event step matches moves on to on_event. */
async function resumeWaiting(tx: Sql, c: EngineCampaign, e: StreamEvent, playerId: string, now: Date): Promise<void> {
  const [p] = await tx<{ id: string; step: string; updated_at: Date }[]>`
    select id, step, updated_at from campaign_participants
    where campaign_id = ${c.id} and player_id = ${playerId} and status = 'waiting' for update`
  if (!p) return
  const step = ((c.config.steps as StepDef[] | undefined) ?? []).find((s) => s.id === p.step)
  if (!step || step.type !== 'wait_for_event') return
  // Only events stored after the player reached the step.
  if (e.receivedAt.getTime() < p.updated_at.getTime() - 1000) return
  if (!matchesFilter(e, { event_type: step.event_type!, filters: step.filters })) return
  const next = step.on_event ?? null
  await tx`
    update campaign_participants
    set step = ${next}, status = ${next ? 'active' : 'completed'}, wake_at = ${next ? now : null}, updated_at = ${now}
    where id = ${p.id}`
}

/** Conversion: the event within the window after a delivered message (treated) or the hold-out (control). */
async function convert(tx: Sql, c: EngineCampaign, e: StreamEvent, playerId: string): Promise<void> {
  const conv = c.config.conversion as { event_type: string; within_hours?: number }
  const hours = conv.within_hours ?? 72
  const windowStart = new Date(e.eventTime.getTime() - hours * 3_600_000)
  const [arm] = await tx<{ control: boolean }[]>`
    select false as control where exists (
      select 1 from notifications n
      where n.campaign_id = ${c.id} and n.player_id = ${playerId} and n.status = 'delivered'
        and n.delivered_at <= ${e.eventTime} and n.delivered_at >= ${windowStart})
    union all
    select true where exists (
      select 1 from campaign_audience a
      where a.campaign_id = ${c.id} and a.player_id = ${playerId} and a.control
        and a.selected_at <= ${e.eventTime} and a.selected_at >= ${windowStart})
    limit 1`
  if (!arm) return
  const [inserted] = await tx<{ player_id: string }[]>`
    insert into campaign_conversions (campaign_id, player_id, control, converted_at)
    values (${c.id}, ${playerId}, ${arm.control}, ${e.eventTime})
    on conflict do nothing returning player_id`
  if (!inserted || arm.control) return
  await insertOutbox(tx, {
    tenantId: c.tenant_id,
    brandId: c.brand_id,
    event: 'player.converted',
    data: { player_id: playerId, external_id: e.externalId, conversion: 'campaign', campaign_id: c.id, event_type: e.type, at: e.eventTime.toISOString() },
  })
}

export function campaignConsumer(ctx: Pick<AppContext, 'clock' | 'log' | 'delivery'>): StreamConsumer {
  return {
    name: CONSUMER_NAME,
    async interest(sql: Pool, brandIds: string[]) {
      const byBrand = interestOf(await reactiveCampaigns(sql, brandIds))
      return byBrand as Map<string, Iterable<string>>
    },
    async handle(tx: Tx, events: StreamEvent[]) {
      // The stream hands a transaction (or a reserved connection inside one): the same queries apply.
      const sql = tx as unknown as Sql
      const brandIds = [...new Set(events.map((e) => e.brandId))]
      const campaigns = await reactiveCampaigns(sql, brandIds)
      if (!campaigns.length) return
      for (const e of events) {
        const playerId = e.playerId ?? (await sql<{ id: string }[]>`select id from players where brand_id = ${e.brandId} and external_id = ${e.externalId}`)[0]?.id
        if (!playerId) continue
        const now = ctx.clock()
        for (const c of campaigns) {
          if (c.brand_id !== e.brandId) continue
          const trigger = c.config.trigger as Filter | undefined
          const running = c.status === 'running'
          const afterStart = !!c.started_at && e.receivedAt.getTime() >= c.started_at.getTime()
          if (c.type === 'triggered' && running && afterStart && trigger && matchesFilter(e, trigger)) await enrol(sql, ctx, c, e, playerId, now)
          if (c.type === 'journey' && (c.status === 'running' || c.status === 'paused')) {
            if (running && afterStart && trigger && matchesFilter(e, trigger)) await enterJourney(sql, c, playerId, now)
            await resumeWaiting(sql, c, e, playerId, now)
            if (e.type === 'status_change' && e.fields.status !== 'active' && isMarketing(c)) {
              await sql`
                update campaign_participants set status = 'exited', wake_at = null, updated_at = ${now}
                where campaign_id = ${c.id} and player_id = ${playerId} and status in ('active', 'waiting')`
            }
          }
          const conv = c.config.conversion as { event_type?: string } | undefined
          if (conv && conv.event_type === e.type) await convert(sql, c, e, playerId)
        }
      }
    },
  }
}

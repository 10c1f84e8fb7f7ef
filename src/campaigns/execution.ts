// Campaign execution (contract-engines §4, docs/campaigns.md "Execution"): what happens when a campaign
// changes status, the engine's visits to due campaigns (start_at, end_at, cron ticks), and runs: a run
// selects its audience once (the segment's members at that moment, frozen in campaign_audience) and then
// enqueues it chunk by chunk, each chunk one transaction that marks its members enqueued. A process that
// dies mid-run leaves the rest unmarked; whoever takes the run over continues from there, and the
// exactly-once key of every send (the notification's idempotency key, sends.ts) makes a repeated chunk
// send nothing.
import type { AppContext } from '../context.ts'
import type { QueueTable } from '../engine/work-loop.ts'
import { insertOutbox } from '../lib/outbox.ts'
import { memberCondition } from '../segments/queries.ts'
import { controlPercentOf, controlSql } from './control-group.ts'
import type { Sql } from './queries.ts'
import { engineTimes, latestDueTick, nextTick } from './schedule.ts'
import type { CampaignType } from './schemas.ts'
import { enqueueCampaignSends } from './sends.ts'
import { computeStats } from './stats.ts'
import type { CampaignStatus } from './status.ts'

type Deps = Pick<AppContext, 'sql' | 'log' | 'clock' | 'delivery'>

/** Players per chunk transaction. */

/**
 * How long an ended pause is remembered (see onStatusChange). The event stream applies an event seconds
 * after it is received, minutes in a backlog; a week covers any outage it could recover from.
 */
export const PAUSE_SPANS_KEPT_MS = 7 * 24 * 3600_000
export const CHUNK_SIZE = 1000
/** How long a process may hold a run or a participant before another may take it over (renewed per chunk). */
export const LEASE_MS = 5_000

export interface EngineCampaign {
  id: string
  tenant_id: string
  brand_id: string
  status: CampaignStatus
  type: CampaignType
  channels: string[]
  target_segment_id: string | null
  schedule: Record<string, unknown>
  config: Record<string, unknown>
  started_at: Date | null
  next_tick_at: Date | null
  /** [paused_at, resumed_at | null] as ISO text, oldest first (sql/0230). */
  paused_spans: [string, string | null][]
}

const engineColumns = (sql: Sql) =>
  sql`id, tenant_id, brand_id, status, type, channels, target_segment_id, schedule, config, started_at, next_tick_at, paused_spans`

export async function selectEngineCampaign(sql: Sql, id: string, lock: '' | 'for update' | 'for share' = ''): Promise<EngineCampaign | undefined> {
  const [row] = await sql<EngineCampaign[]>`
    select ${engineColumns(sql)} from campaigns where id = ${id} ${lock === 'for update' ? sql`for update` : lock === 'for share' ? sql`for share` : sql``}`
  return row
}

export const templateFor = (c: Pick<EngineCampaign, 'config'>, channel: string): string | undefined => {
  const t = c.config.templates
  return t && typeof t === 'object' ? ((t as Record<string, unknown>)[channel] as string | undefined) : undefined
}

// ---------------------------------------------------------------------------------------------------------
// Status changes (inside the transaction of the change)

/** Writes engine_due_at / next_tick_at for the campaign's current status and schedule. */
export async function storeEngineTimes(tx: Sql, c: EngineCampaign, now: Date): Promise<void> {
  const t = engineTimes({ status: c.status, type: c.type, schedule: c.schedule, nextTickAt: c.next_tick_at }, now)
  await tx`update campaigns set engine_due_at = ${t.engineDueAt}, next_tick_at = ${t.nextTickAt} where id = ${c.id}`
}

/** Creates a run unless the campaign already has one with this key; returns its id either way. */
async function ensureRun(tx: Sql, c: EngineCampaign, runKey: string, state: 'pending' | 'selected' = 'pending'): Promise<{ id: string; created: boolean }> {
  // Due at once, in the database's time: the work loop compares due_at with now() there.
  const [created] = await tx<{ id: string }[]>`
    insert into campaign_runs (campaign_id, tenant_id, brand_id, run_key, state, due_at)
    values (${c.id}, ${c.tenant_id}, ${c.brand_id}, ${runKey}, ${state}, now())
    on conflict (campaign_id, run_key) do nothing
    returning id`
  if (created) return { id: created.id, created: true }
  const [existing] = await tx<{ id: string }[]>`select id from campaign_runs where campaign_id = ${c.id} and run_key = ${runKey}`
  return { id: existing!.id, created: false }
}

/** A run whose audience is the target segment's members now (once per run key). */
async function startRun(tx: Sql, c: EngineCampaign, runKey: string, now: Date): Promise<{ id: string; created: boolean; audience: number }> {
  const run = await ensureRun(tx, c, runKey, 'selected')
  if (!run.created) return { ...run, audience: 0 }
  return { ...run, audience: await selectAudience(tx, c, run.id, now) }
}

/**
 * What a status move sets in motion; `c` is the campaign after the move. Runs on the transaction of the
 * move, so the work exists exactly when the new status does.
 */
export async function onStatusChange(tx: Sql, c: EngineCampaign, from: CampaignStatus, now: Date): Promise<void> {
  if (c.status === 'running' && from !== 'paused') {
    await tx`update campaigns set started_at = coalesce(started_at, ${now}) where id = ${c.id}`
    // The one-shot's audience, and a journey's entry from its segment: the members at the moment it starts,
    // selected in the transaction of the start.
    if (c.type === 'one_shot' || (c.type === 'journey' && c.target_segment_id)) await startRun(tx, c, 'start', now)
  }
  if (c.status === 'paused') {
    // A pause only matters to events received during it that the stream has yet to apply (judged by their
    // received time: events.ts), so spans that ended PAUSE_SPANS_KEPT_MS ago are dropped here: a campaign
    // paused and resumed all day would otherwise carry every span for its life, parsed on every batch.
    const keptSince = new Date(now.getTime() - PAUSE_SPANS_KEPT_MS).toISOString()
    await tx`
      update campaigns set paused_spans = coalesce((
          select jsonb_agg(s order by n) from jsonb_array_elements(paused_spans) with ordinality as e(s, n)
          where s ->> 1 is null or s ->> 1 >= ${keptSince}), '[]'::jsonb)
        || jsonb_build_array(jsonb_build_array(${now.toISOString()}::text, null))
      where id = ${c.id}`
  }
  if (from === 'paused') {
    // The pause ends (resumed, cancelled or completed): its span gets its end.
    await tx`
      update campaigns set paused_spans = jsonb_set(paused_spans, array[(jsonb_array_length(paused_spans) - 1)::text, '1'], to_jsonb(${now.toISOString()}::text))
      where id = ${c.id} and jsonb_array_length(paused_spans) > 0 and paused_spans -> -1 -> 1 = 'null'::jsonb`
  }
  if (c.status === 'cancelled') await dropPending(tx, c.id)
  // Messages the dispatcher kept waiting while the campaign was paused go out now, checked again: those
  // never attempted, and those it found waiting on the pause (their retry was due then). A message still
  // waiting out its retry delay keeps it.
  if (c.status === 'running' && from === 'paused') {
    await tx`
      update notifications set due_at = now(), paused_wait = false, updated_at = now()
      where campaign_id = ${c.id} and status = 'queued' and due_at > now() and lease_owner is null and scheduled_at <= now()
        and (attempts = 0 or paused_wait)`
  }
  await storeEngineTimes(tx, c, now)
}

/** Cancel: runs stop, journeys end, queued notifications end suppressed (campaign_cancelled). */
async function dropPending(tx: Sql, campaignId: string): Promise<void> {
  await tx`update campaign_runs set state = 'cancelled', updated_at = now() where campaign_id = ${campaignId} and state in ('pending', 'selected')`
  await tx`update campaign_participants set status = 'exited', wake_at = null, updated_at = now() where campaign_id = ${campaignId} and status in ('active', 'waiting')`
  // A notification claimed by a dispatcher (lease_owner set, due_at in the future) may be in its channel
  // call right now: left to the dispatcher, whose re-check before any further attempt suppresses it
  // (campaign_cancelled) too.
  await tx`
    update notifications set status = 'suppressed', reason = 'campaign_cancelled', updated_at = now()
    where campaign_id = ${campaignId} and status = 'queued' and not (lease_owner is not null and due_at > now())`
}

// ---------------------------------------------------------------------------------------------------------
// Visits to due campaigns: scheduled → running at start_at, running → completed at end_at, cron ticks

async function complete(tx: Sql, c: Pick<EngineCampaign, 'id' | 'tenant_id' | 'brand_id' | 'type'>, reason: 'all_enqueued' | 'end_at'): Promise<boolean> {
  const [done] = await tx<{ id: string }[]>`
    update campaigns set status = 'completed', engine_due_at = null, next_tick_at = null, updated_at = now()
    where id = ${c.id} and status in ('running', 'paused') returning id`
  if (!done) return false
  await tx`update campaign_runs set state = 'cancelled', updated_at = now() where campaign_id = ${c.id} and state in ('pending', 'selected')`
  await tx`update campaign_participants set status = 'exited', wake_at = null, updated_at = now() where campaign_id = ${c.id} and status in ('active', 'waiting')`
  // The stats as they stand at completion (§2: { campaign_id, stats }); messages still queued then are not
  // yet counted as sent. Stored too, so the list shows the same figures.
  const stats = (await computeStats(tx, [c.id])).get(c.id)!
  await tx`update campaigns set stats = ${tx.json(stats as never)} where id = ${c.id}`
  await insertOutbox(tx, {
    tenantId: c.tenant_id,
    brandId: c.brand_id,
    event: 'campaign.completed',
    data: { campaign_id: c.id, stats, type: c.type, brand_id: c.brand_id, reason },
  })
  return true
}

/**
 * Visits one campaign whose engine_due_at has come (locked; skipped when another process has it). Returns
 * its brand when the visit started or completed it: the rules the event stream tests for that brand changed.
 */
export async function visitCampaign(deps: Deps, campaignId: string): Promise<string | undefined> {
  return await deps.sql.begin(async (tx): Promise<string | undefined> => {
    const [locked] = await tx<{ id: string }[]>`select id from campaigns where id = ${campaignId} for update skip locked`
    if (!locked) return
    const c = (await selectEngineCampaign(tx, campaignId))!
    const now = deps.clock()
    const startAt = c.schedule.start_at ? new Date(String(c.schedule.start_at)) : null
    const endAt = c.schedule.end_at ? new Date(String(c.schedule.end_at)) : null
    let changedBrand: string | undefined
    if (c.status === 'scheduled' && startAt && startAt <= now) {
      changedBrand = c.brand_id
      await tx`update campaigns set status = 'running', updated_at = now() where id = ${c.id}`
      c.status = 'running'
      deps.log.info({ campaignId: c.id }, 'campaign started (start_at)')
      await onStatusChange(tx, c, 'scheduled', now)
      if (c.type === 'recurring' && typeof c.schedule.cron === 'string') {
        // The tick at start_at (or the first since), which this visit came a little after, runs now; a
        // visit later than several ticks runs the latest of them, as after any downtime (below).
        const first = nextTick(c.schedule, new Date(startAt.getTime() - 1))
        if (first.getTime() <= now.getTime()) c.next_tick_at = first
      }
    }
    if ((c.status === 'running' || c.status === 'paused') && endAt && endAt <= now) {
      await complete(tx, c, 'end_at')
      deps.log.info({ campaignId: c.id }, 'campaign completed (end_at)')
      return c.brand_id
    }
    if (c.status === 'running' && c.type === 'recurring' && c.next_tick_at && c.next_tick_at <= now) {
      // One run for the latest tick due: ticks missed while the service was down are not sent in a burst.
      const tick = latestDueTick(c.schedule, c.next_tick_at, now)
      const run = await startRun(tx, c, `tick:${tick.toISOString()}`, now)
      if (run.created) deps.log.info({ campaignId: c.id, tick: tick.toISOString(), audience: run.audience }, 'recurring tick')
      c.next_tick_at = null
    } else if (c.status === 'paused' && c.type === 'recurring' && c.next_tick_at && c.next_tick_at <= now) {
      c.next_tick_at = null // a tick while paused is skipped
    }
    await storeEngineTimes(tx, c, now)
    return changedBrand
  })
}

export async function selectDueCampaignIds(sql: Sql, now: Date, limit: number): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select id from campaigns where engine_due_at <= ${now} order by engine_due_at limit ${limit}`
  return rows.map((r) => r.id)
}

// ---------------------------------------------------------------------------------------------------------
// Runs

/**
 * The runs as a queue of the shared work loop (src/engine/work-loop.ts): due runs of running campaigns,
 * one actor per campaign (its runs one at a time, campaigns side by side). A claim leases the run by
 * pushing due_at to the lease's end; processRun renews it between chunks.
 */
export const RUNS_QUEUE: QueueTable = {
  table: 'campaign_runs',
  keyColumn: 'campaign_id',
  dueColumn: 'due_at',
  ownerColumn: 'lease_owner',
  where: (sql) => sql`state in ('pending', 'selected') and exists (select 1 from campaigns c where c.id = campaign_runs.campaign_id and c.status = 'running')`,
}

interface RunRow {
  id: string
  campaign_id: string
  run_key: string
  state: 'pending' | 'selected' | 'done' | 'cancelled'
}

/** Selects the run's audience: the target segment's members now, with their arm. */
async function selectAudience(tx: Sql, c: EngineCampaign, runId: string, now: Date): Promise<number> {
  const [seg] = await tx<{ type: 'dynamic' | 'static'; rules: Record<string, unknown>; tenant_id: string; brand_id: string }[]>`
    select type, rules, tenant_id, brand_id from segments
    where id = ${c.target_segment_id} and tenant_id = ${c.tenant_id} and brand_id = ${c.brand_id}`
  if (!seg) return 0 // the segment is gone: an empty audience
  const result = await tx`
    insert into campaign_audience (run_id, player_id, campaign_id, control, selected_at)
    select ${runId}::uuid, p.id, ${c.id}::uuid, ${controlSql(tx, c.id, tx`p.id`, controlPercentOf(c.config))}, ${now}
    from players p left join player_profiles pp on pp.player_id = p.id
    where p.tenant_id = ${c.tenant_id} and p.brand_id = ${c.brand_id} and ${memberCondition(tx, seg, now)}
    on conflict do nothing`
  return result.count
}

/** Chunk transactions of one run at once per process: the next chunk's inserts overlap this one's. */
export const RUN_LANES = 3

/**
 * Works on one claimed run until it is done, the campaign stops running, or `shouldStop`. Each chunk is
 * one transaction holding the campaign row shared, so a pause or cancel waits for the chunks in flight
 * and no chunk starts after it. `lanes` chunks run side by side (their members are disjoint: each chunk
 * locks its rows with SKIP LOCKED); the run row itself is locked only to select the audience and to mark
 * the run done, and its lease is renewed between chunks.
 */
export async function processRun(deps: Deps, runId: string, shouldStop: () => boolean = () => false, chunkSize = CHUNK_SIZE, lanes = RUN_LANES): Promise<void> {
  if (!(await selectRunAudience(deps, runId))) return
  let renewedAt = 0 // renewed after the first chunk, then every fifth of the lease
  let stopped = false
  const lane = async () => {
    for (;;) {
      if (stopped || shouldStop()) return
      const step = await enqueueChunk(deps, runId, chunkSize)
      if (step !== 'more') {
        // 'drained': nothing left that this process could lock; 'stopped': the campaign or run ended.
        if (step === 'stopped') stopped = true
        return
      }
      // Renew the lease: another process takes the run over only if this one stops renewing it.
      if (Date.now() - renewedAt > LEASE_MS / 5) {
        renewedAt = Date.now()
        await deps.sql`
          update campaign_runs set due_at = now() + ${LEASE_MS} * interval '1 millisecond', updated_at = now()
          where id = ${runId} and state = 'selected'`
      }
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, lanes) }, lane))
  if (!stopped && !shouldStop()) await finishRun(deps, runId)
}

/** A pending run's audience, selected once (the run row locked). False when the run is not to be worked on. */
async function selectRunAudience(deps: Deps, runId: string): Promise<boolean> {
  return deps.sql.begin(async (tx) => {
    // Campaign first, then run: the order a status change (campaign row, then its runs) locks them in.
    const [ref] = await tx<{ campaign_id: string }[]>`select campaign_id from campaign_runs where id = ${runId}`
    if (!ref) return false
    const c = await selectEngineCampaign(tx, ref.campaign_id, 'for share')
    if (!c || c.status !== 'running') return false
    const [run] = await tx<RunRow[]>`select id, campaign_id, run_key, state from campaign_runs where id = ${runId} for update`
    if (!run || (run.state !== 'pending' && run.state !== 'selected')) return false
    if (run.state === 'pending') {
      const n = await selectAudience(tx, c, run.id, deps.clock())
      await tx`update campaign_runs set state = 'selected', due_at = now() + ${LEASE_MS} * interval '1 millisecond', updated_at = now() where id = ${run.id}`
      deps.log.info({ campaignId: c.id, runId: run.id, audience: n }, 'campaign audience selected')
    }
    return true
  })
}

/** One chunk of a selected run's audience enqueued (or, for a journey, entered), in one transaction. */
async function enqueueChunk(deps: Deps, runId: string, chunkSize: number): Promise<'more' | 'drained' | 'stopped'> {
  return deps.sql.begin(async (tx) => {
    const [ref] = await tx<{ campaign_id: string }[]>`select campaign_id from campaign_runs where id = ${runId}`
    if (!ref) return 'stopped'
    // Shared: a pause or cancel (which locks the campaign first) waits for this chunk, and no chunk
    // starts after it; so the run's state read here cannot change before the chunk commits.
    const c = await selectEngineCampaign(tx, ref.campaign_id, 'for share')
    if (!c || c.status !== 'running') return 'stopped'
    const [run] = await tx<RunRow[]>`select id, campaign_id, run_key, state from campaign_runs where id = ${runId}`
    if (!run || run.state !== 'selected') return 'stopped'
    // The chunk's members locked and marked enqueued in one statement (the mark commits with their sends,
    // or neither does); SKIP LOCKED leaves other lanes' chunks alone.
    const members = await tx<{ player_id: string }[]>`
      update campaign_audience set enqueued = true
      where run_id = ${run.id} and player_id in (
        select player_id from campaign_audience
        where run_id = ${run.id} and not enqueued and not control
        order by player_id limit ${chunkSize}
        for update skip locked)
      returning player_id`
    if (!members.length) return 'drained'
    const ids = members.map((m) => m.player_id).sort()
    if (c.type === 'journey') {
      const now = deps.clock()
      // A marketing journey enters active players only: one who is not would leave at once, and the
      // entry (once per player) would be spent for when they are active again.
      await tx`
        insert into campaign_participants (campaign_id, tenant_id, brand_id, player_id, step, status, wake_at, entered_at, updated_at)
        select ${c.id}::uuid, ${c.tenant_id}::uuid, ${c.brand_id}::uuid, x.id, ${firstStepId(c)}, 'active', ${now}, ${now}, ${now}
        from unnest(${ids}::uuid[]) as x(id)
        ${c.config.class === 'transactional' ? tx`` : tx`join players p on p.id = x.id and p.status = 'active'`}
        on conflict (campaign_id, player_id) do nothing`
    } else {
      const items = ids.flatMap((playerId) => c.channels.map((channel) => ({ playerId, channel, templateId: templateFor(c, channel)! })))
      // A one-shot's or a tick's audience goes in the bulk lane, so real-time sends are not queued
      // behind it; a triggered campaign's delayed send (a run of one) is real-time.
      await enqueueCampaignSends(tx, deps, c, run.id, '', items, { bulk: c.type === 'one_shot' || c.type === 'recurring' })
    }
    return 'more'
  })
}

/** Marks the run done once nothing of its audience is left (a one-shot then completes). */
async function finishRun(deps: Deps, runId: string): Promise<void> {
  await deps.sql.begin(async (tx) => {
    const [ref] = await tx<{ campaign_id: string }[]>`select campaign_id from campaign_runs where id = ${runId}`
    if (!ref) return
    // Exclusive on the campaign from the start: the completion below updates it, and two processes
    // finishing one run must not both hold it shared while each waits to update it.
    const c = await selectEngineCampaign(tx, ref.campaign_id, 'for update')
    if (!c || c.status !== 'running') return
    const [run] = await tx<RunRow[]>`select id, campaign_id, run_key, state from campaign_runs where id = ${runId} for update`
    if (!run || run.state !== 'selected') return
    // Rows still unmarked are in another process's chunk (or left by one that died: the run's next
    // claim, after its lease, takes them). Done only when none is left.
    const [left] = await tx<{ n: number }[]>`
      select count(*)::int as n from campaign_audience where run_id = ${run.id} and not enqueued and not control`
    if (left!.n > 0) return
    await tx`update campaign_runs set state = 'done', updated_at = now() where id = ${run.id}`
    if (c.type === 'one_shot') {
      if (await complete(tx, c, 'all_enqueued')) deps.log.info({ campaignId: c.id }, 'one-shot campaign completed')
    }
  })
}

export function firstStepId(c: Pick<EngineCampaign, 'config'>): string | null {
  const steps = c.config.steps
  return Array.isArray(steps) && steps[0] && typeof steps[0] === 'object' ? String((steps[0] as Record<string, unknown>).id) : null
}

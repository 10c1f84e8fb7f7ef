// The campaign engine's background service (src/app.ts). It registers the campaigns' consumer on the
// event stream, works off runs and journey participants with the shared work loop (src/engine/work-loop.ts:
// lease-based claims, one actor per campaign / per player), and visits campaigns whose engine_due_at came
// (start_at, end_at, cron ticks) on a ticker. Visits compare with ctx.clock() (schedules are tested with
// an injected clock) and lock the campaign row with SKIP LOCKED, so several processes share them too.
import { randomUUID } from 'node:crypto'
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { claimDue, startTicker, startWorkLoop, type Ticker, type WorkLoop } from '../engine/work-loop.ts'
import { campaignConsumer } from './events.ts'
import { LEASE_MS, processRun, RUNS_QUEUE, selectDueCampaignIds, visitCampaign } from './execution.ts'
import { advanceParticipant, PARTICIPANTS_QUEUE } from './journeys.ts'
import type { Sql } from './queries.ts'
import { refreshStats, TERMINAL_STATS_REFRESHED_MS } from './stats.ts'

export const DEFAULT_ENGINE_POLL_MS = 1000
/** How often the stored stats of active campaigns are refreshed. */
const STATS_EVERY_MS = 3000
const VISITS_PER_STEP = 50

export interface CampaignEngine {
  /** Look for due work now (after a status change) rather than at the next poll. */
  wake(): void
  /** Everything due now, done before it resolves (tests, bench). */
  round(): Promise<void>
}

type Deps = Pick<AppContext, 'sql' | 'log' | 'clock' | 'delivery'> & Partial<Pick<AppContext, 'stream'>>

/** Visits the campaigns due at ctx.clock(); true when there may be more. */
export async function visitDue(deps: Deps): Promise<boolean> {
  const ids = await selectDueCampaignIds(deps.sql, deps.clock(), VISITS_PER_STEP)
  for (const id of ids) {
    // A campaign started at start_at (or ended at end_at) changes what the stream's pre-test must let
    // through for its brand, as a PATCH does: every process reloads it now, not when its cache expires.
    const brand = await visitCampaign(deps, id)
    // Best effort (the visit is committed): with the bus down, the other processes' caches expire instead.
    if (brand) await deps.stream?.interestChanged(brand).catch((err: unknown) => deps.log.warn({ err, brandId: brand }, 'stream interest not announced'))
  }
  return ids.length === VISITS_PER_STEP
}

/**
 * One synchronous pass: visits, then every claimable run and participant, claimed through the work
 * loop's claimDue exactly as the loops do (so it is safe beside them and beside other processes).
 */
export async function engineRound(deps: Deps): Promise<void> {
  while (await visitDue(deps));
  const owner = `round-${randomUUID()}`
  for (;;) {
    const runs = await claimDue<{ id: string }>(deps.sql, RUNS_QUEUE, { limit: 8, leaseMs: LEASE_MS, owner })
    if (!runs.length) break
    await Promise.all(runs.map((r) => processRun(deps, r.id)))
  }
  for (;;) {
    const due = await claimDue<{ id: string }>(deps.sql, PARTICIPANTS_QUEUE, { limit: 100, leaseMs: LEASE_MS, owner })
    if (!due.length) break
    for (const p of due) await advanceParticipant(deps, p.id, { owner })
  }
}

async function refreshActiveStats(sql: Sql): Promise<void> {
  const rows = await sql<{ id: string }[]>`
    select id from campaigns where status in ('running', 'paused')
       or (status in ('completed', 'cancelled') and updated_at > now() - ${TERMINAL_STATS_REFRESHED_MS / 1000} * interval '1 second')
       or stats_stale`
  if (rows.length) await refreshStats(sql, rows.map((r) => r.id))
}

export function startCampaignEngine(ctx: AppContext, opts: { pollMs?: number } = {}): BackgroundService & CampaignEngine {
  const pollMs = opts.pollMs ?? DEFAULT_ENGINE_POLL_MS
  ctx.stream?.register(campaignConsumer(ctx))
  let stopping = false
  const runs: WorkLoop<{ id: string; campaign_id: string }> = startWorkLoop({
    name: 'campaign-runs',
    sql: ctx.sql,
    log: ctx.log,
    queue: RUNS_QUEUE,
    keyOf: (r) => r.campaign_id,
    handle: (r) => processRun(ctx, r.id, () => stopping),
    leaseMs: LEASE_MS,
    globalConcurrency: 4,
    idleIntervalMs: pollMs,
    metrics: ctx.metrics,
  })
  const participants: WorkLoop<{ id: string; player_id: string }> = startWorkLoop({
    name: 'campaign-journeys',
    sql: ctx.sql,
    log: ctx.log,
    queue: PARTICIPANTS_QUEUE,
    keyOf: (p) => p.player_id,
    handle: (p, lease) => advanceParticipant(ctx, p.id, lease),
    leaseMs: LEASE_MS,
    globalConcurrency: 16,
    idleIntervalMs: pollMs,
    metrics: ctx.metrics,
  })
  let lastStats = 0
  const visits: Ticker = startTicker({
    name: 'campaign-visits',
    log: ctx.log,
    idleIntervalMs: pollMs,
    async step() {
      const more = await visitDue(ctx)
      // A visit may have started runs: let the loops look now.
      runs.wake()
      if (Date.now() - lastStats >= STATS_EVERY_MS) {
        lastStats = Date.now()
        await refreshActiveStats(ctx.sql)
      }
      return more
    },
  })
  return {
    wake() {
      visits.wake()
      runs.wake()
      participants.wake()
    },
    round: () => engineRound(ctx),
    async stop() {
      stopping = true
      await visits.stop()
      await runs.stop()
      await participants.stop()
      ctx.stream?.unregister('campaigns')
    },
  }
}

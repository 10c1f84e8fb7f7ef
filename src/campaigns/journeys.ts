// Journeys: each participant advances through config.steps on its own. advanceParticipant runs the steps
// from where the player stands until one makes it wait (wait, wait_for_event) or the journey ends, in one
// transaction holding the participant row, so two processes never advance the same player at once and a
// crash replays the whole advance (its sends are keyed by (campaign, entry, player, step, channel)).
import type { AppContext } from '../context.ts'
import type { Sql } from './queries.ts'
import { compileRules } from '../segments/rules.ts'
import type { QueueTable } from '../engine/work-loop.ts'
import { selectEngineCampaign } from './execution.ts'
import { enqueueCampaignSends } from './sends.ts'

type Deps = Pick<AppContext, 'sql' | 'log' | 'clock' | 'delivery'>

/** Steps run per advance at most (validation refuses loops without a wait; this is a second guard). */
const MAX_STEPS_PER_ADVANCE = 100
/** A timeout held for an in-time event the campaigns consumer has not applied yet is looked at again after this. */
const STREAM_LAG_RECHECK_MS = 1_000

/**
 * Is an event of the step's type, received between the player reaching the step and its deadline, still
 * waiting in the campaigns consumer's stream (rows leave it when applied; set-aside rows do not count)?
 */
async function eventStillInStream(tx: Sql, p: ParticipantRow, step: Step): Promise<boolean> {
  const reached = p.updated_at
  const deadline = new Date(reached.getTime() + (step.timeout_seconds ?? 0) * 1000)
  // The usual case, cheaply (the claim index's first row): the consumer's backlog is empty, or starts after
  // the deadline (rows are numbered as their groups commit, within a minute of receipt), so nothing of
  // the wait is left in it. Only a lag reaching back to the wait pays for the scan below (no index has the
  // player: every campaigns stream row would pay for one).
  const [oldest] = await tx<{ received_at: Date }[]>`
    select received_at from event_stream where consumer = 'campaigns' and failed_at is null order by id limit 1`
  if (!oldest || oldest.received_at.getTime() > deadline.getTime() + 60_000) return false
  const [row] = await tx`
    select 1 from event_stream
    where consumer = 'campaigns' and failed_at is null and player_id = ${p.player_id} and event_type = ${step.event_type!}
      and received_at >= ${reached} and received_at <= ${deadline}
    limit 1`
  return !!row
}

interface Step {
  id: string
  type: 'send' | 'wait' | 'wait_for_event' | 'branch'
  channel?: string
  template_id?: string
  next?: string | null
  seconds?: number
  timeout_seconds?: number
  on_event?: string | null
  on_timeout?: string | null
  event_type?: string
  condition?: Record<string, unknown>
  then?: string | null
  else?: string | null
}

interface ParticipantRow {
  id: string
  campaign_id: string
  player_id: string
  step: string | null
  status: 'active' | 'waiting' | 'completed' | 'exited'
  wake_at: Date | null
  /** When the player reached its step: a wait_for_event's deadline counts from it. */
  updated_at: Date
}

/**
 * Participants as a queue of the shared work loop: due to advance (active, or waiting past wake_at) in a
 * running journey, one actor per player. A claim pushes wake_at to the lease's end; the advance writes
 * the next wake_at (or none).
 */
export const PARTICIPANTS_QUEUE: QueueTable = {
  table: 'campaign_participants',
  keyColumn: 'player_id',
  dueColumn: 'wake_at',
  ownerColumn: 'lease_owner',
  where: (sql) => sql`status in ('active', 'waiting') and exists (select 1 from campaigns c where c.id = campaign_participants.campaign_id and c.status = 'running')`,
}

/**
 * `lease`: the claim this advance runs under. A claim that stalled past its lease (waiting on a lock, a
 * slow database) finds the row claimed again by then and does nothing: the newer claim advances it.
 * Without this check the stale one would advance it too, and the second of the two would read the
 * first's fresh `waiting` as a wait already over (sending the next step at once, or taking a timeout).
 */
export async function advanceParticipant(deps: Deps, participantId: string, lease: { owner: string }): Promise<void> {
  await deps.sql.begin(async (tx) => {
    const [ref] = await tx<{ campaign_id: string }[]>`select campaign_id from campaign_participants where id = ${participantId}`
    if (!ref) return
    const c = await selectEngineCampaign(tx, ref.campaign_id, 'for share')
    if (!c || c.status !== 'running') return
    const [p] = await tx<ParticipantRow[]>`
      select id, campaign_id, player_id, step, status, wake_at, updated_at from campaign_participants
      where id = ${participantId} and lease_owner = ${lease.owner} for update`
    if (!p || (p.status !== 'active' && p.status !== 'waiting')) return
    const now = deps.clock()
    const steps = new Map(((c.config.steps as Step[] | undefined) ?? []).map((s) => [s.id, s]))
    const save = (step: string | null, status: ParticipantRow['status'], wakeAt: Date | null) =>
      tx`update campaign_participants set step = ${step}, status = ${status}, wake_at = ${wakeAt}, lease_owner = null, updated_at = ${now} where id = ${p.id}`

    // A marketing journey keeps only active players: anyone else leaves it at once.
    if (c.config.class !== 'transactional') {
      const [player] = await tx<{ status: string }[]>`select status from players where id = ${p.player_id}`
      if (!player || player.status !== 'active') {
        await save(p.step, 'exited', null)
        return
      }
    }
    let stepId = p.step
    let woken = p.status === 'waiting' // the wait or the timeout at `stepId` is over
    // <=: a journey of MAX_STEPS_PER_ADVANCE steps without a wait still reaches its end (stepId null) here.
    for (let n = 0; n <= MAX_STEPS_PER_ADVANCE; n++) {
      if (stepId === null) {
        await save(null, 'completed', null)
        return
      }
      const step = steps.get(stepId)
      if (!step) {
        // An edit removed the step the player stood at: they leave, they did not finish the journey.
        await save(stepId, 'exited', null)
        return
      }
      switch (step.type) {
        case 'send':
          await enqueueCampaignSends(tx, deps, c, p.id, step.id, [{ playerId: p.player_id, channel: step.channel!, templateId: step.template_id! }])
          stepId = step.next ?? null
          break
        case 'wait':
          if (!woken) {
            await save(step.id, 'waiting', new Date(now.getTime() + step.seconds! * 1000))
            return
          }
          stepId = step.next ?? null
          break
        case 'wait_for_event':
          if (!woken) {
            await save(step.id, 'waiting', new Date(now.getTime() + step.timeout_seconds! * 1000))
            return
          }
          if (p.status === 'waiting' && (await eventStillInStream(tx, p, step))) {
            // An event of the type received in time is still in the stream (the consumer lags): the consumer
            // decides (on_event if it matches the filters), the timeout waits for it. updated_at stays: the
            // deadline counts from it.
            await tx`update campaign_participants set wake_at = ${new Date(now.getTime() + STREAM_LAG_RECHECK_MS)}, lease_owner = null where id = ${p.id}`
            return
          }
          stepId = step.on_timeout ?? null
          break
        case 'branch': {
          const [hit] = await tx<{ ok: boolean }[]>`
            select true as ok from players p left join player_profiles pp on pp.player_id = p.id
            where p.id = ${p.player_id} and ${compileRules(tx, step.condition ?? {}, now)}`
          stepId = (hit ? step.then : step.else) ?? null
          break
        }
      }
      woken = false
    }
    // A loop without a wait (refused on write) would end here instead of sending forever.
    deps.log.warn({ campaignId: c.id, participantId: p.id }, 'journey advance stopped after too many steps')
    await save(stepId, 'active', new Date(now.getTime() + 60_000))
  })
}

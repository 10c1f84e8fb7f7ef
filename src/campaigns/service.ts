// Campaign lifecycle: create (as draft, with campaign.created in the outbox), list, get, update with the
// status machine, and DELETE as a soft cancel. A status move sets the execution engine's work in motion in
// the same transaction (execution.ts onStatusChange); references are checked on every write and the whole
// campaign when it is (or stays) scheduled, running or paused (validation.ts).
import type { AppContext } from '../context.ts'
import { AppError, badRequest, notFound } from '../errors.ts'
import { insertOutbox } from '../lib/outbox.ts'
import type { Visibility } from '../lib/visibility.ts'
import { onStatusChange, selectEngineCampaign, storeEngineTimes } from './execution.ts'
import * as q from './queries.ts'
import type { Campaign, CampaignType, Participant } from './schemas.ts'
import { cursorCodec, decodeCursorOr400, invalidCursor } from '../lib/cursor.ts'
import { computeStats } from './stats.ts'
import { checkTransition, type CampaignStatus } from './status.ts'
import { assertReferences, assertRunnable } from './validation.ts'

type Deps = Pick<AppContext, 'sql' | 'log'> & Partial<Pick<AppContext, 'clock' | 'stream' | 'campaigns'>>

const nowOf = (deps: Deps) => (deps.clock ? deps.clock() : new Date())

type Viewer = Visibility

export async function createCampaign(
  deps: Deps,
  input: {
    tenantId: string
    brandId: string
    name: string
    type: CampaignType
    channels: string[]
    description?: string | null
    target_segment_id?: string | null
    schedule?: Record<string, unknown>
    config?: Record<string, unknown>
  },
): Promise<Campaign> {
  await assertReferences(deps.sql, input, {
    type: input.type,
    channels: input.channels,
    target_segment_id: input.target_segment_id ?? null,
    schedule: input.schedule ?? {},
    config: input.config ?? {},
  })
  const campaign = await deps.sql.begin(async (tx) => {
    const created = await q.insertCampaign(tx, {
      tenantId: input.tenantId,
      brandId: input.brandId,
      name: input.name,
      description: input.description ?? null,
      type: input.type,
      channels: input.channels,
      targetSegmentId: input.target_segment_id ?? null,
      schedule: input.schedule ?? {},
      config: input.config ?? {},
    })
    await insertOutbox(tx, {
      tenantId: input.tenantId,
      brandId: input.brandId,
      event: 'campaign.created',
      data: { campaign_id: created.id, name: created.name, type: created.type, brand_id: input.brandId },
    })
    return created
  })
  deps.log.info({ tenantId: input.tenantId, campaignId: campaign.id }, 'campaign created')
  return campaign
}

export const listCampaigns = (
  deps: Deps,
  input: { tenantId: string; brandId: string; status?: CampaignStatus; limit: number; offset: number },
) => q.selectCampaigns(deps.sql, input)

export async function getCampaign(deps: Deps, input: Viewer & { campaignId: string }): Promise<Campaign> {
  const campaign = await q.selectCampaign(deps.sql, input)
  if (!campaign) throw notFound('campaign')
  // A draft has run nothing: its stored stats are the zeros. Anything else is counted now.
  if (campaign.status !== 'draft') campaign.stats = (await computeStats(deps.sql, [campaign.id])).get(campaign.id)!
  return campaign
}

function disallowedMove(from: CampaignStatus, to: CampaignStatus, allowed: CampaignStatus[]): AppError {
  return badRequest(`campaign status cannot move from '${from}' to '${to}'`, { from, to, allowed })
}

/** Conditional updates lost to a concurrent status change are re-decided against the new status. */
/** Each round at least one of the concurrent writers wins: more rounds than writers usually race at once. */
const MAX_ATTEMPTS = 20

export async function updateCampaign(
  deps: Deps,
  input: Viewer & { campaignId: string; changes: q.CampaignChanges },
): Promise<Campaign> {
  // Only the updatable fields; anything else in the body is ignored.
  const { name, description, status, channels, target_segment_id, config, schedule } = input.changes
  const changes = Object.fromEntries(
    Object.entries({ name, description, status, channels, target_segment_id, config, schedule }).filter(([, v]) => v !== undefined),
  ) as q.CampaignChanges
  if (Object.keys(changes).length === 0) return getCampaign(deps, input)
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await q.selectCampaign(deps.sql, input)
    if (!current) throw notFound('campaign')
    const owner = (await selectEngineCampaign(deps.sql, current.id))!
    let expectedStatus: CampaignStatus | undefined
    if (changes.status !== undefined) {
      const move = checkTransition(current.status, changes.status)
      if (!move.ok) throw disallowedMove(move.from, move.to, move.allowed)
      expectedStatus = current.status
    }
    const merged = {
      type: current.type,
      channels: changes.channels ?? current.channels,
      target_segment_id: changes.target_segment_id !== undefined ? changes.target_segment_id : current.target_segment_id,
      schedule: changes.schedule ?? current.schedule,
      config: changes.config ?? current.config,
    }
    const resulting = changes.status ?? current.status
    const ownerKey = { tenantId: owner.tenant_id, brandId: owner.brand_id }
    const now = nowOf(deps)
    // What it runs on: channels, audience, schedule, config (not its name, nor a pause).
    const edits = changes.channels !== undefined || changes.target_segment_id !== undefined || changes.schedule !== undefined || changes.config !== undefined
    const starts = expectedStatus !== undefined && (resulting === 'scheduled' || resulting === 'running')
    if (starts || (edits && (resulting === 'scheduled' || resulting === 'running' || resulting === 'paused'))) {
      // A move to scheduled/running checks everything for that move; an edit of an active campaign keeps
      // it runnable (without asking a scheduled start_at to be in the future again). A pause, or a new
      // name, is never refused for what became of its references meanwhile (a template deactivated).
      const target = starts ? resulting : 'paused'
      await assertRunnable(deps.sql, ownerKey, merged, target, now)
    } else if (changes.target_segment_id !== undefined || changes.config !== undefined) {
      await assertReferences(deps.sql, ownerKey, merged)
    }
    const updated = await deps.sql.begin(async (tx) => {
      // An edit or a start was checked against the campaign as read: written only if nobody changed it
      // since (a concurrent edit of channels and one of config would each pass alone and break it together).
      const row = await q.updateCampaign(tx, { ...input, expectedStatus, expectedUpdatedAt: edits || starts ? current.updated_at : undefined }, changes)
      if (!row) return undefined
      const after = (await selectEngineCampaign(tx, row.id))!
      if (expectedStatus) await onStatusChange(tx, after, expectedStatus, now)
      else if (changes.schedule !== undefined) await storeEngineTimes(tx, { ...after, next_tick_at: null }, now)
      return (await q.selectCampaign(tx, input))!
    })
    if (updated) {
      if (expectedStatus) {
        deps.log.info({ tenantId: input.tenantId, campaignId: updated.id, from: expectedStatus, to: updated.status }, 'campaign status changed')
      }
      if (expectedStatus || changes.config !== undefined) await deps.stream?.interestChanged(owner.brand_id)
      deps.campaigns?.wake()
      return updated
    }
    // Another request changed the status or the campaign (or removed visibility) since we read it: decide
    // again, after a short random pause so that concurrent editors do not collide again in step.
    await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20))
  }
  throw new AppError('SERVICE_UNAVAILABLE', 'the campaign kept changing under concurrent requests; nothing was written: try again', { reason: 'CONCURRENT_CHANGE' }, { 'retry-after': '1' })
}

/** DELETE: the same move as PATCH status cancelled, so a draft (or terminal) campaign is a 400. */
export const cancelCampaign = (deps: Deps, input: Viewer & { campaignId: string }) =>
  updateCampaign(deps, { ...input, changes: { status: 'cancelled' } })

const PARTICIPANTS_PURPOSE = 'campaign-participants'

/** A journey's participants in entry order, keyset-paginated with a signed cursor bound to the campaign. */
export async function listParticipants(
  deps: Deps,
  input: Viewer & { campaignId: string; status?: string; limit: number; cursor?: string },
): Promise<{ data: Participant[]; next_cursor: string | null }> {
  const campaign = await q.selectCampaign(deps.sql, input)
  if (!campaign) throw notFound('campaign')
  const codec = await cursorCodec(deps.sql, PARTICIPANTS_PURPOSE)
  let after: { pos: string; id: string } | undefined
  if (input.cursor) {
    const c = decodeCursorOr400(codec, input.cursor)
    if (c.c !== campaign.id || c.s !== (input.status ?? null) || typeof c.t !== 'string' || typeof c.i !== 'string') throw invalidCursor()
    after = { pos: c.t, id: c.i }
  }
  const rows = await q.selectParticipants(deps.sql, { campaignId: campaign.id, status: input.status, after, limit: input.limit + 1 })
  const page = rows.slice(0, input.limit)
  const last = page[page.length - 1]
  return {
    data: page.map((r) => ({ player_id: r.player_id, step: r.step, status: r.status, entered_at: r.entered_at.toISOString(), updated_at: r.updated_at.toISOString() })),
    next_cursor: rows.length > input.limit && last ? codec.encode({ c: campaign.id, s: input.status ?? null, t: last.pos, i: last.id }) : null,
  }
}

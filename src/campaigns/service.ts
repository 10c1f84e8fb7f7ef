// Campaign lifecycle: create (as draft, with campaign.created in the outbox), list, get, update with the
// status machine, and DELETE as a soft cancel. The execution engine (audience, sends, stats) comes later.
import type { AppContext } from '../context.ts'
import { AppError, badRequest, notFound } from '../errors.ts'
import { insertOutbox } from '../lib/outbox.ts'
import type { Visibility } from '../lib/visibility.ts'
import * as q from './queries.ts'
import type { Campaign, CampaignType } from './schemas.ts'
import { checkTransition, type CampaignStatus } from './status.ts'

type Deps = Pick<AppContext, 'sql' | 'log'>

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
  return campaign
}

function disallowedMove(from: CampaignStatus, to: CampaignStatus, allowed: CampaignStatus[]): AppError {
  return badRequest(`campaign status cannot move from '${from}' to '${to}'`, { from, to, allowed })
}

/** Conditional updates lost to a concurrent status change are re-decided against the new status. */
const MAX_ATTEMPTS = 5

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
    const current = await getCampaign(deps, input)
    let expectedStatus: CampaignStatus | undefined
    if (changes.status !== undefined) {
      const move = checkTransition(current.status, changes.status)
      if (!move.ok) throw disallowedMove(move.from, move.to, move.allowed)
      expectedStatus = current.status
    }
    const updated = await q.updateCampaign(deps.sql, { ...input, expectedStatus }, changes)
    if (updated) {
      if (expectedStatus) {
        deps.log.info({ tenantId: input.tenantId, campaignId: updated.id, from: expectedStatus, to: updated.status }, 'campaign status changed')
      }
      return updated
    }
    // Another request changed the status (or removed visibility) since we read it: decide again.
  }
  throw new AppError('INTERNAL_ERROR', 'campaign kept changing; try again')
}

/** DELETE: the same move as PATCH status cancelled, so a draft (or terminal) campaign is a 400. */
export const cancelCampaign = (deps: Deps, input: Viewer & { campaignId: string }) =>
  updateCampaign(deps, { ...input, changes: { status: 'cancelled' } })

import { defineRoute, type RouteDef } from '../http/route.ts'
import { IdParams, data } from '../lib/schemas.ts'
import type { AppContext } from '../context.ts'
import type { Logger } from '../lib/log.ts'
import { Campaign, CampaignList, CampaignListQuery, CreateCampaignBody, ParticipantList, ParticipantsQuery, UpdateCampaignBody } from './schemas.ts'
import * as campaigns from './service.ts'

const tags = ['campaigns']

/** What the service needs: the stores, the clock, and the engine and stream it wakes after a change. */
const deps = (ctx: AppContext, log: Logger) => ({ sql: ctx.sql, log, clock: ctx.clock, stream: ctx.stream, campaigns: ctx.campaigns })

export const campaignRoutes: RouteDef[] = [
  defineRoute({
    method: 'GET', path: '/campaigns', operationId: 'listCampaigns', tags,
    summary: "List the brand's campaigns, newest first",
    query: CampaignListQuery, responses: { 200: CampaignList }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      return campaigns.listCampaigns(deps(ctx, req.log), { ...req.query, tenantId: req.principal.tenantId, brandId: brand.id })
    },
  }),
  defineRoute({
    method: 'POST', path: '/campaigns', operationId: 'createCampaign', tags,
    summary: 'Create a campaign; it starts as draft',
    description: 'Writes `campaign.created` to the outbox in the same transaction. `target_segment_id` is checked for uuid format only; the execution engine resolves it.',
    body: CreateCampaignBody, responses: { 201: data(Campaign) }, brandScoped: true,
    handler: async (ctx, req) => {
      const brand = await req.resolveBrand()
      const { brand: _hint, ...body } = req.body
      return { data: await campaigns.createCampaign(deps(ctx, req.log), { ...body, tenantId: req.principal.tenantId, brandId: brand.id }) }
    },
  }),
  defineRoute({
    method: 'GET', path: '/campaigns/:id', operationId: 'getCampaign', tags,
    summary: 'Get a campaign',
    params: IdParams, responses: { 200: data(Campaign) },
    handler: async (ctx, req) => ({
      data: await campaigns.getCampaign(deps(ctx, req.log), { tenantId: req.principal.tenantId, brandId: req.principal.brandId, campaignId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'PATCH', path: '/campaigns/:id', operationId: 'updateCampaign', tags,
    summary: 'Update a campaign or move its status',
    description: 'Status moves follow the spec table; a disallowed move (including to the current status) is 400 BAD_REQUEST with `details: { from, to, allowed }`.',
    params: IdParams, body: UpdateCampaignBody, responses: { 200: data(Campaign) },
    handler: async (ctx, req) => ({
      data: await campaigns.updateCampaign(deps(ctx, req.log), {
        tenantId: req.principal.tenantId,
        brandId: req.principal.brandId,
        campaignId: req.params.id,
        changes: req.body,
      }),
    }),
  }),
  defineRoute({
    method: 'DELETE', path: '/campaigns/:id', operationId: 'cancelCampaign', tags,
    summary: 'Cancel a campaign (soft: the record remains)',
    description: 'The same move as PATCH status cancelled: allowed from scheduled, running and paused; otherwise 400 with `details: { from, to, allowed }`.',
    params: IdParams, responses: { 200: data(Campaign) }, errors: [400],
    handler: async (ctx, req) => ({
      data: await campaigns.cancelCampaign(deps(ctx, req.log), { tenantId: req.principal.tenantId, brandId: req.principal.brandId, campaignId: req.params.id }),
    }),
  }),
  defineRoute({
    method: 'GET', path: '/campaigns/:id/participants', operationId: 'listCampaignParticipants', tags,
    summary: "A journey's participants and where each stands",
    description: 'In entry order, keyset-paginated (`cursor` from `next_cursor`). Empty for campaigns that are not journeys.',
    params: IdParams, query: ParticipantsQuery, responses: { 200: ParticipantList },
    handler: async (ctx, req) =>
      campaigns.listParticipants(deps(ctx, req.log), {
        ...req.query, tenantId: req.principal.tenantId, brandId: req.principal.brandId, campaignId: req.params.id,
      }),
  }),
]

// The webhook event catalog (spec "Outbound webhooks" and contract-engines §2). It grows additively: a
// feature that fires a new event adds its name here (so endpoints may subscribe to it) and writes it with
// insertOutbox(tx, { tenantId, brandId, event, data }) in the transaction of its change.
export const WEBHOOK_EVENTS = [
  'player.created',
  'player.updated',
  'player.status_changed',
  'player.converted',
  'segment.recomputed',
  'campaign.created',
  'campaign.completed',
  'message.delivered',
  'message.opened',
  'message.clicked',
  'message.bounced',
  'email.unsubscribed',
  'bonus.granted',
  'gamification.mission_completed',
  'gamification.level_changed',
  'gamification.badge_earned',
  'tournament.ended',
  'player.erased',
] as const

/** Subscribes to every event of the catalog, present and future. */
export const ALL_EVENTS = '*'

/** Sent by POST /webhooks/{id}/ping to that endpoint only; not subscribable. */
export const PING_EVENT = 'webhook.ping'

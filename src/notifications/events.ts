// The platform events of delivery (message.*, email.unsubscribed), written to the outbox in the
// transaction of the change they report. Every one carries notification_id, and campaign_id when a
// campaign sent it (campaign_send_id of the spec = the notification id).
import { insertOutbox } from '../lib/outbox.ts'
import type { Sql } from './delivery-queries.ts'

export interface MessageRef {
  id: string
  tenant_id: string
  brand_id: string
  player_id: string
  channel: string
  campaign_id: string | null
}

export function messageEvent(sql: Sql, event: 'message.delivered' | 'message.opened' | 'message.clicked' | 'message.bounced' | 'email.unsubscribed', n: MessageRef, extra: Record<string, unknown> = {}) {
  const data: Record<string, unknown> = { notification_id: n.id, player_id: n.player_id, channel: n.channel, ...extra }
  if (n.campaign_id) {
    data.campaign_id = n.campaign_id
    data.campaign_send_id = n.id
  } else if (event === 'message.opened' || event === 'message.clicked') {
    data.campaign_id = null // listed by the spec for these two
  }
  return insertOutbox(sql as never, { tenantId: n.tenant_id, brandId: n.brand_id, event, data })
}

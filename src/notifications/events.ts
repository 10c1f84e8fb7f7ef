// The platform events of delivery (message.*, email.unsubscribed), written to the outbox in the
// transaction of the change they report. Every one carries notification_id, and campaign_id when a
// campaign sent it (campaign_send_id of the spec = the notification id).
import { insertOutbox, insertOutboxMany, type OutboxEvent } from '../lib/outbox.ts'
import type { Sql } from './delivery-queries.ts'

export interface MessageRef {
  id: string
  tenant_id: string
  brand_id: string
  player_id: string
  channel: string
  campaign_id: string | null
}

type MessageEventName = 'message.delivered' | 'message.opened' | 'message.clicked' | 'message.bounced' | 'email.unsubscribed'

function messageEventOf(event: MessageEventName, n: MessageRef, extra: Record<string, unknown> = {}): OutboxEvent {
  const data: Record<string, unknown> = { notification_id: n.id, player_id: n.player_id, channel: n.channel, ...extra }
  if (n.campaign_id) {
    data.campaign_id = n.campaign_id
    data.campaign_send_id = n.id
  } else if (event === 'message.opened' || event === 'message.clicked') {
    data.campaign_id = null // listed by the spec for these two
  }
  return { tenantId: n.tenant_id, brandId: n.brand_id, event, data }
}

export function messageEvent(sql: Sql, event: MessageEventName, n: MessageRef, extra: Record<string, unknown> = {}) {
  return insertOutbox(sql as never, messageEventOf(event, n, extra))
}

/** messageEvent for many messages in one statement. */
export function messageEvents(sql: Sql, event: MessageEventName, ns: MessageRef[]) {
  return insertOutboxMany(sql as never, ns.map((n) => messageEventOf(event, n)))
}

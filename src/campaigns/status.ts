// The campaign status machine of the spec ("States and transitions → Campaign status"). Pure: no I/O.
export const CAMPAIGN_STATUSES = ['draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled'] as const
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number]

/**
 * Allowed moves, exactly the spec's table. `completed` and `cancelled` are terminal. A "move" to the
 * current status is not in the table, so it is disallowed too (docs/campaigns.md).
 */
export const ALLOWED_MOVES: Readonly<Record<CampaignStatus, readonly CampaignStatus[]>> = {
  draft: ['scheduled', 'running'],
  scheduled: ['running', 'cancelled'],
  running: ['paused', 'cancelled'],
  paused: ['running', 'cancelled'],
  completed: [],
  cancelled: [],
}

export type Transition =
  | { ok: true; from: CampaignStatus; to: CampaignStatus }
  | { ok: false; from: CampaignStatus; to: CampaignStatus; allowed: CampaignStatus[] }

export function checkTransition(from: CampaignStatus, to: CampaignStatus): Transition {
  const allowed = ALLOWED_MOVES[from]
  if (allowed.includes(to)) return { ok: true, from, to }
  return { ok: false, from, to, allowed: [...allowed] }
}

export const isTerminal = (status: CampaignStatus) => ALLOWED_MOVES[status].length === 0

// Tournament definitions, stored through the generic definition store. Participants, scoring and
// leaderboards come with the tournament engine.
import { endsAfterStarts, type ResourceDef } from '../gamification/crud.ts'
import { badRequest } from '../errors.ts'
import { iso } from '../lib/rows.ts'
import { checkTournament, tournamentRefs } from '../gamification/validation.ts'
import type { Tournament } from './schemas.ts'

export const tournaments: ResourceDef<Tournament> = {
  table: 'tournaments',
  label: 'tournament',
  columns: ['name', 'description', 'status', 'game_config', 'prize_pool', 'max_participants', 'starts_at', 'ends_at'],
  jsonColumns: ['game_config', 'prize_pool'],
  orderBy: ['created_at'],
  toOut: (r) => ({
    id: r.id as string,
    name: r.name as string,
    description: (r.description as string | null) ?? null,
    status: r.status as Tournament['status'],
    game_config: r.game_config as Tournament['game_config'],
    prize_pool: r.prize_pool as Tournament['prize_pool'],
    max_participants: (r.max_participants as number | null) ?? null,
    starts_at: iso(r.starts_at),
    ends_at: iso(r.ends_at),
    created_at: iso(r.created_at) as string,
    updated_at: iso(r.updated_at) as string,
  }),
  check: (record) => [...endsAfterStarts(record), ...checkTournament(record)],
  checkRefs: tournamentRefs,
  // An ended tournament's ranks are final and its prizes granted once (contract-engines §5): set active
  // again, its next end would grant them a second time. Every other move is free.
  checkChange(current, merged) {
    if (current.status === 'ended' && merged.status !== 'ended') {
      throw badRequest(`tournament status cannot move from 'ended' to '${String(merged.status)}'`, { from: 'ended', to: merged.status, allowed: [] })
    }
  },
}

import { crudRoutes } from '../gamification/crud-routes.ts'
import { rulesChanged } from '../gamification/routes.ts'
import type { RouteDef } from '../http/route.ts'
import { CreateTournamentBody, PatchTournamentBody, Tournament } from './schemas.ts'
import { tournaments } from './service.ts'

export const tournamentRoutes: RouteDef[] = crudRoutes({
  path: '/tournaments', tag: 'tournaments', singular: 'Tournament', plural: 'Tournaments', def: tournaments, schema: Tournament,
  createBody: CreateTournamentBody, patchBody: PatchTournamentBody, onChange: rulesChanged,
})

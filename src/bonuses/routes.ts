import { crudRoutes } from '../gamification/crud-routes.ts'
import type { RouteDef } from '../http/route.ts'
import { Bonus, CreateBonusBody, PatchBonusBody } from './schemas.ts'
import { bonuses } from './service.ts'

export const bonusRoutes: RouteDef[] = crudRoutes({
  path: '/bonuses', tag: 'bonuses', singular: 'Bonus', plural: 'Bonuses', def: bonuses, schema: Bonus,
  createBody: CreateBonusBody, patchBody: PatchBonusBody,
})

// Every route the API serves, grouped by auth regime. New features add their route list here; the
// OpenAPI document follows automatically.
import { adminRoutes } from '../admin/routes.ts'
import { analyticsRoutes } from '../analytics/routes.ts'
import { bonusRoutes } from '../bonuses/routes.ts'
import { campaignRoutes } from '../campaigns/routes.ts'
import { eventRoutes } from '../events/routes.ts'
import { engineRoutes } from '../gamification/engine-routes.ts'
import { exportRoutes } from '../exports/routes.ts'
import { gamificationRoutes } from '../gamification/routes.ts'
import { notificationRoutes } from '../notifications/routes.ts'
import { playerRoutes } from '../players/routes.ts'
import { segmentRoutes } from '../segments/routes.ts'
import { docsRoutes } from '../system/docs.ts'
import { healthRoute, liveRoute, openApiRoute } from '../system/routes.ts'
import { tournamentRoutes } from '../tournaments/routes.ts'
import { webhookRoutes } from '../webhooks/routes.ts'
import { buildOpenApi } from './openapi.ts'
import type { RouteDef } from './route.ts'

/** Operator routes (API key). */
const operatorRoutes: RouteDef[] = [
  ...eventRoutes,
  ...playerRoutes,
  ...segmentRoutes,
  ...campaignRoutes,
  ...notificationRoutes,
  ...gamificationRoutes,
  ...bonusRoutes,
  ...tournamentRoutes,
  ...webhookRoutes,
  ...engineRoutes,
  ...analyticsRoutes,
  ...exportRoutes,
]

export function allRoutes(version: string): RouteDef[] {
  let document: unknown
  const routes: RouteDef[] = [healthRoute, openApiRoute(() => document), ...operatorRoutes, ...adminRoutes]
  routes.push(liveRoute, ...docsRoutes)
  document = buildOpenApi(routes, version)
  return routes
}

// Every route the API serves, grouped by auth regime. New features add their route list here; the
// OpenAPI document follows automatically.
import { adminRoutes } from '../admin/routes.ts'
import { eventRoutes } from '../events/routes.ts'
import { healthRoute, openApiRoute } from '../system/routes.ts'
import { buildOpenApi } from './openapi.ts'
import type { RouteDef } from './route.ts'

/** Operator routes (API key). */
const operatorRoutes: RouteDef[] = [...eventRoutes]

export function allRoutes(version: string): RouteDef[] {
  let document: unknown
  const routes: RouteDef[] = [healthRoute, openApiRoute(() => document), ...operatorRoutes, ...adminRoutes]
  document = buildOpenApi(routes, version)
  return routes
}

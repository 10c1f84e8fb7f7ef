// `npm run openapi > openapi.json`: prints the OpenAPI 3.1 document, built from the route table, without
// starting the service.
import { loadConfig } from '../config.ts'
import { buildOpenApi } from './openapi.ts'
import { allRoutes } from './routes.ts'

const { version } = loadConfig()
process.stdout.write(`${JSON.stringify(buildOpenApi(allRoutes(version), version), null, 2)}\n`)

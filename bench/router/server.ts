// Server side of the router bench: a bare uWS handler and Respin in one process (so they share the core),
// on two ports. Prints {"bare":port,"respin":port,"key":"rsp_..."} once both listen.
import { mkdtempSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Type from 'typebox'
import uWS from 'uWebSockets.js'
import { createApiKey, createBrand, createTenant } from '../../src/admin/service.ts'
import { startApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { defineRoute } from '../../src/http/route.ts'

const noop = defineRoute({
  method: 'GET', path: '/_bench/noop', operationId: 'benchNoop', tags: ['bench'], summary: 'authenticated no-op',
  responses: { 200: Type.Object({ ok: Type.Boolean() }) },
  handler: () => ({ ok: true }),
})

const config = loadConfig({
  ...process.env,
  PORT: '0',
  HOST: '127.0.0.1',
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  DATA_DIR: mkdtempSync(join(tmpdir(), 'respin-bench-')),
})
const app = await startApp(config, { extraRoutes: [noop] })
const tenant = await createTenant(app.ctx, { name: `bench ${Date.now()}` })
await createBrand(app.ctx, { tenantId: tenant.id, name: 'main', slug: 'main' })
const { key } = await createApiKey(app.ctx, { tenantId: tenant.id, name: 'bench' })

const bare = uWS.App()
const health = JSON.stringify({ status: 'ok', version: '0.0.0', timestamp: new Date().toISOString(), service: 'bare', checks: {} })
bare.get('/api/v1/health', (res) => {
  res.cork(() => {
    res.writeHeader('content-type', 'application/json').end(health)
  })
})
const barePort = await new Promise<number>((resolve, reject) =>
  bare.listen('127.0.0.1', 0, (s) => (s ? resolve(uWS.us_socket_local_port(s as unknown as uWS.us_socket)) : reject(new Error('listen')))),
)
// The same bare handler on node:http: the floor of the default engine (HTTP_ENGINE=node).
const bareNode = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(health) })
  res.end(health)
})
bareNode.keepAliveTimeout = 10_000
const bareNodePort = await new Promise<number>((resolve) => bareNode.listen(0, '127.0.0.1', () => resolve((bareNode.address() as { port: number }).port)))
process.stdout.write(`${JSON.stringify({ bare: barePort, bareNode: bareNodePort, respin: app.port, key, engine: config.httpEngine })}\n`)
process.on('SIGTERM', () => {
  app.close().finally(() => process.exit(0))
})

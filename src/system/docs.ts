// GET /docs: an interactive reference of our OpenAPI document, rendered by Scalar's standalone bundle served
// from our own dependencies (node_modules/@scalar/api-reference), so the page needs no CDN and works offline.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { definePublicRoute, reply } from '../http/route.ts'
import { API_PREFIX } from '../http/router.ts'

const BUNDLE_PATH = `${API_PREFIX}/docs/scalar.js`

// Off: what would reach Scalar's hosts (fonts, telemetry, the AI agent's API registry). Tags open, so the
// page lists every operation at once.
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Respin API reference</title>
</head>
<body>
<div id="app"></div>
<script src="${BUNDLE_PATH}"></script>
<script>
Scalar.createApiReference('#app', {
  url: '${API_PREFIX}/openapi.json',
  withDefaultFonts: false,
  telemetry: false,
  agent: { disabled: true },
  defaultOpenAllTags: true,
})
</script>
</body>
</html>
`

let bundle: Buffer | undefined
/** Read on first use (3.5 MB), then kept. */
function scalarBundle(): Buffer {
  bundle ??= readFileSync(fileURLToPath(new URL('./browser/standalone.js', import.meta.resolve('@scalar/api-reference'))))
  return bundle
}

export const docsRoutes = [
  definePublicRoute({
    method: 'GET',
    path: '/docs',
    operationId: 'getApiReference',
    tags: ['system'],
    summary: 'Interactive API reference (HTML)',
    description: 'Public. Renders this OpenAPI document with Scalar, served from this server (no CDN).',
    responses: { 200: { description: 'The reference page', contentType: 'text/html' } },
    handler: () => reply(200, PAGE, { 'cache-control': 'no-cache' }, 'text/html; charset=utf-8'),
  }),
  definePublicRoute({
    method: 'GET',
    path: '/docs/scalar.js',
    operationId: 'getApiReferenceScript',
    tags: ['system'],
    summary: "The reference page's script (Scalar's standalone bundle)",
    responses: { 200: { description: 'JavaScript', contentType: 'text/javascript' } },
    handler: () => reply(200, scalarBundle(), { 'cache-control': 'public, max-age=86400' }, 'text/javascript; charset=utf-8'),
  }),
]

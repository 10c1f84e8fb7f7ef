// Health, the served API documents, and the service's PostgreSQL sessions, under one harness (a test file of
// its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import $RefParser from '@apidevtools/json-schema-ref-parser'
import { Validator } from '@seriousme/openapi-schema-validator'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { existsSync } from 'node:fs'
import { chromium } from 'playwright-core'
import { ENGINE_POOL, IDLE_IN_TRANSACTION_MS } from '../../src/db/postgres.ts'

const h = await startHarness(t)

t.test('health', async (t) => {
  t.test('health is public and reports every dependency', async (t) => {
    const res = await h.request('GET', '/health')
    t.equal(res.status, 200)
    t.equal(res.body.status, 'ok')
    t.equal(res.body.service, 'respin')
    t.type(res.body.version, 'string')
    t.ok(!Number.isNaN(Date.parse(res.body.timestamp)))
    t.equal(res.body.checks.postgres.status, 'ok')
    t.equal(res.body.checks.clickhouse.status, 'ok')
    t.ok(['ok', 'embedded'].includes(res.body.checks.redis.status))
  })

  t.test('an unknown route is a JSON 404 in the error shape', async (t) => {
    const res = await h.request('GET', '/no-such-thing')
    t.equal(res.status, 404)
    t.equal(res.body.code, 'NOT_FOUND')
    t.type(res.body.error, 'string')
    t.match(res.headers.get('content-type'), /application\/json/)
  })

  t.test('ClickHouse not answering: reported in checks; 200 while ingestion is acknowledged after PostgreSQL and Redis keeps dedupe, else 503', async (t) => {
    const ch = h.app.ctx.ch
    const ping = ch.ping
    t.teardown(() => {
      ch.ping = ping
    })
    // The embedded engine cannot be stopped from here: its ping fails as a server's would.
    ch.ping = async () => {
      throw new Error('connect ECONNREFUSED 127.0.0.1:8123')
    }
    const config = h.app.ctx.config as { ingestAckAfter: 'clickhouse' | 'postgres' }
    const mode = config.ingestAckAfter
    t.teardown(() => {
      config.ingestAckAfter = mode
    })
    await new Promise((r) => setTimeout(r, 1100)) // past the 1 s result cache
    config.ingestAckAfter = 'postgres'
    const soft = await h.request('GET', '/health')
    if (process.env.REDIS_URL) {
      t.equal(soft.status, 200)
      t.match(soft.body.checks.clickhouse, { status: 'fail', required: false, impact: /spool/ })
    } else {
      // Without Redis, dedupe checks each new event id against ClickHouse: ingestion stops with it.
      t.equal(soft.status, 503)
      t.notOk('required' in soft.body.checks.clickhouse)
    }
    await new Promise((r) => setTimeout(r, 1100))
    config.ingestAckAfter = 'clickhouse'
    const hard = await h.request('GET', '/health')
    t.equal(hard.status, 503)
    t.equal(hard.body.status, 'degraded')
    t.notOk(hard.body.checks.clickhouse.required === false, 'required when ingestion waits for it')
  })
})

t.test('openapi', async (t) => {
  // The document and page are the HTTP layer's, the same whatever stores run: checked in the embedded run only.
  t.test('the OpenAPI document is public and valid OpenAPI 3.1', embeddedRunOnly, async (t) => {
    const res = await h.request('GET', '/openapi.json')
    t.equal(res.status, 200)
    const doc = res.body
    t.equal(doc.openapi, '3.1.0')
    const validator = new Validator()
    const result = await validator.validate(doc)
    t.same(result.errors ?? [], [], 'no validation errors')
    t.equal(result.valid, true)
    t.equal(validator.version, '3.1')
  })

  t.test('it is generated from the route table: every served route is in it', embeddedRunOnly, async (t) => {
    const doc = (await h.request('GET', '/openapi.json')).body
    const { allRoutes } = await import('../../src/http/routes.ts')
    for (const route of allRoutes('test')) {
      const path = `/api/v1${route.path.replace(/:(\w+)/g, '{$1}')}`
      const op = doc.paths[path]?.[route.method.toLowerCase()]
      t.ok(op, `${route.method} ${path}`)
      if (!op) continue
      t.equal(op.operationId, route.operationId)
      if (route.auth === 'public') t.same(op.security, [])
      else t.same(op.security, [{ ApiKeyHeader: [] }, { BearerAuth: [] }, { ApiKeyQuery: [] }])
    }
    t.same(Object.keys(doc.components.securitySchemes).sort(), ['ApiKeyHeader', 'ApiKeyQuery', 'BearerAuth'])
    t.ok(doc.components.schemas.Error, 'the error shape is a shared component')
    t.ok(doc.paths['/api/v1/admin/tenants'].post.responses['401'], 'error responses are documented')
  })

  t.test('the document resolves completely: every $ref points at a real schema, and none at itself', embeddedRunOnly, async (t) => {
    const doc = (await h.request('GET', '/openapi.json')).body
    const refs: string[] = []
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(collect)
      if (!node || typeof node !== 'object') return
      for (const [k, v] of Object.entries(node)) {
        if (k === '$ref' && typeof v === 'string') refs.push(v)
        else collect(v)
      }
    }
    collect(doc)
    t.ok(refs.includes('#/components/schemas/Error'), 'error responses refer to the shared Error schema')
    for (const ref of new Set(refs)) {
      const target = ref.replace(/^#\//, '').split('/').reduce<any>((node, part) => node?.[part], doc)
      t.ok(target && typeof target === 'object', `${ref} exists`)
      t.notOk(Object.keys(target ?? {}).length === 1 && '$ref' in target, `${ref} is a schema, not only another reference`)
    }
    t.match(doc.components.schemas.Error, { type: 'object', properties: { error: { type: 'string' } }, required: ['error'] })
    // What a client generator does: replace every reference by its target. A reference cycle with no schema
    // in it (Error -> Error) is refused here.
    const resolved = await $RefParser.dereference(structuredClone(doc), { dereference: { circular: false } })
    t.notMatch(JSON.stringify(resolved), /"\$ref"/, 'nothing left unresolved')
    t.match((resolved as any).paths['/api/v1/players'].get.responses['401'].content['application/json'].schema, {
      type: 'object',
      properties: { error: { type: 'string' }, request_id: { type: 'string' } },
    })
  })
})

// docs-page: GET /api/v1/docs rendered in a real headless Chromium (Debian's `chromium` package): the page renders,
// lists the operations of our OpenAPI document, and asks nothing of any other host (no CDN, no fonts).
// Skipped, saying so, where /usr/bin/chromium is not installed (`apt-get install -y chromium`).
t.test('docs-page', async (t) => {
  const CHROMIUM = '/usr/bin/chromium'

  // The document and page are the HTTP layer's, the same whatever stores run: checked in the embedded run only.
  t.test('the page and its script are public and served from this server', embeddedRunOnly, async (t) => {
    const page = await fetch(`${h.origin}/api/v1/docs`)
    t.equal(page.status, 200)
    t.match(page.headers.get('content-type'), /^text\/html/)
    const html = await page.text()
    t.match(html, /<script src="\/api\/v1\/docs\/scalar\.js"><\/script>/)
    t.notMatch(html, /https?:\/\//, 'no absolute URL: nothing from a CDN')
    const script = await fetch(`${h.origin}/api/v1/docs/scalar.js`)
    t.equal(script.status, 200)
    t.match(script.headers.get('content-type'), /javascript/)
    t.ok((await script.arrayBuffer()).byteLength > 1_000_000, "Scalar's standalone bundle")
  })

  t.test('headless Chromium renders the reference and lists the operations', { skip: embeddedRunOnly.skip ?? (existsSync(CHROMIUM) ? false : `${CHROMIUM} not installed (apt-get install -y chromium)`) }, async (t) => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
    t.teardown(() => browser.close())
    const page = await browser.newPage()
    const foreign: string[] = []
    const pageErrors: string[] = []
    // Anything not from our origin is recorded and refused, so a CDN dependency fails here, offline or not.
    await page.route('**/*', (route) => {
      const url = route.request().url()
      if (url.startsWith(h.origin) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue()
      foreign.push(url)
      return route.abort()
    })
    page.on('pageerror', (err) => pageErrors.push(err.message))
    await page.goto(`${h.origin}/api/v1/docs`, { waitUntil: 'load' })
    // Scalar fetches the document, then renders one section per operation, titled by its summary.
    await page.getByText('Service health and dependency checks').first().waitFor({ timeout: 60_000 })
    // The sidebar comes first; the main column (the document's title, then each section) a moment later.
    await page.getByRole('heading', { name: /Respin API/ }).first().waitFor({ timeout: 60_000 })
    const text = await page.locator('body').innerText()
    const doc = (await h.request('GET', '/openapi.json')).body
    const summaries = Object.values(doc.paths as Record<string, Record<string, { summary: string }>>).flatMap((ops) => Object.values(ops).map((op) => op.summary))
    const shown = summaries.filter((s) => text.includes(s))
    t.ok(summaries.length > 20, `${summaries.length} operations in the document`)
    t.ok(shown.length / summaries.length > 0.9, `the page lists ${shown.length} of ${summaries.length} operations`)
    t.match(text, /Respin API/, "the document's title")
    t.same(foreign, [], 'no request left our origin')
    t.same(pageErrors, [], 'no script error')
  })
})

// postgres-session: The service's PostgreSQL sessions on a server: a transaction a bug leaves open is ended by PostgreSQL.
t.test('postgres-session', async (t) => {
  t.test('a transaction idle for a minute is ended by PostgreSQL, not left holding its locks', { skip: !process.env.DATABASE_URL && 'a PostgreSQL server setting' }, async (t) => {
    const [row] = await h.app.ctx.sql<{ ms: string }[]>`select setting as ms from pg_settings where name = 'idle_in_transaction_session_timeout'`
    t.equal(Number(row!.ms), IDLE_IN_TRANSACTION_MS)
    t.equal(IDLE_IN_TRANSACTION_MS, 60_000)
  })

  t.test('the engines run on a pool of their own: requests are answered while every engine connection is busy', { skip: !process.env.DATABASE_URL && 'two pools on a PostgreSQL server only' }, async (t) => {
    const { sql, engineSql } = h.app.ctx.pg
    t.not(engineSql, sql)
    // Every engine connection held in a transaction (as engine work piling up would hold them).
    const release: (() => void)[] = []
    const held = Array.from({ length: ENGINE_POOL }, () =>
      engineSql.begin(async (tx) => {
        await tx`select 1`
        await new Promise<void>((r) => release.push(r))
      }),
    )
    t.teardown(async () => {
      for (const r of release) r()
      await Promise.all(held)
    })
    while (release.length < ENGINE_POOL) await new Promise((r) => setTimeout(r, 10))
    const [busy] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'respin-engines' and state = 'idle in transaction'`
    t.equal(busy!.n, ENGINE_POOL, 'the engines\' connections are all taken')
    const tenant = await h.createTenant()
    const started = Date.now()
    const res = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'p1' } })
    t.equal(res.status, 201)
    t.ok(Date.now() - started < 2000, `a request is answered meanwhile (${Date.now() - started} ms)`)
  })
})

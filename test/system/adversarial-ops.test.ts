// Adversarial: operations, what an operator running Respin relies on. Configuration refusals (in process,
// and the admin CLI's), readiness probes, the OpenAPI document against real responses, metrics that move
// with real work, logs free of credentials, the ingestion rate limit across a tenant's keys and brands,
// webhook/outbox retention on a real restart, and SIGTERM under ingestion load (exit code, every
// acknowledged event kept). What test/system/*.test.ts, test/admin/* and test/http/drain.test.ts already
// prove is not repeated.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import WebSocket from 'ws'
import t from 'tap'
import { ConfigError, ENV_VARS, loadConfig } from '../../src/config.ts'
import { isolateDatabase, seedEmbeddedPostgres, startHarness } from '../helpers/harness.ts'
import { nodeArgs, runCli, runCliWith } from '../helpers/processes.ts'
import { rawRequest } from '../helpers/raw-http.ts'
import { reapOnExit } from '../helpers/reap.ts'
import { pollUntil, sleep, waitFor } from '../helpers/wait.ts'
import { startReceiver } from '../webhooks/helpers.ts'


await isolateDatabase() // every process below (harnesses, the spawned API process, the CLI) shares this file's database

// ---------------------------------------------------------------------------------------------------
// The admin CLI, started first (separate processes, each a few seconds of start-up): its runs go on while
// the harness below starts. README, Configuration: "a bad value stops the process with a message (exit
// code 78)"; the CLI reads the same configuration (src/admin/cli.ts calls loadConfig).
// ---------------------------------------------------------------------------------------------------
const cliDir = mkdtempSync(join(tmpdir(), 'respin-ops-cli-'))
t.teardown(() => rmSync(cliDir, { recursive: true, force: true }))
const cliWith = (env: Record<string, string>, ...args: string[]) => runCliWith(env, cliDir, ...args)
const cliRuns = Promise.all([
  cliWith({ LOG_LEVEL: 'verbose' }, 'tenant:list'),
  cliWith({ DATABASE_URL: 'mysql://nope' }, 'tenant:list'),
  runCli(cliDir, 'tenant:list', '--tenatn', 'x'),
  runCli(cliDir, 'tenant:create', '--name'),
  runCli(cliDir, '--help'),
])
cliRuns.catch(() => {})
/** A Node.js crash report rather than a message: a stack frame line, or node's own banner. */
const crashTrace = (text: string) => /^\s+at .+[(:]\d+/m.test(text) || /Node\.js v\d+/.test(text)


interface Proc {
  child: ChildProcess
  listening: Promise<number>
  exited: Promise<number | null>
  output(): string
}
function startProcess(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [...nodeArgs(env), 'src/main.ts'], {
    cwd: new URL('../../', import.meta.url),
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  reapOnExit(child)
  let out = ''
  const listening = new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c
      const m = /"port":(\d+),[^\n]*"msg":"respin listening"/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${out.slice(-2000)}`)))
  })
  listening.catch(() => {})
  child.stderr!.on('data', (c: Buffer) => (out += c))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, listening, exited, output: () => out }
}

// Node timers hold at most 2^31-1 ms (~24.8 days): a longer delay is silently set to 1 ms
// (TimeoutOverflowWarning). A timeout setting past it must be refused, or capped, never turned into 1 ms.
// An API process of its own (embedded stores whatever the run's URLs: its engines stay out of the file's
// database), started now, in parallel with the harness below.
const overflowEnv = { HTTP_BODY_TIMEOUT_MS: '3000000000', WEBHOOK_RETENTION_DAYS: '99999999' }
const overflowRefused = (() => {
  try {
    loadConfig(overflowEnv)
    return false
  } catch {
    // Refused at start, each value on its own and naming it: what the tests below accept as the fix.
    for (const [name, value] of Object.entries(overflowEnv)) {
      const refused = (() => {
        try {
          loadConfig({ [name]: value })
          return undefined
        } catch (err) {
          return err
        }
      })()
      if (!(refused instanceof ConfigError) || !refused.message.includes(name)) throw new Error(`${name}=${value} is not refused on its own`)
    }
    return true
  }
})()
const overflowDir = mkdtempSync(join(tmpdir(), 'respin-ops-overflow-'))
t.teardown(() => rmSync(overflowDir, { recursive: true, force: true }))
const overflowAdmin = `admin-${randomBytes(12).toString('hex')}`
const overflowProc = overflowRefused
  ? undefined
  : seedEmbeddedPostgres(overflowDir).then(() =>
      startProcess({ ...overflowEnv, DATA_DIR: overflowDir, DATABASE_URL: '', REDIS_URL: '', CLICKHOUSE_URL: '', ADMIN_KEY: overflowAdmin, LOG_LEVEL: 'info' }),
    )
overflowProc?.catch(() => {})
t.teardown(async () => {
  const p = await overflowProc?.catch(() => undefined)
  if (p && p.child.exitCode === null) {
    p.child.kill('SIGTERM')
    await p.exited
  }
})

// ---------------------------------------------------------------------------------------------------
// The main harness: its own embedded data directory (reopened by a spawned API process at the end of the
// file), metrics on, every log line captured at debug level.
// ---------------------------------------------------------------------------------------------------
const dataDir = mkdtempSync(join(tmpdir(), 'respin-ops-'))
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
if (!process.env.DATABASE_URL) await seedEmbeddedPostgres(dataDir)
const METRICS_TOKEN = `metrics-${randomBytes(12).toString('hex')}`
let rawLog = ''
const destination = new Writable({
  write(chunk: Buffer, _enc, done) {
    rawLog += chunk.toString()
    done()
  },
})
const RATE = 4
const h = await startHarness(t, {
  env: { DATA_DIR: dataDir, METRICS_TOKEN, LOG_LEVEL: 'debug', WEBHOOK_ALLOW_PRIVATE: 'true', RATE_LIMIT_INGEST_PER_MIN: String(RATE), WEBHOOK_RETRY_DELAYS: '1,1,1,1' },
  logDestination: destination,
})
/** Every credential this file creates, grepped for in the logs at the end. */
const secrets: string[] = [METRICS_TOKEN, h.adminKey]

// ---------------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------------

t.test('every variable refuses a bad value with a ConfigError that names it (nothing falls back to a default)', async (t) => {
  // README, Configuration: "Read once from the environment at start; a bad value stops the process with a
  // message (exit code 78)". One plainly wrong value per variable the service reads.
  const badValues: Record<string, string> = {
    PORT: '70000', HOST: '', ADMIN_KEY: 'short', DATA_DIR: '', DATABASE_URL: 'mysql://x', CLICKHOUSE_URL: 'tcp://x:9000',
    REDIS_URL: 'http://x', RATE_LIMIT_INGEST_PER_MIN: '-5', WEBHOOK_TIMEOUT_MS: '0', WEBHOOK_RETRY_DELAYS: '60,300',
    WEBHOOK_ALLOW_PRIVATE: 'yes', LOG_LEVEL: 'verbose', BODY_LIMIT_BYTES: '1mb', SEGMENT_RECOMPUTE_INTERVAL_MS: '1e3',
    INGEST_ACK_AFTER: 'redis', INGEST_FLUSH_INTERVAL_MS: '0', CAMPAIGN_ENGINE_POLL_MS: '-1', METRICS_TOKEN: 'short',
    LOG_REDACT: 'a,,b', EVENT_RETENTION_DAYS: '0', SECRET_KEY: 'too-short', WEBHOOK_RETENTION_DAYS: '0',
    PUBLIC_BASE_URL: 'ftp://x', DELIVERY_RETRY_DELAYS: '1,2,3', DELIVERY_CHECK_MAX_AGE_MS: '0', TRACKING_SECRET: 'short',
    HTTP_ENGINE: 'express', HTTP_HEADERS_TIMEOUT_MS: '0', HTTP_BODY_TIMEOUT_MS: '10s', GAMIFICATION_TICK_MS: '0', EVENT_STREAM_LOOPS: '65',
    RESPONSE_SCHEMA_CHECK: 'on',
  }
  const missing = ENV_VARS.filter((v) => !(v in badValues) && v !== 'HOST' && v !== 'DATA_DIR')
  t.same(missing, [], 'a bad value is tried for every variable')
  const bad: string[] = []
  for (const [name, value] of Object.entries(badValues)) {
    if (value === '') continue // empty means unset (config.ts), by design
    try {
      loadConfig({ [name]: value })
      bad.push(`${name}=${value} accepted`)
    } catch (err) {
      if (!(err instanceof ConfigError) || !err.message.includes(name)) bad.push(`${name}=${value}: ${String(err)}`)
    }
  }
  t.same(bad, [])
})


t.test('URL variables: a value that is no URL is refused at start, not used as is', async (t) => {
  // README: "a bad value stops the process with a message (exit code 78)". These pass the patterns but no
  // URL parser takes them: PUBLIC_BASE_URL="http://mail example.com" would put a space into every link
  // of every email, silently.
  const accepted: string[] = []
  for (const [name, value] of [
    ['PUBLIC_BASE_URL', 'http://mail example.com'],
    ['PUBLIC_BASE_URL', 'https://[not-an-ip]'],
    ['CLICKHOUSE_URL', 'http://click house:8123/respin'],
    ['DATABASE_URL', 'postgres://user@db host:5432/respin'],
    ['REDIS_URL', 'redis://cache host:6379'],
  ] as const) {
    let parses = true
    try {
      new URL(value)
    } catch {
      parses = false
    }
    t.notOk(parses, `${value} is no URL`)
    try {
      loadConfig({ [name]: value })
      accepted.push(`${name}=${value}`)
    } catch (err) {
      t.ok(err instanceof ConfigError && err.message.includes(name), String(err))
    }
  }
  t.same(accepted, [])
})

t.test('HTTP_BODY_TIMEOUT_MS over 2^31-1 ms is refused at start, or else honoured (was: every body in a second packet got 408 at once)', async (t) => {
  // README: HTTP_BODY_TIMEOUT_MS is the "longest pause between body chunks, else 408". A 3e9 ms (35 days)
  // pause allowance cannot make a 50 ms pause fatal.
  if (!overflowProc) {
    t.pass('refused at start')
    return
  }
  const p = await overflowProc
  const port = await p.listening
  const admin = async (path: string, body: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/admin${path}`, { method: 'POST', headers: { 'x-api-key': overflowAdmin, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return ((await res.json()) as { data: { id: string; key: string } }).data
  }
  const tenant = await admin('/tenants', { name: 'overflow' })
  await admin(`/tenants/${tenant.id}/brands`, { name: 'main', slug: 'main' })
  const key = (await admin(`/tenants/${tenant.id}/keys`, { name: 'k' })).key
  const body = JSON.stringify({ external_id: 'slow-body' })
  const res = await rawRequest(port, [
    `POST /api/v1/players HTTP/1.1\r\nHost: respin\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
    body,
  ], { gapMs: 50, waitMs: 3000, responses: 1 })
  t.same(res.statuses, [201], res.text.split('\r\n\r\n')[1]?.slice(0, 120) ?? '')
})

t.test('WEBHOOK_RETENTION_DAYS too large for PostgreSQL is refused at start, or else pruned without errors (was: an error every second, nothing pruned)', async (t) => {
  // EVENT_RETENTION_DAYS is bounded to six digits (config.ts); WEBHOOK_RETENTION_DAYS is not. An operator
  // who writes a huge value to "keep everything" gets an error-log storm and no pruning at all.
  if (!overflowProc) {
    t.pass('refused at start')
    return
  }
  const p = await overflowProc
  await p.listening
  await sleep(1500)
  const failures = p.output().split('\n').filter((l) => l.includes('webhook-upkeep') && l.includes('failed'))
  t.same(failures.map((l) => (JSON.parse(l) as { err?: { message?: string } }).err?.message), [], 'the retention upkeep runs without errors')
  p.child.kill('SIGTERM') // done with it: the machine's cores are shared
  await p.exited
})


// ---------------------------------------------------------------------------------------------------
// Admin CLI
// ---------------------------------------------------------------------------------------------------

t.test('admin CLI: a bad configuration value is a one-line message and exit 78, as for the server', async (t) => {
  const [badLevel, badDb] = await cliRuns
  for (const [label, r] of [['LOG_LEVEL=verbose', badLevel], ['DATABASE_URL=mysql://nope', badDb]] as const) {
    t.equal(r.status, 78, `${label}: exit code`)
    t.match(r.stderr, /invalid configuration: /, `${label}: the message`)
    t.notOk(crashTrace(r.stderr), `${label}: no stack trace: ${r.stderr.slice(0, 200)}`)
  }
})

t.test('admin CLI: an unknown option or an option without its value is a usage error (exit 2 and the usage), not a crash', async (t) => {
  const [, , unknown, noValue] = await cliRuns
  for (const [label, r] of [['--tenatn', unknown], ['--name without a value', noValue]] as const) {
    t.equal(r.status, 2, `${label}: exit code`)
    t.match(r.stderr, /usage: npm run admin/, `${label}: the usage`)
    t.notOk(crashTrace(r.stderr), `${label}: no stack trace: ${r.stderr.slice(0, 200)}`)
  }
})

t.test('admin CLI: --help (README: "`npm run admin -- --help`") prints the usage', async (t) => {
  const help = (await cliRuns)[4]
  t.match(help.stdout, /usage: npm run admin -- <command>/)
  for (const cmd of ['bootstrap', 'tenant:create', 'tenant:list', 'brand:create', 'key:create', 'key:list', 'key:revoke']) t.match(help.stdout, cmd)
})

t.test('admin CLI: --help alone exits 0, as asked-for help does', async (t) => {
  // README, Commands: "`npm run admin -- --help`" is how the CLI documents itself; a script or a CI step
  // running it must not see a failure.
  const help = (await cliRuns)[4]
  t.equal(help.status, 0)
})

// ---------------------------------------------------------------------------------------------------
// Health
// ---------------------------------------------------------------------------------------------------

t.test('HEAD on the health probes answers like GET, without a body', async (t) => {
  // RFC 9110 §9.1: "All general-purpose servers MUST support the methods GET and HEAD"; load balancers
  // and uptime checkers probe with HEAD. The readiness answer must not depend on the method.
  for (const path of ['/health', '/health/live']) {
    const get = await h.request('GET', path)
    const head = await h.request('HEAD', path)
    t.equal(head.status, get.status, `HEAD ${path}`)
    t.equal(head.text, '', 'no body')
  }
})

t.test('/health body: the spec fields and nothing secret, /health/live is constant', async (t) => {
  const res = await h.request('GET', '/health')
  // 200 ok, or 503 degraded when a check is slow on a loaded machine (the 1 s PostgreSQL check): both in the spec's shape.
  t.ok(res.status === 200 || res.status === 503, `status ${res.status}`)
  t.match(res.body, { status: res.status === 200 ? 'ok' : 'degraded', version: String, service: 'respin', checks: Object })
  t.ok(!Number.isNaN(Date.parse(res.body.timestamp)))
  for (const [name, check] of Object.entries<{ status: string }>(res.body.checks)) t.ok(['ok', 'embedded', 'fail'].includes(check.status), `${name}: ${check.status}`)
  t.notMatch(res.text, /postgres(ql)?:\/\/|redis:\/\/|[a-z]+:\/\/[^/\s"]*:[^/\s"]*@/, 'no connection URL in a public body')
  t.same((await h.request('GET', '/health/live')).body, { status: 'ok' })
})

// ---------------------------------------------------------------------------------------------------
// OpenAPI: the served document describes what the server actually answers
// ---------------------------------------------------------------------------------------------------

const doc = (await h.request('GET', '/openapi.json')).body as any
const ajv = new (Ajv2020 as any)({ strict: false, allErrors: true })
;(addFormats as any)(ajv)
ajv.addSchema({ ...doc, $id: 'openapi' })
const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1')
const docPath = (path: string) => `/api/v1${path.replace(/:(\w+)/g, '{$1}').split('?')[0]}`

/** Why a response does not match the document ('' when it does). */
function undocumented(method: string, template: string, res: { status: number; headers: Headers; body: unknown }): string {
  const path = docPath(template)
  const op = doc.paths[path]?.[method.toLowerCase()]
  if (!op) return `${method} ${path}: not in the document`
  const declared = op.responses[String(res.status)]
  if (!declared) return `${method} ${path}: status ${res.status} not declared`
  const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim()
  if (!declared.content?.[type]) return `${method} ${path} ${res.status}: content type ${type} not declared`
  if (type !== 'application/json') return ''
  const validate = ajv.getSchema(`openapi#/paths/${esc(path)}/${method.toLowerCase()}/responses/${res.status}/content/${esc(type)}/schema`)
  if (!validate(res.body)) return `${method} ${path} ${res.status}: ${ajv.errorsText(validate.errors)}`
  return ''
}

t.test('OpenAPI: every parameterless GET answers with a declared status and a body valid against its declared schema', async (t) => {
  const tenant = await h.createTenant()
  const bad: string[] = []
  let checked = 0
  for (const [path, ops] of Object.entries<any>(doc.paths)) {
    if (!ops.get || path.includes('{') || path.startsWith('/api/v1/docs')) continue
    const template = path.replace(/^\/api\/v1/, '')
    const res = await h.request('GET', template, { key: template.startsWith('/admin/') ? h.adminKey : tenant.key })
    const why = undocumented('GET', template, res)
    if (why) bad.push(why)
    checked++
  }
  t.ok(checked > 20, `${checked} routes checked`)
  t.same(bad, [])
})

t.test('OpenAPI: writes, reads by id and error answers match their declared schemas', async (t) => {
  const tenant = await h.createTenant()
  const bad: string[] = []
  const check = async (method: string, template: string, path: string, opts: { key?: string; body?: unknown; query?: Record<string, string> } = {}) => {
    const res = await h.request(method, path, { key: tenant.key, ...opts })
    const why = undocumented(method, template, res)
    if (why) bad.push(`${why} (${res.text.slice(0, 100)})`)
    return res
  }
  const player = await check('POST', '/players', '/players', { body: { external_id: 'oa-1', email: 'oa@example.com', metadata: { vip: true } } })
  const id = player.body.data.id as string
  await check('GET', '/players/:id', `/players/${id}`)
  await check('PATCH', '/players/:id', `/players/${id}`, { body: { status: 'suspended' } })
  await check('GET', '/players/:id', `/players/${randomUUID()}`) // 404
  await check('POST', '/players', '/players', { body: { external_id: 'oa-1' } }) // duplicate
  await check('POST', '/players', '/players', { body: { email: 42 } }) // 400
  await check('GET', '/players', '/players', { key: 'rsp_nope' }) // 401
  await check('POST', '/events', '/events', { body: { events: [{ event_id: 'oa-e1', player_id: 'oa-1', event_type: 'deposit', payload: { amount: 5, currency: 'EUR' } }] } })
  const seg = await check('POST', '/segments', '/segments', { body: { name: 'oa', type: 'dynamic', rules: { all: [{ field: 'status', op: 'eq', value: 'active' }] } } })
  if (seg.body?.data?.id) await check('GET', '/segments/:id', `/segments/${seg.body.data.id}`)
  const level = await check('POST', '/gamification/levels', '/gamification/levels', { body: { name: 'Bronze', tier: 1, min_points: 0 } })
  if (level.body?.data?.id) await check('DELETE', '/gamification/levels/:id', `/gamification/levels/${level.body.data.id}`)
  const rec = await startReceiver(t)
  const hook = await check('POST', '/webhooks', '/webhooks', { body: { url: rec.url('/oa'), events: ['player.created'] } })
  if (hook.body?.data?.id) {
    secrets.push(hook.body.data.secret)
    await check('POST', '/webhooks/:id/ping', `/webhooks/${hook.body.data.id}/ping`)
    await check('GET', '/webhooks/:id/deliveries', `/webhooks/${hook.body.data.id}/deliveries`)
  }
  const key = await h.request('POST', `/admin/tenants/${tenant.id}/keys`, { key: h.adminKey, body: { name: 'oa', scopes: ['read'] } })
  const whyKey = undocumented('POST', '/admin/tenants/:tenantId/keys', key)
  if (whyKey) bad.push(whyKey)
  secrets.push(key.body.data.key)
  await check('GET', '/analytics/summary', '/analytics/summary')
  t.same(bad, [])
})

t.test('OpenAPI: a route that reads a body declares 408, which docs/errors.md says it answers when the body stalls', async (t) => {
  // docs/errors.md: REQUEST_TIMEOUT 408 "the request body stopped arriving for HTTP_BODY_TIMEOUT_MS".
  const missing: string[] = []
  for (const [path, ops] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(ops)) if (op.requestBody && !op.responses['408']) missing.push(`${method.toUpperCase()} ${path}`)
  }
  t.same(missing.slice(0, 5), [], `${missing.length} body routes without 408`)
})

// ---------------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------------

const scrape = async () => {
  const res = await fetch(`${h.origin}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  if (res.status !== 200) throw new Error(`metrics: ${res.status}`)
  return res.text()
}
/** The sum of a metric's samples whose labels include every given one. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]))
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3])
  }
  return sum
}

t.test('metrics: the token only as a Bearer header; not in the query string, not as an API key', async (t) => {
  for (const [label, url, headers] of [
    ['query token', `${h.origin}/metrics?token=${METRICS_TOKEN}`, {}],
    ['query access_token', `${h.origin}/metrics?access_token=${METRICS_TOKEN}`, {}],
    ['x-api-key', `${h.origin}/metrics`, { 'x-api-key': METRICS_TOKEN }],
    ['the admin key', `${h.origin}/metrics`, { authorization: `Bearer ${h.adminKey}` }],
  ] as const) {
    const res = await fetch(url, { headers })
    t.equal(res.status, 401, label)
    t.equal(((await res.json()) as { code: string }).code, 'UNAUTHORIZED')
  }
})

t.test('metrics: counters move with real work (a webhook delivered, a retried one, ingestion outcomes)', async (t) => {
  const tenant = await h.createTenant()
  const rec = await startReceiver(t)
  rec.on('/fail', (_r, res) => {
    res.statusCode = 500
    res.end('no')
  })
  const ok = (await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rec.url('/ok'), events: ['player.created'] } })).body.data
  const failing = (await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rec.url('/fail'), events: ['player.created'] } })).body.data
  secrets.push(ok.secret, failing.secret)
  await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'junk_*', action: 'reject' }, { match: 'noise_*', action: 'ignore' }] })
  const before = await scrape()
  t.equal((await h.request('POST', `/webhooks/${ok.id}/ping`, { key: tenant.key })).status, 202)
  t.equal((await h.request('POST', `/webhooks/${failing.id}/ping`, { key: tenant.key })).status, 202)
  const ingest = await h.request('POST', '/events', {
    key: tenant.key,
    body: { events: [{ event_id: 'm-1', player_id: 'metrics-player-7', event_type: 'login' }, { event_id: 'm-2', player_id: 'metrics-player-7', event_type: 'junk_x' }, { event_id: 'm-3', player_id: 'metrics-player-7', event_type: 'noise_y' }] },
  })
  t.equal(ingest.status, 200, ingest.text)
  await waitFor('both pings attempted', () => rec.at('/ok').length >= 1 && rec.at('/fail').length >= 1)
  const after = await pollUntil(scrape, (text) => ['retrying', 'successful'].every((o) => sample(text, 'respin_delivery_outcomes_total', { kind: 'webhook', outcome: o }) > sample(before, 'respin_delivery_outcomes_total', { kind: 'webhook', outcome: o })), 5000, 100)
  const moved = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels) - sample(before, name, labels)
  t.ok(moved('respin_delivery_outcomes_total', { kind: 'webhook', outcome: 'successful' }) >= 1, 'webhook successful')
  t.ok(moved('respin_delivery_outcomes_total', { kind: 'webhook', outcome: 'retrying' }) >= 1, 'webhook retrying')
  t.ok(moved('respin_queue_attempts_total', { queue: 'webhook-dispatch' }) >= 2, 'webhook attempts')
  t.ok(moved('respin_ingest_events_total', { outcome: 'stored' }) >= 1, 'stored')
  t.ok(moved('respin_ingest_events_total', { outcome: 'rejected' }) >= 1, 'rejected')
  t.ok(moved('respin_ingest_events_total', { outcome: 'ignored' }) >= 1, 'ignored')
  t.ok(moved('respin_http_request_duration_seconds_count', { route: '/webhooks/:id/ping', method: 'POST', status: '202' }) >= 2, 'the ping route by template')
  // docs/operating.md: "Labels are names from code only ... never a tenant, brand, player or key id".
  for (const v of [tenant.id, tenant.brand.id, ok.id, failing.id, 'metrics-player-7', tenant.key, String(rec.port)]) t.notOk(after.includes(v), `no ${v} in the metrics`)
})

t.test('metrics: every sample is a respin_, nodejs_ or process_ metric, and label values are short names', async (t) => {
  const text = await scrape()
  const bad: string[] = []
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? \S+$/.exec(line)
    if (!m) {
      bad.push(`unparsable: ${line.slice(0, 80)}`)
      continue
    }
    if (!/^(respin_|nodejs_|process_)/.test(m[1]!)) bad.push(`name: ${m[1]}`)
    for (const [, k, v] of (m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) {
      if (k === 'le' || k === 'quantile' || k === 'version' || k === 'type' || k === 'space' || k === 'kind' && m[1]!.startsWith('nodejs_')) continue
      if (!/^[\w/:.+-]{1,64}$/.test(v!) || /[0-9a-f]{8}-[0-9a-f]{4}-/.test(v!)) bad.push(`${m[1]} ${k}="${v}"`)
    }
  }
  t.same([...new Set(bad)].slice(0, 10), [])
})

// ---------------------------------------------------------------------------------------------------
// The ingestion rate limit (spec Limits: "per tenant per minute")
// ---------------------------------------------------------------------------------------------------

t.test('rate limit: one budget per tenant, whichever key, brand or means of sending the key; another tenant is untouched', async (t) => {
  // Avoid straddling the fixed minute window.
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 6_000) await sleep(left + 50)
  const tenant = await h.createTenant()
  const other = await h.createTenant()
  const second = await tenant.createBrand('second')
  const pinned = await tenant.createKey({ name: 'pinned', brand: second.slug, scopes: ['events:write'] })
  const ingestOnly = await tenant.createKey({ name: 'ingest', scopes: ['events:write'] })
  secrets.push(pinned.key, ingestOnly.key, tenant.key, other.key)
  const e = (n: number) => ({ event_id: `rl-${n}-${randomUUID()}`, player_id: 'rl', event_type: 'login' })
  const sends = [
    () => h.request('POST', '/events', { key: tenant.key, body: e(1) }),
    () => h.request('POST', '/events', { headers: { authorization: `Bearer ${ingestOnly.key}` }, body: e(2) }),
    () => h.request('POST', '/events', { query: { api_key: pinned.key }, body: e(3) }),
    () => h.request('POST', '/events', { key: tenant.key, headers: { 'x-brand': 'second' }, body: e(4) }),
  ]
  t.equal(sends.length, RATE)
  for (const send of sends) t.equal((await send()).status, 200)
  const over = [
    await h.request('POST', '/events', { key: pinned.key, body: e(5) }),
    await h.request('POST', '/events', { query: { api_key: ingestOnly.key }, body: e(6) }),
  ]
  for (const res of over) {
    t.equal(res.status, 429)
    t.match(res.body, { code: 'RATE_LIMITED', error: String, request_id: String })
    const retry = Number(res.headers.get('retry-after'))
    t.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${retry}`)
  }
  // A refused request (bad body, wrong key) spends nothing of a budget, and other tenants have their own.
  t.equal((await h.request('POST', '/events', { key: other.key, body: { events: [] } })).status, 400)
  for (let i = 0; i < RATE; i++) t.equal((await h.request('POST', '/events', { key: other.key, body: e(10 + i) })).status, 200, `other tenant ${i}`)
  // Other routes are not rate limited (spec: only ingestion has a stated limit).
  t.equal((await h.request('GET', '/players', { key: tenant.key })).status, 200)
})

// ---------------------------------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------------------------------

t.test('logs: every request line carries the request id the client got; no credential of this file is ever logged', async (t) => {
  const tenant = await h.createTenant()
  secrets.push(tenant.key)
  const smtpPassword = `Smtp-${randomBytes(8).toString('hex')}`
  secrets.push(smtpPassword)
  t.equal((await h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://user:${smtpPassword}@127.0.0.1:1`, from: 'ops@example.com' } })).status, 200)
  const ids: string[] = []
  for (const [m, p, key] of [['GET', '/players', tenant.key], ['GET', '/players', 'rsp_wrongwrongwrong'], ['GET', '/nowhere', undefined]] as const) {
    const res = await h.request(m, p, { key })
    ids.push(res.headers.get('x-request-id') ?? 'missing')
  }
  // The key in the query string (documented for POST /events) is a credential too.
  const q = await h.request('GET', '/players', { query: { api_key: tenant.key } })
  ids.push(q.headers.get('x-request-id') ?? 'missing')
  await sleep(100)
  const requestLines = rawLog.split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l) as { reqId: string })
  for (const id of ids) t.equal(requestLines.filter((l) => l.reqId === id).length, 1, `one request line for ${id}`)
  const leaked = [...new Set(secrets.filter(Boolean))].filter((s) => rawLog.includes(s))
  t.same(leaked.map((s) => `${s.slice(0, 6)}…`), [], `none of ${secrets.length} credentials in ${rawLog.length} bytes of log`)
})

t.test('logs: a request the HTTP layer refuses (431 head too large, 400 without Host) has its one log line under the request id it was given', async (t) => {
  // docs/operating.md: "Every request writes exactly one line, msg: \"request\", with reqId (... echoed in the
  // response)"; docs/errors.md: each error carries an x-request-id, which is what a client reports to the
  // operator. A refused request's id must lead somewhere in the log.
  const cases: [string, string][] = [
    ['431', `GET /api/v1/players HTTP/1.1\r\nHost: respin\r\nx-filler: ${'a'.repeat(17_000)}\r\n\r\n`],
    ['400 no Host', 'GET /api/v1/players HTTP/1.1\r\nx-request-id: ops-nohost-1\r\n\r\n'],
  ]
  for (const [label, raw] of cases) {
    const res = await rawRequest(h.app.port, [raw], { waitMs: 3000, responses: 1 })
    const id = /x-request-id: (\S+)/i.exec(res.text)?.[1]
    t.ok(id, `${label}: answered ${res.statuses.join(',')} with a request id`)
    await sleep(100)
    t.match(rawLog, new RegExp(`"reqId":"${id}"`), `${label}: a log line carries ${id}`)
  }
})

// ---------------------------------------------------------------------------------------------------
// Retention and shutdown, on the real process: the harness's data is backdated, the harness closed, and
// the API process (`npm start`'s command) started on the same stores.
// ---------------------------------------------------------------------------------------------------

let inboxCloseCode: number | undefined

t.test('retention and SIGTERM on the real process', async (t) => {
  // --- Retention (README: WEBHOOK_RETENTION_DAYS, default 30: "completed webhook deliveries (with their
  // attempt log) and dispatched outbox rows older than this are pruned"; docs/webhooks.md: every minute).
  const tenant = await h.createTenant()
  secrets.push(tenant.key)
  const rec = await startReceiver(t)
  const hook = (await h.request('POST', '/webhooks', { key: tenant.key, body: { url: rec.url('/keep'), events: ['player.created'] } })).body.data
  secrets.push(hook.secret)
  for (let i = 0; i < 3; i++) t.equal((await h.request('POST', `/webhooks/${hook.id}/ping`, { key: tenant.key })).status, 202)
  const sql = h.app.ctx.sql
  const delivered = await waitFor('three pings delivered', async () => {
    const rows = await sql<{ id: string }[]>`select id from webhook_deliveries where endpoint_id = ${hook.id} and status = 'successful' order by created_at`
    return rows.length === 3 ? rows.map((r) => r.id) : undefined
  })
  const [oldDone, youngDone, oldFailed] = delivered as [string, string, string]
  await sql`update webhook_deliveries set completed_at = now() - interval '40 days', created_at = now() - interval '40 days' where id = ${oldDone}`
  await sql`update webhook_deliveries set completed_at = now() - interval '29 days', created_at = now() - interval '29 days' where id = ${youngDone}`
  await sql`update webhook_deliveries set status = 'failed', completed_at = now() - interval '31 days', created_at = now() - interval '31 days' where id = ${oldFailed}`
  // A delivery still pending (its next attempt far off) is not completed, however old.
  const [pending] = await sql<{ id: string }[]>`
    insert into webhook_deliveries (tenant_id, endpoint_id, event, body, status, attempt_count, next_attempt_at, run_at, created_at)
    values (${tenant.id}, ${hook.id}, 'webhook.ping', '{}', 'pending', 4, now() + interval '1 day', now() + interval '1 day', now() - interval '60 days')
    returning id`
  const outboxRows = await sql<{ id: string }[]>`select id from outbox where tenant_id = ${tenant.id} and dispatched_at is not null order by id`
  for (const ext of ['ret-1', 'ret-2']) t.equal((await h.request('POST', '/players', { key: tenant.key, body: { external_id: ext } })).status, 201)
  const outboxAll = await waitFor('the player.created outbox rows dispatched', async () => {
    const rows = await sql<{ id: string }[]>`select id from outbox where tenant_id = ${tenant.id} and dispatched_at is not null order by id`
    return rows.length >= outboxRows.length + 2 ? rows.map((r) => String(r.id)) : undefined
  })
  const oldOutbox = outboxAll[0]!
  const youngOutbox = outboxAll[outboxAll.length - 1]!
  await sql`update outbox set dispatched_at = now() - interval '45 days', created_at = now() - interval '45 days' where id = ${oldOutbox}`
  const [undispatched] = await sql<{ id: string }[]>`
    insert into outbox (tenant_id, brand_id, event, data, created_at) select tenant_id, brand_id, event, data, now() - interval '50 days' from outbox where id = ${youngOutbox} returning id`.catch(() => [undefined])
  // Events older than EVENT_RETENTION_DAYS, dropped by the process started below (docs/operating.md,
  // Retention: "every process checks hourly", the first time shortly after it starts).
  const oldEvents = ['2003-01-10T10:00:00.000Z', '2003-01-20T10:00:00.000Z'].map((ts, i) => ({ event_id: `old-${i}`, player_id: 'ret-1', event_type: 'login', timestamp: ts }))
  const ingestOld = await h.request('POST', '/events', { key: tenant.key, body: { events: [...oldEvents, { event_id: 'recent-0', player_id: 'ret-1', event_type: 'login' }] } })
  t.equal(ingestOld.status, 200, ingestOld.text)

  // An inbox WebSocket open when the process stops (docs/delivery.md, In-app inbox).
  const wsPlayer = (await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'ws-1' } })).body.data.id as string
  const wsToken = (await h.request('POST', `/players/${wsPlayer}/inbox/token`, { key: tenant.key })).body.data.token as string
  const ws = new WebSocket(`${h.origin.replace('http', 'ws')}/api/v1/inbox/ws?token=${encodeURIComponent(wsToken)}`)
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  const wsClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
  const closingStarted = Date.now()
  await h.app.close()
  inboxCloseCode = await Promise.race([wsClosed, sleep(3000).then(() => -1)])
  t.ok(Date.now() - closingStarted < 10_000, 'an open inbox socket does not hold the shutdown')

  const adminKey = `admin-${randomBytes(12).toString('hex')}`
  const tracking = `tracking-${randomBytes(16).toString('hex')}`
  const env = { DATA_DIR: dataDir, ADMIN_KEY: adminKey, METRICS_TOKEN, TRACKING_SECRET: tracking, EVENT_RETENTION_DAYS: '365', SECRET_KEY: process.env.SECRET_KEY ?? 'respin-tests-shared-secret-box-key-0123456789' }
  const a = startProcess(env)
  const port = await a.listening
  const origin = `http://127.0.0.1:${port}`
  const call = async (method: string, path: string, key: string, body?: unknown) => {
    const res = await fetch(`${origin}/api/v1${path}`, { method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: res.status, body: (await res.json()) as any }
  }
  // The upkeep runs as the engines start; the list reads what is left.
  const listed = await pollUntil(
    async () => ((await call('GET', `/webhooks/${hook.id}/deliveries`, tenant.key)).body.data ?? []).map((d: { id: string }) => d.id) as string[],
    (ids) => !ids.includes(oldDone) && !ids.includes(oldFailed),
    8000,
    200,
  )
  t.notOk(listed.includes(oldDone), 'a successful delivery completed 40 days ago is pruned')
  t.notOk(listed.includes(oldFailed), 'a failed delivery completed 31 days ago is pruned')
  t.ok(listed.includes(youngDone), 'a delivery completed 29 days ago is kept')
  t.ok(listed.includes(pending!.id), 'a pending delivery is kept, however old')

  // --- SIGTERM under ingestion load (docs/http.md, Shutdown: "answers the requests in flight ... and exits
  // as soon as none is left (10 s at most)"; an acknowledged event is durable).
  const acked = new Set<string>()
  const outcomes = new Map<string, number>()
  let n = 0
  let stop = false
  const sender = async () => {
    while (!stop) {
      const ids = Array.from({ length: 10 }, () => `sig-${n++}`)
      try {
        const res = await call('POST', '/events', tenant.key, { events: ids.map((id) => ({ event_id: id, player_id: `p${n % 7}`, event_type: 'login' })) })
        outcomes.set(String(res.status), (outcomes.get(String(res.status)) ?? 0) + 1)
        if (res.status === 200) ids.forEach((id) => acked.add(id))
      } catch {
        outcomes.set('refused', (outcomes.get('refused') ?? 0) + 1) // the listener is closed: not acknowledged
        await sleep(20)
      }
    }
  }
  const senders = Array.from({ length: 3 }, sender)
  await waitFor('some events acknowledged', () => acked.size >= 30, 20_000)
  // Meanwhile the retention's first run (about 10 s after the start) went by.
  await waitFor('the retention drop of the process', () => /"msg":"event retention: dropped partitions"/.test(a.output()), 25_000)
  t.match(a.output(), /"partitions":\["200301"\]/, 'January 2003 dropped, nothing else')
  const signalled = Date.now()
  a.child.kill('SIGTERM')
  const code = await a.exited
  const took = Date.now() - signalled
  stop = true
  await Promise.all(senders)
  t.equal(code, 0, 'exit code 0')
  t.ok(took < 10_000, `stopped in ${took} ms`)
  t.match(a.output(), /"msg":"stopped"/)
  t.notMatch(a.output(), /unclean shutdown|"level":50/, 'no error logged while stopping')
  t.notOk(outcomes.has('500'), `no 500 while stopping: ${JSON.stringify([...outcomes])}`)
  for (const s of [adminKey, tracking, METRICS_TOKEN, env.SECRET_KEY, tenant.key]) t.notOk(a.output().includes(s), `${s.slice(0, 8)}… not in the process output`)

  // The same stores again: every acknowledged event is there once; the outbox rows past the retention are gone.
  const h2 = await startHarness(t, { env: { DATA_DIR: dataDir, WEBHOOK_RETRY_DELAYS: '1,1,1,1' } })
  const exported = new Map<string, number>()
  let cursor: string | undefined
  for (;;) {
    const page = await h2.request('GET', '/export/events', { key: tenant.key, query: { limit: 1000, ...(cursor ? { cursor } : {}) } })
    t.equal(page.status, 200)
    for (const r of page.body.data as { event_id: string }[]) exported.set(r.event_id, (exported.get(r.event_id) ?? 0) + 1)
    if (!page.body.next_cursor || page.body.data.length === 0) break
    cursor = page.body.next_cursor
  }
  t.notOk(exported.has('old-0') || exported.has('old-1'), 'the events past the retention are gone')
  t.ok(exported.has('recent-0'), 'a recent event of the same player is kept')
  const lost = [...acked].filter((id) => !exported.has(id))
  const twice = [...exported].filter(([id, c]) => id.startsWith('sig-') && c > 1)
  t.same(lost, [], `${acked.size} acknowledged events, none lost`)
  t.same(twice, [], 'none stored twice')
  const left = await h2.app.ctx.sql<{ id: string }[]>`select id from outbox where id = any(${[oldOutbox, youngOutbox, ...(undispatched ? [undispatched.id] : [])]}::bigint[])`
  const leftIds = left.map((r) => String(r.id))
  t.notOk(leftIds.includes(oldOutbox), 'an outbox row dispatched 45 days ago is pruned')
  t.ok(leftIds.includes(youngOutbox), 'a recently dispatched outbox row is kept')
  if (undispatched) t.ok(leftIds.includes(String(undispatched.id)), 'an old row not yet dispatched when the process started is kept (dispatched now)')
})

t.test('shutdown closes an open inbox WebSocket with 1001 "going away", not by dropping the connection', async (t) => {
  // RFC 6455 §7.4.1: 1001 "indicates that an endpoint is \"going away\", such as a server going down";
  // 1006 is reserved for a connection that was lost without a close frame. A browser inbox client tells a
  // planned restart (reconnect now) from a network fault only by this code.
  t.equal(inboxCloseCode, 1001)
})

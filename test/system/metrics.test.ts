// GET /metrics (Prometheus text, METRICS_TOKEN bearer), the request histogram by route template, ingestion
// and queue metrics, bounded labels (no tenant, player or key ids), and the one log line per request with
// key material and PII redacted as configured (LOG_REDACT).
import { randomBytes, randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import t from 'tap'
import uWS from 'uWebSockets.js'
import type { AppContext } from '../../src/context.ts'
import { createMetrics } from '../../src/lib/metrics.ts'
import { registerMetricsRoute } from '../../src/system/metrics-route.ts'
import { startHarness } from '../helpers/harness.ts'
import { ev, post } from '../events/helpers.ts'
import { ingest, makePlayer, send, waitForStatus } from '../notifications/delivery-helpers.ts'

const token = `metrics-${randomBytes(12).toString('hex')}`
const lines: Record<string, unknown>[] = []
let rawLog = ''
const destination = new Writable({
  write(chunk: Buffer, _enc, done) {
    rawLog += chunk.toString()
    for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>)
    done()
  },
})
const h = await startHarness(t, { env: { METRICS_TOKEN: token, LOG_LEVEL: 'info', LOG_REDACT: 'player.external_id,custom_secret' }, logDestination: destination })

const scrape = (auth?: string) => fetch(`${h.origin}/metrics`, { headers: auth ? { authorization: auth } : {} })

t.test('GET /metrics needs the bearer token', async (t) => {
  const none = await scrape()
  t.equal(none.status, 401)
  const body = (await none.json()) as { code: string; request_id: string }
  t.equal(body.code, 'UNAUTHORIZED')
  // Like every error of the API (docs/errors.md): a request id of its own, in the body and the header.
  t.match(body.request_id, /^[\w-]+$/)
  t.not(body.request_id, 'metrics')
  t.equal(none.headers.get('x-request-id'), body.request_id)
  const own = await fetch(`${h.origin}/metrics`, { headers: { 'x-request-id': 'scrape-42' } })
  t.equal(own.headers.get('x-request-id'), 'scrape-42', "the caller's own id is echoed")
  t.equal(((await own.json()) as { request_id: string }).request_id, 'scrape-42')
  t.equal((await scrape(`Bearer ${token}x`)).status, 401)
  const ok = await scrape(`Bearer ${token}`)
  t.equal(ok.status, 200)
  t.match(ok.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  const text = await ok.text()
  t.match(text, /nodejs_eventloop_lag_seconds /, 'event-loop lag')
  t.match(text, /nodejs_heap_size_used_bytes /, 'heap')
})

t.test('requests by route template and status; ingestion outcomes; no ids as labels', async (t) => {
  const tenant = await h.createTenant()
  const playerId = randomUUID()
  t.equal((await h.request('GET', `/players/${playerId}`, { key: tenant.key })).status, 404)
  const created = await h.request('POST', '/players', { key: tenant.key, body: { external_id: `x-${playerId}`, email: 'metrics@example.com' } })
  t.equal(created.status, 201)
  const id = created.body.data.id as string
  t.equal((await h.request('GET', `/players/${id}`, { key: tenant.key })).status, 200)
  const first = ev({ player_id: 'pm-1' })
  t.equal((await post(h, tenant.key, { events: [first, ev({ player_id: 'pm-1' })] })).status, 200)
  t.equal((await post(h, tenant.key, first)).status, 200) // a duplicate
  t.equal((await fetch(`${h.origin}/no/such/${playerId}`)).status, 404)

  const text = await (await scrape(`Bearer ${token}`)).text()
  t.match(text, /respin_http_request_duration_seconds_count\{route="\/players\/:id",method="GET",status="404"\} [1-9]/)
  t.match(text, /respin_http_request_duration_seconds_count\{route="\/players\/:id",method="GET",status="200"\} [1-9]/)
  t.match(text, /respin_http_request_duration_seconds_count\{route="unmatched",method="other",status="404"\} [1-9]/)
  t.match(text, /respin_ingest_events_total\{outcome="stored"\} [2-9]/)
  t.match(text, /respin_ingest_events_total\{outcome="deduped"\} [1-9]/)
  t.match(text, /respin_ingest_group_events_count [1-9]/)
  t.match(text, /respin_queue_depth\{queue="ingest_spool"\} \d+/)
  t.match(text, /respin_queue_oldest_age_seconds\{queue="ingest_spool"\} [\d.e+-]+/)
  // Every engine on the shared work loop reports its queue the same way (here the webhook dispatcher's),
  // as do the outbox and the erasure jobs.
  for (const queue of ['webhook-dispatch', 'outbox', 'player_erasures']) t.match(text, new RegExp(`respin_queue_depth\\{queue="${queue}"\\} \\d+`), queue)
  for (const v of [tenant.id, playerId, id, tenant.brand.id, 'pm-1']) t.notOk(text.includes(v), `no ${v} in the metrics`)
})

t.test('every engine reports its queue; message outcomes; event-stream lag', async (t) => {
  const tenant = await h.createTenant()
  const player = await makePlayer(h, tenant)
  const sent = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'metrics' } })
  await waitForStatus(h, tenant, sent.notification_id, ['delivered'])
  // Withdrawn consent: suppressed when enqueued, an outcome all the same.
  await ingest(h, tenant, [{ player_id: player.externalId, event_type: 'consent_update', payload: { channel: 'in_app', granted: false } }])
  const stopped = await send(h, tenant, { player_id: player.id, channel: 'in_app', payload: { body: 'metrics' } })
  t.equal(stopped.queued, false)
  // The brand has no email channel configured: the dispatcher ends the message failed.
  const mailable = await makePlayer(h, tenant, { email: 'metrics-mail@example.com', consent: ['email'] })
  const unsendable = await send(h, tenant, { player_id: mailable.id, channel: 'email', payload: { subject: 's', body: 'b' } })
  t.match(await waitForStatus(h, tenant, unsendable.notification_id, ['failed', 'suppressed', 'delivered']), { status: 'failed' })

  const text = await (await scrape(`Bearer ${token}`)).text()
  // The delivery dispatcher, both campaign work loops and the event stream, like the webhook dispatcher.
  for (const queue of ['delivery', 'campaign-runs', 'campaign-journeys', 'event_stream']) {
    t.match(text, new RegExp(`respin_queue_depth\\{queue="${queue}"\\} \\d+`), `${queue} depth`)
    t.match(text, new RegExp(`respin_queue_oldest_age_seconds\\{queue="${queue}"\\} [\\d.e+-]+`), `${queue} oldest age`)
  }
  t.match(text, /respin_queue_attempts_total\{queue="delivery"\} [1-9]/, 'delivery attempts')
  t.match(text, /respin_queue_failures_total\{queue="delivery"\} [1-9]/, 'delivery failures')
  t.match(text, /respin_delivery_outcomes_total\{kind="message",outcome="failed",channel="email"\} [1-9]/)
  t.match(text, /respin_delivery_outcomes_total\{kind="message",outcome="delivered",channel="in_app"\} [1-9]/)
  t.match(text, /respin_delivery_outcomes_total\{kind="message",outcome="suppressed",channel="in_app"\} [1-9]/)
  t.match(text, /respin_consumer_lag_seconds\{consumer="event_stream"\} [\d.e+-]+/, 'event-stream lag')
  for (const v of [tenant.id, tenant.brand.id, player.id, player.externalId, sent.notification_id, 'metrics-mail@example.com']) t.notOk(text.includes(v), `no ${v} in the metrics`)
})

t.test('engine queues, outcomes and lag through the registry API', async (t) => {
  const m = createMetrics({ defaultMetrics: false })
  m.registerQueue('webhook_deliveries', () => ({ depth: 7, oldestAgeSeconds: 12.5 }))
  m.registerQueue('broken', () => Promise.reject(new Error('db down')))
  m.queueAttempt('webhook_deliveries', 3)
  m.queueFailure('webhook_deliveries')
  m.outcome('webhook', 'delivered')
  m.outcome('message', 'sent', 'email')
  m.registerLag('event_stream', () => 0.25)
  // A label value that is not a short name (an id, a URL) is folded into "other".
  m.queueAttempt(`tenant ${randomUUID()} / https://x`)
  m.observeRequest('/x/:id', 'GET', 200, 0.003)
  m.observeRequest('/x/:id', 'GET', 200, 20)
  const text = await m.render()
  t.match(text, /respin_http_request_duration_seconds_bucket\{route="\/x\/:id",method="GET",status="200",le="0.0025"\} 0\n/)
  t.match(text, /respin_http_request_duration_seconds_bucket\{route="\/x\/:id",method="GET",status="200",le="0.005"\} 1\n/)
  t.match(text, /respin_http_request_duration_seconds_bucket\{route="\/x\/:id",method="GET",status="200",le="\+Inf"\} 2\n/)
  t.match(text, /respin_http_request_duration_seconds_sum\{route="\/x\/:id",method="GET",status="200"\} 20\.003\n/)
  t.match(text, /respin_queue_depth\{queue="webhook_deliveries"\} 7/)
  t.match(text, /respin_queue_oldest_age_seconds\{queue="webhook_deliveries"\} 12\.5/)
  t.match(text, /respin_queue_attempts_total\{queue="webhook_deliveries"\} 3/)
  t.match(text, /respin_queue_failures_total\{queue="webhook_deliveries"\} 1/)
  t.match(text, /respin_queue_attempts_total\{queue="other"\} 1/)
  t.match(text, /respin_delivery_outcomes_total\{kind="message",outcome="sent",channel="email"\} 1/)
  t.match(text, /respin_consumer_lag_seconds\{consumer="event_stream"\} 0\.25/)
  t.match(text, /respin_metrics_probe_failures_total\{probe="broken"\} 1/, 'a failing probe is counted, the scrape still answers')
  t.notMatch(text, /respin_queue_depth\{queue="broken"\}/)
})

t.test('without METRICS_TOKEN there is no /metrics route', async (t) => {
  const app = uWS.App()
  const ctx = { config: { metricsToken: undefined }, metrics: createMetrics({ defaultMetrics: false }) } as unknown as AppContext
  registerMetricsRoute(app, ctx, { inFlight: 0, draining: false })
  app.any('/*', (res) => {
    res.writeStatus('404 Not Found').end('nothing')
  })
  const listen = await new Promise<uWS.us_listen_socket>((resolve) => app.listen('127.0.0.1', 0, (s) => resolve(s)))
  const port = uWS.us_socket_local_port(listen as unknown as uWS.us_socket)
  t.teardown(() => uWS.us_listen_socket_close(listen))
  t.equal((await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: 'Bearer anything-at-all-1234' } })).status, 404)
})

t.test('one log line per request, key material and PII redacted', async (t) => {
  const tenant = await h.createTenant()
  const before = lines.length
  const res = await h.request('POST', '/events', { key: tenant.key, body: ev({ player_id: 'pl-log', email: 'pii@example.com', phone: '+391234567' }), headers: { 'x-request-id': 'req-log-1' } })
  t.equal(res.status, 200)
  await h.request('GET', '/players', { query: { api_key: tenant.key, search: 'pii@example.com' } })
  const requestLines = lines.slice(before).filter((l) => l.msg === 'request')
  const line = requestLines.find((l) => l.reqId === 'req-log-1')
  t.ok(line, 'the request is logged')
  t.match(line, { route: '/events', status: 200, tenantId: tenant.id, method: 'POST' })
  t.type(line?.ms, 'number')
  t.equal(requestLines.filter((l) => l.reqId === 'req-log-1').length, 1, 'exactly one line')
  t.match(requestLines.find((l) => l.route === '/players'), { status: 200, tenantId: tenant.id })
  // Configured redaction: built-in paths plus LOG_REDACT's.
  h.app.ctx.log.info({
    email: 'a@example.com', player: { phone: '+39000', external_id: 'ext-42' }, headers: { authorization: `Bearer ${tenant.key}` }, custom_secret: 'shh',
    req: { headers: { authorization: 'Bearer nested-auth-9', 'x-api-key': 'nested-key-9' } },
    settings: { smtpUrl: 'smtp://u:smtp-pw-9@h', botToken: '1:bot-token-9', vapidPrivateKey: 'vapid-9' },
  }, 'redaction probe')
  const probe = lines.find((l) => l.msg === 'redaction probe')
  t.match(probe, {
    email: '[redacted]', player: { phone: '[redacted]', external_id: '[redacted]' }, headers: { authorization: '[redacted]' }, custom_secret: '[redacted]',
    req: { headers: { authorization: '[redacted]', 'x-api-key': '[redacted]' } },
    settings: { smtpUrl: '[redacted]', botToken: '[redacted]', vapidPrivateKey: '[redacted]' },
  })
  // A tracking or unsubscribe link's token is a credential of its own: the request line shows `:token`.
  const token = 'AAAAtrackingTokenThatIsNotValid0123456789'
  await fetch(`${h.origin}/t/u/${token}`, { method: 'POST' })
  const unsub = lines.slice(before).find((l) => l.msg === 'request' && l.route === '/t/u/:token')
  t.match(unsub, { path: '/t/u/:token' }, 'the token is not in the logged path')
  for (const secret of [tenant.key, 'pii@example.com', '+391234567', 'ext-42', 'shh', 'nested-auth-9', 'nested-key-9', 'smtp-pw-9', 'bot-token-9', 'vapid-9', token]) {
    t.notOk(rawLog.includes(secret), `${secret} never logged`)
  }
})

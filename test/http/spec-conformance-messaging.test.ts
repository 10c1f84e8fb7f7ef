// Conformance of the messaging routes (campaigns, notifications, outbound webhooks) to the documents,
// statement by statement, over real HTTP against the real server and stores, with a real node:http webhook
// receiver and the standardwebhooks library. What test/campaigns/*, test/notifications/* and
// test/webhooks/* already pin down is not repeated; this file checks what they leave out:
// - spec "States and transitions → Campaign status": the whole 6×6 matrix of PATCH moves and DELETE from
//   each status, with `completed` reached by the engine itself (not written behind the API's back);
// - contract-engines §4 `stats`: the twelve counters on GET, in the list and in campaign.completed, and the
//   list keeping up with GET ("current within a few seconds");
// - contract-engines §4 boundaries (control_group_percent 0..50, delay_seconds from 0);
// - spec "Outbound webhooks" + contract-engines §2: the envelope and headers of messaging events exactly,
//   the delivery log entry of contract.md "Delivery", a non-ASCII body signed over its raw bytes;
// - contract-engines §2 "an inactive endpoint gets no new deliveries" for ping and redeliver.
import { createHmac } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { pollUntil, sleep, waitFor } from '../helpers/wait.ts'
import { startReceiver, type Received } from '../webhooks/helpers.ts'


const h = await startHarness(t, {
  env: { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_DELAYS: '1,1,1,1', WEBHOOK_TIMEOUT_MS: '2000', CAMPAIGN_ENGINE_POLL_MS: '100' },
})
const rx = await startReceiver(t)
let pathN = 0
const nextPath = () => `/msg-${++pathN}`

const FUTURE = '2099-01-01T00:00:00Z'
const STATUSES = ['draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled'] as const
type Status = (typeof STATUSES)[number]
// spec "States and transitions → Campaign status", written out here from the spec's table (not imported
// from src/ nor from another test), "Any move not in the table is invalid".
const TABLE: Record<Status, Status[]> = {
  draft: ['scheduled', 'running'],
  scheduled: ['running', 'cancelled'],
  running: ['paused', 'cancelled'],
  paused: ['running', 'cancelled'],
  completed: [],
  cancelled: [],
}
// contract-engines §4 `stats`.
const STATS_KEYS = ['audience', 'control', 'sent', 'delivered', 'suppressed', 'failed', 'opened', 'clicked', 'bounced', 'unsubscribed', 'converted', 'control_converted']

async function must(p: Promise<{ status: number; body: any; text: string }>, status: number, what = ''): Promise<any> {
  const res = await p
  if (res.status !== status) throw new Error(`${what} expected ${status}, got ${res.status}: ${res.text}`)
  return res.body
}
const isSpecError = (b: any) =>
  !!b && typeof b === 'object' && typeof b.error === 'string' && (b.code === undefined || typeof b.code === 'string') &&
  (b.details === undefined || (typeof b.details === 'object' && b.details !== null))
const fieldsOf = (body: any): string[] => (body?.details?.errors ?? []).map((e: { field: string }) => e.field)

async function template(tenant: TestTenant, channel = 'in_app', over: Record<string, unknown> = {}): Promise<string> {
  return (await must(h.request('POST', '/notifications/templates', { key: tenant.key, body: { name: `t-${channel}`, channel, subject: 'Hi', body: 'Hello', ...over } }), 201, 'template')).data.id
}
async function segment(tenant: TestTenant): Promise<string> {
  return (await must(h.request('POST', '/segments', { key: tenant.key, body: { name: 'all', type: 'dynamic', rules: {} } }), 201, 'segment')).data.id
}
async function player(tenant: TestTenant, externalId: string): Promise<string> {
  return (await must(h.request('POST', '/players', { key: tenant.key, body: { external_id: externalId, email: `${externalId}@example.com` } }), 201, 'player')).data.id
}
const getCampaign = async (tenant: TestTenant, id: string) => (await must(h.request('GET', `/campaigns/${id}`, { key: tenant.key }), 200, 'GET campaign')).data
const patch = (tenant: TestTenant, id: string, body: Record<string, unknown>) => h.request('PATCH', `/campaigns/${id}`, { key: tenant.key, body })
const listed = async (tenant: TestTenant, id: string) =>
  ((await must(h.request('GET', '/campaigns', { key: tenant.key, query: { limit: 100 } }), 200, 'list')).campaigns as any[]).find((c) => c.id === id)

/** Waits until the engine has the campaign in one of `statuses` (it runs on its own, polled every 100 ms). */
async function campaignReaches(tenant: TestTenant, id: string, status: string, ms = 15_000) {
  return waitFor(`campaign ${id} ${status}`, async () => {
    const c = await getCampaign(tenant, id)
    return c.status === status && c
  }, ms)
}

/**
 * A campaign brought to `status` through the API and the engine only: a triggered in-app campaign (running,
 * it waits for events and never completes on its own) for draft..cancelled; a one-shot to the brand's
 * (here empty or small) segment for completed, which the engine completes once all are enqueued (§4).
 */
async function campaignIn(tenant: TestTenant, status: Status, tpl: string, seg: string): Promise<any> {
  if (status === 'completed') {
    const c = (await must(h.request('POST', '/campaigns', {
      key: tenant.key, body: { name: 'oneshot', type: 'one_shot', channels: ['in_app'], target_segment_id: seg, config: { templates: { in_app: tpl } } },
    }), 201, 'create one_shot')).data
    await must(patch(tenant, c.id, { status: 'running' }), 200, 'start one_shot')
    return campaignReaches(tenant, c.id, 'completed')
  }
  const c = (await must(h.request('POST', '/campaigns', {
    key: tenant.key,
    body: { name: 'walker', type: 'triggered', channels: ['in_app'], schedule: { start_at: FUTURE }, config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' } } },
  }), 201, 'create triggered')).data
  const path: Record<Exclude<Status, 'completed'>, Status[]> = {
    draft: [], scheduled: ['scheduled'], running: ['running'], paused: ['running', 'paused'], cancelled: ['running', 'cancelled'],
  }
  for (const s of path[status]) await must(patch(tenant, c.id, { status: s }), 200, `move to ${s}`)
  return getCampaign(tenant, c.id)
}

t.test('campaign status: every (from, to) pair through PATCH, and DELETE from every status, as the spec table says', async (t) => {
  const tenant = await h.createTenant()
  const tpl = await template(tenant)
  const seg = await segment(tenant) // no players: the one-shot completes at once
  // The six source statuses side by side (each on its own campaigns), to keep the file fast.
  await Promise.all(STATUSES.map(async (from) => {
    // One campaign in `from` takes every refused move (a refusal changes nothing, checked each time).
    const fixed = await campaignIn(tenant, from, tpl, seg)
    t.equal(fixed.status, from, `reached ${from}`)
    for (const to of STATUSES) {
      if (TABLE[from].includes(to)) {
        const c = await campaignIn(tenant, from, tpl, seg)
        await sleep(2)
        const res = await patch(tenant, c.id, { status: to })
        t.equal(res.status, 200, `${from} → ${to} allowed: ${res.text.slice(0, 200)}`)
        t.equal(res.body.data?.status, to, `${from} → ${to}: the answer carries the new status`)
        t.ok(Date.parse(res.body.data?.updated_at) > Date.parse(c.updated_at), `${from} → ${to}: updated_at moves`)
        t.equal(res.body.data?.created_at, c.created_at, `${from} → ${to}: created_at stays`)
        // one_shot/triggered running stays running or completes on its own; anything else stays where it was put.
        const after = await getCampaign(tenant, c.id)
        t.equal(after.status, to, `${from} → ${to}: GET shows it`)
        continue
      }
      const res = await patch(tenant, fixed.id, { status: to })
      t.equal(res.status, 400, `${from} → ${to} refused`)
      t.ok(isSpecError(res.body), `${from} → ${to}: the spec's error body`)
      t.equal(res.body.code, 'BAD_REQUEST', `${from} → ${to}: BAD_REQUEST`)
      // contract.md: "A disallowed campaign status move is 400 BAD_REQUEST with details: { from, to, allowed: [...] }".
      t.same({ ...res.body.details, allowed: [...(res.body.details?.allowed ?? [])].sort() }, { from, to, allowed: [...TABLE[from]].sort() }, `${from} → ${to}: details`)
    }
    // The refusals changed nothing (a changed status would also have shown in the next refusal's `from`).
    const after = await getCampaign(tenant, fixed.id)
    t.equal(after.status, from, `${from}: status unchanged by the refused moves`)
    t.equal(after.updated_at, fixed.updated_at, `${from}: record untouched by the refused moves`)
    // DELETE: "the same move as PATCH status: cancelled, allowed only where the spec's table allows cancelled".
    const target = TABLE[from].includes('cancelled') ? await campaignIn(tenant, from, tpl, seg) : fixed
    const del = await h.request('DELETE', `/campaigns/${target.id}`, { key: tenant.key })
    if (TABLE[from].includes('cancelled')) {
      t.equal(del.status, 200, `DELETE from ${from}`)
      t.equal(del.body.data?.status, 'cancelled', `DELETE from ${from}: { data: Campaign } with status cancelled`)
      t.equal(del.body.data?.id, target.id)
      // "DELETE is a soft cancel; the record remains".
      t.equal((await getCampaign(tenant, target.id)).status, 'cancelled', `DELETE from ${from}: the record remains`)
      const list = await must(h.request('GET', '/campaigns', { key: tenant.key, query: { status: 'cancelled', limit: 100 } }), 200)
      t.ok(list.campaigns.some((c: any) => c.id === target.id), `DELETE from ${from}: still listed`)
    } else {
      t.equal(del.status, 400, `DELETE from ${from} refused`)
      t.equal(del.body.code, 'BAD_REQUEST')
      t.same({ ...del.body.details, allowed: [...(del.body.details?.allowed ?? [])].sort() }, { from, to: 'cancelled', allowed: [...TABLE[from]].sort() }, `DELETE from ${from}: details`)
      t.equal((await getCampaign(tenant, target.id)).status, from, `DELETE from ${from}: status unchanged`)
    }
  }))
})

t.test('stats: exactly the twelve counters of §4, integers, on GET, in the list and in campaign.completed; audience and delivered agree', async (t) => {
  const tenant = await h.createTenant()
  const p = nextPath()
  const hook = (await must(h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(p), events: ['campaign.completed', 'message.delivered'] } }), 201)).data
  const tpl = await template(tenant)
  const seg = await segment(tenant)
  const players = [await player(tenant, 'st-1'), await player(tenant, 'st-2')]
  const c = (await must(h.request('POST', '/campaigns', {
    key: tenant.key, body: { name: 'stats', type: 'one_shot', channels: ['in_app'], target_segment_id: seg, config: { templates: { in_app: tpl }, class: 'transactional' } },
  }), 201)).data
  await must(patch(tenant, c.id, { status: 'running' }), 200)
  await campaignReaches(tenant, c.id, 'completed')
  const got = await pollUntil(() => getCampaign(tenant, c.id), (x) => x.stats.delivered === 2, 10_000)
  t.same(Object.keys(got.stats).sort(), [...STATS_KEYS].sort(), 'GET: the twelve counters, no more, no fewer')
  t.ok(Object.values(got.stats).every((v) => Number.isInteger(v) && (v as number) >= 0), 'GET: non-negative integers')
  t.match(got.stats, { audience: 2, control: 0, delivered: 2, sent: 2, suppressed: 0, failed: 0, bounced: 0 })
  // "current within a few seconds": the list shows the same figures soon after.
  const inList = await pollUntil(() => listed(tenant, c.id), (x) => x?.stats?.delivered === 2, 8000)
  t.same(inList, got, 'the list item agrees with GET (stats included) within a few seconds')
  // The wire: campaign.completed { campaign_id, stats } (contract-engines §2) with the same twelve names.
  const completed = await waitFor('campaign.completed', () => rx.at(p).find((r) => r.json?.event === 'campaign.completed'))
  t.equal(completed.json.data.campaign_id, c.id)
  t.same(Object.keys(completed.json.data.stats).sort(), [...STATS_KEYS].sort(), 'campaign.completed: stats with the twelve counters')
  t.equal(completed.json.data.stats.audience, 2)
  t.ok(new Webhook(hook.secret).verify(completed.body, completed.headers as Record<string, string>))
  // message.delivered: "player_id, channel, optional campaign_send_id" (spec), campaign_send_id = the
  // notification id and campaign_id when a campaign sent it (contract-engines §3).
  const deliveredOf = (): Received[] => rx.at(p).filter((r) => r.json?.event === 'message.delivered')
  await waitFor('two message.delivered', () => deliveredOf().length >= 2)
  const delivered = deliveredOf()
  const notifications = (await must(h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: c.id } }), 200)).data as any[]
  t.same(delivered.map((r) => r.json.data.player_id).sort(), [...players].sort())
  for (const r of delivered) {
    t.match(r.json.data, { channel: 'in_app', campaign_id: c.id, brand_id: tenant.brand.id })
    t.ok(notifications.some((n) => n.id === r.json.data.campaign_send_id && n.player_id === r.json.data.player_id), 'campaign_send_id names that player\'s notification')
  }
})

t.test("the list's stats of a campaign that completed over a day ago still follow GET (an in-app read counts as opened)", async (t) => {
  const tenant = await h.createTenant()
  const tpl = await template(tenant)
  const seg = await segment(tenant)
  const pid = await player(tenant, 'old-1')
  const c = (await must(h.request('POST', '/campaigns', {
    key: tenant.key, body: { name: 'aged', type: 'one_shot', channels: ['in_app'], target_segment_id: seg, config: { templates: { in_app: tpl }, class: 'transactional' } },
  }), 201)).data
  await must(patch(tenant, c.id, { status: 'running' }), 200)
  await campaignReaches(tenant, c.id, 'completed')
  const n = await waitFor('delivered', async () => {
    const list = (await must(h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: c.id } }), 200)).data as any[]
    return list.find((x) => x.status === 'delivered')
  })
  await pollUntil(() => listed(tenant, c.id), (x) => x?.stats?.delivered === 1, 8000)
  // The campaign completed two days ago: its record was last changed then (simulated on the row's clock).
  await h.app.ctx.sql`update campaigns set updated_at = now() - interval '2 days' where id = ${c.id}`
  // The player reads the message now: "An in-app first read sets opened_at", and stats.opened counts it.
  await must(h.request('POST', `/players/${pid}/inbox/${n.id}/read`, { key: tenant.key }), 200, 'read')
  const got = await pollUntil(() => getCampaign(tenant, c.id), (x) => x.stats.opened === 1, 5000)
  t.equal(got.stats.opened, 1, 'GET counts the open')
  const inList = await pollUntil(() => listed(tenant, c.id), (x) => x?.stats?.opened === 1, 8000)
  t.equal(inList?.stats?.opened, 1, 'the list counts it too, within a few seconds')
})

t.test('boundaries of config on start: control_group_percent 0 and 50 start, one past either side is refused; delay_seconds 0 starts', async (t) => {
  const tenant = await h.createTenant()
  const tpl = await template(tenant)
  const start = async (config: Record<string, unknown>) => {
    const c = (await must(h.request('POST', '/campaigns', {
      key: tenant.key, body: { name: 'b', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' }, ...config } },
    }), 201)).data
    return patch(tenant, c.id, { status: 'running' })
  }
  for (const pct of [0, 50, 12.5]) t.equal((await start({ control_group_percent: pct })).status, 200, `control_group_percent ${pct}`)
  for (const pct of [-1, 51, 50.5, '10']) {
    const res = await start({ control_group_percent: pct })
    t.equal(res.status, 400, `control_group_percent ${JSON.stringify(pct)}`)
    t.same(fieldsOf(res.body), ['config.control_group_percent'])
  }
  t.equal((await start({ delay_seconds: 0 })).status, 200, 'delay_seconds 0 (the default)')
  const neg = await start({ delay_seconds: -1 })
  t.equal(neg.status, 400)
  t.same(fieldsOf(neg.body), ['config.delay_seconds'])
})

t.test('outbound envelope of messaging events exactly as the spec shows it; headers; the delivery log entry of contract.md', async (t) => {
  const tenant = await h.createTenant()
  const p = nextPath()
  const e = (await must(h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(p), events: ['campaign.created'] } }), 201)).data
  t.match(e.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'contract-engines §2: whsec_ + base64 of 32 bytes')
  // A name outside ASCII: the signature is over the raw bytes sent, and Content-Length counts bytes.
  const name = 'Bienvenue — 🎰 ünïcødé « promo »'
  const c = (await must(h.request('POST', '/campaigns', { key: tenant.key, body: { name, type: 'one_shot', channels: ['email'] } }), 201)).data
  const got = await waitFor('campaign.created', () => rx.at(p).find((r) => r.json?.event === 'campaign.created'))
  // spec: Body `{ event: string, created_at: date-time (delivery timestamp), data: object }`.
  t.same(Object.keys(got.json).sort(), ['created_at', 'data', 'event'], 'exactly event, created_at, data')
  t.equal(got.json.event, 'campaign.created')
  t.match(got.json.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, 'created_at is an ISO 8601 date-time')
  t.ok(Math.abs(Date.parse(got.json.created_at) - got.at) < 60_000, 'created_at is about now')
  t.type(got.json.data, 'object')
  t.equal(got.json.data.campaign_id, c.id, 'campaign.created data: campaign_id')
  t.equal(got.json.data.brand_id, tenant.brand.id, 'contract-engines §2: every data carries brand_id')
  t.equal(Number(got.headers['content-length']), Buffer.byteLength(got.body, 'utf8'), 'Content-Length counts bytes')
  t.equal(got.json.data.name ?? name, name, 'the non-ASCII text arrives intact')
  // spec/contract.md: `X-Respin-Signature: sha256=<hex>`, HMAC-SHA256 of the raw body keyed by the secret.
  const sig = got.headers['x-respin-signature'] as string
  t.match(sig, /^sha256=[0-9a-f]{64}$/)
  t.equal(sig, `sha256=${createHmac('sha256', e.secret).update(Buffer.from(got.body, 'utf8')).digest('hex')}`)
  // contract-engines §2: Standard Webhooks headers, verified by the library unchanged.
  t.ok(new Webhook(e.secret).verify(got.body, got.headers as Record<string, string>), 'standardwebhooks verifies')
  t.match(got.headers['webhook-timestamp'], /^\d{10}$/, 'webhook-timestamp: Unix seconds')
  t.ok(Math.abs(Number(got.headers['webhook-timestamp']) * 1000 - got.at) < 60_000, 'of the attempt')
  t.match(got.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/)
  // contract.md "Delivery": { id, event, status, attempt_count, next_attempt_at, created_at, attempts: [{ n, at, response_code, duration_ms, error }] }.
  const d = await waitFor('logged successful', async () => {
    const list = (await must(h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key }), 200)).data as any[]
    return list.find((x) => x.status === 'successful')
  })
  t.equal(d.id, got.headers['webhook-id'], 'webhook-id is the delivery id')
  t.equal(d.event, 'campaign.created')
  t.equal(d.attempt_count, 1)
  t.equal(d.next_attempt_at, null)
  t.match(d.created_at, /^\d{4}-\d{2}-\d{2}T/)
  t.equal(d.attempts.length, 1)
  const a = d.attempts[0]
  t.equal(a.n, 1)
  t.match(a.at, /^\d{4}-\d{2}-\d{2}T/)
  t.equal(a.response_code, 200)
  t.ok(Number.isInteger(a.duration_ms) && a.duration_ms >= 0, 'duration_ms an integer')
  t.equal(a.error, null)
})

t.test('an inactive endpoint is sent nothing, not even a ping or a redelivery; once resumed nothing asked for meanwhile is lost', async (t) => {
  const tenant = await h.createTenant()
  const p = nextPath()
  const e = (await must(h.request('POST', '/webhooks', { key: tenant.key, body: { url: rx.url(p), events: ['campaign.created'] } }), 201)).data
  const first = (await must(h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key }), 202)).data
  await waitFor('ping delivered', () => rx.at(p).length === 1)
  await must(h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { active: false } }), 200)
  // contract-engines §2: "an inactive endpoint gets no new deliveries".
  const ping = await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
  const again = await h.request('POST', `/webhooks/${e.id}/deliveries/${first.id}/redeliver`, { key: tenant.key })
  t.ok([202, 400].includes(ping.status), `ping on an inactive endpoint: ${ping.status}`)
  t.ok([202, 400].includes(again.status), `redeliver on an inactive endpoint: ${again.status}`)
  await must(h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'while off', type: 'one_shot', channels: ['email'] } }), 201)
  await sleep(1200)
  t.equal(rx.at(p).length, 1, 'nothing reached the inactive endpoint')
  await must(h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { active: true } }), 200)
  // What was accepted (202) while inactive goes out on resume, signed; an event of the inactive period does not.
  const accepted = [ping, again].filter((r) => r.status === 202).length
  await waitFor('held requests sent on resume', () => rx.at(p).length === 1 + accepted)
  await sleep(500)
  t.equal(rx.at(p).length, 1 + accepted)
  for (const r of rx.at(p)) t.ok(new Webhook(e.secret).verify(r.body, r.headers as Record<string, string>))
  t.notOk(rx.at(p).some((r) => r.json?.event === 'campaign.created'), 'the event of the inactive period was not delivered')
})

t.test('the served OpenAPI document lists the statuses these routes answer', async (t) => {
  const doc = await must(h.request('GET', '/openapi.json'), 200)
  const responses = (path: string, method: string) => Object.keys(doc.paths[`/api/v1${path}`]?.[method]?.responses ?? {})
  // Statuses answered in this file (and in contract.md / contract-engines): documented for each operation.
  const expected: [string, string, string[]][] = [
    ['/campaigns', 'post', ['201', '400']],
    ['/campaigns/{id}', 'patch', ['200', '400', '404']],
    ['/campaigns/{id}', 'delete', ['200', '400', '404']],
    ['/notifications/send', 'post', ['202', '400', '404']],
    ['/webhooks/{id}/ping', 'post', ['202', '404']],
    ['/webhooks/{id}/deliveries', 'get', ['200', '400', '404']],
  ]
  for (const [path, method, statuses] of expected) {
    for (const s of statuses) t.ok(responses(path, method).includes(s), `${method.toUpperCase()} ${path} documents ${s} (has ${responses(path, method)})`)
  }
})

// Adversarial concurrency checks over real HTTP: one server, many requests at once on the same resource.
// The documents promise invariants that must hold whatever the interleaving: idempotent creates
// (spec: POST /players "Idempotent on (brand, external_id)"), no lost update (metadata "shallow-merged"),
// one outbox event per real change (docs/webhooks.md: "it exists exactly when the change does"),
// never below 0 (contract-engines §5), legal campaign moves only (spec's table), one notification per
// (campaign, run, player, step, channel) (contract-engines §4), a secret rotation keeps exactly the previous
// secret for 24 h (contract-engines §2), unique slugs (contract.md Admin API). Where the documents are
// silent, what a mature product does: a write racing the delete of what it names gets 404 (or its own
// success), never 500 (spec: 500 is "unexpected failure").
import { createHmac, randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { startHarness, type TestResponse, type TestTenant } from '../helpers/harness.ts'
import { pollUntil, sleep, waitFor } from '../helpers/wait.ts'
import { startReceiver } from '../webhooks/helpers.ts'


const h = await startHarness(t, { env: { RATE_LIMIT_INGEST_PER_MIN: '0', WEBHOOK_ALLOW_PRIVATE: 'true' } })
const sql = h.app.ctx.sql
// A valid Web Push subscription's keys (a P-256 point and a 16-byte secret).
const P256 = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM'
const AUTH = 'tBHItJI5svbpez7KI4CCXg'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Res = TestResponse<any>
/**
 * A server error: any 5xx but the documented "try again" (docs/errors.md: 503 CONCURRENT_CHANGE with
 * Retry-After, when PostgreSQL chose this write to give way to a concurrent one; nothing was written).
 */
const failed = (r: Res) => r.status >= 500 && !(r.status === 503 && r.body?.details?.reason === 'CONCURRENT_CHANGE' && r.headers.get('retry-after'))

async function must(p: Promise<Res>, status: number): Promise<any> {
  const res = await p
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`)
  return res.body
}
/** Every answer is one of `allowed`; anything else (a 500 above all) is shown with its body. */
function onlyStatuses(t: Test, rs: Res[], allowed: number[], label: string) {
  const odd = rs.filter((r) => !allowed.includes(r.status))
  t.same(odd.map((r) => `${r.status} ${r.text.slice(0, 160)}`), [], `${label}: only ${allowed.join('/')}`)
  // The spec's error body on every refusal.
  for (const r of rs.filter((x) => x.status >= 400)) {
    if (typeof r.body?.error !== 'string' || typeof r.body?.code !== 'string') {
      t.fail(`${label}: error body in the spec's shape: ${r.text.slice(0, 160)}`)
      return
    }
  }
}
const outbox = (tenantId: string, event?: string) =>
  sql<{ id: string; event: string; data: Record<string, any> }[]>`
    select id::text, event, data from outbox where tenant_id = ${tenantId} ${event ? sql`and event = ${event}` : sql``} order by outbox.id`

async function player(tenant: TestTenant, body: Record<string, unknown>) {
  return (await must(h.request('POST', '/players', { key: tenant.key, body }), 201)).data as { id: string; external_id: string }
}
async function create(tenant: TestTenant, path: string, body: Record<string, unknown>) {
  return (await must(h.request('POST', path, { key: tenant.key, body }), 201)).data
}
const credit = (tenant: TestTenant, pid: string, currency_id: string, amount: number) =>
  h.request('POST', `/gamification/player/${pid}/points`, { key: tenant.key, body: { currency_id, amount } })

// ---- Players ------------------------------------------------------------------------------------------

/** The tenant's player.status_changed chain from active: the links that do not follow, and the last status. */
async function statusChain(tenantId: string): Promise<{ broken: string[]; last: string; count: number }> {
  let last = 'active'
  const broken: string[] = []
  const changes = await outbox(tenantId, 'player.status_changed')
  for (const e of changes) {
    if (e.data.previous_status !== last) broken.push(`${e.data.previous_status}->${e.data.status} after ${last}`)
    if (e.data.status === e.data.previous_status) broken.push(`no-op ${e.data.status}`)
    last = e.data.status
  }
  return { broken, last, count: changes.length }
}

t.test('POST /players x20 with one external_id: all 201, one player, one player.created, each player.updated a real change', async (t) => {
  const tenant = await h.createTenant()
  const emails = Array.from({ length: 20 }, (_, i) => `race${i % 6}@example.com`)
  const rs = await Promise.all(emails.map((email) => h.request('POST', '/players', { key: tenant.key, body: { external_id: 'same', email, metadata: { [`k${emails.indexOf(email)}`]: 1 } } })))
  onlyStatuses(t, rs, [201], 'creates')
  t.equal(new Set(rs.map((r) => r.body?.data?.id)).size, 1, 'one id for all (spec: idempotent on (brand, external_id))')
  const rows = await sql<{ id: string; email: string; metadata: Record<string, number> }[]>`select id, email, metadata from players where brand_id = ${tenant.brand.id}`
  t.equal(rows.length, 1, 'one row')
  t.same(Object.keys(rows[0]!.metadata).sort(), ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'], 'every metadata key merged (no lost update)')
  const events = await outbox(tenant.id)
  t.equal(events.filter((e) => e.event === 'player.created').length, 1, 'player.created once')
  // Each player.updated names a real change of email from the one before it (docs/webhooks.md: "changes a field").
  const emailChanges = events.filter((e) => e.event === 'player.updated' && (e.data.changed as string[]).includes('email'))
  let prev: string | undefined
  let chained = true
  for (const e of emailChanges) {
    if (prev !== undefined && e.data.email === prev) chained = false
    prev = e.data.email
  }
  t.ok(chained, 'no player.updated repeats the email it already had')
  if (prev !== undefined) t.equal(rows[0]!.email, prev, "the stored email is the last event's")
  else t.ok(emails.includes(rows[0]!.email), 'the stored email is one of the writes')
  const profiles = await sql`select 1 from player_profiles where player_id = ${rows[0]!.id}`
  t.equal(profiles.length, 1, 'one profile')
})

t.test('PATCH status x24 on one player: all 200, status_changed events chain (each previous_status = the status before), final = last event', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'st' })
  const cycle = ['suspended', 'active', 'self_excluded', 'closed', 'active', 'suspended']
  const rs = await Promise.all(Array.from({ length: 24 }, (_, i) => h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status: cycle[i % cycle.length] } })))
  onlyStatuses(t, rs, [200], 'patches')
  const { broken, last: before, count: changed } = await statusChain(tenant.id)
  t.same(broken, [], 'each status_changed follows the one before and is a real change')
  const got = await must(h.request('GET', `/players/${p.id}`, { key: tenant.key }), 200)
  t.equal(got.data.status, before, 'the stored status is the last event\'s')
  const updates = (await outbox(tenant.id, 'player.updated')).filter((e) => (e.data.changed as string[]).includes('status'))
  t.equal(updates.length, changed, 'one player.updated naming status per status_changed')
})

t.test('PATCH metadata x30, each a different key: all kept (shallow merge, no lost update)', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'md', metadata: { base: true } })
  const rs = await Promise.all(Array.from({ length: 30 }, (_, i) => h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { metadata: { [`k${i}`]: i }, phone: `+3900${i}` } })))
  onlyStatuses(t, rs, [200], 'patches')
  const got = await must(h.request('GET', `/players/${p.id}`, { key: tenant.key }), 200)
  t.equal(Object.keys(got.data.metadata).length, 31, 'base + 30 keys')
  t.ok(rs.some((r) => r.body.data.phone === got.data.phone), 'the phone is one of the writes')
  t.equal((await outbox(tenant.id, 'player.updated')).length, 30, 'one player.updated per PATCH (each changed metadata)')
})

t.test('a new external_id through POST /players and POST /events at once: one player, one player.created', async (t) => {
  const tenant = await h.createTenant()
  const ids = Array.from({ length: 8 }, (_, i) => `both-${i}`)
  const rs = await Promise.all(ids.flatMap((ext) => [
    h.request('POST', '/players', { key: tenant.key, body: { external_id: ext, email: `${ext}@example.com` } }),
    h.request('POST', '/events', { key: tenant.key, body: { player_id: ext, event_type: 'login', event_id: `${ext}-a` } }),
    h.request('POST', '/events', { key: tenant.key, body: { events: [{ player_id: ext, event_type: 'registration', event_id: `${ext}-b`, payload: { country: 'IT' } }] } }),
    h.request('POST', '/players', { key: tenant.key, body: { external_id: ext, language: 'it' } }),
  ]))
  onlyStatuses(t, rs, [200, 201], 'writes')
  await h.app.ctx.stream?.idle()
  const rows = await sql<{ external_id: string; n: number }[]>`
    select external_id, count(*)::int as n from players where brand_id = ${tenant.brand.id} group by external_id order by external_id`
  t.same(rows, ids.map((external_id) => ({ external_id, n: 1 })), 'one player per external_id')
  const created = await outbox(tenant.id, 'player.created')
  t.same(created.map((e) => e.data.external_id).sort(), ids, 'player.created once per external_id (contract: by POST /players and ingestion alike)')
})

t.test('status changes by PATCH and by status_change events at once: the status_changed events chain and the last one is the stored status', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'mix' })
  const cycle = ['suspended', 'active', 'self_excluded', 'active', 'closed', 'active']
  let n = 0
  const rs = await Promise.all(Array.from({ length: 24 }, (_, i) => {
    const status = cycle[i % cycle.length]!
    return i % 2
      ? h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status } })
      : h.request('POST', '/events', { key: tenant.key, body: { player_id: 'mix', event_type: 'status_change', event_id: `mix-${n++}`, payload: { status, reason: 'race' } } })
  }))
  onlyStatuses(t, rs, [200], 'writes')
  await h.app.ctx.stream?.idle()
  const { broken, last: before } = await statusChain(tenant.id)
  t.same(broken, [], 'docs/webhooks.md: each status_changed carries the status it left')
  const got = await must(h.request('GET', `/players/${p.id}`, { key: tenant.key }), 200)
  t.equal(got.data.status, before, "the stored status is the last status_changed's")
})

// ---- Writes racing the delete of what they name ------------------------------------------------------

/** Rounds of `writes(player)` fired around one DELETE /players/{id} of a fresh player; the 5xx answers, by label. */
async function raceErasure(tenant: TestTenant, rounds: number, writes: (p: { id: string; external_id: string }, round: number) => [string, () => Promise<Res>][]) {
  const odd: Record<string, string[]> = {}
  for (let round = 0; round < rounds; round++) {
    const p = await player(tenant, { external_id: `er-${round}`, email: `er${round}@example.com` })
    const list = writes(p, round)
    const fire = () => list.map(([label, w]) => w().then((r) => [label, r] as const))
    const rs = await Promise.all([...fire(), h.request('DELETE', `/players/${p.id}`, { key: tenant.key }).then((r) => ['erase', r] as const), ...fire(), ...fire()])
    for (const [label, r] of rs) {
      odd[label] ??= []
      if (failed(r)) odd[label]!.push(`${r.status} ${r.text.slice(0, 100)}`)
    }
  }
  return odd
}

t.test('POST /players racing the erasure of the same external_id: 201, never 500', async (t) => {
  const tenant = await h.createTenant()
  const odd = await raceErasure(tenant, 3, (p) => Array.from({ length: 6 }, (_, i) => ['POST /players', () => h.request('POST', '/players', { key: tenant.key, body: { external_id: p.external_id, phone: `+${i}` } })]))
  t.same(odd['POST /players'], [], 'spec: "Idempotent on (brand, external_id): a repeat updates" — a repeat racing an erasure creates or updates, never 500')
  t.same(odd.erase, [], 'the erasure itself: no 500')
})

t.test('point credits racing the erasure of their player: 201 or 404, never 500', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const odd = await raceErasure(tenant, 3, (p) => Array.from({ length: 6 }, () => ['points', () => credit(tenant, p.id, lp.id, 1)]))
  t.same(odd.points, [], 'no 500')
})

t.test('grants, joins, sends and contact points racing the erasure of their player: 2xx or 404, never 500', async (t) => {
  const tenant = await h.createTenant()
  const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'custom', value: 1, value_type: 'fixed' })
  const mission = await create(tenant, '/gamification/missions', { name: 'M', type: 'one_time', rules: { event_type: 'login', target: 3, opt_in: true } })
  const odd = await raceErasure(tenant, 3, (p, round) => [
    ['POST /bonuses/{id}/grant', () => h.request('POST', `/bonuses/${bonus.id}/grant`, { key: tenant.key, body: { player_id: p.id } })],
    ['POST /gamification/missions/{id}/join', () => h.request('POST', `/gamification/missions/${mission.id}/join`, { key: tenant.key, body: { player_id: p.id } })],
    ['POST /notifications/send', () => h.request('POST', '/notifications/send', { key: tenant.key, body: { player_id: p.id, channel: 'in_app', class: 'transactional', payload: { subject: 's', body: 'b' } } })],
    ['PUT /players/{id}/telegram', () => h.request('PUT', `/players/${p.id}/telegram`, { key: tenant.key, body: { chat_id: `${100 + round}` } })],
    ['POST /players/{id}/push-subscriptions', () => h.request('POST', `/players/${p.id}/push-subscriptions`, { key: tenant.key, body: { endpoint: `http://127.0.0.1:9/push/${round}`, keys: { p256dh: P256, auth: AUTH } } })],
    ['PATCH /players/{id}', () => h.request('PATCH', `/players/${p.id}`, { key: tenant.key, body: { status: 'suspended', metadata: { r: round } } })],
  ])
  for (const [label, list] of Object.entries(odd)) t.same(list, [], `${label}: no 500`)
})

t.test('events of a player racing its erasure: every POST /events 200 (or 503 with Retry-After), never 500; reads 200 or 404', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  let n = 0
  const odd = await raceErasure(tenant, 2, (p) => [
    ['POST /events', () => h.request('POST', '/events', { key: tenant.key, body: { events: [
      { player_id: p.external_id, event_type: 'deposit', event_id: `ev-${n++}`, payload: { amount: 5, currency: 'EUR' } },
      { player_id: p.external_id, event_type: 'status_change', event_id: `ev-${n++}`, payload: { status: 'suspended' } },
      { player_id: p.external_id, event_type: 'consent_update', event_id: `ev-${n++}`, payload: { channel: 'email', granted: true } },
    ] } })],
    ['GET /players/{id}', () => h.request('GET', `/players/${p.id}`, { key: tenant.key })],
    ['GET /players/{id}/next-best-action', () => h.request('GET', `/players/${p.id}/next-best-action`, { key: tenant.key })],
    ['GET /gamification/player/{id}', () => h.request('GET', `/gamification/player/${p.id}`, { key: tenant.key })],
    ['GET /gamification/player/{id}/points', () => h.request('GET', `/gamification/player/${p.id}/points`, { key: tenant.key, query: { currency_id: lp.id } })],
    ['GET /players/{id}/export', () => h.request('GET', `/players/${p.id}/export`, { key: tenant.key })],
    ['GET /players/{id}/inbox', () => h.request('GET', `/players/${p.id}/inbox`, { key: tenant.key })],
  ])
  for (const [label, list] of Object.entries(odd)) t.same(list.filter((x) => !x.startsWith('503')), [], `${label}: no 500`)
  await h.app.ctx.stream?.idle()
})

t.test('point credits racing the delete of their currency: 201 or 400/404, never 500', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'cur' })
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const c = await create(tenant, '/gamification/currencies', { name: `C${round}`, symbol: 'C', type: 'virtual' })
    const rs = await Promise.all([
      ...Array.from({ length: 8 }, () => credit(tenant, p.id, c.id, 1)),
      h.request('DELETE', `/gamification/currencies/${c.id}`, { key: tenant.key }),
      ...Array.from({ length: 8 }, () => credit(tenant, p.id, c.id, 1)),
    ])
    for (const r of rs) if (failed(r)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
  }
  t.same(odd, [], 'no 500')
})

t.test('bonus grants racing the delete of their bonus: 201 or 400/404, never 500', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'bon' })
  const odd: string[] = []
  const granted: string[] = []
  for (let round = 0; round < 6; round++) {
    const b = await create(tenant, '/bonuses', { name: `B${round}`, type: 'custom', value: 1, value_type: 'fixed' })
    const grant = () => h.request('POST', `/bonuses/${b.id}/grant`, { key: tenant.key, body: { player_id: p.id } })
    const rs = await Promise.all([...Array.from({ length: 8 }, grant), h.request('DELETE', `/bonuses/${b.id}`, { key: tenant.key }), ...Array.from({ length: 8 }, grant)])
    for (const r of rs) if (failed(r)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
    // A grant whose bonus went between its lookup and its insert recorded nothing: a 404, not a 201 with id ''.
    for (const r of rs) if (r.status === 201 && r.body.data.status === 'granted') granted.push(r.body.data.id)
  }
  t.same(odd, [], 'no 500')
  const announced = (await outbox(tenant.id, 'bonus.granted')).map((e) => (e.data as { grant_id: string }).grant_id)
  t.same(announced.sort(), granted.sort(), 'one bonus.granted per 201, each naming its grant (none for a grant that was never made)')
})

t.test('joins of one mission x12 at once: all 200 with one joined_at', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'mj' })
  const m = await create(tenant, '/gamification/missions', { name: 'M', type: 'one_time', rules: { event_type: 'login', target: 3, opt_in: true } })
  const rs = await Promise.all(Array.from({ length: 12 }, () => h.request('POST', `/gamification/missions/${m.id}/join`, { key: tenant.key, body: { player_id: p.id } })))
  onlyStatuses(t, rs, [200], 'concurrent joins')
  t.equal(new Set(rs.map((r) => r.body.data.joined_at)).size, 1, 'one joined_at (docs/gamification.md: "joining twice keeps the first time")')
})

t.test('mission joins racing the delete of their mission: 200 or 400/404, never 500', async (t) => {
  const tenant = await h.createTenant()
  const p = await player(tenant, { external_id: 'mj' })
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const m = await create(tenant, '/gamification/missions', { name: `M${round}`, type: 'one_time', rules: { event_type: 'login', target: 3, opt_in: true } })
    const join = () => h.request('POST', `/gamification/missions/${m.id}/join`, { key: tenant.key, body: { player_id: p.id } })
    const rs = await Promise.all([...Array.from({ length: 8 }, join), h.request('DELETE', `/gamification/missions/${m.id}`, { key: tenant.key }), ...Array.from({ length: 8 }, join)])
    for (const r of rs) if (failed(r)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
  }
  t.same(odd, [], 'no 500')
})

t.test('pings and redeliveries racing the delete of their webhook endpoint: 202 or 404, never 500', async (t) => {
  const tenant = await h.createTenant()
  const receiver = await startReceiver(t)
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const e = await create(tenant, '/webhooks', { url: receiver.url(`/r${round}`), events: ['player.created'] })
    const first = (await must(h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key }), 202)).data
    const ping = () => h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    const redeliver = () => h.request('POST', `/webhooks/${e.id}/deliveries/${first.id}/redeliver`, { key: tenant.key })
    const some = () => [ping(), redeliver(), ping(), redeliver()]
    const rs = await Promise.all([...some(), h.request('DELETE', `/webhooks/${e.id}`, { key: tenant.key }), ...some(), ...some()])
    for (const r of rs) if (failed(r)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
  }
  t.same(odd, [], 'no 500')
})

// ---- Points and levels --------------------------------------------------------------------------------

t.test('first credits of a fresh player racing: all 201, balance = sum, levels changed in a chain without repeats', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const levels = []
  for (const [tier, min] of [[1, 0], [2, 5], [3, 10], [4, 15]] as const) levels.push(await create(tenant, '/gamification/levels', { name: `L${tier}`, tier, min_points: min }))
  const p = await player(tenant, { external_id: 'fresh' })
  const rs = await Promise.all(Array.from({ length: 20 }, () => credit(tenant, p.id, lp.id, 1)))
  onlyStatuses(t, rs, [201], 'credits')
  t.same(rs.map((r) => r.body.data.balance_after).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1), 'each balance_after distinct, 1..20')
  const prof = await must(h.request('GET', `/gamification/player/${p.id}`, { key: tenant.key }), 200)
  t.match(prof.data.point_balances[0], { balance: 20, lifetime: 20 })
  t.equal(prof.data.current_level?.tier, 4)
  const changes = await outbox(tenant.id, 'gamification.level_changed')
  let prev: string | null = null
  const broken: string[] = []
  for (const e of changes) {
    if (e.data.previous_level_id !== prev) broken.push(`previous ${e.data.previous_level_id} after ${prev}`)
    prev = e.data.level_id
  }
  t.same(broken, [], 'each level_changed chains from the one before')
  t.equal(new Set(changes.map((e) => e.data.level_id)).size, changes.length, 'no level announced twice')
  t.equal(prev, levels[3].id)
})

t.test('point credits racing the delete of the levels and level badges they reach: 201, never 500', async (t) => {
  const tenant = await h.createTenant()
  const lp = await create(tenant, '/gamification/currencies', { name: 'LP', symbol: 'LP', type: 'virtual' })
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const p = await player(tenant, { external_id: `lv-${round}` })
    const defs: [string, string][] = []
    for (let tier = 1; tier <= 4; tier++) {
      defs.push(['/gamification/levels', (await create(tenant, '/gamification/levels', { name: `L${tier}`, tier, min_points: tier - 1 })).id])
      defs.push(['/gamification/badges', (await create(tenant, '/gamification/badges', { name: `B${tier}`, criteria: { level_tier: tier } })).id])
    }
    const rs = await Promise.all([
      ...Array.from({ length: 6 }, () => credit(tenant, p.id, lp.id, 1)),
      ...defs.map(([path, id]) => h.request('DELETE', `${path}/${id}`, { key: tenant.key })),
    ])
    for (const r of rs) if (failed(r)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
  }
  t.same(odd, [], 'no 500')
})

// ---- Webhook secret rotation ------------------------------------------------------------------------------

t.test('rotate_secret x8 at once: 8 distinct secrets; the next ping signs with one of them, and the previous is another of them', async (t) => {
  const tenant = await h.createTenant()
  const receiver = await startReceiver(t)
  const e = await create(tenant, '/webhooks', { url: receiver.url('/rot'), events: ['player.created'] })
  const original = e.secret as string
  const rs = await Promise.all(Array.from({ length: 8 }, () => h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: true } })))
  onlyStatuses(t, rs, [200], 'rotations')
  const secrets = rs.map((r) => r.body.data?.secret as string)
  t.equal(new Set(secrets).size, 8, 'each rotation returns its own secret')
  t.notOk(secrets.includes(original))
  await must(h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key }), 202)
  const got = await waitFor('the ping', () => receiver.at('/rot')[0], 10_000)
  const hex = String(got.headers['x-respin-signature'])
  const current = secrets.filter((s) => `sha256=${createHmac('sha256', s).update(got.body).digest('hex')}` === hex)
  t.equal(current.length, 1, 'X-Respin-Signature: exactly one of the returned secrets is current')
  const std = String(got.headers['webhook-signature']).split(' ')
  t.equal(std.length, 2, 'two v1 signatures after a rotation (contract-engines §2)')
  const v1 = (s: string) => `v1,${createHmac('sha256', Buffer.from(s.slice('whsec_'.length), 'base64')).update(`${got.headers['webhook-id']}.${got.headers['webhook-timestamp']}.${got.body}`).digest('base64')}`
  t.equal(std[0], current[0] && v1(current[0]), 'the first v1 is the current secret')
  const previous = [original, ...secrets].filter((s) => v1(s) === std[1])
  t.equal(previous.length, 1, 'the second v1 is one known secret')
  t.not(previous[0], original, 'the previous secret is a rotated one (the last before the current), not the original')
  t.ok(previous[0] && secrets.includes(previous[0]) && previous[0] !== current[0])
})

// ---- Campaigns ------------------------------------------------------------------------------------------

async function inAppTemplate(tenant: TestTenant) {
  return (await create(tenant, '/notifications/templates', { name: 'race', channel: 'in_app', subject: 'Hi', body: 'Hello' })).id as string
}

t.test('a one-shot started x8 at once (running/scheduled mixed): the moves that succeed form a legal path, every member gets exactly one notification', async (t) => {
  const tenant = await h.createTenant()
  for (let i = 0; i < 6; i++) await player(tenant, { external_id: `c${i}` })
  const tpl = await inAppTemplate(tenant)
  const seg = await create(tenant, '/segments', { name: 'all', type: 'dynamic', rules: {} })
  const c = await create(tenant, '/campaigns', { name: 'os', type: 'one_shot', channels: ['in_app'], target_segment_id: seg.id, config: { templates: { in_app: tpl } } })
  const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => h.request('PATCH', `/campaigns/${c.id}`, {
    key: tenant.key,
    body: i % 4 === 3 ? { status: 'scheduled', schedule: { start_at: new Date(Date.now() + 3_600_000).toISOString() } } : { status: 'running' },
  })))
  onlyStatuses(t, rs, [200, 400], 'moves')
  // The moves that succeeded form a legal path from draft: running; scheduled; or scheduled then running.
  const moved = rs.filter((r) => r.status === 200).map((r) => r.body.data.status as string).sort()
  t.ok([['running'], ['scheduled'], ['running', 'scheduled']].some((path) => JSON.stringify(path) === JSON.stringify(moved)), `a legal path out of draft: ${moved.join(', ')}`)
  for (const r of rs.filter((x) => x.status === 400)) {
    const d = r.body.details
    t.ok(d && !d.allowed.includes(d.to), `a refused move really is disallowed from ${d?.from}: ${JSON.stringify(d)}`)
  }
  const winner = moved.includes('running') ? 'running' : 'scheduled'
  if (winner === 'running') {
    await waitFor('completed', async () => (await must(h.request('GET', `/campaigns/${c.id}`, { key: tenant.key }), 200)).data.status === 'completed', 10_000)
  }
  const per = await sql<{ player_id: string; n: number }[]>`select player_id, count(*)::int as n from notifications where campaign_id = ${c.id} group by player_id`
  t.equal(per.length, winner === 'running' ? 6 : 0, 'every member (running) or none (scheduled)')
  t.ok(per.every((r) => r.n === 1), 'one notification each')
  t.equal((await outbox(tenant.id, 'campaign.completed')).length, winner === 'running' ? 1 : 0, 'campaign.completed at most once')
})

t.test('a triggered campaign under a storm of pause/resume/cancel/rename: no 500, every refusal a really disallowed move, final state legal', async (t) => {
  const tenant = await h.createTenant()
  const tpl = await inAppTemplate(tenant)
  const c = await create(tenant, '/campaigns', { name: 'tr', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' } } })
  await must(h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } }), 200)
  const all: Res[] = []
  for (let round = 0; round < 3; round++) {
    const body = (i: number) => [{ status: 'paused' }, { status: 'running' }, { name: `n${i}` }, { status: 'paused' }, { status: 'running' }][i % 5]
    const rs = await Promise.all(Array.from({ length: 30 }, (_, i) => h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: body(i) })))
    all.push(...rs)
  }
  const final = await Promise.all([
    ...Array.from({ length: 6 }, (_, i) => h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: i % 2 ? 'paused' : 'running' } })),
    h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key }),
    h.request('DELETE', `/campaigns/${c.id}`, { key: tenant.key }),
  ])
  all.push(...final)
  onlyStatuses(t, all, [200, 400], 'moves and edits')
  const bad = all.filter((r) => r.status === 400 && !(r.body.details && !r.body.details.allowed.includes(r.body.details.to)))
  t.same(bad.map((r) => r.text.slice(0, 160)), [], 'each 400 is a move the table disallows from the status it found')
  const got = await must(h.request('GET', `/campaigns/${c.id}`, { key: tenant.key }), 200)
  t.equal(got.data.status, 'cancelled', 'cancelled (one DELETE won, and nothing leaves cancelled)')
  t.equal(final.filter((r) => r.status === 200 && r.body.data?.status === 'cancelled').length, 1, 'exactly one cancel succeeded')
})

t.test('a triggered campaign with max_per_player 1 and 12 matching events of one player sent at once: one notification', async (t) => {
  const tenant = await h.createTenant()
  const tpl = await inAppTemplate(tenant)
  await player(tenant, { external_id: 'trig' })
  const c = await create(tenant, '/campaigns', { name: 'max1', type: 'triggered', channels: ['in_app'], config: { templates: { in_app: tpl }, trigger: { event_type: 'deposit' }, max_per_player: 1 } })
  await must(h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } }), 200)
  const rs = await Promise.all(Array.from({ length: 12 }, (_, i) => h.request('POST', '/events', {
    key: tenant.key, body: { player_id: 'trig', event_type: 'deposit', event_id: `trig-${i}`, payload: { amount: 10 + i, currency: 'EUR' } },
  })))
  onlyStatuses(t, rs, [200], 'events')
  await h.app.ctx.stream?.idle()
  const n = await pollUntil(async () => (await sql<{ n: number }[]>`select count(*)::int as n from notifications where campaign_id = ${c.id}`)[0]!.n, (x) => x >= 1, 5000)
  await sleep(300)
  const again = (await sql<{ n: number }[]>`select count(*)::int as n from notifications where campaign_id = ${c.id}`)[0]!.n
  t.equal(n, 1, 'one enrolment')
  t.equal(again, 1, 'contract-engines §4: max_per_player caps the sends, whatever the interleaving')
})

t.test('edits of a running campaign at once (channels+templates vs templates alone): it stays runnable, a template for every channel', async (t) => {
  const tenant = await h.createTenant()
  const inApp = await inAppTemplate(tenant)
  const email = (await create(tenant, '/notifications/templates', { name: 'race', channel: 'email', subject: 'Hi', body: 'Hello' })).id as string
  const trigger = { event_type: 'deposit' }
  const odd: string[] = []
  for (let round = 0; round < 4; round++) {
    const c = await create(tenant, '/campaigns', { name: `ed${round}`, type: 'triggered', channels: ['in_app'], config: { templates: { in_app: inApp }, trigger } })
    await must(h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } }), 200)
    const widen = { channels: ['in_app', 'email'], config: { templates: { in_app: inApp, email }, trigger } }
    const narrow = { config: { templates: { in_app: inApp }, trigger, delay_seconds: round } }
    const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: i % 2 ? widen : narrow })))
    for (const r of rs) if (![200, 400].includes(r.status)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
    const got = (await must(h.request('GET', `/campaigns/${c.id}`, { key: tenant.key }), 200)).data
    const missing = (got.channels as string[]).filter((ch) => !got.config.templates?.[ch])
    if (missing.length) odd.push(`round ${round}: ${got.status} with channels ${got.channels.join(',')} but templates for ${Object.keys(got.config.templates ?? {}).join(',')}`)
  }
  // contract-engines §4: "config.templates: one for each of channels"; an edit of an active campaign keeps it runnable.
  t.same(odd, [], 'every stored state is one the validation accepts')
})

t.test('template PATCHes of body and subject at once: variables are those of the final body and subject', async (t) => {
  const tenant = await h.createTenant()
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const tpl = await create(tenant, '/notifications/templates', { name: `v${round}`, channel: 'email', subject: 'S {{ a }}', body: 'B {{ b }}' })
    const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => h.request('PATCH', `/notifications/templates/${tpl.id}`, {
      key: tenant.key, body: i % 2 ? { subject: `S {{ s${i} }}` } : { body: `B {{ b${i} }}` },
    })))
    for (const r of rs) if (r.status !== 200) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
    const got = (await must(h.request('GET', `/notifications/templates/${tpl.id}`, { key: tenant.key }), 200)).data
    const expected = [...`${got.subject} ${got.body}`.matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1]).sort()
    if (JSON.stringify([...got.variables].sort()) !== JSON.stringify(expected)) odd.push(`variables ${got.variables} for "${got.subject}" / "${got.body}"`)
  }
  t.same(odd, [], 'spec: variables "auto-extracted from {{name}} placeholders in body and subject"')
})

// ---- Definitions: cross-field rules and final states under concurrent PATCHes -----------------------

t.test('level PATCHes of min_points and max_points at once: the stored level keeps max ≥ min, no 500', async (t) => {
  const tenant = await h.createTenant()
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const l = await create(tenant, '/gamification/levels', { name: `L${round}`, tier: 1, min_points: 0, max_points: 6000 })
    const rs = await Promise.all([
      ...Array.from({ length: 4 }, () => h.request('PATCH', `/gamification/levels/${l.id}`, { key: tenant.key, body: { min_points: 5000 } })),
      ...Array.from({ length: 4 }, () => h.request('PATCH', `/gamification/levels/${l.id}`, { key: tenant.key, body: { max_points: 100 } })),
    ])
    for (const r of rs) if (![200, 400].includes(r.status)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
    const got = (await must(h.request('GET', `/gamification/levels/${l.id}`, { key: tenant.key }), 200)).data
    if (got.max_points !== null && got.max_points < got.min_points) odd.push(`stored ${got.min_points}..${got.max_points}`)
  }
  t.same(odd, [], 'only 200/400 and a valid record')
})

t.test('tournament PATCH ended and cancelled at once: once an ended answered 200, the tournament stays ended', async (t) => {
  const tenant = await h.createTenant()
  const odd: string[] = []
  for (let round = 0; round < 6; round++) {
    const tn = await create(tenant, '/tournaments', {
      name: `T${round}`, status: 'active', game_config: { metric: 'bet_amount' },
      starts_at: new Date(Date.now() - 3_600_000).toISOString(), ends_at: new Date(Date.now() + 3_600_000).toISOString(),
    })
    const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => h.request('PATCH', `/tournaments/${tn.id}`, { key: tenant.key, body: { status: i % 2 ? 'ended' : 'cancelled' } })))
    for (const r of rs) if (![200, 400].includes(r.status)) odd.push(`${r.status} ${r.text.slice(0, 120)}`)
    const got = (await must(h.request('GET', `/tournaments/${tn.id}`, { key: tenant.key }), 200)).data
    if (rs.some((r) => r.status === 200 && r.body.data.status === 'ended') && got.status !== 'ended') odd.push(`ended answered 200, stored ${got.status}`)
  }
  t.same(odd, [], 'ended is final whatever the interleaving')
})

t.test('a key revoked while 40 requests use it: after the revocation answers, the key gets 401 at once', async (t) => {
  const tenant = await h.createTenant()
  const k = await tenant.createKey({ name: 'doomed' })
  const inflight = Array.from({ length: 40 }, (_, i) => h.request(i % 2 ? 'GET' : 'POST', i % 2 ? '/players' : '/players', { key: k.key, ...(i % 2 ? {} : { body: { external_id: `k${i}` } }) }))
  const revoked = await h.admin('DELETE', `/admin/keys/${k.id}`.replace('/admin', ''))
  t.equal(revoked.status, 200, revoked.text)
  const during = await Promise.all(inflight)
  onlyStatuses(t, during, [200, 201, 401], 'requests in flight: served or refused')
  const after = await Promise.all(Array.from({ length: 10 }, () => h.request('GET', '/players', { key: k.key })))
  t.same(after.map((r) => r.status), Array(10).fill(401), 'contract.md: "the key fails with 401 on its very next use"')
  t.ok(after.every((r) => r.body.code === 'UNAUTHORIZED'))
})

// ---- Admin: unique slugs --------------------------------------------------------------------------------

t.test('the same brand slug x10 and the same tenant slug x10 at once: one 201, the rest 400 ALREADY_EXISTS', async (t) => {
  const tenant = await h.createTenant()
  const brands = await Promise.all(Array.from({ length: 10 }, (_, i) => h.admin('POST', `/tenants/${tenant.id}/brands`, { name: `dup ${i}`, slug: 'dup' })))
  onlyStatuses(t, brands, [201, 400], 'brands')
  t.equal(brands.filter((r) => r.status === 201).length, 1, 'one brand created')
  t.ok(brands.filter((r) => r.status === 400).every((r) => r.body.details?.reason === 'ALREADY_EXISTS'), 'the rest: ALREADY_EXISTS (docs/errors.md)')
  const slug = `dup-${randomUUID().slice(0, 8)}`
  const tenants = await Promise.all(Array.from({ length: 10 }, (_, i) => h.admin('POST', '/tenants', { name: `Dup ${i}`, slug })))
  onlyStatuses(t, tenants, [201, 400], 'tenants')
  t.equal(tenants.filter((r) => r.status === 201).length, 1, 'one tenant created')
  t.ok(tenants.filter((r) => r.status === 400).every((r) => r.body.details?.reason === 'ALREADY_EXISTS'))
})


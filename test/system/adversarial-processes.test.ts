// Adversarial: two API processes on one PostgreSQL and one Redis. Process A is this file's harness, process
// B a child started with `npm start`'s command. What one process caches, a write through the other must
// change, within what the docs promise (docs/tenancy.md "Caching, and why revocation is still immediate":
// changes are published on the bus and the request answers once every process acknowledged; docs/
// gamification.md "publishes the change on the bus before the request returns"; docs/ingestion.md "a
// change applies from the next request"); shared budgets are global; acknowledged work survives a kill -9
// of one process. Servers only: embedded PGlite serves one process.
import { createHmac } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import WebSocket from 'ws'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { call, runCli, spawnServer } from '../helpers/processes.ts'
import { sleep, waitFor } from '../helpers/wait.ts'
import { startReceiver, type Received } from '../webhooks/helpers.ts'


if (!process.env.DATABASE_URL || !process.env.REDIS_URL) {
  t.pass('skipped: needs DATABASE_URL and REDIS_URL (several API processes share one PostgreSQL and one Redis)')
} else {
  const SECRET_KEY = process.env.SECRET_KEY ?? 'respin-tests-shared-secret-box-key-0123456789'
  const RATE = 40
  const env = {
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_TIMEOUT_MS: '1500',
    RATE_LIMIT_INGEST_PER_MIN: String(RATE),
    INGEST_ACK_AFTER: 'postgres',
    CAMPAIGN_ENGINE_POLL_MS: '200',
    SECRET_KEY,
  }
  const h = await startHarness(t, { env })
  const sql = h.app.ctx.sql
  const dataDir = mkdtempSync(join(tmpdir(), 'respin-adv-procs-'))
  const b = await spawnServer({ ...env, DATA_DIR: dataDir, ADMIN_KEY: h.adminKey })
  t.teardown(async () => {
    if (b.proc.exitCode === null && b.proc.signalCode === null) b.proc.kill('SIGKILL')
    await b.exited
    rmSync(dataDir, { recursive: true, force: true })
  })
  const bPid = b.proc.pid!

  /** A request to process B (the child). */
  const B = (method: string, path: string, key: string, body?: unknown) => call(b.origin, method, path, key, body)
  /** A request to process A (the harness). */
  const A = async (method: string, path: string, key: string, body?: unknown) => {
    const res = await h.request(method, path, { key, body })
    return { status: res.status, body: res.body, headers: res.headers }
  }
  let seq = 0
  const eid = (p = 'e') => `${p}-${process.pid}-${Date.now().toString(36)}-${++seq}`
  const must = async <R extends { status: number; body: any }>(p: Promise<R>, status: number): Promise<any> => {
    const res = await p
    if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`)
    return res.body
  }
  const playerIdOf = async (tenant: TestTenant, external: string, brandId = tenant.brand.id) =>
    (await sql<{ id: string }[]>`select id from players where brand_id = ${brandId} and external_id = ${external}`)[0]?.id
  /** No event-stream row of the tenant left to apply (in either process). */
  const streamDrained = (tenantId: string) =>
    waitFor('the event stream drained', async () => (await sql`select 1 from event_stream where tenant_id = ${tenantId} and failed_at is null limit 1`).length === 0)

  // ───────────────────────────── webhooks ─────────────────────────────

  /**
   * A receiver that also tells which process is making each attempt: while an attempt is in flight the
   * delivery row is leased to its process (work-loop owner token `<pid>-<uuid>:<n>`).
   */
  async function webhookReceiver(t: Parameters<typeof startReceiver>[0]) {
    const rx = await startReceiver(t)
    const byWhom = new Map<Received, number | undefined>()
    const answer = async (r: Received, res: import('node:http').ServerResponse) => {
      const [row] = await sql<{ lease_owner: string | null }[]>`select lease_owner from webhook_deliveries where id = ${r.headers['webhook-id'] as string}`
      byWhom.set(r, row?.lease_owner ? Number(row.lease_owner.split('-')[0]) : undefined)
      res.end('ok')
    }
    for (const p of ['/old', '/new', '/hook']) rx.on(p, answer)
    return { rx, byWhom }
  }
  const sigOf = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`

  t.test('a webhook endpoint changed through A (secret rotated, URL changed, deactivated): B follows each change at once', async (t) => {
    // docs/webhooks.md, Rotation: after the PATCH "X-Respin-Signature [carries] the new one" and
    // webhook-signature both (the rotate response is the receiver's cue to switch); contract: PATCH accepts
    // url and active; docs/webhooks.md 6: an inactive endpoint "gets no new deliveries; its pending ones
    // wait". B sends a steady stream of pings it created itself while A changes the endpoint; an attempt
    // that started more than MARGIN ms after A answered must follow the change. An attempt's start is the
    // `at` of its log entry, taken right after it read the endpoint, before signing: judged by its arrival
    // instead, an attempt of A's own that read the endpoint just before the change arrived 150 ms and, on
    // a slower machine, 400 ms after A answered (the HTTP worker and this busy receiver process). The
    // margin covers a read of the endpoint already in flight when the change committed.
    const MARGIN = 400
    const PHASE = 1600
    const tenant = await h.createTenant()
    const w = await webhookReceiver(t)
    const created = await must(B('POST', '/webhooks', tenant.key, { url: w.rx.url('/old'), events: ['player.created'] }), 201)
    const id = created.data.id as string
    let streaming = true
    const pinger = (async () => {
      while (streaming) {
        await B('POST', `/webhooks/${id}/ping`, tenant.key).catch(() => undefined)
        await sleep(60)
      }
    })()
    t.teardown(() => {
      streaming = false
      return pinger
    })
    await waitFor('B attempting its pings', () => [...w.byWhom.values()].includes(bPid))
    await sleep(300)
    const fromB = (rs: Received[]) => rs.filter((r) => w.byWhom.get(r) === bPid).length
    /** The requests received whose attempt started more than MARGIN ms after `at` (once each is logged). */
    async function startedAfter(at: number): Promise<Received[]> {
      const received = [...w.rx.received]
      const ids = received.map((r) => r.headers['webhook-id'] as string)
      const started = new Map<string, number>()
      await waitFor('every received attempt logged', async () => {
        const rows = await sql<{ id: string; at: string | null }[]>`
          select id::text, attempts->-1->>'at' as at from webhook_deliveries where id = any(${ids}::uuid[])`
        for (const r of rows) if (r.at) started.set(r.id, Date.parse(r.at))
        return ids.every((i) => started.has(i))
      })
      return received.filter((r) => (started.get(r.headers['webhook-id'] as string) as number) > at + MARGIN)
    }

    const rotated = await must(A('PATCH', `/webhooks/${id}`, tenant.key, { rotate_secret: true }), 200)
    const t1 = Date.now()
    const secret = rotated.data.secret as string
    await sleep(PHASE)
    const phase1 = await startedAfter(t1)
    const stale = phase1.filter((r) => r.headers['x-respin-signature'] !== sigOf(secret, r.body))
    t.ok(fromB(phase1) > 0, `B attempted ${fromB(phase1)} of the ${phase1.length} deliveries after the rotation`)
    t.equal(stale.length, 0, `X-Respin-Signature by the new secret (${stale.length} signed by the old one, ${fromB(stale)} of them by B)`)
    t.ok(phase1.every((r) => String(r.headers['webhook-signature']).split(' ').length === 2), 'webhook-signature carries both secrets during the overlap')

    await must(A('PATCH', `/webhooks/${id}`, tenant.key, { url: w.rx.url('/new') }), 200)
    const t2 = Date.now()
    await sleep(PHASE)
    const phase2 = await startedAfter(t2)
    const toOld = phase2.filter((r) => r.path === '/old')
    t.ok(phase2.some((r) => r.path === '/new'), 'deliveries reach the new URL')
    t.equal(toOld.length, 0, `nothing to the old URL after the change (${toOld.length} sent there, ${fromB(toOld)} by B)`)

    await must(A('PATCH', `/webhooks/${id}`, tenant.key, { active: false }), 200)
    const t3 = Date.now()
    await sleep(PHASE)
    const phase3 = await startedAfter(t3)
    t.equal(phase3.length, 0, `nothing sent once inactive (${phase3.length} sent, ${fromB(phase3)} by B)`)
    streaming = false
    await pinger
    // An inactive endpoint takes no new delivery, a ping included (contract: 400 ENDPOINT_INACTIVE), in B too.
    const refused = await B('POST', `/webhooks/${id}/ping`, tenant.key)
    t.equal(refused.status, 400, 'B refuses a ping for the inactive endpoint')
    t.equal(refused.body?.details?.reason, 'ENDPOINT_INACTIVE', JSON.stringify(refused.body))
  })

  // ───────────────────────────── ingestion budgets and dedupe ─────────────────────────────

  t.test('the ingestion budget is per tenant across processes, not per process', async (t) => {
    // Spec: "Ingestion rate | per tenant per minute"; src/events/rate-limit.ts: "Shared by every process
    // through Redis". Budget RATE per minute in both processes: 2 × RATE requests split over them → RATE 429s.
    for (let attempt = 0; attempt < 3; attempt++) {
      const tenant = await h.createTenant()
      const other = await h.createTenant()
      const minute = Math.floor(Date.now() / 60_000)
      if (Date.now() % 60_000 > 55_000) {
        await sleep(60_000 - (Date.now() % 60_000) + 50)
        continue
      }
      const results = await Promise.all(
        Array.from({ length: 2 * RATE }, (_, i) =>
          (i % 2 ? B : A)('POST', '/events', tenant.key, { player_id: `rl-${i % 5}`, event_type: 'login', event_id: eid('rl') })),
      )
      if (Math.floor(Date.now() / 60_000) !== minute) continue // the window turned during the burst: again
      const limited = results.filter((r) => r.status === 429)
      t.equal(results.filter((r) => r.status === 200).length, RATE, `${RATE} accepted in all`)
      t.equal(limited.length, RATE, `${RATE} refused in all (A: ${results.filter((r, i) => i % 2 === 0 && r.status === 429).length}, B: ${results.filter((r, i) => i % 2 === 1 && r.status === 429).length})`)
      t.ok(limited.every((r) => r.body?.code === 'RATE_LIMITED' && Number(r.headers.get('retry-after')) >= 1), '429 RATE_LIMITED with Retry-After')
      t.equal((await B('POST', '/events', other.key, { player_id: 'x', event_type: 'login' })).status, 200, 'another tenant keeps its own budget')
      return
    }
    t.fail('could not run the burst inside one minute window')
  })

  t.test('an event rejected by the mapping in B claims no event_id; accepted after a mapping change through A, then a duplicate in both', async (t) => {
    // docs/ingestion.md: "Rejected and ignored events claim no event_id"; the mapping "applies from the
    // next request" in every process; dedupe across processes through Redis.
    const tenant = await h.createTenant()
    await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'legacy_*', action: 'reject' }], default_action: 'accept' })
    const ev = { player_id: 'dd-1', event_type: 'legacy_login', event_id: eid('dd') }
    const first = await must(B('POST', '/events', tenant.key, ev), 200)
    t.equal(first.rejected, 1, 'rejected in B')
    t.equal((await must(h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'legacy_*', type: 'login' }], default_action: 'accept' }), 200)).data.rules.length, 1)
    const second = await must(B('POST', '/events', tenant.key, ev), 200)
    t.match(second, { stored: 1, deduped: 0, rejected: 0 }, 'mapped and stored by B: the rejection claimed nothing')
    const [a2, b2] = await Promise.all([A('POST', '/events', tenant.key, ev), B('POST', '/events', tenant.key, ev)])
    t.match([a2.body, b2.body], [{ deduped: 1, stored: 0 }, { deduped: 1, stored: 0 }], 'a re-send to either process is a duplicate')
    const [row] = await sql<{ n: number }[]>`select event_count::int as n from player_profiles where player_id = ${(await playerIdOf(tenant, 'dd-1'))!}`
    t.equal(row?.n, 1, 'the profile counted the event once')
  })

  // ───────────────────────────── keys and brands ─────────────────────────────

  t.test("a key pinned to a brand deactivated through A is refused by B at once; reactivated, accepted at once", async (t) => {
    // docs/tenancy.md: a pinned key always acts on its brand; hints to an inactive brand are refused; the
    // brand cache is dropped on every process before the admin call answers.
    const tenant = await h.createTenant()
    const vip = await tenant.createBrand('vip')
    const pinned = await tenant.createKey({ brand: 'vip' })
    t.equal((await B('GET', '/players', pinned.key)).status, 200, 'warm in B')
    t.equal((await must(h.admin('PATCH', `/brands/${vip.id}`, { active: false }), 200)).data.active, false)
    const refused = await B('POST', '/events', pinned.key, { player_id: 'pin-1', event_type: 'login' })
    t.equal(refused.status, 400, 'refused at once in B')
    t.equal(refused.body?.code, 'BAD_REQUEST')
    t.equal(await playerIdOf(tenant, 'pin-1', vip.id), undefined, 'nothing written to the inactive brand')
    t.equal(await playerIdOf(tenant, 'pin-1'), undefined, 'nor to another brand')
    await must(h.admin('PATCH', `/brands/${vip.id}`, { active: true }), 200)
    t.equal((await B('POST', '/events', pinned.key, { player_id: 'pin-1', event_type: 'login' })).status, 200, 'accepted at once in B')
    t.ok(await playerIdOf(tenant, 'pin-1', vip.id), 'in its brand')
  })

  t.test('a key revoked with the admin CLI fails at once in both running processes', async (t) => {
    // docs/tenancy.md: the change publishes on the bus and is acknowledged by every listening process;
    // src/admin/cli.ts publishes the same invalidations after its commit.
    const tenant = await h.createTenant()
    const { id, key } = await tenant.createKey({ name: 'to-revoke' })
    t.equal((await A('GET', '/players', key)).status, 200, 'warm in A')
    t.equal((await B('GET', '/players', key)).status, 200, 'warm in B')
    const cliDir = mkdtempSync(join(tmpdir(), 'respin-adv-procs-cli-'))
    t.teardown(() => rmSync(cliDir, { recursive: true, force: true }))
    const out = await runCli(cliDir, 'key:revoke', '--id', id)
    t.equal(out.status, 0, out.stderr)
    t.equal(JSON.parse(out.stdout).id, id)
    t.equal((await A('GET', '/players', key)).status, 401, 'refused in A')
    t.equal((await B('GET', '/players', key)).status, 401, 'refused in B')
    t.equal((await B('POST', '/events', key, { player_id: 'x', event_type: 'login' })).status, 401, 'ingestion refused in B')
  })

  t.test('a segment export cursor issued by one process continues in the other', async (t) => {
    // Cursors are signed with the installation secret "shared by all processes" (docs/segments.md); the
    // spec: next_cursor pages on; every member once.
    const tenant = await h.createTenant()
    for (let i = 0; i < 5; i++) await must(A('POST', '/players', tenant.key, { external_id: `seg-${i}`, email: `seg-${i}@example.com` }), 201)
    const seg = (await must(B('POST', '/segments', tenant.key, { name: 'all', type: 'dynamic', rules: { field: 'external_id', op: 'contains', value: 'seg-' } }), 201)).data.id
    const seen: string[] = []
    let cursor: string | null = null
    for (let page = 0; page < 10; page++) {
      const path = `/segments/${seg}/export?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`
      const res = await (page % 2 ? B : A)('GET', path, tenant.key)
      t.equal(res.status, 200, `page ${page} through ${page % 2 ? 'B' : 'A'}`)
      seen.push(...res.body.data.map((r: { external_id: string }) => r.external_id))
      cursor = res.body.next_cursor
      if (!cursor) break
    }
    t.same(seen.sort(), ['seg-0', 'seg-1', 'seg-2', 'seg-3', 'seg-4'], 'every member once across both processes')
  })

  t.test('a frequency cap holds for one player when both processes send to them at once', async (t) => {
    // docs/delivery.md: caps count the marketing messages handed to a channel; "Two processes sending to
    // one player at once could both pass a cap" is prevented by the player's lock around check and mark.
    const tenant = await h.createTenant()
    await must(B('PUT', '/settings/delivery', tenant.key, { frequency_caps: [{ channel: 'in_app', max: 1, per: 'day' }] }), 200)
    const player = (await must(A('POST', '/players', tenant.key, { external_id: 'capped' }), 201)).data.id as string
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      (i % 2 ? B : A)('POST', '/notifications/send', tenant.key, { player_id: player, channel: 'in_app', payload: { body: `m${i}` } })))
    t.ok(results.every((r) => r.status === 202), 'all accepted')
    const rows = await waitFor('every message settled', async () => {
      const r = await sql<{ status: string; reason: string | null }[]>`select status, reason from notifications where player_id = ${player}`
      return r.length === 8 && r.every((x) => x.status !== 'queued') ? [...r] : undefined
    }, 15_000)
    t.equal(rows.filter((r) => r.status === 'delivered').length, 1, 'one delivered')
    t.same([...new Set(rows.filter((r) => r.status !== 'delivered').map((r) => `${r.status}:${r.reason}`))], ['suppressed:frequency_cap'], 'the rest suppressed by the cap')
  })

  // ───────────────────────────── engines' definitions ─────────────────────────────

  t.test('missions and a tournament changed through A apply to the very next event sent to B', async (t) => {
    // docs/gamification.md: "Creating, patching or deleting a mission, badge or tournament publishes the
    // change on the bus before the request returns, so every process reloads the interest and its
    // compiled rules". Each event is applied exactly once (docs/engines.md).
    const tenant = await h.createTenant()
    // B's caches warm for the brand: interest (no definitions) and compiled definitions.
    await must(B('POST', '/events', tenant.key, { player_id: 'g1', event_type: 'login', event_id: eid('g') }), 200)
    const deposits = (await must(A('POST', '/gamification/missions', tenant.key, { name: 'Deposits', type: 'one_time', rules: { event_type: 'deposit', target: 100 } }), 201)).data
    const logins = (await must(A('POST', '/gamification/missions', tenant.key, { name: 'Logins', type: 'one_time', rules: { event_type: 'login', target: 100 } }), 201)).data
    const race = (await must(A('POST', '/tournaments', tenant.key, { name: 'Race', status: 'active', game_config: { metric: 'bet_count' } }), 201)).data
    await must(B('POST', '/events', tenant.key, { events: [
      { player_id: 'g1', event_type: 'deposit', event_id: eid('g'), payload: { amount: 10, currency: 'EUR' } },
      { player_id: 'g1', event_type: 'bet', event_id: eid('g'), payload: { amount: 1, currency: 'EUR' } },
      { player_id: 'g1', event_type: 'login', event_id: eid('g') },
    ] }), 200)
    const pid = (await playerIdOf(tenant, 'g1'))!
    const progress = async (missionId: string) =>
      Number((await sql<{ value: string }[]>`select value from player_missions where mission_id = ${missionId} and player_id = ${pid}`)[0]?.value ?? 0)
    const score = async () => Number((await sql<{ score: string }[]>`select score from tournament_participants where tournament_id = ${race.id} and player_id = ${pid}`)[0]?.score ?? 0)
    await waitFor('the login counted', async () => (await progress(logins.id)) === 1)
    await streamDrained(tenant.id)
    t.equal(await progress(deposits.id), 1, 'a mission created through A counts the next deposit sent to B')
    t.equal(await score(), 1, 'a tournament created through A scores the next bet sent to B')

    // Cancelled / ended / re-targeted through A, then events to B.
    await must(A('PATCH', `/gamification/missions/${deposits.id}`, tenant.key, { status: 'cancelled' }), 200)
    await must(A('PATCH', `/tournaments/${race.id}`, tenant.key, { status: 'ended' }), 200)
    await must(A('PATCH', `/gamification/missions/${logins.id}`, tenant.key, { rules: { event_type: 'login', target: 100, filters: [{ field: 'platform', op: 'eq', value: 'ios' }] } }), 200)
    const sentinel = (await must(A('POST', '/gamification/missions', tenant.key, { name: 'Withdrawals', type: 'one_time', rules: { event_type: 'withdrawal', target: 100 } }), 201)).data
    await must(B('POST', '/events', tenant.key, { events: [
      { player_id: 'g1', event_type: 'deposit', event_id: eid('g'), payload: { amount: 10, currency: 'EUR' } },
      { player_id: 'g1', event_type: 'bet', event_id: eid('g'), payload: { amount: 1, currency: 'EUR' } },
      { player_id: 'g1', event_type: 'login', event_id: eid('g'), payload: { platform: 'web' } },
      { player_id: 'g1', event_type: 'withdrawal', event_id: eid('g'), payload: { amount: 1, currency: 'EUR' } },
    ] }), 200)
    await waitFor('the sentinel withdrawal counted', async () => (await progress(sentinel.id)) === 1)
    await streamDrained(tenant.id)
    t.equal(await progress(deposits.id), 1, 'a mission cancelled through A no longer counts in B')
    t.equal(await progress(logins.id), 1, "a mission's new filter (set through A) applies in B: a web login does not count")
    t.equal(await score(), 1, 'a tournament ended through A no longer scores in B')
  })

  t.test('a triggered campaign started, re-filtered and paused through A governs the next events sent to B', async (t) => {
    // docs/campaigns.md, triggered: enrolls the player of each matching event received while running
    // (received while paused: nobody); a PATCH reloads its brand's stream interest at once.
    const tenant = await h.createTenant()
    await must(B('POST', '/events', tenant.key, { player_id: 'c0', event_type: 'deposit', event_id: eid('c'), payload: { amount: 100, currency: 'EUR' } }), 200)
    const tpl = (await must(A('POST', '/notifications/templates', tenant.key, { name: 'hi', channel: 'in_app', subject: 'Hi', body: 'Hello' }), 201)).data.id as string
    const config = (min: number) => ({ templates: { in_app: tpl }, trigger: { event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: min }] } })
    const c = (await must(A('POST', '/campaigns', tenant.key, { name: 'c', type: 'triggered', channels: ['in_app'], config: config(50) }), 201)).data
    await must(A('PATCH', `/campaigns/${c.id}`, tenant.key, { status: 'running' }), 200)
    const deposit = (player: string, amount: number) => ({ player_id: player, event_type: 'deposit', event_id: eid('c'), payload: { amount, currency: 'EUR' } })
    const sentTo = async () =>
      (await sql<{ external_id: string }[]>`select p.external_id from notifications n join players p on p.id = n.player_id where n.campaign_id = ${c.id} order by 1`).map((r) => r.external_id)
    await must(B('POST', '/events', tenant.key, deposit('c1', 100)), 200)
    await waitFor('c1 enrolled', async () => (await sentTo()).includes('c1'))
    // The filter lowered through A: a deposit of 10 to B now matches.
    await must(A('PATCH', `/campaigns/${c.id}`, tenant.key, { config: config(5) }), 200)
    await must(B('POST', '/events', tenant.key, deposit('c2', 10)), 200)
    await waitFor('c2 enrolled', async () => (await sentTo()).includes('c2'), 8000).catch(() => undefined)
    t.same(await sentTo(), ['c1', 'c2'], 'the lowered filter applied to the next event sent to B')
    // Paused through A: a matching deposit to B enrolls nobody, even once resumed.
    await must(A('PATCH', `/campaigns/${c.id}`, tenant.key, { status: 'paused' }), 200)
    await must(B('POST', '/events', tenant.key, deposit('c3', 100)), 200)
    await streamDrained(tenant.id)
    await must(A('PATCH', `/campaigns/${c.id}`, tenant.key, { status: 'running' }), 200)
    await must(B('POST', '/events', tenant.key, deposit('c4', 100)), 200)
    await waitFor('c4 enrolled', async () => (await sentTo()).includes('c4'))
    await streamDrained(tenant.id)
    t.same(await sentTo(), ['c1', 'c2', 'c4'], 'nobody for the deposit received while paused')
  })

  // ───────────────────────────── players ─────────────────────────────

  t.test("a player erased through A while B caches its id: B's next event for that external id is a new player's", async (t) => {
    // docs/operating.md, Erasure: "Events received after the erasure (a new registration with the same
    // external id) are a new player's and are left alone"; docs/ingestion.md: a stale player-id cache
    // entry is detected and the group retried through the upsert.
    const tenant = await h.createTenant()
    await must(B('POST', '/events', tenant.key, { player_id: 'gone', event_type: 'login', event_id: eid('er') }), 200)
    await must(B('POST', '/events', tenant.key, { player_id: 'gone', event_type: 'login', event_id: eid('er') }), 200) // B knows its id now
    const oldId = (await playerIdOf(tenant, 'gone'))!
    const erased = await A('DELETE', `/players/${oldId}`, tenant.key)
    t.equal(erased.status, 202)
    const again = await B('POST', '/events', tenant.key, { player_id: 'gone', event_type: 'deposit', event_id: eid('er'), payload: { amount: 5, currency: 'EUR' } })
    t.equal(again.status, 200, JSON.stringify(again.body))
    t.equal(again.body?.stored, 1)
    const newId = await playerIdOf(tenant, 'gone')
    t.ok(newId && newId !== oldId, 'a new player under the external id')
    await waitFor('the erasure completed', async () => (await A('GET', `/players/${oldId}/erasure`, tenant.key)).body?.data?.status === 'completed', 20_000)
    const got = await B('GET', `/players/${newId}`, tenant.key)
    t.equal(got.status, 200, 'the new player survives the erasure of the old one')
    t.equal(got.body?.data?.external_id, 'gone')
    const [profile] = await sql<{ event_count: number; deposit_count: number }[]>`select event_count, deposit_count from player_profiles where player_id = ${newId!}`
    t.match(profile, { event_count: 1, deposit_count: 1 }, "the new player's profile holds only its own event")
    t.equal((await B('GET', `/players/${oldId}`, tenant.key)).status, 404, 'the erased id is gone in B too')
  })

  // ───────────────────────────── inbox ─────────────────────────────

  t.test('an inbox token issued by A opens a socket on B, which hears the message sent through A', async (t) => {
    // contract-engines: the socket receives each new in-app message "from whichever API process delivered it".
    const tenant = await h.createTenant()
    const player = (await must(A('POST', '/players', tenant.key, { external_id: 'inbox-1' }), 201)).data.id as string
    const token = (await must(A('POST', `/players/${player}/inbox/token`, tenant.key), 201)).data.token as string
    const items: any[] = []
    const ws = new WebSocket(`ws://127.0.0.1:${b.port}/api/v1/inbox/ws?token=${encodeURIComponent(token)}`)
    t.teardown(() => ws.close())
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
    })
    ws.on('message', (m) => items.push(JSON.parse(String(m))))
    const sent = (await must(A('POST', '/notifications/send', tenant.key, { player_id: player, channel: 'in_app', payload: { body: 'from A' } }), 202)).notification_id
    await waitFor('the message on the socket', () => items.length >= 1, 8000)
    t.equal(items[0]?.type, 'message')
    t.equal(items[0]?.data?.id, sent)
    t.equal(items[0]?.data?.body, 'from A')
    await sleep(300)
    t.equal(items.length, 1, 'heard once')
  })

  // ───────────────────────────── kill -9 of one process ─────────────────────────────

  t.test('kill -9 of B with a webhook attempt and an ingest group in flight: A finishes both, each exactly once', async (t) => {
    // docs/webhooks.md 5: "A process that dies mid-attempt leaves its deliveries leased; after the lease
    // (timeout + 5 s) another process ... sends them again. The receiver may then see a delivery twice".
    // docs/ingestion.md, Dedupe 3: a pending claim of a dead owner is verified and taken over, so the
    // client's retry of an event whose request died with B is stored once (never lost, never twice), and
    // docs/engines.md: each stored event is applied exactly once by each interested consumer.
    const tenant = await h.createTenant()
    const rx = await startReceiver(t)
    let hold = true
    const seen: string[] = []
    rx.on('/hook', async (r, res) => {
      const [row] = await sql<{ lease_owner: string | null }[]>`select lease_owner from webhook_deliveries where id = ${r.headers['webhook-id'] as string}`
      seen.push(row?.lease_owner ?? '')
      if (hold && row?.lease_owner?.startsWith(`${bPid}-`)) return // B's attempt hangs until B dies
      res.end('ok')
    })
    const created = await must(B('POST', '/webhooks', tenant.key, { url: rx.url('/hook'), events: ['player.created'] }), 201)
    const id = created.data.id as string
    let victim: string | undefined
    for (let i = 0; i < 10 && !victim; i++) {
      const ping = (await must(B('POST', `/webhooks/${id}/ping`, tenant.key), 202)).data.id as string
      await waitFor('the ping attempted', () => rx.received.some((x) => x.headers['webhook-id'] === ping) && seen.length === rx.received.length)
      if (seen[seen.length - 1]!.startsWith(`${bPid}-`)) victim = ping
    }
    t.ok(victim, 'B has a webhook attempt in flight')

    // An ingest group of B held inside its PostgreSQL transaction: the player's profile row is locked here.
    const mission = (await must(A('POST', '/gamification/missions', tenant.key, { name: 'Deposits', type: 'one_time', rules: { event_type: 'deposit', target: 100 } }), 201)).data
    await must(B('POST', '/events', tenant.key, { player_id: 'k1', event_type: 'login', event_id: eid('k') }), 200)
    const pid = (await playerIdOf(tenant, 'k1'))!
    let release!: () => void
    const released = new Promise<void>((r) => (release = r))
    let locked!: () => void
    const isLocked = new Promise<void>((r) => (locked = r))
    const holder = sql.begin(async (tx) => {
      await tx`select 1 from player_profiles where player_id = ${pid} for update`
      locked()
      await released
    })
    await isLocked
    const stuckEvent = { player_id: 'k1', event_type: 'deposit', event_id: eid('stuck'), payload: { amount: 5, currency: 'EUR' } }
    const stuck = B('POST', '/events', tenant.key, stuckEvent).catch((err: unknown) => ({ status: 0, body: String(err), headers: new Headers() }))
    await waitFor('B waiting on the profile lock', async () => (await sql`select 1 from pg_locks l join pg_stat_activity a on a.pid = l.pid where not l.granted and a.application_name = 'respin'`).length > 0)

    b.proc.kill('SIGKILL')
    await b.exited
    hold = false
    release()
    await holder
    const killedAt = Date.now()
    t.not((await stuck).status, 200, 'B never acknowledged the stuck event')

    // The client retries the event on A.
    const retried = await A('POST', '/events', tenant.key, stuckEvent)
    t.equal(retried.status, 200, `the retry on A answered ${Date.now() - killedAt} ms after the kill: ${JSON.stringify(retried.body)}`)
    t.equal((retried.body?.stored ?? 0) + (retried.body?.deduped ?? 0), 1, 'stored, or found stored: one event')
    t.match((await A('POST', '/events', tenant.key, stuckEvent)).body, { stored: 0, deduped: 1 }, 'a further retry is a duplicate')
    await streamDrained(tenant.id)
    const [profile] = await sql<{ event_count: number; deposit_count: number }[]>`select event_count, deposit_count from player_profiles where player_id = ${pid}`
    t.match(profile, { event_count: 2, deposit_count: 1 }, 'the profile counted the stuck deposit once')
    const [pm] = await sql<{ value: string }[]>`select value from player_missions where mission_id = ${mission.id} and player_id = ${pid}`
    t.equal(Number(pm?.value ?? 0), 1, 'the mission counted the stuck deposit once')

    const done = await waitFor('the delivery taken over by A', async () => {
      const [row] = await sql<{ status: string }[]>`select status from webhook_deliveries where id = ${victim!}`
      return row?.status === 'successful' && row
    }, 20_000)
    t.ok(done)
    t.ok(Date.now() - killedAt < 15_000, `taken over ${Date.now() - killedAt} ms after the kill (lease: timeout 1.5 s + 5 s)`)
    await sleep(500)
    const copies = rx.received.filter((x) => x.headers['webhook-id'] === victim)
    t.equal(copies.length, 2, 'the interrupted attempt and one more, from A')
    const list = await A('GET', `/webhooks/${id}/deliveries`, tenant.key)
    t.equal(list.body.data.find((d: { id: string }) => d.id === victim)?.status, 'successful', 'listed successful')
  })
}


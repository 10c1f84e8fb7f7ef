// Adversarial checks, part 2: what webhooks.test.ts and adversarial.test.ts leave out. Every catalog event of
// the spec and contract-engines §2 fired from its real cause (the API, ingestion, the gamification,
// tournament, campaign and delivery engines) and received by a real HTTP receiver with its data as the
// spec/contract name it; each fired once per cause (duplicate event_ids, parallel re-sends, no-op and
// refused requests fire nothing more); only for committed changes (failures injected after the outbox
// write roll it back); brand scope and subscription filters for engine events; the deliveries list's
// filters and cursor; redeliver; PATCH (active, events, URL policy, atomic refusal); rotation overlap with
// standardwebhooks and @octokit/webhooks-methods.
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods'
import { randomUUID } from 'node:crypto'
import { SMTPServer } from 'smtp-server'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import { startHarness, type Harness, type TestTenant } from '../helpers/harness.ts'
import { sleep, startReceiver, waitFor, type Received, type Receiver } from './helpers.ts'

const uid = (tag: string) => `${tag}-${randomUUID()}`

function kit(h: Harness, rx: Receiver) {
  const sql = h.app.ctx.sql
  let n = 0
  const path = () => `/adv2-${++n}`

  async function must(p: Promise<{ status: number; body: any; text: string }>, status: number, what = ''): Promise<any> {
    const res = await p
    if (res.status !== status) throw new Error(`${what} expected ${status}, got ${res.status}: ${res.text}`)
    return res.body
  }
  const create = async (tenant: TestTenant, p: string, body: Record<string, unknown>, o: { key?: string; headers?: Record<string, string> } = {}) =>
    (await must(h.request('POST', p, { key: o.key ?? tenant.key, headers: o.headers, body }), 201, `POST ${p}`)).data
  async function endpoint(tenant: TestTenant, body: Record<string, unknown>, key = tenant.key) {
    return (await must(h.request('POST', '/webhooks', { key, body }), 201, 'create webhook')).data as {
      id: string
      secret: string
      brand_id: string | null
      url: string
      events: string[]
    }
  }
  /** POST /events (single events get an event_id unless given); 200 expected. */
  async function ingest(tenant: TestTenant, events: Record<string, unknown>[], o: { key?: string; headers?: Record<string, string> } = {}) {
    const body = { events: events.map((e) => ({ event_id: uid('e'), ...e })) }
    return (await must(h.request('POST', '/events', { key: o.key ?? tenant.key, headers: o.headers, body }), 200, 'POST /events'))
  }
  /** The bodies' data of one event name received at one path. */
  const datas = (p: string, event: string) => rx.at(p).filter((r) => r.json?.event === event).map((r) => r.json.data)
  const requests = (p: string, event: string) => rx.at(p).filter((r) => r.json?.event === event)
  /**
   * Everything caused so far has been delivered: the event stream applied what was ingested, the tenant's
   * outbox is fanned out and none of its deliveries (of `endpointIds`, or all) is pending. The receiver
   * records a request before its outcome is written, so after this it holds every delivery.
   */
  async function drain(tenant: TestTenant, endpointIds?: string[]) {
    await h.app.ctx.stream?.idle()
    await waitFor('outbox fanned out and deliveries settled', async () => {
      const [r] = await sql<{ o: number; d: number }[]>`
        select (select count(*)::int from outbox where tenant_id = ${tenant.id} and dispatched_at is null) as o,
               (select count(*)::int from webhook_deliveries where tenant_id = ${tenant.id} and status = 'pending'
                  ${endpointIds ? sql`and endpoint_id = any(${endpointIds}::uuid[])` : sql``}) as d`
      return r!.o === 0 && r!.d === 0
    }, 15_000)
  }
  const verifies = async (secret: string, r: Received) => {
    let std = false
    try {
      std = !!new Webhook(secret).verify(r.body, r.headers as Record<string, string>)
    } catch {
      std = false
    }
    return std && (await verifyGithubStyle(secret, r.body, r.headers['x-respin-signature'] as string))
  }
  const deliveries = async (tenant: TestTenant, id: string, query: Record<string, string | number> = {}) =>
    must(h.request('GET', `/webhooks/${id}/deliveries`, { key: tenant.key, query }), 200, 'deliveries')
  /** Pages through the deliveries list with `query`, returning every id in order. */
  async function pageAll(tenant: TestTenant, id: string, query: Record<string, string | number>) {
    const ids: string[] = []
    let cursor: string | undefined
    for (let i = 0; i < 200; i++) {
      const page = await deliveries(tenant, id, { ...query, ...(cursor ? { cursor } : {}) })
      ids.push(...page.data.map((d: { id: string }) => d.id))
      cursor = page.next_cursor ?? undefined
      if (!cursor) return { ids, pages: i + 1 }
    }
    throw new Error('cursor never ended')
  }
  const hasKeys = (t: Test, data: Record<string, unknown> | undefined, keys: string[], what: string) => {
    const missing = keys.filter((k) => !data || !(k in data))
    t.same(missing, [], `${what}: data carries ${keys.join(', ')}`)
  }
  return { sql, path, must, create, endpoint, ingest, datas, requests, drain, verifies, deliveries, pageAll, hasKeys }
}

t.test('webhooks adversarial 2: catalog events from their real causes', async (t) => {
  const h = await startHarness(t, {
    env: {
      WEBHOOK_ALLOW_PRIVATE: 'true',
      // The first retry after 1 s, the next ones after 5 s: a failing delivery stays pending through a test.
      WEBHOOK_RETRY_DELAYS: '1,5,5,5',
      WEBHOOK_TIMEOUT_MS: '2000',
      SEGMENT_RECOMPUTE_INTERVAL_MS: '300',
      GAMIFICATION_TICK_MS: '200',
      CAMPAIGN_ENGINE_POLL_MS: '200',
      RATE_LIMIT_INGEST_PER_MIN: '0',
      DELIVERY_RETRY_DELAYS: '0,0,0,0',
      DELIVERY_CHECK_MAX_AGE_MS: '1000',
    },
  })
  const rx = await startReceiver(t)
  const { sql, path, must, create, endpoint, ingest, datas, requests, drain, verifies, deliveries, pageAll, hasKeys } = kit(h, rx)

  t.test('bonus.granted from POST /bonuses/{id}/grant: the contract\'s data, one per grant; refused grants fire nothing', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['bonus.granted'] })
    const bonus = await create(tenant, '/bonuses', { name: 'Reload', type: 'reload', value: 25, value_type: 'percent', wagering_requirement: 30, expires_in_hours: 24 })
    const off = await create(tenant, '/bonuses', { name: 'Off', type: 'custom', value: 5, value_type: 'fixed', active: false })
    const ok = await create(tenant, '/players', { external_id: 'bg-ok' })
    const sus = await create(tenant, '/players', { external_id: 'bg-sus' })
    await must(h.request('PATCH', `/players/${sus.id}`, { key: tenant.key, body: { status: 'suspended' } }), 200)
    const grant = (bonusId: string, playerId: string, key = tenant.key) =>
      h.request('POST', `/bonuses/${bonusId}/grant`, { key, body: { player_id: playerId, reason: 'vip' } })
    const g1 = (await must(grant(bonus.id, ok.id), 201, 'grant')).data
    // "An inactive bonus is 400; a player who is not `active` is 400 details.reason: player_not_active"
    t.equal((await grant(off.id, ok.id)).status, 400, 'inactive bonus')
    const refused = await grant(bonus.id, sus.id)
    t.equal(refused.status, 400, 'suspended player')
    t.equal(refused.body.details?.reason, 'player_not_active')
    t.equal((await grant(bonus.id, randomUUID())).status, 400, 'unknown player')
    const stranger = await h.createTenant()
    t.equal((await grant(bonus.id, ok.id, stranger.key)).status, 404, 'another tenant')
    const g2 = (await must(grant(bonus.id, ok.id), 201, 'second grant')).data
    t.not(g2.id, g1.id)
    await drain(tenant)
    const got = datas(p, 'bonus.granted')
    t.same(got.map((d) => d.grant_id).sort(), [g1.id, g2.id].sort(), 'one bonus.granted per granted grant, none for the refused')
    // contract-engines §5: bonus.granted with { grant_id, bonus_id, player_id, external_id, type, value,
    // value_type, wagering_requirement, expires_at }; §2: every data carries brand_id.
    const d1 = got.find((d) => d.grant_id === g1.id)
    t.match(d1, {
      grant_id: g1.id, bonus_id: bonus.id, player_id: ok.id, external_id: 'bg-ok', type: 'reload', value: 25, value_type: 'percent',
      wagering_requirement: 30, brand_id: tenant.brand.id,
    })
    hasKeys(t, d1, ['grant_id', 'bonus_id', 'player_id', 'external_id', 'type', 'value', 'value_type', 'wagering_requirement', 'expires_at', 'brand_id'], 'bonus.granted')
    t.equal(d1?.expires_at, g1.expires_at, 'expires_at as in the grant')
    const r = requests(p, 'bonus.granted')[0]!
    t.ok(await verifies(e.secret, r), 'signed: standardwebhooks and X-Respin-Signature verify')
    t.equal(r.headers['x-respin-event'], 'bonus.granted')
  })

  t.test('a mission reward end to end: mission_completed, level_changed, badge_earned, bonus.granted once each; re-sent event_ids fire nothing', async (t) => {
    const tenant = await h.createTenant()
    const [pAll, pBadges] = [path(), path()]
    await endpoint(tenant, { url: rx.url(pAll), events: ['*'] })
    // A subscription filter: only badge events reach this one.
    await endpoint(tenant, { url: rx.url(pBadges), events: ['gamification.badge_earned'] })
    const lp = await create(tenant, '/gamification/currencies', { name: 'Loyalty', symbol: 'LP', type: 'virtual' })
    await create(tenant, '/gamification/levels', { name: 'Bronze', tier: 1, min_points: 10 })
    const silver = await create(tenant, '/gamification/levels', { name: 'Silver', tier: 2, min_points: 100 })
    const bonus = await create(tenant, '/bonuses', { name: 'Prize', type: 'free_spins', value: 10, value_type: 'spins' })
    const reward = await create(tenant, '/gamification/badges', { name: 'Reward', criteria: { event_type: 'never_sent', target: 1 } })
    const firstMission = await create(tenant, '/gamification/badges', { name: 'First mission', criteria: { missions_completed: 1 } })
    const tier2 = await create(tenant, '/gamification/badges', { name: 'Silver member', criteria: { level_tier: 2 } })
    const m = await create(tenant, '/gamification/missions', {
      name: 'Two bets', type: 'one_time', rules: { event_type: 'bet', target: 2 },
      rewards: { points: [{ currency_id: lp.id, amount: 150 }], badge_ids: [reward.id], bonus_ids: [bonus.id] },
    })
    const bet = (id: string) => ({ player_id: 'm-1', event_type: 'bet', event_id: id, payload: { amount: 1, currency: 'EUR', game: 'g' } })
    const e1 = uid('bet')
    await ingest(tenant, [bet(e1)])
    // The same event re-sent: in parallel requests and twice in one batch.
    const resent = await Promise.all([ingest(tenant, [bet(e1)]), ingest(tenant, [bet(e1)]), ingest(tenant, [bet(e1), bet(e1)])])
    t.same(resent.map((r) => r.stored), [0, 0, 0], 're-sends stored nothing')
    await drain(tenant)
    t.same(datas(pAll, 'gamification.mission_completed'), [], 'the re-sent bet counted once: 1 of 2, not completed')
    const e2 = uid('bet')
    await ingest(tenant, [bet(e2)])
    await drain(tenant)
    // After completion: the completing event re-sent, and a further bet (a one_time mission completes once).
    await ingest(tenant, [bet(e2)])
    await ingest(tenant, [bet(uid('bet'))])
    await drain(tenant)

    const created = datas(pAll, 'player.created')
    t.equal(created.length, 1, 'player.created once for the ingested player')
    const pid = created[0]?.player_id as string
    t.match(created[0], { player_id: String, external_id: 'm-1', brand_id: tenant.brand.id })
    const completed = datas(pAll, 'gamification.mission_completed')
    t.equal(completed.length, 1, 'mission_completed once')
    // contract-engines §2: gamification.mission_completed { player_id, mission_id, stage }
    t.match(completed[0], { player_id: pid, mission_id: m.id, stage: Number, brand_id: tenant.brand.id })
    hasKeys(t, completed[0], ['player_id', 'mission_id', 'stage', 'brand_id'], 'mission_completed')
    const levels = datas(pAll, 'gamification.level_changed')
    t.equal(levels.length, 1, 'one level change for one credit')
    // §2: gamification.level_changed { player_id, level_id, tier, previous_level_id }: 150 LP reach Silver.
    t.match(levels[0], { player_id: pid, level_id: silver.id, tier: 2, previous_level_id: null, brand_id: tenant.brand.id })
    hasKeys(t, levels[0], ['player_id', 'level_id', 'tier', 'previous_level_id', 'brand_id'], 'level_changed')
    const badges = datas(pAll, 'gamification.badge_earned')
    t.same(badges.map((b) => b.badge_id).sort(), [reward.id, firstMission.id, tier2.id].sort(), 'each badge earned once: reward, missions_completed, level_tier')
    t.ok(badges.every((b) => b.player_id === pid && b.brand_id === tenant.brand.id), 'badge_earned { player_id, badge_id }')
    const granted = datas(pAll, 'bonus.granted')
    t.equal(granted.length, 1, 'the reward bonus granted once')
    t.match(granted[0], { bonus_id: bonus.id, player_id: pid, external_id: 'm-1', type: 'free_spins', value: 10, value_type: 'spins', grant_id: String })
    hasKeys(t, granted[0], ['grant_id', 'bonus_id', 'player_id', 'external_id', 'type', 'value', 'value_type', 'wagering_requirement', 'expires_at'], 'bonus.granted (reward)')
    t.same(rx.at(pBadges).map((r) => r.json.event), ['gamification.badge_earned', 'gamification.badge_earned', 'gamification.badge_earned'], 'the filtered endpoint got its 3 badge events and nothing else')
  })

  t.test('points by hand: level_changed chains previous_level_id; spending, bonus-type points and a refused debit fire nothing', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['gamification.level_changed'] })
    const vp = await create(tenant, '/gamification/currencies', { name: 'VP', symbol: 'VP', type: 'virtual' })
    const bp = await create(tenant, '/gamification/currencies', { name: 'BP', symbol: 'BP', type: 'bonus' })
    const l1 = await create(tenant, '/gamification/levels', { name: 'L1', tier: 1, min_points: 10 })
    const l2 = await create(tenant, '/gamification/levels', { name: 'L2', tier: 2, min_points: 50 })
    const player = await create(tenant, '/players', { external_id: 'lv-1' })
    const points = (currency: string, amount: number) =>
      h.request('POST', `/gamification/player/${player.id}/points`, { key: tenant.key, body: { currency_id: currency, amount } })
    t.equal((await points(vp.id, 20)).status, 201)
    t.equal((await points(vp.id, 40)).status, 201)
    t.equal((await points(bp.id, 1000)).status, 201, 'points of a bonus currency do not count toward levels')
    t.equal((await points(vp.id, -1000)).status, 400, 'a debit past the balance is 400')
    t.equal((await points(vp.id, -30)).status, 201, 'spending')
    t.equal((await points(vp.id, 1)).status, 201, 'still L2')
    await drain(tenant)
    t.same(datas(p, 'gamification.level_changed').map((d) => [d.level_id, d.tier, d.previous_level_id, d.player_id]), [
      [l1.id, 1, null, player.id],
      [l2.id, 2, l1.id, player.id],
    ], 'two changes, chained')
  })

  t.test('ingestion: player.created, player.converted, badge_earned and status_changed once per cause despite re-sends', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    const badge = await create(tenant, '/gamification/badges', { name: 'Two deposits', criteria: { event_type: 'deposit', target: 2 } })
    // A new player in four parallel requests (distinct events): created once.
    await Promise.all([0, 1, 2, 3].map((i) => ingest(tenant, [{ player_id: 'in-1', event_type: i === 0 ? 'registration' : 'login' }])))
    const dep = (id: string, amount = 10) => ({ player_id: 'in-1', event_type: 'deposit', event_id: id, payload: { amount, currency: 'EUR' } })
    const d1 = uid('dep')
    const first = await ingest(tenant, [dep(d1), dep(d1)])
    t.equal(first.deduped, 1, 'a duplicate inside one batch is deduped')
    await Promise.all([ingest(tenant, [dep(d1)]), ingest(tenant, [dep(d1)]), ingest(tenant, [dep(d1)])])
    await drain(tenant)
    t.same(datas(p, 'gamification.badge_earned'), [], 'the re-sent deposit counted once: 1 of 2')
    await ingest(tenant, [dep(uid('dep'), 20)])
    await ingest(tenant, [dep(uid('dep'), 30)])
    // "Failed deposits ... never count toward FTD": a new player whose only deposit failed.
    await ingest(tenant, [{ player_id: 'in-2', event_type: 'deposit_failed', payload: { amount: 50, currency: 'EUR' } }])
    await h.app.ctx.stream?.idle() // the deposits applied before the player is suspended
    const s1 = uid('st')
    const status = (id: string, st: string) => ({ player_id: 'in-1', event_type: 'status_change', event_id: id, payload: { status: st, reason: 'kyc' } })
    await ingest(tenant, [status(s1, 'suspended')])
    await ingest(tenant, [status(s1, 'suspended')])
    await ingest(tenant, [status(uid('st'), 'suspended')]) // the same status again: no change
    await drain(tenant)

    const created = datas(p, 'player.created')
    t.same(created.map((d) => d.external_id).sort(), ['in-1', 'in-2'], 'player.created once per new player')
    const pid = created.find((d) => d.external_id === 'in-1')?.player_id
    t.match(created.find((d) => d.external_id === 'in-1'), { player_id: String, external_id: 'in-1' }, 'spec: player_id, external_id')
    const converted = datas(p, 'player.converted')
    t.equal(converted.length, 1, 'player.converted once: the first deposit only, never the failed one')
    t.match(converted[0], { player_id: pid, external_id: 'in-1' })
    t.equal(Number(converted[0]?.amount), 10, 'the first deposit')
    t.same(datas(p, 'gamification.badge_earned').map((d) => [d.badge_id, d.player_id]), [[badge.id, pid]], 'badge earned once')
    const statuses = datas(p, 'player.status_changed')
    t.equal(statuses.length, 1, 'status_changed once: re-sent and unchanged statuses fire nothing')
    t.match(statuses[0], { player_id: pid, status: 'suspended' })
  })

  t.test('player.* from the API: once per change; rejected PATCHes and repeats fire nothing', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['player.created', 'player.updated', 'player.status_changed'] })
    const player = await create(tenant, '/players', { external_id: 'pp-1', email: 'a@example.com' })
    // "Idempotent on (brand, external_id): a repeat updates": no second player.created.
    await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'pp-1', email: 'a@example.com' } })
    const patch = (body: Record<string, unknown>) => h.request('PATCH', `/players/${player.id}`, { key: tenant.key, body })
    t.equal((await patch({ status: 'suspended' })).status, 200)
    t.equal((await patch({ status: 'suspended' })).status, 200, 'the same status again')
    for (const body of [{ status: 'bogus' }, { email: 'not-an-email' }, { email: 'b@example.com', status: 'nope' }, { metadata: 'x' }]) {
      t.equal((await patch(body)).status, 400, `refused: ${JSON.stringify(body)}`)
    }
    t.equal((await h.request('GET', `/players/${player.id}`, { key: tenant.key })).body.data.email, 'a@example.com', 'a refused PATCH applies nothing')
    t.equal((await patch({ metadata: { vip: true } })).status, 200)
    t.equal((await patch({ status: 'active' })).status, 200)
    await drain(tenant)
    t.same(datas(p, 'player.created').map((d) => d.player_id), [player.id], 'created once')
    t.same(datas(p, 'player.status_changed').map((d) => [d.player_id, d.status]), [[player.id, 'suspended'], [player.id, 'active']], 'one status_changed per status change')
    const updated = datas(p, 'player.updated')
    t.ok(updated.every((d) => d.player_id === player.id), 'player.updated names the player')
    t.notOk(updated.some((d) => d.email === 'b@example.com' || d.status === 'nope' || d.status === 'bogus'), 'nothing of the refused PATCHes')
    t.ok(updated.some((d) => d.metadata?.vip === true), 'the metadata change fired player.updated')
  })

  t.test('player.updated when ingestion updates the player record (email by profile_update, status by status_change)', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['player.updated'] })
    const player = await create(tenant, '/players', { external_id: 'pu-1', email: 'old@example.com' })
    await ingest(tenant, [{ player_id: 'pu-1', event_type: 'profile_update', payload: { email: 'new@example.com' } }])
    await drain(tenant)
    const read = (await h.request('GET', `/players/${player.id}`, { key: tenant.key })).body.data
    t.equal(read.email, 'new@example.com', 'precondition: the event changed the player record\'s email')
    t.ok(datas(p, 'player.updated').some((d) => d.player_id === player.id && d.email === 'new@example.com'), 'player.updated for the email change')
    await ingest(tenant, [{ player_id: 'pu-1', event_type: 'status_change', payload: { status: 'closed' } }])
    await drain(tenant)
    t.equal((await h.request('GET', `/players/${player.id}`, { key: tenant.key })).body.data.status, 'closed', 'precondition: the record\'s status changed')
    t.ok(datas(p, 'player.updated').some((d) => d.player_id === player.id && d.status === 'closed'), 'player.updated for the status change, as PATCH fires it')
  })

  t.test('only committed changes fire: a failure after the outbox write rolls the event back with the change', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    // Failures injected into the database, after the event was written in the change's transaction:
    // PATCH writes player.updated and then player.status_changed (which fails for rb-* players);
    // POST /players writes player.created and then the profile (which fails for currency XTS).
    await sql.unsafe(`
      create or replace function respin_adv2_fail() returns trigger language plpgsql as $$ begin raise exception 'injected failure'; end $$;
      create trigger respin_adv2_outbox after insert on outbox for each row
        when (new.event = 'player.status_changed' and new.data->>'external_id' like 'rb-%') execute function respin_adv2_fail();
      create trigger respin_adv2_profile before insert or update on player_profiles for each row
        when (new.currency = 'XTS') execute function respin_adv2_fail();`)
    t.teardown(() => sql.unsafe(`
      drop trigger if exists respin_adv2_outbox on outbox;
      drop trigger if exists respin_adv2_profile on player_profiles;
      drop function if exists respin_adv2_fail();`))
    const rb = await create(tenant, '/players', { external_id: 'rb-1', email: 'rb@example.com' })
    const failedPatch = await h.request('PATCH', `/players/${rb.id}`, { key: tenant.key, body: { email: 'changed@example.com', status: 'closed' } })
    t.equal(failedPatch.status, 500, 'the injected failure fails the request')
    t.equal(failedPatch.body.code, 'INTERNAL_ERROR')
    const failedCreate = await h.request('POST', '/players', { key: tenant.key, body: { external_id: 'rb-2', currency: 'XTS' } })
    t.equal(failedCreate.status, 500)
    // A batch refused by validation stores nothing, the valid event in it included.
    const badBatch = await h.request('POST', '/events', {
      key: tenant.key,
      body: { events: [{ player_id: 'rb-3', event_type: 'registration', event_id: uid('rb') }, { player_id: 'rb-3', event_type: 'login', event_id: 'x'.repeat(129) }] },
    })
    t.equal(badBatch.status, 400, 'event_id over 128 characters')
    await ingest(tenant, [{ player_id: 'rb-4', event_type: 'registration' }]) // committed: a marker that the pipeline works
    await drain(tenant)
    const read = (await h.request('GET', `/players/${rb.id}`, { key: tenant.key })).body.data
    t.match(read, { email: 'rb@example.com', status: 'active' }, 'the PATCH rolled back')
    t.equal((await h.request('GET', '/players', { key: tenant.key, query: { search: 'rb-2' } })).body.pagination.total, 0, 'the player was not created')
    t.same(datas(p, 'player.created').map((d) => d.external_id).sort(), ['rb-1', 'rb-4'], 'player.created only for the committed players')
    t.same(datas(p, 'player.updated'), [], 'no player.updated of the rolled-back PATCH')
    t.same(datas(p, 'player.status_changed'), [], 'no status_changed either')
  })

  t.test('brand scope for engine events: a brand-scoped endpoint gets only its brand\'s, a tenant-wide one all', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = (await tenant.createKey({ brand: second.id })).key
    const [pWide, pMain, pSecond] = [path(), path(), path()]
    await endpoint(tenant, { url: rx.url(pWide), events: ['*'] })
    await endpoint(tenant, { url: rx.url(pMain), events: ['*'], brand: tenant.brand.slug })
    const bySecond = await endpoint(tenant, { url: rx.url(pSecond), events: ['*'] }, pinned)
    t.equal(bySecond.brand_id, second.id)
    const setUp = async (o: { key: string }) => {
      const bonus = await create(tenant, '/bonuses', { name: 'B', type: 'custom', value: 1, value_type: 'fixed' }, o)
      await create(tenant, '/gamification/missions', { name: 'Login', type: 'one_time', rules: { event_type: 'login', target: 1 }, rewards: { bonus_ids: [bonus.id] } }, o)
      await ingest(tenant, [{ player_id: 'same-id', event_type: 'login' }], o)
      // The login's mission applied (and its reward granted) while the player is still active: rewards skip
      // players who are not (contract-engines §5).
      await h.app.ctx.stream?.idle()
      await ingest(tenant, [{ player_id: 'same-id', event_type: 'status_change', payload: { status: 'suspended' } }], o)
    }
    await setUp({ key: tenant.key })
    await setUp({ key: pinned })
    await drain(tenant)
    // A status_change fires player.updated (changed: status) and player.status_changed, as PATCH does.
    const names = ['player.created', 'gamification.mission_completed', 'bonus.granted', 'player.updated', 'player.status_changed']
    const summary = (at: string) => rx.at(at).map((r) => `${r.json.event}@${r.json.data.brand_id}`).sort()
    t.same(summary(pMain), names.map((n) => `${n}@${tenant.brand.id}`).sort(), 'the main brand\'s endpoint: the main brand\'s events, once each')
    t.same(summary(pSecond), names.map((n) => `${n}@${second.id}`).sort(), 'the second brand\'s endpoint: the second brand\'s events, once each')
    t.same(summary(pWide), [...names.map((n) => `${n}@${tenant.brand.id}`), ...names.map((n) => `${n}@${second.id}`)].sort(), 'the tenant-wide endpoint: both')
  })

  let completedData: Record<string, any> | undefined
  t.test('a one_shot campaign: message.delivered per message with campaign_id/campaign_send_id, campaign.completed once', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['*'] })
    const players = [await create(tenant, '/players', { external_id: 'c-1' }), await create(tenant, '/players', { external_id: 'c-2' })]
    const seg = await create(tenant, '/segments', { name: 'all', type: 'dynamic', rules: {} })
    const tpl = await create(tenant, '/notifications/templates', { name: 'hi', channel: 'in_app', subject: 'Hi', body: 'Hello' })
    const c = await create(tenant, '/campaigns', {
      name: 'welcome', type: 'one_shot', channels: ['in_app'], target_segment_id: seg.id,
      config: { templates: { in_app: tpl.id }, class: 'transactional', conversion: { event_type: 'deposit', within_hours: 72 } },
    })
    await must(h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } }), 200, 'start')
    await waitFor('campaign.completed', () => datas(p, 'campaign.completed').length > 0 && datas(p, 'message.delivered').length >= 2, 15_000)
    // A move out of completed is refused and fires nothing.
    t.equal((await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } })).status, 400)
    await drain(tenant)
    t.same(datas(p, 'campaign.created').map((d) => d.campaign_id), [c.id], 'campaign.created once')
    const completed = datas(p, 'campaign.completed')
    t.equal(completed.length, 1, 'campaign.completed once')
    t.match(completed[0], { campaign_id: c.id, brand_id: tenant.brand.id })
    completedData = completed[0]
    const delivered = datas(p, 'message.delivered')
    t.equal(delivered.length, 2, 'one message.delivered per message')
    t.same(delivered.map((d) => d.player_id).sort(), players.map((x) => x.id).sort())
    const notifications = (await h.request('GET', '/notifications', { key: tenant.key, query: { campaign_id: c.id } })).body.data as { id: string; player_id: string }[]
    for (const d of delivered) {
      // spec: player_id, channel, optional campaign_send_id; contract-engines §3: notification_id, and
      // campaign_id when a campaign sent it (campaign_send_id = the notification id).
      t.match(d, { channel: 'in_app', campaign_id: c.id, brand_id: tenant.brand.id })
      t.equal(d.campaign_send_id, d.notification_id, 'campaign_send_id is the notification id')
      t.ok(notifications.some((n) => n.id === d.notification_id && n.player_id === d.player_id), 'the notification of that player')
    }
    // contract-engines §4: a player delivered a message who then makes the conversion event within the
    // window "counts once in converted (and fires player.converted with campaign_id)".
    const dep = { player_id: 'c-1', event_type: 'deposit', event_id: uid('conv'), payload: { amount: 5, currency: 'EUR' } }
    await ingest(tenant, [dep])
    await ingest(tenant, [dep]) // re-sent
    await ingest(tenant, [{ ...dep, event_id: uid('conv') }]) // a second deposit: the player converted already
    await drain(tenant)
    const conversions = datas(p, 'player.converted').filter((d) => d.campaign_id === c.id)
    t.equal(conversions.length, 1, 'player.converted with campaign_id once')
    t.match(conversions[0], { player_id: players[0].id, external_id: 'c-1', brand_id: tenant.brand.id })
  })

  t.test('campaign.completed data carries stats', async (t) => {
    t.ok(completedData, 'the campaign above completed')
    t.type(completedData?.stats, 'object', 'stats present')
    t.match(completedData?.stats, { audience: 2, delivered: Number })
  })

  t.test('delivery: message.delivered (email, in-app), message.bounced with reason, once; failed messages and in-app reads fire nothing', async (t) => {
    const smtp = new SMTPServer({
      disabledCommands: ['STARTTLS'],
      authOptional: true,
      closeTimeout: 100,
      onRcptTo(address, _session, cb) {
        if (address.address.startsWith('bounce')) return cb(Object.assign(new Error('5.1.1 no such user'), { responseCode: 550 }))
        if (address.address.startsWith('busy')) return cb(Object.assign(new Error('4.2.1 try later'), { responseCode: 451 }))
        cb()
      },
      onData(stream, _session, cb) {
        stream.on('data', () => {})
        stream.on('end', () => cb())
      },
    })
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
    t.teardown(() => new Promise<void>((resolve) => smtp.close(() => resolve())))
    const port = (smtp.server.address() as { port: number }).port
    const tenant = await h.createTenant()
    await must(h.request('PUT', '/settings/channels/email', { key: tenant.key, body: { smtp_url: `smtp://127.0.0.1:${port}`, from: 'Casino <news@casino.example>' } }), 200, 'smtp settings')
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['message.delivered', 'message.bounced', 'message.opened', 'message.clicked'] })
    const sendTo = async (email: string) => {
      const player = await create(tenant, '/players', { external_id: email, email })
      const res = await must(h.request('POST', '/notifications/send', {
        key: tenant.key, body: { player_id: player.id, channel: 'email', class: 'transactional', payload: { subject: 'S', body: 'B' } },
      }), 202, 'send')
      return { player, id: res.notification_id as string }
    }
    const good = await sendTo('good@example.com')
    const bounce = await sendTo('bounce@example.com')
    const busy = await sendTo('busy@example.com')
    // In-app, outside a campaign: one delivered; one whose template lacks a value fails ("A missing value with
    // no fallback fails the notification").
    const inApp = (await must(h.request('POST', '/notifications/send', {
      key: tenant.key, body: { player_id: good.player.id, channel: 'in_app', class: 'transactional', payload: { subject: 'S', body: 'in-app' } },
    }), 202, 'in-app send')).notification_id as string
    const tpl = await create(tenant, '/notifications/templates', { name: 'needs', channel: 'in_app', subject: 'Hi', body: 'Hi {{ nickname }}' })
    const broken = (await must(h.request('POST', '/notifications/send', {
      key: tenant.key, body: { player_id: good.player.id, channel: 'in_app', class: 'transactional', template_id: tpl.id },
    }), 202, 'broken send')).notification_id as string
    const final = async (id: string) => waitFor(`notification ${id} final`, async () => {
      const n = (await h.request('GET', `/notifications/${id}`, { key: tenant.key })).body.data
      return ['delivered', 'bounced', 'failed', 'suppressed'].includes(n?.status) && n
    }, 20_000)
    t.equal((await final(good.id)).status, 'delivered')
    t.equal((await final(bounce.id)).status, 'bounced')
    t.equal((await final(busy.id)).status, 'failed', 'transient refusals used up 5 attempts')
    t.equal((await final(inApp)).status, 'delivered')
    t.equal((await final(broken)).status, 'failed', 'missing variable')
    // "An in-app first read sets opened_at; message.opened stays email-only, as the spec says."
    t.equal((await h.request('POST', `/players/${good.player.id}/inbox/${inApp}/read`, { key: tenant.key })).status, 200)
    await drain(tenant)
    const delivered = datas(p, 'message.delivered')
    t.same(delivered.map((d) => d.notification_id).sort(), [good.id, inApp].sort(), 'message.delivered once per delivered message, for those only')
    t.match(delivered.find((d) => d.notification_id === good.id), { player_id: good.player.id, channel: 'email', brand_id: tenant.brand.id })
    t.match(delivered.find((d) => d.notification_id === inApp), { player_id: good.player.id, channel: 'in_app', brand_id: tenant.brand.id })
    t.same(datas(p, 'message.opened'), [], 'an in-app read fires no message.opened')
    t.notOk(rx.at(p).some((r) => r.json.data.notification_id === broken), 'the failed in-app message fired nothing')
    const bounced = datas(p, 'message.bounced')
    t.same(bounced.map((d) => d.notification_id), [bounce.id], 'message.bounced once, for the bounce only')
    // spec: message.bounced data `player_id`, `channel`, `reason`, optional `campaign_send_id`.
    t.match(bounced[0], { player_id: bounce.player.id, channel: 'email', reason: /550/, brand_id: tenant.brand.id })
    t.notOk(rx.at(p).some((r) => r.json.data.notification_id === busy.id), 'the failed message fired no message.* event')
  })

  t.test('tournament.ended: the top 10 with rank, player_id and score, once; its prize grants fire bonus.granted; a cancelled one fires nothing', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['tournament.ended', 'bonus.granted'] })
    const bonus = await create(tenant, '/bonuses', { name: 'Winner', type: 'custom', value: 100, value_type: 'fixed' })
    // Ends in an hour; once its bets are in, PATCH moves ends_at to now (robust to a slow machine).
    const endsAt = new Date(Date.now() + 3600_000).toISOString()
    const tr = await create(tenant, '/tournaments', {
      name: 'Sprint', status: 'active', game_config: { metric: 'bet_amount' }, ends_at: endsAt,
      prize_pool: { prizes: [{ from_rank: 1, to_rank: 1, bonus_id: bonus.id }] },
    })
    const off = await create(tenant, '/tournaments', { name: 'Off', status: 'active', game_config: { metric: 'bet_count' }, ends_at: endsAt })
    await must(h.request('PATCH', `/tournaments/${off.id}`, { key: tenant.key, body: { status: 'cancelled' } }), 200, 'cancel')
    // 11 players with distinct scores 1..11.
    await ingest(tenant, Array.from({ length: 11 }, (_, i) => ({ player_id: `t-${i + 1}`, event_type: 'bet', payload: { amount: i + 1, currency: 'EUR', game: 'g' } })))
    await h.app.ctx.stream?.idle()
    const live = (await h.request('GET', `/tournaments/${tr.id}/leaderboard`, { key: tenant.key, query: { limit: 100 } })).body
    t.equal(live.total, 11)
    const idOf = new Map<string, string>(live.data.map((r: { external_id: string; player_id: string }) => [r.external_id, r.player_id]))
    const now = new Date().toISOString()
    for (const id of [tr.id, off.id]) await must(h.request('PATCH', `/tournaments/${id}`, { key: tenant.key, body: { ends_at: now } }), 200, 'ends_at now')
    await waitFor('tournament.ended', () => datas(p, 'tournament.ended').length > 0, 15_000)
    await drain(tenant)
    await sleep(500) // a few more engine ticks: a second end would show
    await drain(tenant)
    const ended = datas(p, 'tournament.ended')
    t.equal(ended.length, 1, 'tournament.ended once, and none for the cancelled one')
    t.match(ended[0], { tournament_id: tr.id, brand_id: tenant.brand.id })
    // §2: tournament.ended { tournament_id, winners: [{ rank, player_id, score }] } (the top 10 ranks).
    const expected = Array.from({ length: 10 }, (_, i) => ({ rank: i + 1, player_id: idOf.get(`t-${11 - i}`), score: 11 - i }))
    t.same(ended[0]?.winners, expected, 'the top 10 by score, ranked')
    const granted = datas(p, 'bonus.granted')
    t.same(granted.map((d) => [d.bonus_id, d.player_id]), [[bonus.id, idOf.get('t-11')]], 'the rank-1 prize granted once')
  })

  t.test('segment.recomputed: segment_id and the new player_count when membership changes', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    await endpoint(tenant, { url: rx.url(p), events: ['segment.recomputed'] })
    const players: any[] = []
    for (let i = 0; i < 3; i++) players.push(await create(tenant, '/players', { external_id: `s-${i}` }))
    const seg = await create(tenant, '/segments', { name: 'active', type: 'dynamic', rules: { field: 'status', op: 'eq', value: 'active' } })
    const mine = () => datas(p, 'segment.recomputed').filter((d) => d.segment_id === seg.id)
    await waitFor('3 members', () => mine().some((d) => d.player_count === 3), 10_000)
    await must(h.request('PATCH', `/players/${players[0].id}`, { key: tenant.key, body: { status: 'suspended' } }), 200)
    await waitFor('2 members', () => mine().some((d) => d.player_count === 2), 10_000)
    t.ok(mine().every((d) => Number.isInteger(d.player_count) && d.brand_id === tenant.brand.id), 'segment_id, player_count (an integer), brand_id')
    t.same(mine().map((d) => d.player_count).filter((c) => c === 2 || c === 3), [3, 2], 'the counts in order')
  })

  t.test('deliveries list: status and event filters together with the cursor; every delivery once; new deliveries during paging', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    // Pings fail (they stay pending, retried later); everything else succeeds.
    rx.on(p, (r, res) => {
      res.statusCode = r.json?.event === 'webhook.ping' ? 500 : 200
      res.end()
    })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    const pingIds: string[] = []
    for (let i = 0; i < 5; i++) pingIds.push((await must(h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key }), 202, 'ping')).data.id)
    for (let i = 0; i < 4; i++) await create(tenant, '/players', { external_id: `dl-${i}` })
    await waitFor('4 successful, 5 pings tried', async () => {
      const all = (await deliveries(tenant, e.id, { limit: 100 })).data as { event: string; status: string; attempt_count: number }[]
      return all.filter((d) => d.event === 'player.created' && d.status === 'successful').length === 4 &&
        all.filter((d) => d.event === 'webhook.ping' && d.attempt_count >= 1).length === 5
    }, 15_000)
    const ok = await pageAll(tenant, e.id, { status: 'successful', limit: 1 })
    t.equal(ok.ids.length, 4, 'status=successful: the 4 player.created deliveries')
    t.equal(new Set(ok.ids).size, 4, 'each once')
    const okAll = (await deliveries(tenant, e.id, { status: 'successful' })).data as { id: string; event: string; status: string; endpoint_id: string }[]
    t.ok(okAll.every((d) => d.event === 'player.created' && d.status === 'successful' && d.endpoint_id === e.id))
    t.same(ok.ids, okAll.map((d) => d.id), 'the cursor keeps the order of one page')
    const pend = await pageAll(tenant, e.id, { status: 'pending', event: 'webhook.ping', limit: 2 })
    t.same([...pend.ids].sort(), [...pingIds].sort(), 'status=pending&event=webhook.ping, limit 2: the 5 pings once each')
    t.equal(pend.pages, 3)
    t.same((await deliveries(tenant, e.id, { status: 'successful', event: 'webhook.ping' })).data, [], 'both filters apply')
    t.same((await deliveries(tenant, e.id, { event: 'player.updated' })).data, [], 'an event with no deliveries')
    // Paging while new deliveries arrive: the rest of the scan holds exactly the older ones.
    const before = (await deliveries(tenant, e.id, { limit: 100 })).data.map((d: { id: string }) => d.id) as string[]
    const first = await deliveries(tenant, e.id, { limit: 3 })
    for (let i = 0; i < 3; i++) await create(tenant, '/players', { external_id: `dl-new-${i}` })
    await h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key })
    await waitFor('new deliveries listed', async () => (await deliveries(tenant, e.id, { limit: 100 })).data.length === before.length + 4)
    const seen = first.data.map((d: { id: string }) => d.id) as string[]
    let cursor = first.next_cursor as string | null
    while (cursor) {
      const page = await deliveries(tenant, e.id, { limit: 3, cursor })
      seen.push(...page.data.map((d: { id: string }) => d.id))
      cursor = page.next_cursor
    }
    t.same(seen, before, 'every delivery that existed once, in order; none twice')
    // Limits and validation: 400 with the spec's error body.
    t.equal((await deliveries(tenant, e.id, { limit: 100 })).data.length, before.length + 4, 'limit 100 accepted')
    const badQueries: Record<string, string | number>[] = [{ limit: 0 }, { limit: 101 }, { limit: -1 }, { status: 'successfull' }, { status: 'PENDING' }, { cursor: `${first.next_cursor}x` }, { cursor: String(first.next_cursor).replace(/^./, (c) => (c === 'A' ? 'B' : 'A')) }]
    for (const query of badQueries) {
      const res = await h.request('GET', `/webhooks/${e.id}/deliveries`, { key: tenant.key, query })
      t.equal(res.status, 400, `400 for ${JSON.stringify(query)}`)
      t.equal(res.body.code, 'BAD_REQUEST')
    }
  })

  t.test('redeliver: a new delivery of the identical body; the original untouched; chains; 404 for other tenants, brands, unknown ids', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = (await tenant.createKey({ brand: second.id })).key
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    await create(tenant, '/players', { external_id: 'rd-1' })
    await drain(tenant)
    const original = requests(p, 'player.created')[0]!
    const [d0] = (await deliveries(tenant, e.id)).data
    t.equal(d0.id, original.headers['webhook-id'])
    const redeliver = (id: string, key = tenant.key) => h.request('POST', `/webhooks/${e.id}/deliveries/${id}/redeliver`, { key })
    const r1 = (await must(redeliver(d0.id), 202, 'redeliver')).data
    t.match(r1, { event: 'player.created', endpoint_id: e.id, redelivery_of: d0.id, attempt_count: 0 })
    t.not(r1.id, d0.id, 'a new delivery')
    const r2 = (await must(redeliver(r1.id), 202, 'redeliver the redelivery')).data
    t.equal(r2.redelivery_of, r1.id)
    await drain(tenant)
    for (const r of [r1, r2]) {
      const got = rx.at(p).filter((x) => x.headers['webhook-id'] === r.id)
      t.equal(got.length, 1, 'sent once, under its own webhook-id')
      t.equal(got[0]?.body, original.body, 'the identical body, its created_at included')
      t.ok(got[0] && (await verifies(e.secret, got[0])), 'signed')
    }
    const list = (await deliveries(tenant, e.id)).data as any[]
    t.same(list.map((d) => d.id).sort(), [d0.id, r1.id, r2.id].sort(), 'all three in the log')
    t.same(list.find((d) => d.id === d0.id), d0, 'the original untouched')
    t.ok(list.filter((d) => d.id !== d0.id).every((d) => d.status === 'successful' && d.attempt_count === 1))
    const stranger = await h.createTenant()
    t.equal((await redeliver(d0.id, stranger.key)).status, 404, 'another tenant')
    t.equal((await redeliver(d0.id, pinned)).status, 404, 'a key pinned to another brand: the tenant-wide endpoint is not visible')
    t.equal((await redeliver(randomUUID())).status, 404, 'an unknown delivery')
    await drain(tenant)
    t.equal(rx.at(p).length, 3, 'nothing sent by the refused redeliveries')
  })

  t.test('PATCH: inactive gets nothing (not even later), reactivated resumes; events replaced; a refused PATCH changes nothing', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    const patch = (body: unknown) => h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body })
    t.equal((await must(patch({ active: false }), 200)).data.active, false)
    await create(tenant, '/players', { external_id: 'while-off' })
    await drain(tenant)
    t.equal((await must(patch({ active: true }), 200)).data.active, true)
    await create(tenant, '/players', { external_id: 'after-on' })
    await drain(tenant)
    t.same(datas(p, 'player.created').map((d) => d.external_id), ['after-on'], 'resumed for new events; the one of the inactive period never sent')
    t.same((await deliveries(tenant, e.id)).data.map((d: { event: string }) => d.event), ['player.created'], 'no delivery was made while inactive')
    const replaced = (await must(patch({ events: ['campaign.created'] }), 200)).data
    t.same(replaced.events, ['campaign.created'])
    await create(tenant, '/players', { external_id: 'not-subscribed' })
    const c = await create(tenant, '/campaigns', { name: 'c', type: 'one_shot', channels: ['email'] })
    await drain(tenant)
    t.same(datas(p, 'player.created').map((d) => d.external_id), ['after-on'], 'player.created no longer subscribed')
    t.same(datas(p, 'campaign.created').map((d) => d.campaign_id), [c.id])
    // Refused PATCHes apply none of their fields.
    for (const body of [
      { events: ['campaign.created', 'no.such_event'], active: false },
      { url: 'ftp://example.com/hook', active: false, events: ['*'] },
      { url: 'not a url', rotate_secret: true },
      { events: [], url: rx.url('/elsewhere') },
      // Subscriptions name catalog events or "*" (docs/webhooks.md); the spec defines no prefix wildcards.
      { events: ['gamification.*'] },
    ]) {
      const res = await patch(body)
      t.equal(res.status, 400, `refused: ${JSON.stringify(body)}`)
      t.notOk(res.body?.data, 'no endpoint in a refusal')
      t.notOk(/"secret"/.test(res.text), 'no secret in a refusal')
    }
    const now = (await must(h.request('GET', `/webhooks/${e.id}`, { key: tenant.key }), 200)).data
    t.match(now, { url: rx.url(p), events: ['campaign.created'], active: true }, 'unchanged by the refused PATCHes')
    const ping = (await must(h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key }), 202)).data
    const got = await waitFor('ping', () => rx.at(p).find((r) => r.headers['webhook-id'] === ping.id))
    t.equal((got.headers['webhook-signature'] as string).split(' ').length, 1, 'the refused rotate_secret rotated nothing')
    t.ok(await verifies(e.secret, got))
  })

  t.test('rotation: a retry of a pre-rotation delivery carries both signatures; a second rotation overlaps the last two secrets', async (t) => {
    const tenant = await h.createTenant()
    const p = path()
    let fail = true
    rx.on(p, (_r, res) => {
      res.statusCode = fail ? 500 : 200
      res.end()
    })
    const e = await endpoint(tenant, { url: rx.url(p), events: ['player.created'] })
    await create(tenant, '/players', { external_id: 'rot-1' })
    await waitFor('first attempt', () => rx.at(p).length >= 1)
    const first = rx.at(p)[0]!
    t.ok(await verifies(e.secret, first), 'the first attempt: the original secret')
    const s2 = (await must(h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: true } }), 200)).data.secret as string
    fail = false
    const retry = await waitFor('the retry after the rotation', () => rx.at(p).find((r, i) => i > 0 && r.headers['webhook-id'] === first.headers['webhook-id']), 10_000)
    t.equal(retry.body, first.body, 'the same delivery')
    t.equal((retry.headers['webhook-signature'] as string).split(' ').length, 2, 'two v1 signatures')
    const headers = retry.headers as Record<string, string>
    t.ok(new Webhook(s2).verify(retry.body, headers), 'standardwebhooks: the new secret verifies')
    t.ok(new Webhook(e.secret).verify(retry.body, headers), 'standardwebhooks: the old secret verifies during the overlap')
    t.ok(await verifyGithubStyle(s2, retry.body, headers['x-respin-signature']!), 'X-Respin-Signature: the new secret')
    const s3 = (await must(h.request('PATCH', `/webhooks/${e.id}`, { key: tenant.key, body: { rotate_secret: true } }), 200)).data.secret as string
    t.not(s3, s2)
    const ping = (await must(h.request('POST', `/webhooks/${e.id}/ping`, { key: tenant.key }), 202)).data
    const got = await waitFor('ping after the second rotation', () => rx.at(p).find((r) => r.headers['webhook-id'] === ping.id))
    const sigs = (got.headers['webhook-signature'] as string).split(' ')
    t.equal(sigs.length, 2, 'two signatures: the newest secret and the one it replaced')
    t.ok(new Webhook(s3).verify(got.body, got.headers as Record<string, string>), 'the newest secret')
    t.ok(new Webhook(s2).verify(got.body, got.headers as Record<string, string>), 'the secret it replaced, during its overlap')
    t.ok(await verifyGithubStyle(s3, got.body, got.headers['x-respin-signature'] as string))
    t.notOk(await verifyGithubStyle(s2, got.body, got.headers['x-respin-signature'] as string), 'X-Respin-Signature carries the newest only')
  })
})

// The URL policy on (no WEBHOOK_ALLOW_PRIVATE): PATCH re-validates the url like create. Its own harness,
// after the first one closed (on a PostgreSQL server both would share the file's database, and this one's
// dispatcher would refuse the other's 127.0.0.1 deliveries).
t.test('webhooks adversarial 2: PATCH url under the URL policy', async (t) => {
  const h = await startHarness(t, { env: { WEBHOOK_TIMEOUT_MS: '1000' } })
  const tenant = await h.createTenant()
  const created = await h.request('POST', '/webhooks', { key: tenant.key, body: { url: 'https://8.8.8.8/hook', events: ['player.created'] } })
  t.equal(created.status, 201)
  const id = created.body.data.id as string
  const refused = [
    'http://8.8.8.8/hook', // https only
    'https://127.1/hook', // loopback, short form
    'https://0177.0.0.1/hook', // octal
    'https://0x7f000001/hook', // hex
    'https://[::ffff:127.0.0.1]/hook', // IPv4-mapped loopback
    'https://[::ffff:7f00:1]/hook', // the same, hex form
    'https://169.254.169.254/latest/meta-data', // link-local / cloud metadata
    'https://[fe80::1]/hook', // IPv6 link-local
    'https://192.168.1.10/hook', // RFC 1918
    'https://172.31.255.255/hook',
    'https://100.127.0.1/hook', // CGNAT
    'https://0.0.0.0/hook',
    'https://224.0.0.1/hook', // multicast
    'https://255.255.255.255/hook', // broadcast
    'https://240.0.0.1/hook', // reserved
    'https://[fc00::1]/hook', // ULA
    'https://[::]/hook', // unspecified
    'https://[64:ff9b::7f00:1]/hook', // NAT64 of loopback
    'https://user:pw@8.8.8.8/hook', // credentials (project docs)
  ]
  for (const url of refused) {
    const res = await h.request('PATCH', `/webhooks/${id}`, { key: tenant.key, body: { url, active: false } })
    t.equal(res.status, 400, url)
    t.equal(res.body.details?.errors?.[0]?.field, 'url', `${url}: names the field`)
  }
  t.match((await h.request('GET', `/webhooks/${id}`, { key: tenant.key })).body.data, { url: 'https://8.8.8.8/hook', active: true }, 'unchanged, active included')
  const moved = await h.request('PATCH', `/webhooks/${id}`, { key: tenant.key, body: { url: 'https://1.1.1.1/hook' } })
  t.equal(moved.status, 200, 'a public https address passes')
  t.equal(moved.body.data.url, 'https://1.1.1.1/hook')
})

// The campaigns' consumer of the event stream (src/engine/event-stream.ts, docs/engines.md): triggered
// campaigns' enrolments, journeys' trigger entries and wait_for_event, players leaving marketing journeys
// when their status stops being active, and conversions. Everything is written on the stream's
// transaction, so an event's effect and its consumption commit together (exactly once in effect).
import type { ReservedSql, TransactionSql } from 'postgres'
import type { AppContext } from '../context.ts'
import type { Sql as Pool } from '../db/postgres.ts'
import type { InterestEntry, StreamConsumer, StreamEvent } from '../engine/event-stream.ts'
import { matchesFilter, type EventCondition } from '../lib/event-filter.ts'
import { insertOutboxMany } from '../lib/outbox.ts'
import { memberCondition } from '../segments/queries.ts'
import { controlPercentOf, isControl } from './control-group.ts'
import { firstStepId, templateFor, type EngineCampaign } from './execution.ts'
import type { Sql } from './queries.ts'
import { exitMarketingJourneys } from './journey-exit.ts'
import { endAtOf } from './schedule.ts'
import { markStatsStale } from './stats.ts'
import { enqueueRunSends, type SendDeps } from './sends.ts'

type Tx = TransactionSql | ReservedSql

export const CONSUMER_NAME = 'campaigns'
/** Conversions are looked for in campaigns that ended at most this long ago (the longest window). */
const CONVERSION_LOOKBACK = '366 days'

interface Filter {
  event_type: string
  filters?: EventCondition[]
}

interface StepDef {
  id: string
  type: string
  event_type?: string
  filters?: EventCondition[]
  on_event?: string | null
  timeout_seconds?: number
}

/** Campaigns of these brands whose rules could react to an event now. */
async function reactiveCampaigns(sql: Sql, brandIds: string[]): Promise<EngineCampaign[]> {
  return sql<EngineCampaign[]>`
    select id, tenant_id, brand_id, status, type, channels, target_segment_id, schedule, config, started_at, next_tick_at, paused_spans
    from campaigns
    where brand_id = any(${brandIds}::uuid[])
      and (
        (status in ('running', 'paused') and (type in ('triggered', 'journey') or config ? 'conversion'))
        or (status in ('completed', 'cancelled') and config ? 'conversion' and updated_at > now() - ${CONVERSION_LOOKBACK}::interval)
      )`
}

/**
 * What each brand's campaigns could react to (the stream's cheap pre-test): a trigger's or a
 * wait_for_event step's type with its filters (events no filter passes never become rows), a conversion's
 * and status_change (journeys' exits) in full.
 */
export function interestOf(campaigns: EngineCampaign[]): Map<string, InterestEntry[]> {
  const out = new Map<string, InterestEntry[]>()
  const add = (brandId: string, type: unknown, filters?: EventCondition[]) => {
    if (typeof type !== 'string') return
    let list = out.get(brandId)
    if (!list) out.set(brandId, (list = []))
    list.push(filters?.length ? { type, filters } : type)
  }
  for (const c of campaigns) {
    const conv = c.config.conversion as { event_type?: string } | undefined
    if (conv) add(c.brand_id, conv.event_type)
    if (c.status !== 'running' && c.status !== 'paused') continue
    const trigger = c.config.trigger as Filter | undefined
    if (c.type === 'triggered' && trigger) add(c.brand_id, trigger.event_type, trigger.filters)
    if (c.type === 'journey') {
      if (trigger) add(c.brand_id, trigger.event_type, trigger.filters)
      for (const s of (c.config.steps as StepDef[] | undefined) ?? []) if (s.type === 'wait_for_event') add(c.brand_id, s.event_type, s.filters)
      add(c.brand_id, 'status_change')
    }
  }
  return out
}

/** Which of these players are in the campaign's target segment now (all of them when it has none). */
async function membersAmong(tx: Sql, c: EngineCampaign, playerIds: string[], now: Date): Promise<Set<string>> {
  if (!c.target_segment_id) return new Set(playerIds)
  const [seg] = await tx<{ type: 'dynamic' | 'static'; rules: Record<string, unknown> }[]>`
    select type, rules from segments where id = ${c.target_segment_id} and tenant_id = ${c.tenant_id} and brand_id = ${c.brand_id}`
  if (!seg) return new Set()
  const hits = await tx<{ id: string }[]>`
    select p.id from players p left join player_profiles pp on pp.player_id = p.id
    where p.id = any(${playerIds}::uuid[]) and p.brand_id = ${c.brand_id} and ${memberCondition(tx, seg, now)}`
  return new Set(hits.map((h) => h.id))
}

/** An event of the batch that matched one of a campaign's rules (a trigger, a conversion). */
interface RuleMatch {
  c: EngineCampaign
  e: StreamEvent
  playerId: string
}

/** A (campaign, player) pair's key in the maps below; in key order as PostgreSQL orders (uuid, uuid). */
const pairKey = (campaignId: string, playerId: string) => `${campaignId}|${playerId}`

/** The campaign's max_per_player, or null without one. */
const maxPerPlayer = (c: EngineCampaign) => (typeof c.config.max_per_player === 'number' ? c.config.max_per_player : null)

/**
 * max_per_player for a whole batch: how many of the places each (campaign, player) asks for it gets. The
 * pairs new to the table take theirs in one insert; the others are read under a row lock (the latest
 * committed count, even with another process enrolling the same player) and updated by what is left.
 */
async function takePlaces(tx: Sql, wanted: { c: EngineCampaign; playerId: string; count: number; max: number }[]): Promise<Map<string, number>> {
  const granted = new Map<string, number>()
  if (!wanted.length) return granted
  // In key order, like the row locks below: two processes enrolling the same players never wait in a cycle.
  wanted = [...wanted].sort((a, b) => (pairKey(a.c.id, a.playerId) < pairKey(b.c.id, b.playerId) ? -1 : 1))
  const inserted = await tx<{ campaign_id: string; player_id: string; count: number }[]>`
    insert into campaign_enrolments (campaign_id, player_id, count)
    select * from unnest(${wanted.map((w) => w.c.id)}::uuid[], ${wanted.map((w) => w.playerId)}::uuid[], ${wanted.map((w) => Math.min(w.count, w.max))}::int[])
    on conflict (campaign_id, player_id) do nothing
    returning campaign_id, player_id, count`
  for (const r of inserted) granted.set(pairKey(r.campaign_id, r.player_id), r.count)
  const rest = wanted.filter((w) => !granted.has(pairKey(w.c.id, w.playerId)))
  if (!rest.length) return granted
  const current = await tx<{ campaign_id: string; player_id: string; count: number }[]>`
    select e.campaign_id, e.player_id, e.count from campaign_enrolments e
    join unnest(${rest.map((w) => w.c.id)}::uuid[], ${rest.map((w) => w.playerId)}::uuid[]) as x(campaign_id, player_id)
      on e.campaign_id = x.campaign_id and e.player_id = x.player_id
    order by e.campaign_id, e.player_id
    for update of e`
  const countOf = new Map(current.map((r) => [pairKey(r.campaign_id, r.player_id), r.count]))
  const more = rest
    .map((w) => ({ w, take: Math.max(0, Math.min(w.count, w.max - (countOf.get(pairKey(w.c.id, w.playerId)) ?? w.max))) }))
    .filter((m) => m.take > 0)
  if (more.length) {
    await tx`
      update campaign_enrolments e set count = e.count + x.take
      from unnest(${more.map((m) => m.w.c.id)}::uuid[], ${more.map((m) => m.w.playerId)}::uuid[], ${more.map((m) => m.take)}::int[]) as x(campaign_id, player_id, take)
      where e.campaign_id = x.campaign_id and e.player_id = x.player_id`
  }
  for (const m of more) granted.set(pairKey(m.w.c.id, m.w.playerId), m.take)
  return granted
}

/**
 * Triggered campaigns' enrolments for a whole batch of events, a few statements in all whatever its size
 * (one at a time, a busy stream fell minutes behind): the segment check per campaign, the places of
 * max_per_player, then one run per enrolment keyed by its event (sent now, or after delay_seconds), its
 * audience row, and the immediate sends. Matches come in stream order, so when a player has fewer places
 * left than matching events, the earliest events take them.
 */
async function enrolAll(tx: Sql, deps: SendDeps, matches: RuleMatch[], now: Date): Promise<void> {
  if (!matches.length) return
  // The target segment, checked once per campaign for the batch's players.
  const byCampaign = new Map<EngineCampaign, RuleMatch[]>()
  for (const m of matches) {
    const list = byCampaign.get(m.c)
    if (list) list.push(m)
    else byCampaign.set(m.c, [m])
  }
  const outside = new Set<RuleMatch>()
  for (const [c, ms] of byCampaign) {
    const members = await membersAmong(tx, c, [...new Set(ms.map((m) => m.playerId))], now)
    for (const m of ms) if (!members.has(m.playerId)) outside.add(m)
  }
  const inAudience = matches.filter((m) => !outside.has(m))
  // max_per_player
  const pairs = new Map<string, { c: EngineCampaign; playerId: string; count: number; max: number }>()
  for (const m of inAudience) {
    const max = maxPerPlayer(m.c)
    if (max === null) continue
    const k = pairKey(m.c.id, m.playerId)
    const pair = pairs.get(k)
    if (pair) pair.count++
    else pairs.set(k, { c: m.c, playerId: m.playerId, count: 1, max })
  }
  const places = await takePlaces(tx, [...pairs.values()])
  const enrolled = inAudience.filter((m) => {
    if (maxPerPlayer(m.c) === null) return true
    const k = pairKey(m.c.id, m.playerId)
    const left = places.get(k) ?? 0
    places.set(k, left - 1)
    return left > 0
  })
  if (!enrolled.length) return
  // One run per enrolment, keyed by its event: a second look at the same event finds its run taken.
  const plans = enrolled.map((m) => {
    const delay = typeof m.c.config.delay_seconds === 'number' ? m.c.config.delay_seconds : 0
    const control = isControl(m.c.id, m.playerId, controlPercentOf(m.c.config))
    // Control members and immediate sends are done within this transaction; delayed ones wait for the runs' loop.
    return { ...m, delay, control, runKey: `event:${m.e.eventId ?? `stream:${m.e.id}`}`, state: control || delay === 0 ? 'done' : 'selected' }
  })
  const runs = await tx<{ id: string; campaign_id: string; run_key: string }[]>`
    insert into campaign_runs (campaign_id, tenant_id, brand_id, run_key, state, due_at)
    select * from unnest(${plans.map((p) => p.c.id)}::uuid[], ${plans.map((p) => p.c.tenant_id)}::uuid[], ${plans.map((p) => p.c.brand_id)}::uuid[],
                         ${plans.map((p) => p.runKey)}::text[], ${plans.map((p) => p.state)}::text[],
                         ${plans.map((p) => new Date(now.getTime() + p.delay * 1000).toISOString())}::timestamptz[])
    on conflict (campaign_id, run_key) do nothing
    returning id, campaign_id, run_key`
  const runOf = new Map(runs.map((r) => [`${r.campaign_id}|${r.run_key}`, r.id]))
  // A run that existed already: the same event enrolled before (its effects were committed with it).
  const started = plans.flatMap((p) => {
    const runId = runOf.get(`${p.c.id}|${p.runKey}`)
    if (!runId) return []
    runOf.delete(`${p.c.id}|${p.runKey}`) // a key twice in the batch: its first match only
    return [{ ...p, runId }]
  })
  if (!started.length) return
  await tx`
    insert into campaign_audience (run_id, player_id, campaign_id, control, enqueued, selected_at)
    select x.run_id, x.player_id, x.campaign_id, x.control, x.enqueued, ${now}
    -- (booleans go as text: the driver would send a JS boolean array as one boolean)
    from unnest(${started.map((p) => p.runId)}::uuid[], ${started.map((p) => p.playerId)}::uuid[], ${started.map((p) => p.c.id)}::uuid[],
                ${started.map((p) => String(p.control))}::text[]::bool[], ${started.map((p) => String(p.delay === 0 && !p.control))}::text[]::bool[])
      as x(run_id, player_id, campaign_id, control, enqueued)`
  // Sent at once, on the stream's transaction: the trigger's latency is the stream's.
  await enqueueRunSends(
    tx,
    deps,
    started
      .filter((p) => p.delay === 0 && !p.control)
      .map((p) => ({ c: p.c, runId: p.runId, step: '', items: p.c.channels.map((channel) => ({ playerId: p.playerId, channel, templateId: templateFor(p.c, channel)! })) })),
  )
}

/**
 * Journey entries by trigger for a whole batch (once per player and campaign): the segment per campaign,
 * control members held out in the audience of the campaign's 'entries' run, the others inserted at the
 * first step in one statement.
 */
async function enterJourneys(tx: Sql, matches: RuleMatch[], now: Date): Promise<void> {
  const byCampaign = new Map<EngineCampaign, Set<string>>()
  for (const m of matches) byCampaign.set(m.c, (byCampaign.get(m.c) ?? new Set()).add(m.playerId))
  const entering: { c: EngineCampaign; playerId: string }[] = []
  for (const [c, players] of byCampaign) {
    const members = await membersAmong(tx, c, [...players], now)
    const held = new Set([...members].filter((p) => isControl(c.id, p, controlPercentOf(c.config))))
    if (held.size) await holdOut(tx, c, [...held], now)
    for (const playerId of members) if (!held.has(playerId)) entering.push({ c, playerId })
  }
  if (!entering.length) return
  // A marketing journey enters active players only (as at its start from the segment): one who is not
  // would leave at once and have spent the entry (once per player) for when they are active again.
  await tx`
    insert into campaign_participants (campaign_id, tenant_id, brand_id, player_id, step, status, wake_at, entered_at, updated_at)
    select x.campaign_id, x.tenant_id, x.brand_id, x.player_id, x.step, 'active', ${now}, ${now}, ${now}
    from unnest(${entering.map((e) => e.c.id)}::uuid[], ${entering.map((e) => e.c.tenant_id)}::uuid[], ${entering.map((e) => e.c.brand_id)}::uuid[],
                ${entering.map((e) => e.playerId)}::uuid[], ${entering.map((e) => firstStepId(e.c))}::text[],
                ${entering.map((e) => String(e.c.config.class === 'transactional'))}::text[]::bool[])
      as x(campaign_id, tenant_id, brand_id, player_id, step, transactional)
    join players p on p.id = x.player_id and (x.transactional or p.status = 'active')
    on conflict (campaign_id, player_id) do nothing`
}

/** Control members entering by event: recorded in the audience of the campaign's 'entries' run. */
async function holdOut(tx: Sql, c: EngineCampaign, playerIds: string[], now: Date): Promise<void> {
  const [run] = await tx<{ id: string }[]>`
    insert into campaign_runs (campaign_id, tenant_id, brand_id, run_key, state, due_at)
    values (${c.id}, ${c.tenant_id}, ${c.brand_id}, 'entries', 'done', ${now})
    on conflict (campaign_id, run_key) do update set updated_at = now()
    returning id`
  await tx`
    insert into campaign_audience (run_id, player_id, campaign_id, control, enqueued, selected_at)
    select ${run!.id}, x.player_id, ${c.id}, true, false, ${now} from unnest(${playerIds}::uuid[]) as x(player_id)
    on conflict do nothing`
}

/**
 * How far a wait_for_event's event may be dated before the wait (a feed that delivers its events late, the
 * stream's lag) and after its end (the operator's clock ahead of ours).
 */
const EVENT_TIME_EARLY_MS = 60 * 60_000
const EVENT_TIME_LATE_MS = 5 * 60_000

/**
 * Waiting participants whose wait_for_event step an event of the batch matches move on to on_event: the
 * batch's waiting participants read (and locked) in one statement, the events tried in stream order, the
 * moves written in one.
 */
async function resumeWaiting(tx: Sql, matches: RuleMatch[], now: Date): Promise<void> {
  if (!matches.length) return
  const waiting = await tx<{ id: string; campaign_id: string; player_id: string; step: string; updated_at: Date }[]>`
    select p.id, p.campaign_id, p.player_id, p.step, p.updated_at from campaign_participants p
    join unnest(${matches.map((m) => m.c.id)}::uuid[], ${matches.map((m) => m.playerId)}::uuid[]) as x(campaign_id, player_id)
      on p.campaign_id = x.campaign_id and p.player_id = x.player_id
    where p.status = 'waiting'
    order by p.id
    for update of p`
  const byKey = new Map(waiting.map((w) => [pairKey(w.campaign_id, w.player_id), w]))
  const moves: { id: string; next: string | null }[] = []
  for (const { c, e, playerId } of matches) {
    const k = pairKey(c.id, playerId)
    const p = byKey.get(k)
    if (!p) continue
    const step = ((c.config.steps as StepDef[] | undefined) ?? []).find((s) => s.id === p.step)
    if (!step || step.type !== 'wait_for_event') continue
    // Only events received after the player reached the step, and before its timeout ran out (one received
    // later is too late, though the engine has not yet taken the player down on_timeout). Both times are
    // the processes' clocks (the receiving one's, the advancing one's): hosts keep them in sync (NTP).
    // The deadline from when it reached the step, not wake_at: that is the work loop's due column, pushed
    // to the end of a lease while the engine takes the timeout.
    const received = e.receivedAt.getTime()
    const reached = p.updated_at.getTime()
    const deadline = reached + (step.timeout_seconds ?? 0) * 1000
    if (received < reached || received > deadline) continue
    // And its own time falls in the wait too (§1: an event counts in the window of its event_time), within
    // EVENT_TIME_EARLY_MS before it (the step is reached when the stream applies the entering event, and a
    // feed may deliver its events late) and EVENT_TIME_LATE_MS after it (the operator's clock is not ours).
    // A late import dated hours before the wait, or an event dated after the timeout, does not end it.
    const at = e.eventTime.getTime()
    if (at < reached - EVENT_TIME_EARLY_MS || at > deadline + EVENT_TIME_LATE_MS) continue
    if (!matchesFilter(e, { event_type: step.event_type!, filters: step.filters })) continue
    moves.push({ id: p.id, next: step.on_event ?? null })
    byKey.delete(k) // moved on: no longer waiting for the batch's later events
  }
  if (!moves.length) return
  await tx`
    update campaign_participants p
    set step = x.next, status = case when x.next is null then 'completed' else 'active' end,
        wake_at = case when x.next is null then null else ${now}::timestamptz end, updated_at = ${now}
    from unnest(${moves.map((m) => m.id)}::uuid[], ${moves.map((m) => m.next)}::text[]) as x(id, next)
    where p.id = x.id`
}

/**
 * Conversions of a whole batch: each matching event counts when it falls within the window after a
 * delivered message (treated arm) or the hold-out (control arm); a player converts once per campaign,
 * with the earliest such event of the batch. Treated conversions fire player.converted.
 */
async function convertAll(tx: Sql, matches: RuleMatch[]): Promise<void> {
  if (!matches.length) return
  const since = matches.map((m) => {
    const conv = m.c.config.conversion as { within_hours?: number }
    return new Date(m.e.eventTime.getTime() - (conv.within_hours ?? 72) * 3_600_000).toISOString()
  })
  const arms = await tx<{ n: string; treated: boolean; control: boolean }[]>`
    select x.n,
      exists (select 1 from notifications n
              where n.campaign_id = x.campaign_id and n.player_id = x.player_id and n.status = 'delivered'
                and n.delivered_at <= x.at and n.delivered_at >= x.since) as treated,
      exists (select 1 from campaign_audience a
              where a.campaign_id = x.campaign_id and a.player_id = x.player_id and a.control
                and a.selected_at <= x.at and a.selected_at >= x.since) as control
    from unnest(${matches.map((m) => m.c.id)}::uuid[], ${matches.map((m) => m.playerId)}::uuid[],
                ${matches.map((m) => m.e.eventTime.toISOString())}::timestamptz[], ${since}::timestamptz[])
      with ordinality as x(campaign_id, player_id, at, since, n)`
  const armOf = new Map(arms.map((a) => [Number(a.n) - 1, a.treated ? false : a.control ? true : null]))
  const first = new Map<string, RuleMatch & { control: boolean }>()
  matches.forEach((m, i) => {
    const control = armOf.get(i)
    const k = pairKey(m.c.id, m.playerId)
    if (control != null && !first.has(k)) first.set(k, { ...m, control })
  })
  const conversions = [...first.values()]
  if (!conversions.length) return
  const inserted = await tx<{ campaign_id: string; player_id: string }[]>`
    insert into campaign_conversions (campaign_id, player_id, control, converted_at)
    select * from unnest(${conversions.map((m) => m.c.id)}::uuid[], ${conversions.map((m) => m.playerId)}::uuid[],
                         ${conversions.map((m) => String(m.control))}::text[]::bool[], ${conversions.map((m) => m.e.eventTime.toISOString())}::timestamptz[])
    on conflict do nothing returning campaign_id, player_id`
  const fresh = new Set(inserted.map((r) => pairKey(r.campaign_id, r.player_id)))
  await markStatsStale(tx, inserted.map((r) => r.campaign_id))
  await insertOutboxMany(
    tx,
    conversions
      .filter((m) => !m.control && fresh.has(pairKey(m.c.id, m.playerId)))
      .map(({ c, e, playerId }) => ({
        tenantId: c.tenant_id,
        brandId: c.brand_id,
        event: 'player.converted',
        data: { player_id: playerId, external_id: e.externalId, conversion: 'campaign', campaign_id: c.id, event_type: e.type, at: e.eventTime.toISOString() },
      })),
  )
}

export function campaignConsumer(ctx: Pick<AppContext, 'clock' | 'log' | 'delivery'>): StreamConsumer {
  return {
    name: CONSUMER_NAME,
    async interest(sql: Pool, brandIds: string[]) {
      return interestOf(await reactiveCampaigns(sql, brandIds))
    },
    async handle(tx: Tx, events: StreamEvent[]) {
      // The stream hands a transaction (or a reserved connection inside one): the same queries apply.
      const sql = tx as unknown as Sql
      const brandIds = [...new Set(events.map((e) => e.brandId))]
      const campaigns = await reactiveCampaigns(sql, brandIds)
      if (!campaigns.length) return
      const playerOf = await playersOf(sql, events)
      const pauses = new Map(campaigns.map((c) => [c.id, pausesOf(c)]))
      const now = ctx.clock()
      const triggered: RuleMatch[] = []
      const converting: RuleMatch[] = []
      const entering: RuleMatch[] = []
      const waitingFor: RuleMatch[] = []
      const leaving = new Set<string>()
      for (const e of events) {
        const playerId = playerOf(e)
        if (!playerId) continue
        if (e.type === 'status_change' && e.fields.status !== 'active') leaving.add(playerId)
        for (const c of campaigns) {
          if (c.brand_id !== e.brandId) continue
          const trigger = c.config.trigger as Filter | undefined
          // Stored while the campaign ran: after its start, outside its pauses, and before its end_at even
          // when the engine's visit has not completed it yet. Judged by the time it was received, not by the
          // status when the stream applies it (an event stored while paused and applied after the resume
          // enrolls nobody; one stored while running and applied during a later pause does, its sends held).
          const endAt = endAtOf(c.schedule)
          const running = (c.status === 'running' || c.status === 'paused') && (!endAt || e.receivedAt.getTime() < endAt.getTime()) && !inPause(pauses.get(c.id)!, e.receivedAt)
          const afterStart = !!c.started_at && e.receivedAt.getTime() >= c.started_at.getTime()
          if (c.type === 'triggered' && running && afterStart && trigger && matchesFilter(e, trigger)) triggered.push({ c, e, playerId })
          if (c.type === 'journey' && (c.status === 'running' || c.status === 'paused')) {
            if (running && afterStart && trigger && matchesFilter(e, trigger)) entering.push({ c, e, playerId })
            waitingFor.push({ c, e, playerId })
          }
          const conv = c.config.conversion as { event_type?: string } | undefined
          if (conv && conv.event_type === e.type) converting.push({ c, e, playerId })
        }
      }
      // Each kind for the whole batch at once. The order keeps what one event at a time did: an entry
      // starts 'active' (a wait it reaches later is for later events), and leaving comes last, so a player
      // who stops being active within the batch ends outside every marketing journey.
      await enrolAll(sql, ctx, triggered, now)
      await enterJourneys(sql, entering, now)
      await resumeWaiting(sql, waitingFor.filter((m) => waitsFor(m.c, m.e.type)), now)
      await exitMarketingJourneys(sql, [...leaving], now)
      await convertAll(sql, converting)
    },
  }
}

/**
 * A campaign's pauses as [from, to] ms (to: Infinity while it lasts), parsed once per batch. A paused
 * campaign without an open span (none recorded) counts as paused all along: it enrolls nobody.
 */
function pausesOf(c: EngineCampaign): [number, number][] {
  const spans = c.paused_spans.map(([from, to]): [number, number] => [Date.parse(from), to === null ? Infinity : Date.parse(to)])
  if (c.status === 'paused' && !spans.some(([, to]) => to === Infinity)) spans.push([-Infinity, Infinity])
  return spans
}

/** Was the campaign paused at this time? */
const inPause = (pauses: [number, number][], at: Date): boolean => pauses.some(([from, to]) => at.getTime() >= from && at.getTime() < to)

/** Whether some wait_for_event step of the journey waits for this event type. */
const waitsFor = (c: EngineCampaign, type: string) => ((c.config.steps as StepDef[] | undefined) ?? []).some((s) => s.type === 'wait_for_event' && s.event_type === type)

/** Each event's player id: from the stream row, else (a player the row predates) by its external id, in one query. */
async function playersOf(sql: Sql, events: StreamEvent[]): Promise<(e: StreamEvent) => string | undefined> {
  const missing = events.filter((e) => !e.playerId)
  const found = new Map<string, string>()
  if (missing.length) {
    const rows = await sql<{ id: string; brand_id: string; external_id: string }[]>`
      select p.id, p.brand_id, p.external_id from players p
      join unnest(${missing.map((e) => e.brandId)}::uuid[], ${missing.map((e) => e.externalId)}::text[]) as x(brand_id, external_id)
        on p.brand_id = x.brand_id and p.external_id = x.external_id`
    for (const r of rows) found.set(`${r.brand_id}|${r.external_id}`, r.id)
  }
  return (e) => e.playerId ?? found.get(`${e.brandId}|${e.externalId}`)
}

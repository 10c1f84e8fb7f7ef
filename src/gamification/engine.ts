// The gamification engine: an event-stream consumer (src/engine/event-stream.ts) that turns stored events
// into mission progress, badge progress and tournament scores, and grants what they earn; plus the timer
// that expires missions and ends tournaments. docs/gamification.md, "Engine".
//
// Every effect of a batch of events is written on the stream's transaction, so it commits exactly when
// the events are consumed (exactly once in effect). Per batch: match the events against the brands'
// compiled definitions in memory (most events that reach here match something), lock the touched
// players' engine rows (player_gamification, in id order: concurrent batches of several processes
// serialise per player and cannot deadlock), read their state in a few set-based queries, fold the events
// in order in JS (periods, stages, caps, rollbacks), and write the state back set-based. Rewards (points,
// badges, bonuses) and their webhooks go through rewards.ts on the same transaction.
import { createHash } from 'node:crypto'
import type { ReservedSql, TransactionSql } from 'postgres'
import type { AppContext } from '../context.ts'
import type { Sql } from '../db/postgres.ts'
import type { InterestEntry, StreamConsumer, StreamEvent } from '../engine/event-stream.ts'
import type { EventCondition } from '../lib/event-filter.ts'
import { microsToDecimal, toMicros } from '../events/transform.ts'
import { insertOutbox } from '../lib/outbox.ts'
import { startTicker } from '../engine/work-loop.ts'
import { memoryLeaderboards, redisLeaderboards, type BoardEntry, type Leaderboards } from '../tournaments/leaderboard.ts'
import { periodStart } from './periods.ts'
import { grantBonus, grantRewards, grantRewardsMany, lockPlayers, milestoneBadgesMany, awardBadge, type PlayerKey } from './rewards.ts'
import {
  compileFilter, measureOf, ROLLBACK_OF, tournamentDelta, tournamentInterest,
  type EventFilter, type GameConfig, type MissionRules, type PrizePool, type Rewards,
} from './rules.ts'

type Tx = TransactionSql | ReservedSql

export const CONSUMER_NAME = 'gamification'

interface MissionDef {
  id: string
  tenantId: string
  brandId: string
  type: string
  rules: MissionRules
  rewards: Rewards
  maxCompletions: number | null
  startsAt: number | null
  endsAt: number | null
  match: (e: StreamEvent) => boolean
  tz: string
}
interface BadgeDef {
  id: string
  criteria: EventFilter & { target: number }
  match: (e: StreamEvent) => boolean
}
interface TournamentDef {
  id: string
  game: GameConfig
  startsAt: number | null
  endsAt: number | null
  maxParticipants: number | null
}
interface BrandDefs {
  missions: MissionDef[]
  badges: BadgeDef[]
  tournaments: TournamentDef[]
}

const DEFS_TTL_MS = 10_000
/** How long a counted bet/win can still be rolled back. */
const CREDIT_RETENTION_MS = 7 * 86_400_000
const CREDIT_PRUNE_EVERY_MS = 60_000
const inWindow = (t: number, start: number | null, end: number | null) => (start === null || t >= start) && (end === null || t <= end)
const ms = (d: unknown) => (d == null ? null : new Date(d as string).getTime())

/**
 * A round's key in gamification_round_credits: the operator's round_id, or its SHA-256 when longer than
 * 200 characters (an index entry holds ~2,700 bytes: a longer id failed the credit's insert, and the
 * event's whole effect was set aside).
 */
function roundKey(raw: unknown): string | null {
  // A round id sent as a JSON number names the same round as its decimal text (a bet with 12345 and its
  // rollback with 12345, or with "12345").
  const roundId = typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : raw
  if (typeof roundId !== 'string') return null
  return roundId.length > 200 ? `sha256:${createHash('sha256').update(roundId).digest('hex')}` : roundId
}

/** Exact decimal arithmetic in micro-units (amounts carry ≤ 6 decimals; sums exact up to ~9e9 units). */
const micros = (s: string | number) => {
  const m = toMicros(s)
  return Number.isNaN(m) ? Math.round(Number(s) * 1e6) || 0 : m
}

export interface GamificationEngine {
  consumer: StreamConsumer
  boards: Leaderboards
  /** Definitions of a brand changed: drop the cached compiled definitions (every process, via the bus). */
  invalidate(): void
  /** Expires missions and ends tournaments due by now; returns what it did (tests). */
  tick(): Promise<{ expired: number; ended: string[] }>
  /** Rebuilds the leaderboards of active tournaments from PostgreSQL (start, repair). */
  rebuildBoards(opts?: { since?: Date }): Promise<void>
}

export function createGamificationEngine(ctx: AppContext): GamificationEngine {
  const { sql, log } = ctx
  const defsCache = new Map<string, { at: number; defs: Promise<BrandDefs> }>()
  const boards = ctx.redis ? redisLeaderboards(ctx.redis) : memoryLeaderboards()

  // Loaded on the stream's transaction: embedded PostgreSQL has one connection, which the transaction holds.
  async function loadDefs(sql: Tx, brandId: string): Promise<BrandDefs> {
    const [missions, badges, tournaments] = await Promise.all([
      sql<Record<string, unknown>[]>`select * from gamification_missions where brand_id = ${brandId} and status = 'active'`,
      sql<Record<string, unknown>[]>`select id, criteria from gamification_badges where brand_id = ${brandId} and criteria ? 'event_type'`,
      sql<Record<string, unknown>[]>`select * from tournaments where brand_id = ${brandId} and status = 'active'`,
    ])
    return {
      missions: missions.map((m) => {
        const rules = m.rules as MissionRules
        return {
          id: m.id as string, tenantId: m.tenant_id as string, brandId, type: m.type as string, rules, rewards: (m.rewards ?? {}) as Rewards,
          maxCompletions: (m.max_completions_per_player as number | null) ?? null, startsAt: ms(m.starts_at), endsAt: ms(m.ends_at),
          match: rules?.event_type ? compileFilter(rules) : () => false, tz: rules?.timezone ?? 'UTC',
        }
      }),
      badges: badges.map((b) => ({ id: b.id as string, criteria: b.criteria as BadgeDef['criteria'], match: compileFilter(b.criteria as EventFilter) })),
      tournaments: tournaments
        .filter((t) => typeof (t.game_config as GameConfig)?.metric === 'string')
        .map((t) => ({
          id: t.id as string, game: t.game_config as GameConfig, startsAt: ms(t.starts_at), endsAt: ms(t.ends_at),
          maxParticipants: (t.max_participants as number | null) ?? null,
        })),
    }
  }

  function defsOf(tx: Tx, brandId: string): Promise<BrandDefs> {
    const hit = defsCache.get(brandId)
    if (hit && Date.now() - hit.at < DEFS_TTL_MS) return hit.defs
    const defs = loadDefs(tx, brandId)
    const entry = { at: Date.now(), defs }
    defsCache.set(brandId, entry)
    defs.catch(() => defsCache.get(brandId) === entry && defsCache.delete(brandId))
    return defs
  }

  // Rule changes drop the compiled definitions with the stream's interest (same bus topic).
  ctx.bus.subscribe('event_stream_interest', () => defsCache.clear())

  /**
   * A mission's or badge's type with its filters (events none passes cost no stream row; their rollback
   * types in full, since a rollback takes back what its round was credited, whatever it carries), and
   * the types a tournament's metric reads with its game filters (tournamentInterest).
   */
  async function interest(s: Sql, brandIds: string[]): Promise<Map<string, InterestEntry[]>> {
    const rows = await s<{ brand_id: string; t: string | null; filters: EventCondition[] | null; game: GameConfig | null }[]>`
      select brand_id, rules->>'event_type' as t, rules->'filters' as filters, null::jsonb as game from gamification_missions
        where brand_id = any(${brandIds}::uuid[]) and status = 'active'
      union all
      select brand_id, criteria->>'event_type', criteria->'filters', null from gamification_badges
        where brand_id = any(${brandIds}::uuid[]) and criteria ? 'event_type'
      union all
      select brand_id, null, null, game_config from tournaments
        where brand_id = any(${brandIds}::uuid[]) and status = 'active'`
    const out = new Map<string, InterestEntry[]>()
    for (const r of rows) {
      let list = out.get(r.brand_id)
      if (!list) out.set(r.brand_id, (list = []))
      if (r.t) {
        list.push(Array.isArray(r.filters) && r.filters.length ? { type: r.t, filters: r.filters } : r.t)
        const rb = ROLLBACK_OF[r.t]
        if (rb) list.push(rb)
      }
      if (r.game?.metric) list.push(...tournamentInterest(r.game))
    }
    return out
  }

  async function handle(tx: Tx, events: StreamEvent[]): Promise<(() => Promise<void>) | undefined> {
    const brands = [...new Set(events.map((e) => e.brandId))]
    const defs = new Map(await Promise.all(brands.map(async (b) => [b, await defsOf(tx, b)] as const)))

    // 1. Match, in memory.
    interface Hit { e: StreamEvent; targetId: string; delta: number; rollback: boolean; roundId: string | null; kind: string | null }
    const missionHits = new Map<string, Hit[]>() // key player|mission
    const badgeHits = new Map<string, Hit[]>()
    const tournamentHits = new Map<string, Hit[]>()
    const push = (m: Map<string, Hit[]>, key: string, h: Hit) => {
      const list = m.get(key)
      if (list) list.push(h)
      else m.set(key, [h])
    }
    const players = new Map<string, PlayerKey & { externalId: string }>()
    for (const e of events) {
      if (!e.playerId) continue
      const d = defs.get(e.brandId) as BrandDefs
      const t = e.eventTime.getTime()
      const roundId = roundKey(e.fields.round_id)
      const rolledBack = e.type === 'bet_rollback' ? 'bet' : e.type === 'win_rollback' ? 'win' : null
      const kind = e.type === 'bet' || e.type === 'win' ? e.type : rolledBack
      let touched = false
      for (const m of d.missions) {
        if (!inWindow(t, m.startsAt, m.endsAt)) continue
        if (m.match(e)) {
          push(missionHits, `${e.playerId}|${m.id}`, { e, targetId: m.id, delta: micros(measureOf(m.rules.measure, e)), rollback: false, roundId, kind })
          touched = true
        } else if (rolledBack && roundId && m.rules.event_type === rolledBack) {
          push(missionHits, `${e.playerId}|${m.id}`, { e, targetId: m.id, delta: micros(measureOf(m.rules.measure, e)), rollback: true, roundId, kind })
          touched = true
        }
      }
      for (const b of d.badges) {
        if (b.match(e)) {
          push(badgeHits, `${e.playerId}|${b.id}`, { e, targetId: b.id, delta: micros(measureOf(b.criteria.measure, e)), rollback: false, roundId, kind })
          touched = true
        } else if (rolledBack && roundId && b.criteria.event_type === rolledBack) {
          push(badgeHits, `${e.playerId}|${b.id}`, { e, targetId: b.id, delta: micros(measureOf(b.criteria.measure, e)), rollback: true, roundId, kind })
          touched = true
        }
      }
      for (const tr of d.tournaments) {
        if (!inWindow(t, tr.startsAt, tr.endsAt)) continue
        const delta = tournamentDelta(tr.game, e)
        if (delta === null) continue
        const rollback = rolledBack !== null
        if (rollback && !roundId) continue
        push(tournamentHits, `${e.playerId}|${tr.id}`, { e, targetId: tr.id, delta: micros(delta), rollback, roundId, kind })
        touched = true
      }
      if (touched) players.set(e.playerId, { playerId: e.playerId, tenantId: e.tenantId, brandId: e.brandId, externalId: e.externalId })
    }
    if (players.size === 0) return undefined

    // 2. Lock the players, read their state.
    await lockPlayers(tx, [...players.values()])
    const playerIds = [...players.keys()]
    const rollbackRounds = events.filter((e) => e.playerId && (e.type === 'bet_rollback' || e.type === 'win_rollback') && roundKey(e.fields.round_id) !== null)
    const [missionRows, badgeRows, earnedRows, partRows, creditRows] = await Promise.all([
      // The rule ids are a filter on each player's rows, not an index condition: with both lists in the
      // key's condition the btree probed every (player, rule) pair (10,000 for 500 players and 20
      // missions: 26 ms of a 38 ms read, against 2 ms for the players' rows alone).
      missionHits.size
        ? tx<Record<string, unknown>[]>`select * from player_missions where player_id = any(${playerIds}::uuid[])
            and mission_id::text = any(${[...new Set([...missionHits.values()].map((h) => (h[0] as Hit).targetId))]}::text[])`
        : [],
      badgeHits.size ? tx<{ player_id: string; badge_id: string; value: string }[]>`select * from player_badge_progress where player_id = any(${playerIds}::uuid[])` : [],
      badgeHits.size ? tx<{ player_id: string; badge_id: string }[]>`select player_id, badge_id from player_badges where player_id = any(${playerIds}::uuid[])` : [],
      tournamentHits.size
        ? tx<Record<string, unknown>[]>`select * from tournament_participants where player_id = any(${playerIds}::uuid[])
            and tournament_id::text = any(${[...new Set([...tournamentHits.values()].map((h) => (h[0] as Hit).targetId))]}::text[])`
        : [],
      rollbackRounds.length
        ? tx<{ target_id: string; player_id: string; round_id: string; kind: string; amount: string; period_start: Date | null }[]>`
            select * from gamification_round_credits where player_id = any(${rollbackRounds.map((e) => e.playerId)}::uuid[])
              and round_id = any(${rollbackRounds.map((e) => roundKey(e.fields.round_id) as string)}::text[])`
        : [],
    ])
    const credits = new Map(creditRows.map((c) => [`${c.player_id}|${c.round_id}|${c.kind}|${c.target_id}`, c]))
    type Credit = { target: string; player: string; round: string; kind: string; amount: number; period: Date | null }
    // This batch's credits, one per (player, round, kind, target): two bets of one round in a batch add up
    // (one row each in the INSERT ... ON CONFLICT would fail the whole batch).
    const newCredits = new Map<string, Credit>()
    // Stored credits a rollback of this batch took from: what is left of each (deleted at 0).
    const usedCredits = new Map<string, Credit>()
    const creditKey = (player: string, h: Hit) => `${player}|${h.roundId}|${h.kind}|${h.targetId}`
    /** A counted bet/win with a round remembers what it added; its rollbacks take back up to that. */
    const remember = (h: Hit, player: string, added: number, period: Date | null) => {
      if (!h.roundId || !h.kind || added === 0) return
      const key = creditKey(player, h)
      const n = newCredits.get(key)
      if (n) n.amount += added
      else newCredits.set(key, { target: h.targetId, player, round: h.roundId, kind: h.kind, amount: added, period })
    }
    /**
     * What a rollback takes back: what its round was credited, at most `max` (§1: a count −1, a sum its own
     * amount); the rest stays for the round's other rollbacks. 0 for a credit of another period (spent).
     */
    const takeBack = (h: Hit, player: string, period: Date | null, max = Number.POSITIVE_INFINITY): number => {
      const key = creditKey(player, h)
      // This batch's own credit first, then what is left of the stored one.
      let credit = newCredits.get(key)
      if (!credit || credit.amount === 0) credit = usedCredits.get(key)
      if (!credit) {
        const c = credits.get(key)
        if (!c) return 0
        credits.delete(key)
        credit = { target: h.targetId, player, round: h.roundId as string, kind: h.kind as string, amount: micros(c.amount), period: c.period_start }
        usedCredits.set(key, credit)
      }
      if ((credit.period?.getTime() ?? null) !== (period?.getTime() ?? null)) {
        credit.amount = 0
        return 0
      }
      // A GGR tournament's win was credited a negative score: its rollback takes back up to -max.
      const back = credit.amount > 0 ? Math.min(credit.amount, max) : Math.max(credit.amount, -max)
      credit.amount -= back
      return back
    }

    const completions: { player: PlayerKey; mission: MissionDef; stage: number; rewards: Rewards | undefined }[] = []
    const missionsCompleted = new Map<string, number>()

    // 3a. Missions.
    const missionDefs = new Map<string, MissionDef>()
    for (const d of defs.values()) for (const m of d.missions) missionDefs.set(m.id, m)
    const stateRows = new Map(missionRows.map((r) => [`${r.player_id}|${r.mission_id}`, r]))
    const missionWrites: { player: string; mission: string; tenant: string; value: string; stage: number; completions: number; period: Date | null; done: boolean; last: Date | null }[] = []
    const batchNow = ctx.clock()
    const collabDeltas = new Map<string, number>()
    for (const [key, hits] of missionHits) {
      const [player, missionId] = key.split('|') as [string, string]
      const m = missionDefs.get(missionId) as MissionDef
      const row = stateRows.get(key)
      if (m.rules.opt_in && !row?.joined_at) continue
      const st = {
        value: micros((row?.value as string) ?? '0'), stage: (row?.stage as number) ?? 0, completions: (row?.completions as number) ?? 0,
        period: (row?.period_start as Date | null) ?? null, done: (row?.period_done as boolean) ?? false, last: (row?.last_completed_at as Date | null) ?? null,
      }
      const pk = players.get(player) as PlayerKey
      let changed = false
      for (const h of hits) {
        // An event stamped ahead of our clock (ingestion takes up to a day ahead: another system's clock)
        // counts in the current period. In its own, it would move the player's state to a period that has
        // not begun, and every event of the current one would then be dropped as a past period's.
        const ps = periodStart(m.type, m.tz, h.e.eventTime.getTime() > batchNow.getTime() ? batchNow : h.e.eventTime)
        // A stored period that is no period start of the mission as it is now (a PATCH changed its type or
        // zone) belongs to the old definition: the player has no state under the new one yet, and the event
        // starts it in its own period, as for a player without state.
        const redefined = ps && st.period && periodStart(m.type, m.tz, st.period)?.getTime() !== st.period.getTime()
        if (ps && (!st.period || redefined || ps.getTime() > st.period.getTime())) {
          Object.assign(st, { value: 0, stage: 0, period: ps, done: false })
          changed = true
        } else if (ps && st.period && ps.getTime() < st.period.getTime()) continue // a past period's late event
        if (h.rollback) {
          if (st.done) continue
          const back = takeBack(h, player, st.period, h.delta > 0 ? h.delta : undefined)
          if (back > 0) {
            st.value = Math.max(0, st.value - back)
            if (m.type === 'collaborative') collabDeltas.set(m.id, (collabDeltas.get(m.id) ?? 0) - back)
            changed = true
          }
          continue
        }
        if (st.done || (m.maxCompletions !== null && st.completions >= m.maxCompletions)) continue
        if (h.delta === 0) continue
        st.value += h.delta
        changed = true
        remember(h, player, h.delta, st.period)
        if (m.type === 'collaborative') {
          collabDeltas.set(m.id, (collabDeltas.get(m.id) ?? 0) + h.delta)
          continue
        }
        if (m.type === 'progressive') {
          const stages = m.rules.stages ?? []
          while (st.stage < stages.length && st.value >= micros((stages[st.stage] as { target: number }).target)) {
            st.stage++
            completions.push({ player: pk, mission: m, stage: st.stage, rewards: (stages[st.stage - 1] as { rewards?: Rewards }).rewards })
          }
          // Past the last stage, reached now or before a PATCH took the stages down to ones the player has
          // all passed (and been rewarded for, as a lowered target completes on the next event): completed.
          if (!st.done && stages.length > 0 && st.stage >= stages.length) {
            st.stage = stages.length
            st.completions++
            st.done = true
            st.last = h.e.eventTime
            missionsCompleted.set(player, (missionsCompleted.get(player) ?? 0) + 1)
          }
        } else if (st.value >= micros(m.rules.target ?? 0)) {
          st.completions++
          st.done = true
          st.last = h.e.eventTime
          completions.push({ player: pk, mission: m, stage: st.completions, rewards: m.rewards })
          missionsCompleted.set(player, (missionsCompleted.get(player) ?? 0) + 1)
        }
      }
      if (changed) {
        missionWrites.push({
          player, mission: missionId, tenant: m.tenantId, value: microsToDecimal(st.value), stage: st.stage, completions: st.completions,
          period: st.period, done: st.done, last: st.last,
        })
      }
    }

    // 3b. Badges with event criteria (over all time).
    const earned = new Set(earnedRows.map((r) => `${r.player_id}|${r.badge_id}`))
    const badgeValues = new Map(badgeRows.map((r) => [`${r.player_id}|${r.badge_id}`, micros(r.value)]))
    const badgeWrites: { player: string; badge: string; value: string }[] = []
    const badgesDue: { player: PlayerKey; badgeId: string }[] = []
    const badgeDefs = new Map<string, BadgeDef>()
    for (const d of defs.values()) for (const b of d.badges) badgeDefs.set(b.id, b)
    for (const [key, hits] of badgeHits) {
      if (earned.has(key)) continue
      const [player, badgeId] = key.split('|') as [string, string]
      const b = badgeDefs.get(badgeId) as BadgeDef
      let v = badgeValues.get(key) ?? 0
      let done = false
      for (const h of hits) {
        if (h.rollback) {
          const back = takeBack(h, player, null, h.delta > 0 ? h.delta : undefined)
          v = Math.max(0, v - back)
          continue
        }
        v += h.delta
        remember(h, player, h.delta, null)
        if (v >= micros(b.criteria.target)) {
          done = true
          break
        }
      }
      badgeWrites.push({ player, badge: badgeId, value: microsToDecimal(v) })
      if (done) badgesDue.push({ player: players.get(player) as PlayerKey, badgeId })
    }

    // 3c. Tournaments: scores, new participants up to max_participants (the first to score).
    const partState = new Map(partRows.map((r) => [`${r.player_id}|${r.tournament_id}`, r]))
    const tDefs = new Map<string, TournamentDef>()
    for (const d of defs.values()) for (const t of d.tournaments) tDefs.set(t.id, t)
    const newcomers = new Map<string, string[]>()
    for (const [key, hits] of tournamentHits) {
      if (partState.has(key) || hits.every((h) => h.rollback)) continue
      const [player, tid] = key.split('|') as [string, string]
      const list = newcomers.get(tid) ?? []
      list.push(player)
      newcomers.set(tid, list)
    }
    // A tournament without max_participants admits every newcomer and locks nothing: the stream's parallel
    // loops do not queue behind each other on a shared row. A capped tournament's row is locked (in id
    // order) while its free places are counted and taken, so two batches cannot both take the last one;
    // the count is of its participant rows (at most the cap), exact whenever the cap was set or changed.
    const admitted = new Set<string>()
    for (const [tid, list] of newcomers) {
      if ((tDefs.get(tid) as TournamentDef).maxParticipants === null) for (const p of list) admitted.add(`${p}|${tid}`)
    }
    const capped = [...newcomers.keys()].filter((tid) => (tDefs.get(tid) as TournamentDef).maxParticipants !== null).sort()
    if (capped.length) {
      await tx`select id from tournaments where id = any(${capped}::uuid[]) order by id for update`
      // After the locks: a statement of its own, so its snapshot sees what the batch before us committed.
      const counts = await tx<{ id: string; participants: number }[]>`
        select t.id, (select count(*)::int from tournament_participants p where p.tournament_id = t.id) as participants
        from unnest(${capped}::uuid[]) as t(id)`
      for (const c of counts) {
        const t = tDefs.get(c.id) as TournamentDef
        const list = newcomers.get(c.id) as string[]
        // The first to score in this batch: by their first event's stream order.
        const firstAt = (p: string) => BigInt(((tournamentHits.get(`${p}|${c.id}`) as Hit[])[0] as Hit).e.id)
        list.sort((a, b) => (firstAt(a) < firstAt(b) ? -1 : 1))
        const room = Math.max(0, (t.maxParticipants as number) - c.participants)
        for (const p of list.slice(0, room)) admitted.add(`${p}|${c.id}`)
      }
    }
    const partWrites: { tournament: string; player: string; tenant: string; external: string; score: string; reached: Date }[] = []
    for (const [key, hits] of tournamentHits) {
      const row = partState.get(key)
      if (!row && !admitted.has(key)) continue
      const [player, tid] = key.split('|') as [string, string]
      // GGR may be negative (a player who won more than they bet); counts and sums of amounts may not.
      const floorAtZero = tDefs.get(tid)?.game.metric !== 'ggr'
      let score = micros((row?.score as string) ?? '0')
      let reached = (row?.reached_at as Date | undefined) ?? (hits[0] as Hit).e.eventTime
      let changed = !row
      for (const h of hits) {
        let d = h.delta
        if (h.rollback) {
          const back = takeBack(h, player, null, h.delta > 0 ? h.delta : undefined)
          if (back === 0) continue
          d = -back
          // count/sum metrics never go below 0 through a rollback
          if (floorAtZero && score + d < 0 && back > 0) d = -score
        } else remember(h, player, d, null)
        if (d === 0) continue
        score += d
        // When the score was reached, for ties: the latest event counted, by its own time (an event
        // arriving late does not make a score look reached earlier).
        if (h.e.eventTime > reached) reached = h.e.eventTime
        changed = true
      }
      if (!changed) continue
      const pk = players.get(player) as PlayerKey & { externalId: string }
      partWrites.push({ tournament: tid, player, tenant: pk.tenantId, external: pk.externalId, score: microsToDecimal(score), reached })
    }

    // 4. Write the state back, set-based; the statements are independent, so they go out together
    // (pipelined on the transaction's connection: one round trip instead of one each).
    const writes: Promise<unknown>[] = []
    if (missionWrites.length) {
      const w = missionWrites
      writes.push(tx`
        insert into player_missions (player_id, mission_id, tenant_id, value, stage, completions, period_start, period_done, last_completed_at, updated_at)
        select t.p, t.m, t.tn, t.v, t.s, t.c, t.ps, t.d::bool, t.l, now()
        from unnest(${w.map((x) => x.player)}::uuid[], ${w.map((x) => x.mission)}::uuid[], ${w.map((x) => x.tenant)}::uuid[],
                    ${w.map((x) => x.value)}::numeric[], ${w.map((x) => x.stage)}::int[], ${w.map((x) => x.completions)}::int[],
                    ${w.map((x) => x.period?.toISOString() ?? null)}::timestamptz[], ${w.map((x) => (x.done ? 't' : 'f'))}::text[],
                    ${w.map((x) => x.last?.toISOString() ?? null)}::timestamptz[]) as t(p, m, tn, v, s, c, ps, d, l)
        -- Completions only grow, and a period's done stays done: a collaborative mission's completion marks
        -- every contributor's row from another lane (completeCollaborative), which this batch may have read
        -- before; its stale copy must not undo that mark.
        on conflict (player_id, mission_id) do update set value = excluded.value, stage = excluded.stage,
          completions = greatest(player_missions.completions, excluded.completions),
          period_start = excluded.period_start,
          period_done = case when player_missions.period_start is not distinct from excluded.period_start
                             then player_missions.period_done or excluded.period_done else excluded.period_done end,
          last_completed_at = greatest(player_missions.last_completed_at, excluded.last_completed_at),
          updated_at = now()`.execute())
    }
    if (badgeWrites.length) {
      const w = badgeWrites
      writes.push(tx`
        insert into player_badge_progress (player_id, badge_id, value)
        select * from unnest(${w.map((x) => x.player)}::uuid[], ${w.map((x) => x.badge)}::uuid[], ${w.map((x) => x.value)}::numeric[])
        on conflict (player_id, badge_id) do update set value = excluded.value`.execute())
    }
    let boardUpdates: Record<string, unknown>[] = []
    if (partWrites.length) {
      const w = partWrites
      writes.push(tx`
        insert into tournament_participants (tournament_id, player_id, tenant_id, external_id, score, reached_at)
        select u.* from unnest(${w.map((x) => x.tournament)}::uuid[], ${w.map((x) => x.player)}::uuid[], ${w.map((x) => x.tenant)}::uuid[],
                             ${w.map((x) => x.external)}::text[], ${w.map((x) => x.score)}::numeric[], ${w.map((x) => x.reached.toISOString())}::timestamptz[])
          as u(tournament_id, player_id, tenant_id, external_id, score, reached_at)
        -- Only while it is active: the definitions come from a cache (up to 10 s old), and a tournament that
        -- ended meanwhile keeps the scores and final ranks it ended with.
        join tournaments t on t.id = u.tournament_id and t.status = 'active'
        on conflict (tournament_id, player_id) do update set score = excluded.score, reached_at = excluded.reached_at,
          version = tournament_participants.version + 1, updated_at = now()
        returning tournament_id, player_id, external_id, score, reached_at, version`.execute().then((rows) => {
        boardUpdates = rows as unknown as Record<string, unknown>[]
      }))
    }
    // What is left of the stored credits first: a round rolled back and bet again in this batch then adds
    // its new credit to the leftover (the insert's ON CONFLICT), instead of the leftover overwriting it.
    if (usedCredits.size) {
      const w = [...usedCredits.values()]
      // What is left of each: deleted when nothing is, else the remainder.
      writes.push(tx`
        with u as (select * from unnest(${w.map((x) => x.target)}::uuid[], ${w.map((x) => x.player)}::uuid[],
          ${w.map((x) => x.round)}::text[], ${w.map((x) => x.kind)}::text[], ${w.map((x) => microsToDecimal(x.amount))}::numeric[]) as u(t, p, r, k, left_over)),
        gone as (
          delete from gamification_round_credits c using u
          where c.target_id = u.t and c.player_id = u.p and c.round_id = u.r and c.kind = u.k and u.left_over = 0)
        update gamification_round_credits c set amount = u.left_over from u
        where c.target_id = u.t and c.player_id = u.p and c.round_id = u.r and c.kind = u.k and u.left_over <> 0`.execute())
    }
    const credited = [...newCredits.values()].filter((c) => c.amount !== 0)
    if (credited.length) {
      const w = credited
      writes.push(tx`
        insert into gamification_round_credits (target_id, player_id, round_id, kind, amount, period_start)
        select * from unnest(${w.map((x) => x.target)}::uuid[], ${w.map((x) => x.player)}::uuid[], ${w.map((x) => x.round)}::text[],
                             ${w.map((x) => x.kind)}::text[], ${w.map((x) => microsToDecimal(x.amount))}::numeric[],
                             ${w.map((x) => x.period?.toISOString() ?? null)}::timestamptz[])
        on conflict (player_id, round_id, kind, target_id) do update set amount = gamification_round_credits.amount + excluded.amount`.execute())
    }
    await Promise.all(writes)

    // 5. Completions, rewards, badges, webhooks.
    // The batch's completions together: their webhooks go out pipelined (one round trip), their rewards
    // in a few set-based statements (rewards.ts, grantRewardsMany) rather than ~7 per completion.
    await Promise.all(completions.map((c) => insertOutbox(tx as unknown as Sql, {
      tenantId: c.player.tenantId, brandId: c.player.brandId, event: 'gamification.mission_completed',
      data: { player_id: c.player.playerId, mission_id: c.mission.id, stage: c.stage, brand_id: c.player.brandId },
    })))
    await grantRewardsMany(tx, completions.map((c) => ({ player: c.player, rewards: c.rewards, source: { kind: 'mission', id: c.mission.id } })))
    if (missionsCompleted.size) {
      const ids = [...missionsCompleted.keys()]
      await tx`update player_gamification g set missions_completed = g.missions_completed + u.n, updated_at = now()
               from unnest(${ids}::uuid[], ${ids.map((i) => missionsCompleted.get(i) as number)}::int[]) as u(p, n) where g.player_id = u.p`
      await milestoneBadgesMany(tx, ids.map((id) => players.get(id) as PlayerKey))
    }
    for (const b of badgesDue) await awardBadge(tx, b.player, b.badgeId)
    // The shared rows last, so that their locks are held only until the commit that follows; in id order,
    // so that concurrent batches lock them in the same order (one statement per row: the order of an
    // UPDATE ... FROM is the plan's). All of them pipelined: one round trip, so a concurrent batch waits
    // for these locks about as long as our commit takes.
    const collabIds = [...collabDeltas.keys()].sort()
    const totals = await Promise.all(collabIds.map((id) => tx<{ total: string; status: string }[]>`
      update gamification_missions set total = greatest(total + ${microsToDecimal(collabDeltas.get(id) as number)}::numeric, 0), updated_at = now()
      where id = ${id} returning total, status`))
    for (const [i, missionId] of collabIds.entries()) {
      await completeCollaborative(tx, missionDefs.get(missionId) as MissionDef, (totals[i] as { total: string; status: string }[])[0])
    }

    if (!boardUpdates.length) return undefined
    return async () => {
      const byT = new Map<string, BoardEntry[]>()
      for (const r of boardUpdates) {
        const list = byT.get(r.tournament_id as string) ?? []
        list.push(entryOf(r))
        byT.set(r.tournament_id as string, list)
      }
      for (const [tid, entries] of byT) await boards.update(tid, entries)
    }
  }

  /** After the batch added its contributions to the brand-wide total: at the target every contributor is rewarded once. */
  async function completeCollaborative(tx: Tx, m: MissionDef, row: { total: string; status: string } | undefined): Promise<void> {
    if (!row || row.status !== 'active' || micros(row.total) < micros(m.rules.target ?? 0)) return
    await tx`update gamification_missions set status = 'completed', updated_at = now() where id = ${m.id}`
    const contributors = await tx<{ player_id: string; tenant_id: string }[]>`
      select pm.player_id, pm.tenant_id from player_missions pm where pm.mission_id = ${m.id} and pm.value > 0 order by pm.player_id`
    await tx`update player_missions set completions = completions + 1, period_done = true, last_completed_at = now()
             where mission_id = ${m.id} and value > 0`
    const keys = contributors.map((c) => ({ playerId: c.player_id, tenantId: c.tenant_id, brandId: m.brandId }))
    // Pipelined, as a batch's own completions are.
    await Promise.all(keys.map((pk) => insertOutbox(tx as unknown as Sql, {
      tenantId: pk.tenantId, brandId: pk.brandId, event: 'gamification.mission_completed',
      data: { player_id: pk.playerId, mission_id: m.id, stage: 1, brand_id: pk.brandId },
    })))
    // Every contributor's rewards in a few statements, each one's level checked once.
    await grantRewardsMany(tx, keys.map((pk) => ({ player: pk, rewards: m.rewards, source: { kind: 'mission', id: m.id } })))
    await tx`insert into player_gamification (player_id, tenant_id, missions_completed)
             select player_id, tenant_id, 1 from player_missions where mission_id = ${m.id} and value > 0
             on conflict (player_id) do update set missions_completed = player_gamification.missions_completed + 1`
    // Badges for a number of completed missions, as an individual completion checks them.
    await milestoneBadgesMany(tx, contributors.map((c) => ({ playerId: c.player_id, tenantId: c.tenant_id, brandId: m.brandId })))
    // No more contributions: drop the definition everywhere.
    defsCache.delete(m.brandId)
    void ctx.stream?.interestChanged(m.brandId)
  }

  const entryOf = (r: Record<string, unknown>): BoardEntry => ({
    playerId: r.player_id as string, externalId: r.external_id as string, score: Number(r.score),
    reachedMs: new Date(r.reached_at as string).getTime(), version: Number(r.version),
  })

  async function rebuildBoards(opts: { since?: Date } = {}): Promise<void> {
    const active = await sql<{ id: string }[]>`select id from tournaments where status = 'active'`
    for (const t of active) {
      const rows = await sql<Record<string, unknown>[]>`
        select player_id, external_id, score, reached_at, version from tournament_participants
        where tournament_id = ${t.id} ${opts.since ? sql`and updated_at >= ${opts.since}` : sql``}`
      if (rows.length) await boards.update(t.id, rows.map(entryOf))
    }
  }

  /**
   * Ends one tournament exactly once: final ranks, prizes, tournament.ended, in one transaction. An active
   * one past its ends_at, or one the API set `ended` (not yet finalized).
   */
  async function endTournament(id: string): Promise<boolean> {
    const ended = await sql.begin(async (tx) => {
      const [t] = await tx<Record<string, unknown>[]>`
        update tournaments set status = 'ended', finalized_at = now(), updated_at = now()
        where id = ${id} and finalized_at is null and status in ('active', 'ended') returning *`
      if (!t) return false
      await tx`
        update tournament_participants p set final_rank = r.rank
        from (select player_id, row_number() over (order by score desc, reached_at, player_id)::int as rank
              from tournament_participants where tournament_id = ${id}) r
        where p.tournament_id = ${id} and p.player_id = r.player_id`
      const pool = (t.prize_pool ?? {}) as PrizePool
      const brandId = t.brand_id as string
      const tenantId = t.tenant_id as string
      for (const prize of pool.prizes ?? []) {
        const winners = await tx<{ player_id: string; final_rank: number }[]>`
          select player_id, final_rank from tournament_participants
          where tournament_id = ${id} and final_rank between ${prize.from_rank} and ${prize.to_rank} order by final_rank`
        for (const w of winners) {
          const pk = { playerId: w.player_id, tenantId, brandId }
          await lockPlayers(tx, [pk])
          await grantRewards(tx, pk, { points: prize.points }, { kind: 'tournament', id })
          if (prize.bonus_id) await grantBonus(tx, { ...pk, bonusId: prize.bonus_id, source: 'tournament', sourceId: id, reason: `tournament rank ${w.final_rank}` })
        }
      }
      const top = await tx<{ final_rank: number; player_id: string; score: string }[]>`
        select final_rank, player_id, score from tournament_participants where tournament_id = ${id} and final_rank <= 10 order by final_rank`
      await insertOutbox(tx as unknown as Sql, {
        tenantId, brandId, event: 'tournament.ended',
        data: { tournament_id: id, winners: top.map((w) => ({ rank: w.final_rank, player_id: w.player_id, score: Number(w.score) })), brand_id: brandId },
      })
      return true
    })
    if (ended) await boards.drop(id).catch((err: unknown) => log.warn({ err, tournament: id }, 'leaderboard cache not dropped'))
    return ended as boolean
  }

  let lastCreditPrune = 0
  async function tick(): Promise<{ expired: number; ended: string[] }> {
    const now = ctx.clock()
    const expired = await sql<{ id: string }[]>`
      update gamification_missions set status = 'expired', updated_at = now()
      where status = 'active' and ends_at is not null and ends_at < ${now} returning id`
    // A tournament waits for the events of its window already acknowledged but not yet applied (the
    // stream's lag, normally well under a second), so that none of them is lost to the end.
    const due = await sql<{ id: string }[]>`
      (select t.id from tournaments t
       where t.status = 'active' and t.ends_at is not null and t.ends_at <= ${now}
         and not exists (select 1 from event_stream s where s.consumer = ${CONSUMER_NAME} and s.brand_id = t.brand_id
                           and s.event_time <= t.ends_at and s.failed_at is null)
       order by t.ends_at limit 100)
      union all
      -- Set ended through the API: scoring stopped then; ended now, with what it had.
      (select t.id from tournaments t where t.status = 'ended' and t.finalized_at is null limit 100)`
    const ended: string[] = []
    for (const t of due) if (await endTournament(t.id)) ended.push(t.id)
    // A rollback comes within days of its bet: older credits only cost space, so they go once a minute
    // (each look cost ~13 ms under the bench's load, every tick).
    if (now.getTime() - lastCreditPrune >= CREDIT_PRUNE_EVERY_MS) {
      lastCreditPrune = now.getTime()
      await sql`delete from gamification_round_credits where ctid = any(array(
                  select ctid from gamification_round_credits where created_at < ${new Date(now.getTime() - CREDIT_RETENTION_MS)} limit 10000))`
    }
    if (expired.length || ended.length) {
      defsCache.clear()
      await ctx.stream?.interestChanged('*')
    }
    return { expired: expired.length, ended }
  }

  return {
    consumer: { name: CONSUMER_NAME, interest, handle, batchSize: 500 },
    boards,
    invalidate: () => defsCache.clear(),
    tick,
    rebuildBoards,
  }
}

/** Background service: registers the consumer, rebuilds the boards, runs the timer (expiry, ends, repair). */
export async function startGamificationEngine(ctx: AppContext) {
  const engine = createGamificationEngine(ctx)
  ctx.gamification = engine
  await engine.rebuildBoards().catch((err: unknown) => ctx.log.error({ err }, 'gamification: leaderboards not rebuilt'))
  ctx.stream?.register(engine.consumer)
  let lastRepair = Date.now()
  // One tick at a time (the work loop's ticker): with PostgreSQL slow, an interval would start a tick each
  // second regardless, each holding a connection, until the pool is gone.
  const ticker = startTicker({
    name: 'gamification-timer',
    log: ctx.log,
    idleIntervalMs: ctx.config.gamificationTickMs,
    async step() {
      await engine.tick()
      // A process that died between a commit and its cache update left a stale entry: refresh recent rows.
      if (Date.now() - lastRepair > 10_000) {
        const since = new Date(lastRepair - 15_000)
        lastRepair = Date.now()
        await engine.rebuildBoards({ since })
      }
      return false
    },
  })
  return {
    async stop() {
      await ticker.stop()
      await ctx.stream?.unregister(CONSUMER_NAME)
      ctx.gamification = undefined
    },
  }
}

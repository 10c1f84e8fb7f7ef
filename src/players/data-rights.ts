// Data-subject rights: erasure (DELETE /players/{id}) and export (GET /players/{id}/export).
//
// Erasure, in the request's transaction: every feature's personal data of the player is removed (the
// player row is deleted, and with it by cascade its profile, consents, notifications and gamification
// state; features with data elsewhere add an ERASURE_STEPS entry), its outbox events lose their personal
// fields, and a job row is written. In the background (the job survives restarts, claimed on the work loop):
// the player's events in ClickHouse are copied under a random token with personal fields stripped from
// `raw`, then the originals are deleted, so event counts, sums and per-player aggregates stay right but
// nothing links them to the person. `player.erased` fires when the job is done.
//
// Export: everything held about the player, streamed as one JSON document (features add EXPORT_SECTIONS).
import { randomBytes } from 'node:crypto'
import type { TransactionSql } from 'postgres'
import type { BackgroundService } from '../app.ts'
import { actorOf, recordAudit } from '../audit/service.ts'
import type { Principal } from '../auth/types.ts'
import type { AppContext } from '../context.ts'
import type { Sql } from '../db/postgres.ts'
import { notFound } from '../errors.ts'
import { EVENT_COLUMNS } from '../events/event-rows.ts'
import { bumpExportEpoch } from '../events/spool.ts'
import { confirmLease, startWorkLoop, type Lease, type QueueTable } from '../engine/work-loop.ts'
import { insertOutbox } from '../lib/outbox.ts'
import { redisLeaderboards } from '../tournaments/leaderboard.ts'
import { visibleTo, type Visibility } from '../lib/visibility.ts'

/** What a feature's erasure step or export section gets: the player being erased or exported. */
export interface PlayerSubject {
  tenantId: string
  brandId: string
  playerId: string
  externalId: string
  /** The contact points being erased (erasure only): also cut out of free text such as a bounce reason. */
  email?: string | null
  phone?: string | null
}

/** Top-level fields of an outbox event's data that are the player's personal data. */
const PERSONAL_FIELDS = ['email', 'phone', 'name', 'metadata', 'external_id']
const ERASED = '[erased]'

/**
 * An outbox event's data without the player's personal data: its personal fields dropped, and the
 * erased email or phone cut out of every string left (an SMTP refusal quoting the address, say).
 */
function scrubData(data: Record<string, unknown>, s: PlayerSubject): Record<string, unknown> {
  const needles = [s.email, s.phone]
    .filter((n): n is string => typeof n === 'string' && n.length >= 3)
    .map((n) => new RegExp(n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gi'))
  const scrub = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return needles.reduce((out, n) => out.replace(n, ERASED), v)
    if (depth > 32 || v === null || typeof v !== 'object') return v
    if (Array.isArray(v)) return v.map((x) => scrub(x, depth + 1))
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, scrub(x, depth + 1)]))
  }
  const kept = Object.fromEntries(Object.entries(data).filter(([k]) => !PERSONAL_FIELDS.includes(k)))
  return scrub(kept, 0) as Record<string, unknown>
}

/**
 * Personal data outside the player row's cascade (contact points, inbox bodies, ...): each step removes
 * its feature's data of the player inside the erasure's transaction. Features append their step at import.
 * A table with a player_id that does not cascade from players fails test/players/data-rights.test.ts until
 * it is listed there with how the erasure handles it.
 */
export const ERASURE_STEPS: ((tx: TransactionSql, subject: PlayerSubject) => Promise<void>)[] = [
  // Outbox events keep their ids (webhook receivers may be mid-delivery) but lose the personal data, and
  // so do the webhook deliveries made of them: the body a pending retry or a redelivery sends, and the one
  // the deliveries list shows (found through the tenant's endpoints: the index is endpoint, outbox id).
  async (tx, s) => {
    const events = await tx<{ id: string; data: Record<string, unknown> }[]>`
      select id, data from outbox where tenant_id = ${s.tenantId} and data->>'player_id' = ${s.playerId}`
    if (!events.length) return
    const scrubbed = events.map((e) => JSON.stringify(scrubData(e.data, s)))
    await tx`
      update outbox o set data = x.data::jsonb from unnest(${events.map((e) => e.id)}::bigint[], ${scrubbed}::text[]) as x(id, data)
      where o.id = x.id`
    const deliveries = await tx<{ id: string; body: string }[]>`
      select d.id, d.body from webhook_deliveries d
      where d.endpoint_id in (select id from webhook_endpoints where tenant_id = ${s.tenantId})
        and d.outbox_id = any(${events.map((e) => e.id)}::bigint[])`
    if (!deliveries.length) return
    const bodies = deliveries.map((d) => {
      const body = JSON.parse(d.body) as { event: string; created_at: string; data: Record<string, unknown> }
      return JSON.stringify({ event: body.event, created_at: body.created_at, data: scrubData(body.data ?? {}, s) })
    })
    await tx`
      update webhook_deliveries d set body = x.body from unnest(${deliveries.map((d) => d.id)}::uuid[], ${bodies}::text[]) as x(id, body)
      where d.id = x.id`
  },
  // Events not yet consumed by gamification or campaigns carry the raw payload (email, name, ...). The
  // table is small (rows live until consumed), so matching by brand scans little.
  async (tx, s) => {
    await tx`
      delete from event_stream
      where brand_id = ${s.brandId} and (player_id = ${s.playerId} or external_id = ${s.externalId})`
  },
  // Journeys of the player end (nothing more is sent); the rows stay, pseudonymous, for the campaign's counts.
  async (tx, s) => {
    await tx`
      update campaign_participants set status = 'exited', wake_at = null, updated_at = now()
      where brand_id = ${s.brandId} and player_id = ${s.playerId} and status in ('active', 'waiting')`
  },
  // Static segments list their members by id: the player leaves them.
  async (tx, s) => {
    await tx`
      update segments set rules = jsonb_set(rules, '{player_ids}', (rules->'player_ids') - ${s.playerId}::text), updated_at = now()
      where brand_id = ${s.brandId} and type = 'static' and rules->'player_ids' ? ${s.playerId}::text`
  },
  // Everything else personal cascades from the player row (sql/*.sql, `references players on delete
  // cascade`): the profile, consents, player_contacts (Telegram chat id, bounced address), push
  // subscriptions, notifications (payload, rendered bodies: the inbox), point ledger and balances,
  // missions, badges, gamification state, bonus grants, tournament participation.
]

/** Sections of the export: name → rows or an object. Features append theirs (bonus grants, inbox, ...). */
export const EXPORT_SECTIONS: [name: string, read: (sql: Sql, subject: PlayerSubject) => Promise<unknown>][] = [
  ['profile', async (sql, s) => (await sql`select * from player_profiles where player_id = ${s.playerId}`)[0] ?? null],
  ['notifications', (sql, s) => sql`
    select id, channel, template_id, campaign_id, payload, rendered, status, reason, scheduled_at, delivered_at, opened_at, clicked_at, read_at, created_at
    from notifications where player_id = ${s.playerId} order by created_at, id`],
  ['point_balances', (sql, s) => sql`select * from player_point_balances where player_id = ${s.playerId}`],
  ['missions', (sql, s) => sql`select * from player_missions where player_id = ${s.playerId}`],
  ['badges', (sql, s) => sql`select * from player_badges where player_id = ${s.playerId}`],
  ['bonus_grants', (sql, s) => sql`
    select g.id, g.bonus_id, b.name as bonus_name, g.status, g.refusal_reason, g.reason, g.source, g.source_id, g.expires_at, g.created_at
    from bonus_grants g join bonuses b on b.id = g.bonus_id where g.player_id = ${s.playerId} order by g.created_at, g.id`],
  ['tournaments', (sql, s) => sql`select tournament_id, score, reached_at, final_rank from tournament_participants where player_id = ${s.playerId}`],
  // Contact points beside the profile: the Telegram chat id, a hard-bounced address, Web Push endpoints
  // (their encryption keys are the browser's, not the player's data, and stay out).
  ['contacts', async (sql, s) => (await sql`select telegram_chat_id, undeliverable_email, updated_at from player_contacts where player_id = ${s.playerId}`)[0] ?? null],
  ['push_subscriptions', (sql, s) => sql`select id, endpoint, created_at from push_subscriptions where player_id = ${s.playerId} order by created_at, id`],
  // Campaigns the player was in: audience (with control-group arm), journeys, conversions.
  ['campaign_audience', (sql, s) => sql`
    select a.campaign_id, c.name as campaign_name, a.run_id, a.control from campaign_audience a join campaigns c on c.id = a.campaign_id
    where c.brand_id = ${s.brandId} and a.player_id = ${s.playerId} order by a.campaign_id, a.run_id`],
  ['campaign_journeys', (sql, s) => sql`
    select campaign_id, step, status, entered_at, updated_at from campaign_participants
    where brand_id = ${s.brandId} and player_id = ${s.playerId} order by entered_at, id`],
  ['campaign_conversions', (sql, s) => sql`
    select v.campaign_id, v.control, v.converted_at from campaign_conversions v join campaigns c on c.id = v.campaign_id
    where c.brand_id = ${s.brandId} and v.player_id = ${s.playerId} order by v.converted_at`],
]

/**
 * Keys of an event kept in `raw` after erasure (everything else, including unknown payload fields that may
 * hold anything, is dropped); player_id is rewritten to the token.
 */
const KEEP_TOP = ['player_id', 'event_type', 'event_id', 'timestamp', 'payload']
const KEEP_PAYLOAD = [
  'amount', 'currency', 'method', 'game', 'provider', 'category', 'round_id', 'status', 'bonus_id', 'channel',
  'granted', 'language', 'platform',
]

export interface ErasureJob {
  id: string
  player_id: string
  status: 'pending' | 'in_progress' | 'completed'
  attempts: number
  created_at: string
  completed_at: string | null
}

interface JobRow {
  id: string
  tenant_id: string
  brand_id: string
  player_id: string
  external_id: string | null
  token: string | null
  cutoff: Date
  state: 'pending' | 'deleting' | 'done'
  attempts: number
  created_at: Date
  finished_at: Date | null
}

const jobOut = (r: JobRow): ErasureJob => ({
  id: r.id,
  player_id: r.player_id,
  status: r.state === 'done' ? 'completed' : r.attempts > 0 ? 'in_progress' : 'pending',
  attempts: r.attempts,
  created_at: r.created_at.toISOString(),
  completed_at: r.finished_at ? r.finished_at.toISOString() : null,
})

async function findJob(sql: Sql, v: Visibility & { playerId: string }): Promise<JobRow | undefined> {
  const [row] = await sql<JobRow[]>`select * from player_erasures where player_id = ${v.playerId} and ${visibleTo(sql, v)}`
  return row
}

/** Wakes this process's erasure worker (set while it runs). */
// Keyed by the process's PostgreSQL: the worker holds the engines' view of the context (app.ts), the
// routes the context itself.
const wakers = new WeakMap<object, () => void>()

/** An erased player's events in ClickHouse carry this prefix and 32 hex digits as their player id. */
export const ERASURE_TOKEN_PREFIX = 'erased-'

/**
 * Erases the player's personal data from PostgreSQL now and queues the ClickHouse part. Repeating it for
 * an erased player answers the same job.
 */
export async function erasePlayer(ctx: AppContext, input: { principal: Principal; playerId: string; requestId: string }): Promise<ErasureJob> {
  const v: Visibility = { tenantId: input.principal.tenantId, brandId: input.principal.brandId }
  const erased = await ctx.sql.begin(async (tx) => {
    const [player] = await tx<{ id: string; tenant_id: string; brand_id: string; external_id: string; email: string | null; phone: string | null }[]>`
      select id, tenant_id, brand_id, external_id, email, phone from players where id = ${input.playerId} and ${visibleTo(tx, v)} for update`
    if (!player) return undefined
    const subject: PlayerSubject = {
      tenantId: player.tenant_id, brandId: player.brand_id, playerId: player.id, externalId: player.external_id, email: player.email, phone: player.phone,
    }
    // The live leaderboards the player is on (their rows go with the player's cascade below).
    const boards = await tx<{ tournament_id: string }[]>`select tournament_id from tournament_participants where player_id = ${player.id}`
    for (const step of ERASURE_STEPS) await step(tx, subject)
    await tx`delete from players where id = ${player.id}`
    const [row] = await tx<JobRow[]>`
      insert into player_erasures (tenant_id, brand_id, player_id, external_id, token, cutoff, sink)
      values (${player.tenant_id}, ${player.brand_id}, ${player.id}, ${player.external_id}, ${`${ERASURE_TOKEN_PREFIX}${randomBytes(16).toString('hex')}`}, ${new Date()}, ${ctx.ch.sinkId})
      returning *`
    // No before/after: they would put back in the trail what was just erased.
    await recordAudit(tx, { ...actorOf(input), action: 'erasePlayer', target: { type: 'player', id: player.id }, requestId: input.requestId })
    return { job: row as JobRow, tournaments: boards.map((b) => b.tournament_id) }
  })
  const job = erased?.job
  const tournaments = erased?.tournaments ?? []
  if (job && tournaments.length) {
    // The leaderboard caches (Redis, shared; or this process's own) drop the player too.
    const boards = ctx.gamification?.boards ?? (ctx.redis ? redisLeaderboards(ctx.redis) : undefined)
    for (const id of tournaments) {
      await boards?.remove(id, input.playerId).catch((err: unknown) => ctx.log.warn({ err, tournament: id }, 'erased player not taken off a leaderboard cache'))
    }
  }
  if (!job) {
    const existing = await findJob(ctx.sql, { ...v, playerId: input.playerId })
    if (!existing) throw notFound('player')
    return jobOut(existing)
  }
  ctx.log.info({ erasureId: job.id, tenantId: job.tenant_id }, 'player erased in PostgreSQL; ClickHouse part queued')
  wakers.get(ctx.pg)?.()
  return jobOut(job)
}

export async function getErasure(ctx: AppContext, v: Visibility & { playerId: string }): Promise<ErasureJob> {
  const job = await findJob(ctx.sql, v)
  if (!job) throw notFound('erasure')
  return jobOut(job)
}

// ---- the background part ----------------------------------------------------------------------------

const LEASE_MS = 300_000
const POLL_MS = 2_000
const COLUMNS = EVENT_COLUMNS.map(([name]) => name)

/** `raw` rebuilt from the kept keys only, player_id replaced by the token (ClickHouse JSON functions). */
const SCRUBBED_RAW =
  "concat('{', arrayStringConcat(arrayMap(kv -> concat(toJSONString(kv.1), ':', multiIf(" +
  "kv.1 = 'player_id', toJSONString({token:String}), " +
  "kv.1 = 'payload', concat('{', arrayStringConcat(arrayMap(p -> concat(toJSONString(p.1), ':', p.2), " +
  'arrayFilter(p -> has({keep_payload:Array(String)}, p.1), JSONExtractKeysAndValuesRaw(kv.2))), \',\'), \'}\'), kv.2)), ' +
  "arrayFilter(kv -> has({keep_top:Array(String)}, kv.1), JSONExtractKeysAndValuesRaw(raw))), ','), '}')"

const PLAYER_EVENTS = "tenant_id = {tenant:UUID} AND brand_id = {brand:UUID} AND player_id = {ext:String} AND received_at <= {cutoff:DateTime64(3, 'UTC')}"

/** The work loop's queue of erasure jobs: a process only takes the jobs whose events are in its ClickHouse. */
const erasureQueue = (sink: string): QueueTable => ({
  table: 'player_erasures',
  keyColumn: 'id',
  dueColumn: 'due_at',
  ownerColumn: 'lease_owner',
  where: (sql) => sql`state <> 'done' and sink = ${sink}`,
})

/** The rollups keyed by player (clickhouse/0010, 0015): each `<name>_mv` fills `<name>` from events. */
export const PLAYER_ROLLUPS = ['rollup_player_buckets', 'rollup_player_totals', 'rollup_player_months', 'rollup_players', 'rollup_player_keys']
/** What retention dropped of each player's totals (clickhouse/0012): no view, deleted with the rollups. */
const EXPIRED_TOTALS = 'rollup_player_totals_expired'
/**
 * Every ClickHouse table holding player ids, each handled by an erasure. A new one must be added here and
 * handled: test/players/data-rights.test.ts fails until it is, so an erasure never leaves a player behind.
 */
export const PLAYER_TABLES = ['events', ...PLAYER_ROLLUPS, EXPIRED_TOTALS]
/**
 * A rollup view's query (system.tables.as_select) reading only the id's events numbered below the hold,
 * for the rebuild; throws for a view that does not read `events` exactly once (say, a join or a subquery
 * over it), which this rewrite cannot narrow.
 */
export function rollupRebuildSource(table: string, asSelect: string): string {
  // as_select names `events` with or without its database; a subquery's ends with its parenthesis.
  const from = /\bFROM\s+(`?\w+`?\.)?`?events`?(?=[\s),;]|$)/gi
  if ((asSelect.match(from) ?? []).length !== 1) throw new Error(`rollup ${table}: its view does not read events once`)
  return asSelect.replace(from, (m) => `FROM (SELECT * FROM ${m.replace(/^FROM\s+/i, '')} WHERE tenant_id = {tenant:UUID} AND brand_id = {brand:UUID} AND player_id = {ext:String} AND seq < {below:UInt64}) AS events`)
}

/** A player's rows in the per-player rollups, gone (`player`: the placeholder of the original id or the token). */
async function deletePlayerRollups(ctx: AppContext, params: Record<string, unknown>, player: string): Promise<void> {
  // rollup_player_totals_expired (clickhouse/0012) too: what retention dropped of the original's events is
  // no longer in its totals once they are rebuilt from the events that are left.
  for (const table of [...PLAYER_ROLLUPS, EXPIRED_TOTALS]) {
    await ctx.ch.command(`ALTER TABLE ${table} DELETE WHERE tenant_id = {tenant:UUID} AND brand_id = {brand:UUID} AND player_id = ${player} SETTINGS mutations_sync = 2`, params)
  }
}

/**
 * Events of the external id received after the erasure's cutoff (a new player with the same id) stay, and
 * deleting the id's rollup rows removes their share too: rebuilt from them with each view's own query
 * (system.tables.as_select). None in the usual case. Exact while that player's events keep arriving: the
 * delete runs with event inserts held (Spool.hold), so the events below the returned seq are
 * exactly those whose share it removed, and the views count every later one themselves; the rebuild
 * reads only the former.
 */
async function resetPlayerRollups(ctx: AppContext, params: Record<string, unknown>): Promise<void> {
  const spool = ctx.ingest?.spool
  if (!spool) throw new Error('ingestion is stopping: erasure retried later')
  const below = await spool.hold(async (held) => {
    await deletePlayerRollups(ctx, params, '{ext:String}')
    return held
  })
  const scope = { ...params, below }
  const [left] = await ctx.ch.query<{ n: string }>(
    'SELECT toString(count()) AS n FROM events WHERE tenant_id = {tenant:UUID} AND brand_id = {brand:UUID} AND player_id = {ext:String} AND seq < {below:UInt64}', scope)
  if (!left || left.n === '0') return
  for (const table of PLAYER_ROLLUPS) {
    const [view] = await ctx.ch.query<{ q: string }>('SELECT as_select AS q FROM system.tables WHERE database = currentDatabase() AND name = {v:String}', { v: `${table}_mv` })
    const columns = (await ctx.ch.query<{ c: string }>(
      'SELECT name AS c FROM system.columns WHERE database = currentDatabase() AND table = {t:String} ORDER BY position', { t: table })).map((r) => `\`${r.c}\``).join(', ')
    if (!view?.q || !columns) throw new Error(`rollup ${table}: view or columns not found`)
    const source = rollupRebuildSource(table, view.q)
    await ctx.ch.command(`INSERT INTO ${table} (${columns}) SELECT ${columns} FROM (${source}) SETTINGS insert_deduplicate = 0`, scope)
  }
}

/**
 * One job's ClickHouse part, from the stage it reached. Every stage can run again after a crash. Before
 * each stage the claim is confirmed (`stillOurs`): a job whose lease ran out and was claimed by another
 * process stops here rather than run its stages beside that one (one deleting the copy the other made).
 */
export async function runErasure(ctx: AppContext, job: JobRow, lease: Lease): Promise<void> {
  const queue = erasureQueue(ctx.ch.sinkId)
  const stillOurs = async () => {
    if (!(await confirmLease(ctx.sql, queue, job.id, lease))) throw new LeaseLost()
  }
  await stillOurs()
  // Counted per claim: GET /players/{id}/erasure shows it, and the retry's backoff grows with it.
  const [counted] = await ctx.sql<{ attempts: number }[]>`
    update player_erasures set attempts = attempts + 1, updated_at = now()
    where id = ${job.id} and lease_owner = ${lease.owner} returning attempts`
  if (!counted) throw new LeaseLost()
  job.attempts = counted.attempts
  const params = {
    tenant: job.tenant_id,
    brand: job.brand_id,
    ext: job.external_id,
    token: job.token,
    cutoff: job.cutoff.toISOString().replace('T', ' ').replace('Z', ''),
    keep_top: KEEP_TOP,
    keep_payload: KEEP_PAYLOAD,
  }
  if (job.state === 'pending') {
    // The player's events still spooled in PostgreSQL go to ClickHouse first, so the copy sees them.
    await ctx.ingest?.spool.flush('all')
    // Copies a crashed earlier attempt left are removed, then the copy is made whole. Never deduplicated
    // as a repeat of that earlier insert (it would be dropped silently).
    await stillOurs()
    await ctx.ch.command(`ALTER TABLE events DELETE WHERE tenant_id = {tenant:UUID} AND brand_id = {brand:UUID} AND player_id = {token:String} SETTINGS mutations_sync = 2`, params)
    await deletePlayerRollups(ctx, params, '{token:String}')
    await stillOurs()
    // Marked as copies: rollup_buckets keeps the originals' figures and skips them (clickhouse/0011); the
    // per-player rollups take them under the token.
    await ctx.ch.command(
      `INSERT INTO events (${COLUMNS.join(', ')}, erasure_copy) SELECT ${COLUMNS.map((c) => (c === 'player_id' ? '{token:String}' : c === 'raw' ? SCRUBBED_RAW : c === 'extra_fields' ? "''" : c)).join(', ')}, 1 ` +
        `FROM events WHERE ${PLAYER_EVENTS} SETTINGS insert_deduplicate = 0`,
      params,
    )
    // Export pages read ahead before the copy are not served any more (src/exports/service.ts).
    await bumpExportEpoch(ctx.sql, ctx.ch.sinkId)
    const moved = await ctx.sql`update player_erasures set state = 'deleting', updated_at = now() where id = ${job.id} and lease_owner = ${lease.owner} returning 1`
    if (!moved.length) throw new LeaseLost()
  }
  await stillOurs()
  await ctx.ch.command(`ALTER TABLE events DELETE WHERE ${PLAYER_EVENTS} SETTINGS mutations_sync = 2`, params)
  await resetPlayerRollups(ctx, params)
  await bumpExportEpoch(ctx.sql, ctx.ch.sinkId)
  await ctx.sql.begin(async (tx) => {
    const [done] = await tx<{ finished_at: Date }[]>`
      update player_erasures set state = 'done', external_id = null, token = null, lease_owner = null, last_error = null,
        finished_at = now(), updated_at = now()
      where id = ${job.id} and state <> 'done' returning finished_at`
    if (!done) return
    await insertOutbox(tx, {
      tenantId: job.tenant_id,
      brandId: job.brand_id,
      event: 'player.erased',
      data: { player_id: job.player_id, erasure_id: job.id, erased_at: done.finished_at.toISOString() },
    })
  })
}

class LeaseLost extends Error {
  constructor() {
    super('erasure claimed by another process (lease lost): stopped')
  }
}

/**
 * Background service: runs queued erasures on the work loop (any process; one job at a time per process:
 * ClickHouse mutations are heavy). A failed job is retried with a backoff of 2^attempts seconds, at most
 * 5 minutes; a job whose process died is claimed again once its lease ends.
 */
export function startErasureWorker(ctx: AppContext): BackgroundService {
  const queue = erasureQueue(ctx.ch.sinkId)
  const loop = startWorkLoop<JobRow>({
    name: 'player_erasures',
    sql: ctx.sql,
    log: ctx.log,
    queue,
    keyOf: (row) => row.id,
    leaseMs: LEASE_MS,
    globalConcurrency: 1,
    // Claimed only when it can start: a job waiting behind another's mutations would sit out its lease unrenewed.
    maxInMemory: 1,
    idleIntervalMs: POLL_MS,
    metrics: ctx.metrics,
    async handle(job, lease) {
      try {
        await runErasure(ctx, job, lease)
        ctx.log.info({ erasureId: job.id, attempts: job.attempts }, 'player erasure completed')
      } catch (err) {
        if (err instanceof LeaseLost) {
          ctx.log.warn({ erasureId: job.id }, err.message)
          return
        }
        ctx.metrics?.queueFailure('player_erasures')
        const retryIn = Math.min(2 ** job.attempts, 300)
        ctx.log.error({ err, erasureId: job.id, attempts: job.attempts, retryIn }, 'player erasure failed; retrying')
        await ctx.sql`
          update player_erasures set due_at = now() + ${retryIn} * interval '1 second', lease_owner = null,
            last_error = ${err instanceof Error ? err.message.slice(0, 500) : 'failed'}, updated_at = now()
          where id = ${job.id} and lease_owner = ${lease.owner}`.catch(() => {})
      }
    },
  })
  wakers.set(ctx.pg, () => loop.wake())
  return {
    async stop() {
      wakers.delete(ctx.pg)
      await loop.stop()
    },
  }
}

// ---- export -----------------------------------------------------------------------------------------

const EVENT_PAGE = 1000

/**
 * The export as JSON text chunks: `{"player":…,"profile":…,…,"events":[…]}`. Events are read from
 * ClickHouse page by page (by seq), so a player with millions of events never sits in memory at once.
 */
export async function exportPlayer(ctx: AppContext, v: Visibility & { playerId: string }): Promise<AsyncIterable<string>> {
  const [player] = await ctx.sql`select * from players where id = ${v.playerId} and ${visibleTo(ctx.sql, v)}`
  if (!player) throw notFound('player')
  const subject: PlayerSubject = { tenantId: player.tenant_id, brandId: player.brand_id, playerId: player.id, externalId: player.external_id }
  // Everything from PostgreSQL is read before the first byte goes out, so a failure there is a clean error.
  // Acknowledged events still spooled in PostgreSQL go to ClickHouse first: the export holds every one.
  await ctx.ingest?.spool.flush('all')
  // While an erasure of an earlier player under this external id is still moving its events to their
  // token, those events are that player's, not this one's: only events received after its cutoff.
  const [pending] = await ctx.sql<{ cutoff: Date | null }[]>`
    select max(cutoff) as cutoff from player_erasures
    where brand_id = ${player.brand_id} and external_id = ${player.external_id} and state <> 'done'`
  const since = pending?.cutoff ?? null
  const sections: [string, unknown][] = [['player', player]]
  for (const [name, read] of EXPORT_SECTIONS) sections.push([name, await read(ctx.sql, subject)])
  const ch = ctx.ch
  return (async function* () {
    yield `{"exported_at":${JSON.stringify(new Date().toISOString())}`
    for (const [name, value] of sections) yield `,${JSON.stringify(name)}:${JSON.stringify(value)}`
    yield ',"events":['
    let after = -1
    let first = true
    for (;;) {
      const rows = await ch.query<Record<string, unknown> & { seq: string | number }>(
        `SELECT * EXCEPT (tenant_id, brand_id, erasure_copy) FROM events WHERE tenant_id = {tenant:UUID} AND brand_id = {brand:UUID} ` +
          `AND player_id = {ext:String} AND seq > {after:Int64} ${since ? "AND received_at > {since:DateTime64(3, 'UTC')}" : ''} ORDER BY seq LIMIT ${EVENT_PAGE}`,
        { tenant: subject.tenantId, brand: subject.brandId, ext: subject.externalId, after, ...(since && { since: since.toISOString().replace('T', ' ').replace('Z', '') }) },
      )
      if (rows.length === 0) break
      let chunk = ''
      for (const row of rows) {
        chunk += (first ? '' : ',') + JSON.stringify({ ...row, raw: parseRaw(row.raw) })
        first = false
      }
      yield chunk
      after = Number(rows[rows.length - 1]?.seq)
      if (rows.length < EVENT_PAGE) break
    }
    yield ']}'
  })()
}

function parseRaw(raw: unknown): unknown {
  try {
    return typeof raw === 'string' ? JSON.parse(raw) : raw
  } catch {
    return raw
  }
}

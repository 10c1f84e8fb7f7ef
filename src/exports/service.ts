// GET /export/{dataset}: keyset pages over append-only streams (docs/analytics.md, "Exports"). `players`
// from PostgreSQL in creation order, `events` and `transactions` from ClickHouse in insertion order (seq).
// A cursor is signed and names its tenant, brand and dataset; next_cursor stays after the last row
// returned, so continuing from it later yields exactly the rows added since (incremental sync). It is
// null only on a page without rows.
import type { AppContext } from '../context.ts'
import { MONEY_TYPES, MONEY_TYPES_SQL, SCOPE } from '../analytics/queries.ts'
import { toNumber, units } from '../analytics/money.ts'
import { exportWatermark } from '../events/spool.ts'
import { cursorCodec, decodeCursorOr400, invalidCursor } from '../lib/cursor.ts'

type Deps = Pick<AppContext, 'sql' | 'ch'>
export const DATASETS = ['players', 'events', 'transactions'] as const
export type Dataset = (typeof DATASETS)[number]

interface Input {
  tenantId: string
  brandId: string
  dataset: Dataset
  cursor?: string
  limit: number
}

const PURPOSE = 'export/v1'

export async function exportPage(deps: Deps, input: Input): Promise<{ data: unknown[]; next_cursor: string | null }> {
  const codec = await cursorCodec(deps.sql, PURPOSE)
  let position: Record<string, unknown> | undefined
  if (input.cursor !== undefined && input.cursor !== '') {
    const c = decodeCursorOr400(codec, input.cursor)
    if (c.t !== input.tenantId || c.b !== input.brandId || c.d !== input.dataset) throw invalidCursor()
    position = c
  }
  const page = input.dataset === 'players' ? await playersPage(deps, input, position) : await eventsPage(deps, input, position)
  return { data: page.rows, next_cursor: page.next ? codec.encode({ t: input.tenantId, b: input.brandId, d: input.dataset, ...page.next }) : null }
}

// ---------------------------------------------------------------------------------------------- players

interface PlayerRow {
  id: string; external_id: string; email: string | null; phone: string | null; status: string; metadata: unknown
  created_at: Date; updated_at: Date; created_key: string; profile: Record<string, unknown> | null
}

/**
 * Creation order is (created_at, id). created_at is its transaction's start (now()), and a transaction
 * still running may commit a player later with an earlier created_at than rows already visible. So a page
 * only reads players created before the oldest transaction running in the database when the page began
 * (read in a statement of its own, before the page's): anything committed later has a created_at at or
 * after that bound, and is read by a later page.
 */
async function playersPage(deps: Deps, input: Input, position: Record<string, unknown> | undefined) {
  let after: { at: string; id: string } | undefined
  if (position) {
    if (typeof position.at !== 'string' || typeof position.id !== 'string' || !/^[0-9a-f-]{36}$/.test(position.id)) throw invalidCursor()
    after = { at: position.at, id: position.id }
  }
  const [bound] = await deps.sql<{ w: string }[]>`
    select least(now(), (select min(xact_start) from pg_stat_activity
                         where datname = current_database() and pid <> pg_backend_pid() and xact_start is not null))::text as w`
  const { sql } = deps
  // The page first, in index order (players_brand_created), then the profiles of its rows only. Times go
  // as text (::text::timestamptz): the driver would send a timestamptz parameter through a JS Date and
  // drop its microseconds, and the keyset would then never pass a row.
  const rows = await sql<PlayerRow[]>`
    with page as (
      select id, external_id, email, phone, status, metadata, created_at, updated_at from players
      where brand_id = ${input.brandId} and tenant_id = ${input.tenantId} and created_at < ${bound?.w ?? null}::text::timestamptz
        ${after ? sql`and (created_at, id) > (${after.at}::text::timestamptz, ${after.id}::uuid)` : sql``}
      order by brand_id, created_at, id
      limit ${input.limit}
    )
    select p.*, to_char(p.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_key,
      prof.profile
    from page p
    -- lateral: one primary-key probe per row of the page, never a join over the brand's profiles.
    left join lateral (
      select to_jsonb(pp) - 'player_id' - 'tenant_id' - 'brand_id' as profile from player_profiles pp where pp.player_id = p.id limit 1
    ) prof on true
    order by p.created_at, p.id`
  const last = rows[rows.length - 1]
  return {
    rows: rows.map((r) => ({
      id: r.id, external_id: r.external_id, email: r.email, phone: r.phone, status: r.status, metadata: r.metadata,
      created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(), profile: r.profile,
    })),
    next: last ? { at: last.created_key, id: last.id } : undefined,
  }
}

// ------------------------------------------------------------------------------------ events, transactions

const EVENT_FIELDS = [
  'event_id', 'player_id', 'event_type', 'source_type', 'event_time', 'received_at', 'session_id', 'amount', 'currency', 'method', 'game',
  'provider', 'category', 'round_id', 'country', 'language', 'device', 'os', 'browser', 'platform', 'status', 'bonus_id', 'channel', 'granted', 'raw',
]
const AMOUNT_TYPES = new Set<string>([...MONEY_TYPES, 'deposit_failed'])
const nullIfEmpty = (s: string) => (s === '' ? null : s)
const iso = (s: string) => `${s.replace(' ', 'T')}Z`

/**
 * Insertion order is seq, given when the spool moves events to ClickHouse; every seq below the watermark
 * (read from PostgreSQL before ClickHouse) is there already or never will be (spool.ts exportWatermark).
 * The page's last seq from the events_by_seq projection (a few granules), then the rows up to it.
 */
async function eventsPage(deps: Deps, input: Input, position: Record<string, unknown> | undefined) {
  let after = 0
  if (position) {
    if (typeof position.s !== 'string' || !/^\d{1,20}$/.test(position.s)) throw invalidCursor()
    after = Number(position.s)
  }
  const watermark = await exportWatermark(deps.sql, deps.ch.sinkId)
  const types = input.dataset === 'transactions' ? `AND event_type IN (${MONEY_TYPES_SQL})` : ''
  const params = { tenant: input.tenantId, brand: input.brandId, after: String(after), below: String(watermark), limit: input.limit }
  // One query: the scalar subquery (the page's last seq, from the projection) is computed first, and the
  // outer read uses it as a constant for the primary key and the seq min-max index.
  const rows = await deps.ch.query<Record<string, string | number | null>>(`
    SELECT ${EVENT_FIELDS.map((f) => (f === 'amount' ? 'toString(amount) AS amount_text' : f)).join(', ')}, toString(seq) AS seq_text FROM events
    WHERE ${SCOPE} AND seq > {after:UInt64} ${types} AND seq <= (
      SELECT max(seq) FROM (
        SELECT seq FROM events WHERE ${SCOPE} AND seq > {after:UInt64} AND seq < {below:UInt64} ${types}
        ORDER BY seq LIMIT {limit:UInt32}))
    ORDER BY seq
    -- A page reads a few granules: one thread, without the setup of a parallel read (21 → 16 ms a page on chDB).
    SETTINGS max_threads = 1`, params)
  const last = rows[rows.length - 1]
  if (!last) return { rows: [], next: undefined }
  return {
    rows: rows.map((r) => {
      let payload: unknown = {}
      try {
        const raw = JSON.parse(r.raw as string) as { payload?: unknown }
        payload = raw && typeof raw === 'object' && raw.payload !== undefined ? raw.payload : {}
      } catch {
        payload = {}
      }
      const type = r.event_type as string
      return {
        event_id: nullIfEmpty(r.event_id as string),
        player_id: r.player_id,
        event_type: type,
        source_type: r.source_type,
        event_time: iso(r.event_time as string),
        received_at: iso(r.received_at as string),
        session_id: nullIfEmpty(r.session_id as string),
        amount: AMOUNT_TYPES.has(type) ? toNumber(units(r.amount_text as string)) : null,
        currency: nullIfEmpty(r.currency as string),
        method: nullIfEmpty(r.method as string),
        game: nullIfEmpty(r.game as string),
        provider: nullIfEmpty(r.provider as string),
        category: nullIfEmpty(r.category as string),
        round_id: nullIfEmpty(r.round_id as string),
        country: nullIfEmpty(r.country as string),
        language: nullIfEmpty(r.language as string),
        device: nullIfEmpty(r.device as string),
        os: nullIfEmpty(r.os as string),
        browser: nullIfEmpty(r.browser as string),
        platform: nullIfEmpty(r.platform as string),
        status: nullIfEmpty(r.status as string),
        bonus_id: nullIfEmpty(r.bonus_id as string),
        channel: nullIfEmpty(r.channel as string),
        granted: r.granted === null || r.granted === undefined ? null : Number(r.granted) === 1,
        payload,
      }
    }),
    next: { s: last.seq_text as string },
  }
}

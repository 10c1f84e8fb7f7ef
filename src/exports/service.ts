// GET /export/{dataset}: keyset pages over append-only streams (docs/analytics.md, "Exports"). `players`
// from PostgreSQL in creation order, `events` and `transactions` from ClickHouse in insertion order (seq).
// A cursor is signed and names its tenant, brand and dataset; next_cursor stays after the last row
// returned, so continuing from it later yields exactly the rows added since (incremental sync). It is
// null only on a page without rows.
import type { AppContext } from '../context.ts'
import { REPORT_SETTINGS } from '../db/clickhouse.ts'
import { MONEY_TYPES, MONEY_TYPES_SQL, SCOPE } from '../analytics/queries.ts'
import { exportWatermark } from '../events/spool.ts'
import { cursorCodec, decodeCursorOr400, invalidCursor } from '../lib/cursor.ts'
import { apiTimeSql, exactTimeSql } from '../lib/rows.ts'

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

/**
 * The page as the JSON bytes of `{ data, next_cursor }`: the rows' JSON comes from ClickHouse (events)
 * or PostgreSQL (players) and is passed on as bytes, never decoded into strings.
 */
export async function exportPage(deps: Deps, input: Input): Promise<Buffer> {
  const codec = await cursorCodec(deps.sql, PURPOSE)
  let position: Record<string, unknown> | undefined
  if (input.cursor !== undefined && input.cursor !== '') {
    const c = decodeCursorOr400(codec, input.cursor)
    if (c.t !== input.tenantId || c.b !== input.brandId || c.d !== input.dataset) throw invalidCursor()
    position = c
  }
  const page = input.dataset === 'players' ? await playersPage(deps, input, position) : await eventsPage(deps, input, position)
  const next = page.next ? codec.encode({ t: input.tenantId, b: input.brandId, d: input.dataset, ...page.next }) : null
  return Buffer.concat([DATA_OPEN, page.data, Buffer.from(`,"next_cursor":${JSON.stringify(next)}}`)])
}

const DATA_OPEN = Buffer.from('{"data":')
const [OPEN, COMMA, CLOSE, EMPTY] = ['[', ',', ']', '[]'].map((t) => Buffer.from(t)) as [Buffer, Buffer, Buffer, Buffer]

// ---------------------------------------------------------------------------------------------- players

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
  const profileColumns = await profileColumnsOf(sql)
  // The page first, in index order (players_brand_created), then the profiles of its rows only (one
  // primary-key probe each), made into the page's JSON text by PostgreSQL: on the embedded database
  // every step runs on the event loop, and parsing the rows into objects to serialise them again cost as
  // much as the query. Times go as text (::text::timestamptz): the driver would send a timestamptz
  // parameter through a JS Date and drop its microseconds, and the keyset would then never pass a row.
  // The row comes raw (bytes, .raw()): the page's JSON goes out as the bytes it came in, never decoded
  // into a string and encoded again (~3 ms a page on the event loop).
  const [page] = (await sql`
    with page as (
      select id, external_id, email, phone, status, metadata, created_at, updated_at from players
      where brand_id = ${input.brandId} and tenant_id = ${input.tenantId} and created_at < ${bound?.w ?? null}::text::timestamptz
        ${after ? sql`and (created_at, id) > (${after.at}::text::timestamptz, ${after.id}::uuid)` : sql``}
      order by brand_id, created_at, id
      limit ${input.limit}
    ), last as (
      select ${sql.unsafe(exactTimeSql('created_at'))} as at, id from page order by created_at desc, id desc limit 1
    )
    -- Each row a record of the fields, its profile a record of every profile column but the ids, made
    -- JSON by json_agg: 12 % quicker on PGlite than json_build_object with row_to_json (whose output
    -- also had a space around every ':'); to_jsonb minus the id keys cost twice as much.
    select coalesce(json_agg((select r from (
        select p.id, p.external_id, p.email, p.phone, p.status, p.metadata,
          ${sql.unsafe(apiTimeSql('p.created_at'))} as created_at, ${sql.unsafe(apiTimeSql('p.updated_at'))} as updated_at,
          case when pp.player_id is not null then (select r from (select ${sql.unsafe(profileColumns)}) r) end as profile) r)
        order by p.created_at, p.id), '[]')::text as data,
      (select at from last) as last_at, (select id::text from last) as last_id
    from page p
    left join player_profiles pp on pp.player_id = p.id`.raw()) as unknown as [data: Buffer, lastAt: Buffer | null, lastId: Buffer | null][]
  const [data, lastAt, lastId] = page ?? [EMPTY, null, null]
  return { data, next: lastAt && lastId ? { at: lastAt.toString(), id: lastId.toString() } : undefined }
}

/**
 * The select list of the profile's columns but its ids, from the catalog once per database (a migration
 * restarts the process). Times are written as the rest of the API writes them (UTC, milliseconds, `Z`,
 * as `GET /players/{id}` gives them), not in row_to_json's session-zone form (`…:24.27+00:00`).
 */
const profileColumnsCache = new WeakMap<object, Promise<string>>()
function profileColumnsOf(sql: Deps['sql']): Promise<string> {
  let columns = profileColumnsCache.get(sql)
  if (!columns) {
    columns = sql<{ c: string; t: string }[]>`
      select column_name as c, data_type as t from information_schema.columns
      where table_schema = current_schema() and table_name = 'player_profiles' and column_name not in ('player_id', 'tenant_id', 'brand_id')
      order by ordinal_position`.then((rows) =>
      rows
        .map(({ c, t }) => {
          const name = `"${c.replace(/"/g, '""')}"`
          return t === 'timestamp with time zone' ? `${apiTimeSql(`pp.${name}`)} as ${name}` : `pp.${name}`
        })
        .join(', '),
    )
    columns.catch(() => profileColumnsCache.delete(sql))
    profileColumnsCache.set(sql, columns)
  }
  return columns
}

// ------------------------------------------------------------------------------------ events, transactions

const AMOUNT_TYPES_SQL = [...MONEY_TYPES, 'deposit_failed'].map((t) => `'${t}'`).join(', ')
const textOrNull = (f: string) => `nullIf(${f}, '') AS ${f}`
const isoTime = (f: string) => `concat(replaceOne(toString(${f}), ' ', 'T'), 'Z') AS ${f}`
/**
 * An event's export row: empty fields null, times ISO 8601 in UTC, the amount as its exact decimal (null
 * for types without money), granted a boolean, the canonical fields kept in extra_fields, and `payload`
 * as sent (the raw event's, minified; `{}` without one).
 */
const ROW_COLUMNS: [name: string, expression: string][] = [
  textOrNull('event_id'), 'player_id', 'event_type', 'source_type', isoTime('event_time'), isoTime('received_at'), textOrNull('session_id'),
  `if(event_type IN (${AMOUNT_TYPES_SQL}), amount, NULL) AS amount`,
  ...['currency', 'method', 'game', 'provider', 'category', 'round_id', 'country', 'language', 'device', 'os', 'browser', 'platform', 'status', 'bonus_id', 'channel'].map(textOrNull),
  'CAST(granted = 1 AS Nullable(Bool)) AS granted',
  // The canonical fields without a column (clickhouse/0016): null when the event has none.
  ...['email', 'phone', 'name', 'timezone', 'reason'].map((f) => `nullIf(JSONExtractString(extra_fields, '${f}'), '') AS ${f}`),
].map((e) => [/ AS (\w+)$/.exec(e)?.[1] ?? e, e])
/**
 * The rows as `seq<TAB>{row JSON}` lines written by ClickHouse's Template format: each field escaped as
 * JSON (as its JSONEachRow would), the payload's JSON as it is. 2.3x quicker than building each row's
 * JSON with formatRowNoNewline (74 against 170 ms for 10,000 rows on chDB), byte for byte the same.
 */
const ROW_TEMPLATE = `\${seq:Raw}\t{${ROW_COLUMNS.map(([name]) => `"${name}":\${${name}:JSON}`).join(',')},"payload":\${payload:Raw}}`
const ROW_SELECT = `seq, ${ROW_COLUMNS.map(([, e]) => e).join(', ')}, if(empty(payload_json), '{}', payload_json) AS payload`
// The raw event's payload as minified JSON text; '' when it has none (or the raw text is not JSON).
const PAYLOAD_JSON = "JSONExtractRaw(raw, 'payload') AS payload_json"
const sqlString = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
// JSON as JSON.stringify writes it: '/' unescaped; strings checked as UTF-8.
const FORMAT_SETTINGS = `format_template_row_format = ${sqlString(ROW_TEMPLATE)}, output_format_json_escape_forward_slashes = 0, output_format_json_validate_utf8 = 1`

/**
 * Insertion order is seq, given when the spool moves events to ClickHouse; every seq below the watermark
 * (read from PostgreSQL before ClickHouse) is there already or never will be (spool.ts exportWatermark).
 * A page may come from the pages read ahead (below); otherwise it is read, with the next few.
 */
async function eventsPage(deps: Deps, input: Input, position: Record<string, unknown> | undefined) {
  let after = '0'
  if (position) {
    if (typeof position.s !== 'string' || !/^\d{1,20}$/.test(position.s)) throw invalidCursor()
    after = position.s
  }
  const { watermark, epoch } = await exportWatermark(deps.sql, deps.ch.sinkId)
  const chain: Chain = { deps, input, watermark, epoch }
  let page = await takeKept(chain, after)
  if (page?.readOnFrom) readAhead(chain, page.readOnFrom)
  page ??= (await readPages(chain, after, FIRST_READ_PAGES))[0]
  return page ? { data: page.data, next: { s: page.next } } : { data: EMPTY, next: undefined }
}

// ------------------------------------------------------------------------------------------- read-ahead

/**
 * A client exporting events reads page after page, and a ClickHouse read costs nearly as much for one
 * page as for several (~20 ms for 1,000 rows, ~60 ms for 10,000 on chDB). So a read also reads the
 * pages after the one asked for, the process keeps them for the client's next requests, and when the
 * client starts on the kept pages the next run is read in the background while it works through them.
 * A kept page is served only when it is exactly what a read would return then: it is full (`limit`
 * rows, all below the watermark it was read under, which only grows) and the sink's epoch has not moved
 * since (an erasure or a retention drop bumps it, sql/0130). Kept pages live in this process only (a
 * client that goes to another process reads afresh), for KEEP_MS at most.
 */
const FIRST_READ_PAGES = 3
const READ_AHEAD_ROWS = 10_000
const KEEP_MS = 30_000
const MAX_KEPT_ROWS = 100_000

/** `data`: the rows' JSON array. `readOnFrom`: where the next run starts, on a run's first kept page. */
interface Page { data: Buffer; count: number; next: string; below: number; readOnFrom?: string }
interface Chain { deps: Deps; input: Input; watermark: number; epoch: string }
interface Kept { at: number; rows: number; page: Promise<Page | undefined> }

const keptPages = new Map<string, Kept>()
let keptRows = 0

const keyOf = (c: Chain, after: string) =>
  `${c.deps.ch.sinkId}|${c.input.tenantId}|${c.input.brandId}|${c.input.dataset}|${c.input.limit}|${c.epoch}|${after}`

function keep(key: string, rows: number, page: Promise<Page | undefined>): void {
  const now = performance.now()
  // Oldest first (a Map keeps insertion order): what has waited too long, then what no longer fits.
  for (const [k, v] of keptPages) {
    if (now - v.at < KEEP_MS && keptRows + rows <= MAX_KEPT_ROWS) break
    dropKept(k, v)
  }
  keptPages.set(key, { at: now, rows, page })
  keptRows += rows
}

function dropKept(key: string, kept: Kept): void {
  keptPages.delete(key)
  keptRows -= kept.rows
}

async function takeKept(c: Chain, after: string): Promise<Page | undefined> {
  const key = keyOf(c, after)
  const kept = keptPages.get(key)
  if (!kept) return undefined
  dropKept(key, kept)
  const page = await kept.page
  return page && page.below <= c.watermark && performance.now() - kept.at < KEEP_MS ? page : undefined
}

/** The run after `after`, read in the background and kept (a failed read is just not kept). */
function readAhead(c: Chain, after: string): void {
  const key = keyOf(c, after)
  if (keptPages.has(key)) return
  const { limit } = c.input
  const first = readPages(c, after, Math.max(2, Math.floor(READ_AHEAD_ROWS / limit))).then(
    ([page]) => (page && page.count === limit ? page : undefined),
    () => undefined,
  )
  keep(key, limit, first)
}

/** Up to `pages` pages after `after` in one ClickHouse read: the first is returned, the full ones after it kept. */
async function readPages(c: Chain, after: string, pages: number): Promise<Page[]> {
  const { limit } = c.input
  const { lines, more } = await readEventLines(c, after, limit * pages)
  const out: Page[] = []
  for (let i = 0; i < lines.length; i += limit) {
    const slice = lines.slice(i, i + limit)
    const parts: Buffer[] = [OPEN]
    for (const line of slice) parts.push(line.row, COMMA)
    parts[parts.length - 1] = CLOSE
    out.push({ data: Buffer.concat(parts), count: slice.length, next: (slice[slice.length - 1] as Line).seq, below: c.watermark })
  }
  const full = out.filter((p) => p.count === limit)
  // More rows may follow: the run's first kept page, once served, starts reading the next run.
  if (more && full.length >= 2) (full[1] as Page).readOnFrom = (full[full.length - 1] as Page).next
  for (let i = 1; i < full.length; i++) keep(keyOf(c, (full[i - 1] as Page).next), limit, Promise.resolve(full[i]))
  return out
}

/** One row of a read: its seq and its JSON (a view into the read's bytes). */
interface Line { seq: string; row: Buffer }

/** `seq<TAB>row JSON<LF>` lines as (seq, row) pairs, the rows left as bytes (see ClickHouse.queryTemplate). */
function splitLines(bytes: Buffer): Line[] {
  const out: Line[] = []
  for (let start = 0; start < bytes.length; ) {
    let end = bytes.indexOf(0x0a, start)
    if (end < 0) end = bytes.length
    const tab = bytes.indexOf(0x09, start)
    if (tab < 0 || tab > end) throw new Error(`an export line without its seq at byte ${start}`)
    out.push({ seq: bytes.toString('latin1', start, tab), row: bytes.subarray(tab + 1, end) })
    start = end + 1
  }
  return out
}

/** The first seq window a read looks in: a few times the rows it wants (one brand's rows are most of a sink's). */
const SEQ_WINDOW_PER_ROW = 4

/**
 * Up to `limit` `seq<TAB>row JSON` lines after `after`, in seq order, from a window of seqs: the
 * projection sorts what the window holds of the brand, so a read costs what it returns, not what
 * follows (an open range sorted all of the brand's later rows: 68 ms instead of 7 for 10,000 rows, 2.7M
 * after them). The window widens until it holds a page's rows or reaches the watermark, so a page is
 * empty only when nothing is left. `more`: rows may follow what was returned.
 */
async function readEventLines(c: Chain, after: string, limit: number): Promise<{ lines: Line[]; more: boolean }> {
  const { input } = c
  const types = input.dataset === 'transactions' ? `AND event_type IN (${MONEY_TYPES_SQL})` : ''
  const below = BigInt(c.watermark)
  for (let window = BigInt(limit * SEQ_WINDOW_PER_ROW); ; window *= 8n) {
    const end = BigInt(after) + window
    const until = end < below ? end : below
    const params = { tenant: input.tenantId, brand: input.brandId, after, until: String(until), limit }
    // One query: the scalar subquery (the read's last seq, from the events_by_seq projection) is computed
    // first, and the outer read uses it as a constant for the primary key and the seq min-max index.
    const bytes = await c.deps.ch.reports.queryTemplate(`
      WITH ${PAYLOAD_JSON}
      SELECT ${ROW_SELECT} FROM events
      WHERE ${SCOPE} AND seq > {after:UInt64} ${types} AND seq <= (
        SELECT max(seq) FROM (
          SELECT seq FROM events WHERE ${SCOPE} AND seq > {after:UInt64} AND seq < {until:UInt64} ${types}
          ORDER BY seq LIMIT {limit:UInt32}))
      ORDER BY seq
      -- A read covers a few granules: one thread, without the setup of a parallel read (21 → 16 ms a page on chDB).
      SETTINGS max_threads = 1, ${REPORT_SETTINGS}, ${FORMAT_SETTINGS}`, params)
    const lines = splitLines(bytes)
    const more = lines.length === limit || until < below
    if (!more || lines.length >= input.limit) return { lines, more }
  }
}

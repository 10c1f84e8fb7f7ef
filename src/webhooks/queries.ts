// SQL of the webhook feature: endpoints, deliveries, the outbox fan-out and the retention pruning.
import type { TransactionSql } from 'postgres'
import type { Sql } from '../db/postgres.ts'
import { CREATED_KEY } from '../lib/cursor.ts'
import { visibleTo, type Visibility } from '../lib/visibility.ts'

type Db = Sql | TransactionSql

export interface EndpointRow {
  id: string
  tenant_id: string
  brand_id: string | null
  url: string
  events: string[]
  active: boolean
  secret_sealed: string
  previous_secret_sealed: string | null
  previous_secret_until: Date | null
  failing_since: Date | null
  created_at: Date
  updated_at: Date
}

export interface DeliveryRow {
  id: string
  tenant_id: string
  endpoint_id: string
  outbox_id: string | null
  redelivery_of: string | null
  event: string
  body: string
  status: 'pending' | 'successful' | 'failed'
  attempt_count: number
  next_attempt_at: Date | null
  attempts: AttemptLog[]
  created_at: Date
  completed_at: Date | null
  lease_owner: string | null
}

export interface AttemptLog {
  n: number
  at: string
  response_code: number | null
  duration_ms: number
  error: string | null
  response_body: string | null
}

export async function insertEndpoint(
  sql: Db,
  e: { tenantId: string; brandId: string | null; url: string; events: string[]; secretSealed: string },
): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow[]>`
    insert into webhook_endpoints (tenant_id, brand_id, url, events, secret_sealed)
    values (${e.tenantId}, ${e.brandId}, ${e.url}, ${e.events}, ${e.secretSealed})
    returning *`
  return row!
}

export const selectEndpoints = (sql: Db, v: Visibility) => sql<EndpointRow[]>`
  select * from webhook_endpoints where ${visibleTo(sql, v)} order by created_at desc, id desc`

export async function selectEndpoint(sql: Db, v: Visibility & { id: string }, lock = false): Promise<EndpointRow | undefined> {
  const [row] = await sql<EndpointRow[]>`
    select * from webhook_endpoints where id = ${v.id} and ${visibleTo(sql, v)} ${lock ? sql`for update` : sql``}`
  return row
}

export async function updateEndpoint(
  sql: Db,
  id: string,
  c: { url?: string; events?: string[]; active?: boolean; secretSealed?: string; previousSecretSealed?: string },
): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow[]>`
    update webhook_endpoints set
      url = coalesce(${c.url ?? null}, url),
      events = coalesce(${c.events ?? null}::text[], events),
      active = coalesce(${c.active ?? null}::boolean, active),
      -- Reactivation starts a fresh failure count.
      failing_since = case when ${c.active === true} and not active then null else failing_since end,
      deactivated_at = case when ${c.active === true} then null else deactivated_at end,
      secret_sealed = coalesce(${c.secretSealed ?? null}, secret_sealed),
      previous_secret_sealed = case when ${c.secretSealed !== undefined} then ${c.previousSecretSealed ?? null} else previous_secret_sealed end,
      previous_secret_until = case when ${c.secretSealed !== undefined} then now() + interval '24 hours' else previous_secret_until end,
      updated_at = now()
    where id = ${id}
    returning *`
  return row!
}

/**
 * Pending deliveries of a resumed endpoint are due at once. Not one under a live lease: an attempt in
 * flight holds its lease (the work loop renews it, keepLeases), and clearing it would let another claim POST it again meanwhile. A
 * process that claimed one while the endpoint was inactive and postpones it now reads the endpoint as
 * active in that same statement (postponeWhileInactive) and makes it due at once itself.
 */
export const resumeDeliveries = (sql: Db, endpointId: string) =>
  sql`update webhook_deliveries set run_at = now(), next_attempt_at = now(), lease_owner = null
      where endpoint_id = ${endpointId} and status = 'pending' and (lease_owner is null or run_at <= now())`

export const deleteEndpoint = (sql: Db, v: Visibility & { id: string }) =>
  sql`delete from webhook_endpoints where id = ${v.id} and ${visibleTo(sql, v)} returning id`

const DELIVERY_COLUMNS = 'id, tenant_id, endpoint_id, outbox_id, redelivery_of, event, body, status, attempt_count, next_attempt_at, attempts, created_at, completed_at, lease_owner'

/** The secret-box key id of a sealed secret (`v1.<key id>.<data>`). */
export const keyIdOf = (sealed: string): string => sealed.split('.')[1] ?? ''

export async function insertDelivery(
  sql: Db,
  d: { tenantId: string; endpointId: string; keyId: string; event: string; body: string; createdAt: Date; outboxId?: string | null; redeliveryOf?: string | null },
): Promise<DeliveryRow> {
  const [row] = await sql<DeliveryRow[]>`
    insert into webhook_deliveries (tenant_id, endpoint_id, key_id, outbox_id, redelivery_of, event, body, created_at)
    values (${d.tenantId}, ${d.endpointId}, ${d.keyId}, ${d.outboxId ?? null}, ${d.redeliveryOf ?? null}, ${d.event}, ${d.body}, ${d.createdAt})
    returning ${sql.unsafe(DELIVERY_COLUMNS)}`
  return row!
}

export async function selectDelivery(sql: Db, d: { endpointId: string; id: string }): Promise<DeliveryRow | undefined> {
  const [row] = await sql<DeliveryRow[]>`
    select ${sql.unsafe(DELIVERY_COLUMNS)} from webhook_deliveries where id = ${d.id} and endpoint_id = ${d.endpointId}`
  return row
}

/** Newest first; keyset after (createdKey, id). `created_key` is created_at as exact text for the cursor. */
export const selectDeliveries = (
  sql: Db,
  q: { endpointId: string; status?: string; event?: string; limit: number; after?: { t: string; id: string } },
) => sql<(DeliveryRow & { created_key: string })[]>`
  select ${sql.unsafe(DELIVERY_COLUMNS)}, ${sql.unsafe(CREATED_KEY)}
  from webhook_deliveries
  where endpoint_id = ${q.endpointId}
    ${q.status ? sql`and status = ${q.status}` : sql``}
    ${q.event ? sql`and event = ${q.event}` : sql``}
    ${q.after ? sql`and (created_at, id) < (${q.after.t}::text::timestamptz, ${q.after.id}::uuid)` : sql``}
  order by created_at desc, id desc
  limit ${q.limit}`

// --- Fan-out -------------------------------------------------------------------------------------------

export interface OutboxRow {
  id: string
  tenant_id: string
  brand_id: string | null
  event: string
  data: Record<string, unknown>
  created_at: Date
}

/** Locks the oldest undispatched outbox rows; concurrent fan-outs skip each other's rows. */
export const lockOutboxBatch = (tx: Db, limit: number) => tx<OutboxRow[]>`
  select id, tenant_id, brand_id, event, data, created_at from outbox
  where dispatched_at is null order by id limit ${limit} for update skip locked`

export type ActiveEndpoint = Pick<EndpointRow, 'id' | 'tenant_id' | 'brand_id' | 'events'> & { key_id: string }

export const selectActiveEndpoints = (tx: Db, tenantIds: string[]) => tx<ActiveEndpoint[]>`
  select id, tenant_id, brand_id, events, split_part(secret_sealed, '.', 2) as key_id
  from webhook_endpoints where active and tenant_id = any(${tenantIds}::uuid[])`

export interface FanOutDelivery {
  id: string
  tenant_id: string
  endpoint_id: string
  key_id: string
  outbox_id: string
  event: string
  body: string
  /** Set: inserted already leased to this claim token (due at the lease's end); null: due at once. */
  lease_owner: string | null
}

/**
 * Inserts the fan-out's deliveries in one statement and returns the ids inserted (a delivery that
 * already exists for its endpoint and outbox row is skipped). The rows go in as one JSON array rather
 * than a text[] per column: bodies are long, and the driver escapes array elements character by character.
 * The parameter is text cast to json: a parameter typed json would be JSON-encoded again by postgres.js.
 */
export async function insertFanOut(tx: Db, list: FanOutDelivery[], createdAt: Date, leaseMs: number): Promise<Set<string>> {
  const rows = await tx<{ id: string }[]>`
    insert into webhook_deliveries (id, tenant_id, endpoint_id, key_id, outbox_id, event, body, lease_owner, run_at, created_at)
    select d.id, d.tenant_id, d.endpoint_id, d.key_id, d.outbox_id, d.event, d.body, d.lease_owner,
           case when d.lease_owner is null then now() else now() + ${leaseMs} * interval '1 millisecond' end,
           ${createdAt}::timestamptz
    from json_to_recordset(${JSON.stringify(list)}::text::json)
      as d(id uuid, tenant_id uuid, endpoint_id uuid, key_id text, outbox_id bigint, event text, body text, lease_owner text)
    on conflict do nothing
    returning id`
  return new Set(rows.map((r) => r.id))
}

export const markDispatched = (tx: Db, ids: string[]) =>
  tx`update outbox set dispatched_at = now() where id = any(${ids}::bigint[])`

// --- Attempt outcomes -------------------------------------------------------------------------------------

export interface Outcome {
  id: string
  owner: string
  attempt: AttemptLog
  /** successful, failed (no attempts left), or pending with the delay before the next attempt. */
  status: 'successful' | 'failed' | 'pending'
  retryInMs?: number
}

/** Records one attempt, guarded by the claim token: a claim that lost its row changes nothing. */
export const recordOutcome = (sql: Db, o: Outcome) => sql`
  update webhook_deliveries set
    status = ${o.status},
    attempt_count = ${o.attempt.n},
    attempts = attempts || ${sql.json([o.attempt] as never)}::jsonb,
    next_attempt_at = ${o.status === 'pending' ? sql`now() + ${o.retryInMs ?? 0} * interval '1 millisecond'` : sql`null`},
    run_at = ${o.status === 'pending' ? sql`now() + ${o.retryInMs ?? 0} * interval '1 millisecond'` : sql`run_at`},
    completed_at = ${o.status === 'pending' ? sql`null` : sql`now()`},
    lease_owner = null
  where id = ${o.id} and lease_owner = ${o.owner}`

/**
 * Many outcomes in one statement (the dispatcher batches them under load). The attempts go in as text[]
 * cast per row: postgres.js encodes each element of a jsonb[] parameter as JSON again (a string).
 */
export function recordOutcomes(sql: Db, list: Outcome[]) {
  return sql`
    update webhook_deliveries d set
      status = o.status,
      attempt_count = o.n,
      attempts = d.attempts || jsonb_build_array(o.attempt::jsonb),
      next_attempt_at = case when o.status = 'pending' then now() + o.retry_ms * interval '1 millisecond' end,
      run_at = case when o.status = 'pending' then now() + o.retry_ms * interval '1 millisecond' else d.run_at end,
      completed_at = case when o.status = 'pending' then null else now() end,
      lease_owner = null
    from unnest(${list.map((o) => o.id)}::uuid[], ${list.map((o) => o.owner)}::text[], ${list.map((o) => o.status)}::text[],
                ${list.map((o) => o.attempt.n)}::int[], ${list.map((o) => JSON.stringify(o.attempt))}::text[],
                ${list.map((o) => o.retryInMs ?? 0)}::float8[])
      as o(id, owner, status, n, attempt, retry_ms)
    where d.id = o.id and d.lease_owner = o.owner`
}

/**
 * Postpones a delivery without an attempt while its endpoint is inactive; an endpoint resumed since the
 * caller read it makes the delivery due at once instead. Returns whether it was postponed.
 */
export async function postponeWhileInactive(sql: Db, id: string, owner: string, ms: number): Promise<boolean> {
  const [row] = await sql<{ postponed: boolean }[]>`
    update webhook_deliveries d set
      run_at = case when e.active then now() else now() + ${ms} * interval '1 millisecond' end,
      lease_owner = null
    from webhook_endpoints e
    where d.id = ${id} and d.lease_owner = ${owner} and e.id = d.endpoint_id
    returning not e.active as postponed`
  return row?.postponed ?? true
}

/**
 * A failed attempt extends the endpoint's run of failures; once it has lasted `deactivateAfterMs` the
 * endpoint is set inactive. Returns whether this call deactivated it.
 */
export async function noteEndpointFailure(sql: Db, endpointId: string, deactivateAfterMs: number): Promise<boolean> {
  const [row] = await sql<{ deactivated: boolean }[]>`
    update webhook_endpoints set
      failing_since = coalesce(failing_since, now()),
      active = active and not coalesce(failing_since < now() - ${deactivateAfterMs} * interval '1 millisecond', false),
      deactivated_at = case when active and failing_since < now() - ${deactivateAfterMs} * interval '1 millisecond' then now() else deactivated_at end
    where id = ${endpointId}
    returning (deactivated_at is not null and deactivated_at >= now() and not active) as deactivated`
  return row?.deactivated ?? false
}

export const noteEndpointSuccess = (sql: Db, endpointId: string) =>
  sql`update webhook_endpoints set failing_since = null where id = ${endpointId} and failing_since is not null`

// --- Retention --------------------------------------------------------------------------------------------

/**
 * Deletes up to `limit` completed deliveries and dispatched outbox rows older than the retention, and
 * forgets the previous secrets whose 24 hours after a rotation are over (sealed, but of no use any more).
 */
export async function prune(sql: Db, retentionDays: number, limit: number): Promise<{ deliveries: number; outbox: number }> {
  await sql`
    update webhook_endpoints set previous_secret_sealed = null, previous_secret_until = null
    where previous_secret_sealed is not null and previous_secret_until < now()`
  const deliveries = await sql`
    delete from webhook_deliveries where id in (
      select id from webhook_deliveries where completed_at < now() - ${retentionDays} * interval '1 day' limit ${limit})`
  const outbox = await sql`
    delete from outbox where id in (
      select id from outbox where dispatched_at < now() - ${retentionDays} * interval '1 day' limit ${limit})`
  return { deliveries: deliveries.count, outbox: outbox.count }
}

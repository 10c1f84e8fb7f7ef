// Player records: list, idempotent create, get with profile, patch, next best action. Every write puts its
// platform events (player.created, player.updated, player.status_changed) into the outbox in the same
// transaction as the change.
import { isDeepStrictEqual } from 'node:util'
import type { Sql } from '../db/postgres.ts'
import type { Sql as Db } from './queries.ts'
import { notFound } from '../errors.ts'
import { iso, num as numOrNull } from '../lib/rows.ts'
import { pagination } from '../lib/schemas.ts'
import type { Visibility } from '../lib/visibility.ts'
import { exitMarketingJourneys } from '../campaigns/journey-exit.ts'
import { insertOutbox } from '../lib/outbox.ts'
import { lockSendGate, lockSendGateByKey } from '../lib/send-gate.ts'
import * as q from './queries.ts'
import type { Player, PlayerProfile, PlayerWithProfile } from './schemas.ts'
import { lifecycleStage, nextBestAction as decideNextBestAction, scores, type NextBestAction, type ScoringInput } from './scoring.ts'

interface Deps {
  sql: Sql
  clock: () => Date
}

/** Profile aggregates are 0 where the player has no profile row yet. */
const num = (v: unknown): number => numOrNull(v) ?? 0

export const toPlayer = (r: q.PlayerRow): Player => ({
  id: r.id,
  external_id: r.external_id,
  email: r.email,
  phone: r.phone,
  status: r.status as Player['status'],
  metadata: r.metadata ?? {},
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
})

/** Normalises the stored consent object to { channel: { granted, at } }, dropping malformed entries. */
export function consentOf(raw: unknown): Record<string, { granted: boolean; at: string | null }> {
  const out: Record<string, { granted: boolean; at: string | null }> = {}
  if (!raw || typeof raw !== 'object') return out
  for (const [channel, v] of Object.entries(raw as Record<string, unknown>)) {
    if (!v || typeof v !== 'object') continue
    const { granted, at } = v as { granted?: unknown; at?: unknown }
    if (typeof granted !== 'boolean') continue
    out[channel] = { granted, at: typeof at === 'string' ? at : null }
  }
  return out
}

export function scoringInputOf(r: q.PlayerWithProfileRow): ScoringInput {
  return {
    status: r.status,
    created_at: r.created_at,
    deposit_count: num(r.deposit_count),
    deposit_total: num(r.deposit_total),
    first_deposit_at: r.first_deposit_at,
    last_deposit_at: r.last_deposit_at,
    last_login_at: r.last_login_at,
    last_seen_at: r.last_seen_at,
    bet_total: num(r.bet_total),
    win_total: num(r.win_total),
    ggr: num(r.ggr),
    event_count: num(r.event_count),
    consent: consentOf(r.consent),
    has_email: !!r.email,
  }
}

function toProfile(r: q.PlayerWithProfileRow, now: Date): PlayerProfile {
  const input = scoringInputOf(r)
  return {
    language: r.language ?? 'en',
    currency: r.currency ?? 'EUR',
    country: r.country,
    name: r.name,
    timezone: r.timezone,
    lifecycle_stage: lifecycleStage(input, now),
    scores: scores(input, now),
    consent: consentOf(r.consent),
    event_count: input.event_count,
    first_seen_at: iso(r.first_seen_at),
    last_seen_at: iso(r.last_seen_at),
    last_login_at: iso(r.last_login_at),
    deposit_count: input.deposit_count,
    deposit_total: input.deposit_total,
    first_deposit_at: iso(r.first_deposit_at),
    last_deposit_at: iso(r.last_deposit_at),
    withdrawal_total: num(r.withdrawal_total),
    bet_total: input.bet_total,
    win_total: input.win_total,
    ggr: input.ggr,
  }
}

export async function listPlayers(
  deps: Deps,
  input: { tenantId: string; brandId: string; page: number; limit: number; search?: string; status?: string },
): Promise<{ data: Player[]; pagination: ReturnType<typeof pagination> }> {
  const { rows, total } = await q.selectPlayersPage(deps.sql, {
    tenantId: input.tenantId,
    brandId: input.brandId,
    search: input.search || undefined,
    status: input.status,
    limit: input.limit,
    offset: (input.page - 1) * input.limit,
  })
  return { data: rows.map(toPlayer), pagination: pagination(input.page, input.limit, total) }
}

/** A player that other features act on (sends, gamification profile). */
export interface PlayerRef {
  id: string
  tenantId: string
  /** The player's own brand. */
  brandId: string
}

/** The player if visible (tenant, and the pinned brand of a brand-pinned key), else undefined. */
export async function findPlayerRef(deps: Pick<Deps, 'sql'>, input: Visibility & { playerId: string }): Promise<PlayerRef | undefined> {
  const row = await q.selectPlayerRef(deps.sql, input)
  return row && { id: row.id, tenantId: row.tenant_id, brandId: row.brand_id }
}

export async function getPlayer(deps: Deps, input: Visibility & { playerId: string }): Promise<PlayerWithProfile> {
  const row = await q.selectPlayerWithProfile(deps.sql, input)
  if (!row) throw notFound('player')
  return { ...toPlayer(row), profile: toProfile(row, deps.clock()) }
}

export async function getNextBestAction(deps: Deps, input: Visibility & { playerId: string }): Promise<NextBestAction & { player_id: string }> {
  const row = await q.selectPlayerWithProfile(deps.sql, input)
  if (!row) throw notFound('player')
  const nba = decideNextBestAction(scoringInputOf(row), deps.clock())
  return { player_id: row.id, ...nba }
}

interface PlayerChanges {
  email?: string | null
  phone?: string | null
  status?: string
  metadata?: Record<string, unknown>
}

const UPDATABLE = ['email', 'phone', 'status', 'metadata'] as const

/**
 * Applies the given fields to a locked player row and writes the outbox events of what actually changed:
 * player.updated (the player fields plus `changed`) and, for a new status, player.status_changed.
 * Must run inside a transaction that holds the row lock.
 */
async function applyChanges(tx: Db, prev: q.PlayerRow, changes: PlayerChanges): Promise<q.PlayerRow> {
  const metadataChanged =
    changes.metadata !== undefined &&
    // Compared by value: jsonb hands objects back in its own key order, so the same nested object sent
    // again in the caller's order is no change.
    Object.entries(changes.metadata).some(([k, v]) => !Object.hasOwn(prev.metadata, k) || !isDeepStrictEqual(prev.metadata[k], v))
  const changed = UPDATABLE.filter((f) =>
    f === 'metadata' ? metadataChanged : changes[f] !== undefined && changes[f] !== prev[f],
  )
  if (changed.length === 0) return prev
  const next = await q.updatePlayer(tx, {
    id: prev.id,
    email: changes.email !== undefined ? changes.email : prev.email,
    phone: changes.phone !== undefined ? changes.phone : prev.phone,
    status: changes.status ?? prev.status,
    metadataPatch: metadataChanged ? changes.metadata : undefined,
  })
  const player = toPlayer(next)
  const { id, ...fields } = player
  await insertOutbox(tx, { tenantId: next.tenant_id, brandId: next.brand_id, event: 'player.updated', data: { player_id: id, ...fields, changed } })
  if (next.status !== prev.status) {
    // Responsible gaming: out of every marketing journey at once, as a status_change event would do.
    if (next.status !== 'active') await exitMarketingJourneys(tx, [next.id], new Date())
    await insertOutbox(tx, {
      tenantId: next.tenant_id,
      brandId: next.brand_id,
      event: 'player.status_changed',
      data: { player_id: id, external_id: next.external_id, status: next.status, previous_status: prev.status, changed_at: player.updated_at, source: 'api' },
    })
  }
  return next
}

/**
 * Idempotent on (brand, external_id): creates the player (player.created), or applies the given fields to
 * the existing one (metadata shallow-merged, like PATCH). Either way the profile gets the given language
 * and currency; a new profile defaults to en / EUR.
 */
export async function createOrUpdatePlayer(
  deps: Deps,
  input: {
    tenantId: string
    brandId: string
    external_id: string
    email?: string | null
    phone?: string | null
    status?: string
    metadata?: Record<string, unknown>
    language?: string
    currency?: string
  },
): Promise<{ player: Player; created: boolean }> {
  const currency = input.currency?.toUpperCase()
  return deps.sql.begin(async (tx) => {
    // A status change of an existing player takes its send gate before its row lock (lib/send-gate.ts).
    if (input.status !== undefined) await lockSendGateByKey(tx, [input.brandId], [input.external_id])
    const insert = () => q.insertPlayerIfAbsent(tx, {
      tenantId: input.tenantId,
      brandId: input.brandId,
      externalId: input.external_id,
      email: input.email ?? null,
      phone: input.phone ?? null,
      status: input.status ?? 'active',
      metadata: input.metadata ?? {},
    })
    // The insert finds the id taken, the lock finds it gone: an erasure deleted the player in between.
    // The id is free again, so it is a new player (a few tries: each round needs another such race).
    let inserted = await insert()
    let prev: q.PlayerRow | undefined
    for (let tries = 0; !inserted && tries < 3; tries++) {
      prev = await q.selectPlayerForUpdate(tx, { tenantId: input.tenantId, brandId: input.brandId, externalId: input.external_id })
      if (prev) break
      inserted = await insert()
    }
    let row: q.PlayerRow
    if (inserted) {
      row = inserted
      await insertOutbox(tx, {
        tenantId: row.tenant_id,
        brandId: row.brand_id,
        event: 'player.created',
        data: { player_id: row.id, external_id: row.external_id, brand_id: row.brand_id, source: 'api' },
      })
    } else {
      if (!prev) throw new Error('player vanished between insert and lock, three times')
      row = await applyChanges(tx, prev, input)
    }
    await q.upsertProfileLocale(tx, { playerId: row.id, tenantId: row.tenant_id, brandId: row.brand_id, language: input.language, currency })
    return { player: toPlayer(row), created: !!inserted }
  })
}

export async function updatePlayer(deps: Deps, input: Visibility & { playerId: string } & PlayerChanges): Promise<Player> {
  return deps.sql.begin(async (tx) => {
    // A status change takes the player's send gate before its row lock (lib/send-gate.ts).
    if (input.status !== undefined) await lockSendGate(tx, [input.playerId])
    const prev = await q.selectPlayerForUpdate(tx, { tenantId: input.tenantId, brandId: input.brandId, playerId: input.playerId })
    if (!prev) throw notFound('player')
    return toPlayer(await applyChanges(tx, prev, input))
  })
}

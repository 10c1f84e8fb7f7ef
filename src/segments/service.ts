// Segments: create/list, the member export with a signed keyset cursor, and the membership recompute that
// stores player_count and emits segment.recomputed through the outbox when membership changed.
import type { Sql as Pool } from '../db/postgres.ts'
import { notFound } from '../errors.ts'
import { cursorCodec, decodeCursorOr400, invalidCursor } from '../lib/cursor.ts'
import type { Logger } from '../lib/log.ts'
import type { Visibility } from '../lib/visibility.ts'
import { consentOf } from '../players/service.ts'
import { toCsv } from './csv.ts'
import { insertOutbox } from '../lib/outbox.ts'
import * as q from './queries.ts'
import { validateRules } from './rules.ts'
import type { ExportRow, Segment } from './schemas.ts'

interface Deps {
  sql: Pool
  clock: () => Date
}

export const toSegment = (r: q.SegmentRow): Segment => ({
  id: r.id,
  name: r.name,
  type: r.type,
  rules: r.rules,
  player_count: r.player_count,
  last_computed_at: r.last_computed_at ? r.last_computed_at.toISOString() : null,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
})

export async function createSegment(
  deps: Deps,
  input: { tenantId: string; brandId: string; name: string; type: 'dynamic' | 'static'; rules?: Record<string, unknown> },
): Promise<Segment> {
  const rules = validateRules(input.type, input.rules)
  return toSegment(await q.insertSegment(deps.sql, { ...input, rules }))
}

export async function listSegments(deps: Deps, input: { tenantId: string; brandId: string; type?: string }): Promise<Segment[]> {
  return (await q.selectSegments(deps.sql, input)).map(toSegment)
}

export async function getSegment(deps: Deps, input: Visibility & { segmentId: string }): Promise<Segment> {
  const row = await q.selectSegment(deps.sql, input)
  if (!row) throw notFound('segment')
  return toSegment(row)
}

const EXPORT_PURPOSE = 'segment-export'

export interface ExportPage {
  segment: Segment
  data: ExportRow[]
  next_cursor: string | null
}

/**
 * One page of the segment's current members in player creation order. The cursor is HMAC-signed and bound
 * to the segment; a forged, altered or foreign cursor is a 400.
 */
export async function exportSegment(
  deps: Deps,
  input: Visibility & { segmentId: string; cursor?: string; limit: number },
): Promise<ExportPage> {
  const seg = await q.selectSegment(deps.sql, input)
  if (!seg) throw notFound('segment')
  const codec = await cursorCodec(deps.sql, EXPORT_PURPOSE)
  let after: { pos: string; id: string } | undefined
  if (input.cursor !== undefined && input.cursor !== '') {
    const c = decodeCursorOr400(codec, input.cursor)
    if (c.s !== seg.id || typeof c.t !== 'string' || typeof c.i !== 'string') throw invalidCursor()
    after = { pos: c.t as string, id: c.i as string }
  }
  const rows = await q.selectMembersPage(deps.sql, seg, { after, limit: input.limit + 1, now: deps.clock() })
  const page = rows.slice(0, input.limit)
  const last = page[page.length - 1]
  const next = rows.length > input.limit && last ? codec.encode({ s: seg.id, t: last.pos, i: last.id }) : null
  return {
    segment: toSegment(seg),
    data: page.map((r) => ({
      external_id: r.external_id,
      email: r.email,
      phone: r.phone,
      name: r.name,
      consent: consentOf(r.consent),
      country: r.country,
    })),
    next_cursor: next,
  }
}

export const exportPageCsv = (page: ExportPage) => toCsv(page.data)

/**
 * Recomputes one segment under a row lock (skipped when another process holds it, or when it was computed
 * after `staleBefore`). Stores player_count and the membership fingerprint; when the fingerprint differs
 * from the last one (a new segment counts as empty), writes segment.recomputed in the same transaction.
 */
export async function recomputeSegment(
  deps: Deps,
  segmentId: string,
  opts: { staleBefore?: Date | null } = {},
): Promise<'changed' | 'unchanged' | 'skipped'> {
  return deps.sql.begin(async (tx) => {
    const seg = await q.lockSegment(tx, segmentId)
    if (!seg) return 'skipped' as const
    if (opts.staleBefore && seg.last_computed_at && seg.last_computed_at >= opts.staleBefore) return 'skipped' as const
    const now = deps.clock()
    const { count, fingerprint } = await q.countMembers(tx, seg, now)
    await q.storeRecompute(tx, { id: seg.id, count, fingerprint, at: now })
    const previous = seg.members_fingerprint ?? '0:0'
    if (fingerprint === previous) return 'unchanged' as const
    await insertOutbox(tx, {
      tenantId: seg.tenant_id,
      brandId: seg.brand_id,
      event: 'segment.recomputed',
      data: { segment_id: seg.id, player_count: count, previous_player_count: seg.player_count ?? 0, computed_at: now.toISOString() },
    })
    return 'changed' as const
  }) as Promise<'changed' | 'unchanged' | 'skipped'>
}

export interface RecomputeResult {
  computed: number
  changed: number
  skipped: number
}

/**
 * Recomputes every segment (of one tenant when given). With `staleBefore`, only segments not computed since
 * then: several processes running the periodic recompute then share the work instead of repeating it.
 */
export async function recomputeSegments(
  deps: Deps & { log?: Logger },
  opts: { tenantId?: string; staleBefore?: Date | null; shouldStop?: () => boolean } = {},
): Promise<RecomputeResult> {
  const result: RecomputeResult = { computed: 0, changed: 0, skipped: 0 }
  let afterId: string | undefined
  for (;;) {
    const ids = await q.selectDueSegmentIds(deps.sql, { tenantId: opts.tenantId, staleBefore: opts.staleBefore ?? null, afterId, limit: 100 })
    for (const id of ids) {
      if (opts.shouldStop?.()) return result
      try {
        const outcome = await recomputeSegment(deps, id, { staleBefore: opts.staleBefore })
        if (outcome === 'skipped') result.skipped++
        else {
          result.computed++
          if (outcome === 'changed') result.changed++
        }
      } catch (err) {
        // One broken segment must not stop the others.
        deps.log?.error({ err, segmentId: id }, 'segment recompute failed')
        result.skipped++
      }
    }
    if (ids.length < 100) return result
    afterId = ids[ids.length - 1]
  }
}

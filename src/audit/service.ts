// The audit trail: who changed what, when, and what it looked like before and after. Written with
// recordAudit() inside the transaction of the change, so a change and its row commit together.
//
// From an operator route (webhooks, channel settings, ...):
//   await recordAudit(tx, { ...actorOf(req), action: 'updateWebhook', target: { type: 'webhook', id }, before, after, requestId: req.requestId })
// Admin routes are audited by auditedAdminRoute() (src/admin/routes.ts), every call including reads.
import type { TransactionSql } from 'postgres'
import type { Principal } from '../auth/types.ts'
import type { Sql } from '../db/postgres.ts'
import { cursorCodec, decodeCursorOr400 } from '../lib/cursor.ts'

export interface AuditActor {
  actor: 'admin' | 'key' | 'system'
  actorKeyId?: string | null
  tenantId?: string | null
}

export interface AuditEntry extends AuditActor {
  action: string
  target?: { type: string; id: string }
  before?: unknown
  after?: unknown
  requestId?: string
}

export const ADMIN_ACTOR: AuditActor = { actor: 'admin' }

/** The actor and tenant of an operator request. */
export const actorOf = (req: { principal: Principal }): AuditActor => ({ actor: 'key', actorKeyId: req.principal.keyId, tenantId: req.principal.tenantId })

/** Field names whose values are secrets: masked in before/after, at any depth. */
const SECRET_FIELD = /secret|password|passwd|token|private|credential|signing|^key$|api_?key|key_hash|authorization|cookie|smtp_pass/i
export const MASK = '[masked]'

/** A URL's password (`scheme://user:pass@host`), whatever the field is called. */
const URL_PASSWORD = /^([a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:)[^/@\s]+@/i

/**
 * A copy with every secret-named field's value replaced (null, empty and boolean values stay: they reveal
 * no secret), and the password of any URL-shaped string cut (`smtp://user:***@host`).
 */
export function maskSecrets(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return URL_PASSWORD.test(value) ? value.replace(URL_PASSWORD, '$1***@') : value
  if (depth > 32 || value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map((v) => maskSecrets(v, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    // A secret is a string (or an object of key material); flags like `secret_rotated: true` are not.
    const secretValue = (typeof v === 'string' && v !== '') || (typeof v === 'object' && v !== null)
    out[k] = SECRET_FIELD.test(k) && secretValue ? MASK : maskSecrets(v, depth + 1)
  }
  return out
}

/** One audit row; call it on the transaction that makes the change. */
export async function recordAudit(sql: Sql | TransactionSql, e: AuditEntry): Promise<void> {
  const json = (v: unknown) => (v === undefined ? null : sql.json(maskSecrets(v) as never))
  await sql`
    insert into audit_log (tenant_id, actor, actor_key_id, action, target_type, target_id, before, after, request_id)
    values (${e.tenantId ?? null}, ${e.actor}, ${e.actorKeyId ?? null}, ${e.action}, ${e.target?.type ?? null},
            ${e.target?.id ?? null}, ${json(e.before)}, ${json(e.after)}, ${e.requestId ?? null})`
}

interface AuditRow {
  /** bigint: the driver hands it over as a string (exact). */
  id: string
  tenant_id: string | null
  actor: string
  actor_key_id: string | null
  action: string
  target_type: string | null
  target_id: string | null
  before: unknown
  after: unknown
  request_id: string | null
  created_at: Date
}

/** Newest first; the cursor is the last row's id, signed. */
export async function listAudit(sql: Sql, input: { tenantId?: string; cursor?: string; limit: number }) {
  const codec = await cursorCodec(sql, 'admin-audit')
  const after = input.cursor ? Number(decodeCursorOr400(codec, input.cursor).id) : undefined
  const rows = await sql<AuditRow[]>`
    select id, tenant_id, actor, actor_key_id, action, target_type, target_id, before, after, request_id, created_at
    from audit_log
    where true
      ${input.tenantId ? sql`and tenant_id = ${input.tenantId}` : sql``}
      ${after !== undefined ? sql`and id < ${after}` : sql``}
    order by id desc
    limit ${input.limit + 1}`
  const page = rows.slice(0, input.limit)
  const last = page[page.length - 1]
  return {
    data: page.map((r) => ({
      id: r.id,
      tenant_id: r.tenant_id,
      actor: r.actor,
      actor_key_id: r.actor_key_id,
      action: r.action,
      target: r.target_type ? { type: r.target_type, id: r.target_id } : null,
      before: r.before ?? null,
      after: r.after ?? null,
      request_id: r.request_id,
      created_at: r.created_at.toISOString(),
    })),
    next_cursor: rows.length > input.limit && last ? codec.encode({ id: last.id }) : null,
  }
}

// Opaque, tamper-proof pagination cursors: base64url(JSON payload) + "." + base64url(HMAC-SHA256).
// Clients cannot read meaning into them or forge a position; a cursor that fails verification is a 400.
// The signing key is an installation-wide secret kept in PostgreSQL (table app_secrets), generated on first
// use, so every process of an installation accepts the cursors of every other.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Sql } from '../db/postgres.ts'
import { badRequest } from '../errors.ts'
import { exactTimeSql } from './rows.ts'

export interface CursorCodec {
  encode(payload: Record<string, unknown>): string
  /** The payload, or null when the token is malformed or its signature does not match. */
  decode(token: string): Record<string, unknown> | null
}

const MAX_CURSOR_LENGTH = 2048

export function createCursorCodec(secret: Buffer, purpose: string): CursorCodec {
  // The purpose is part of the MAC, so a cursor of one endpoint is never valid for another.
  const mac = (body: string) => createHmac('sha256', secret).update(purpose).update('\u0000').update(body).digest()
  return {
    encode(payload) {
      const body = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')
      return `${body}.${mac(body).toString('base64url')}`
    },
    decode(token) {
      if (token.length > MAX_CURSOR_LENGTH) return null
      const dot = token.indexOf('.')
      if (dot <= 0 || dot !== token.lastIndexOf('.')) return null
      const body = token.slice(0, dot)
      const given = Buffer.from(token.slice(dot + 1), 'base64url')
      const expected = mac(body)
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
      try {
        const payload: unknown = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'))
        return payload && typeof payload === 'object' && !Array.isArray(payload) ? (payload as Record<string, unknown>) : null
      } catch {
        return null
      }
    },
  }
}

/** The API's 400 for a forged, truncated or foreign cursor. */
export const invalidCursor = () =>
  badRequest('invalid cursor', { errors: [{ in: 'query', field: 'cursor', message: 'is not a cursor issued by this endpoint' }] })

/** decode() that throws invalidCursor() instead of returning null. */
export function decodeCursorOr400(codec: CursorCodec, token: string): Record<string, unknown> {
  const payload = codec.decode(token)
  if (!payload) throw invalidCursor()
  return payload
}

const secrets = new WeakMap<Sql, Map<string, Promise<Buffer>>>()

/**
 * The named installation secret, created on first use (concurrent first uses agree on one value).
 * Cached per connection pool for the life of the process.
 */
export function appSecret(sql: Sql, name: string): Promise<Buffer> {
  const byName = secrets.get(sql) ?? new Map<string, Promise<Buffer>>()
  secrets.set(sql, byName)
  let pending = byName.get(name)
  if (!pending) {
    pending = (async () => {
      await sql`insert into app_secrets (name, secret) values (${name}, ${randomBytes(32)}) on conflict (name) do nothing`
      const [row] = await sql<{ secret: Buffer }[]>`select secret from app_secrets where name = ${name}`
      if (!row) throw new Error(`app secret ${name} missing`)
      return Buffer.from(row.secret)
    })()
    pending.catch(() => byName.delete(name))
    byName.set(name, pending)
  }
  return pending
}

/** A codec for one endpoint ("purpose"), keyed by the installation's cursor secret. */
export async function cursorCodec(sql: Sql, purpose: string): Promise<CursorCodec> {
  return createCursorCodec(await appSecret(sql, 'cursor'), purpose)
}

/** created_at as exact text, selected as `created_key` for a keyset cursor (rows.ts exactTimeSql). */
export const CREATED_KEY = `${exactTimeSql('created_at')} as created_key`

/**
 * A newest-first keyset over (created_at, id): the position a cursor names, and the next page's cursor.
 * Bound to what the list is of (`of`: its tenant, brand, endpoint, player, filters): a cursor of another
 * list is no position in this one (400).
 */
export async function keysetCursor(sql: Sql, purpose: string, of: string, cursor: string | undefined) {
  const codec = await cursorCodec(sql, purpose)
  let after: { t: string; id: string } | undefined
  if (cursor) {
    const c = decodeCursorOr400(codec, cursor)
    if (typeof c.t !== 'string' || typeof c.id !== 'string' || c.of !== of) throw invalidCursor()
    after = { t: c.t, id: c.id }
  }
  /** `rows`: the page read with one row more than `limit` (which says whether a next page exists). */
  const next = (rows: { id: string; created_key: string }[], limit: number) => {
    const last = rows[limit - 1]
    return rows.length > limit && last ? codec.encode({ of, t: last.created_key, id: last.id }) : null
  }
  return { after, next }
}

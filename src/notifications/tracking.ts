// Tracking and unsubscribe tokens (contract-engines §3): HMAC-signed, naming a notification, a kind
// (o = open, c = click, u = unsubscribe) and for clicks the link's index in the message. A token of one
// kind is no good as another, and a forged or altered one is a 404. The key is TRACKING_SECRET, else an
// installation secret generated once and kept in PostgreSQL (app_secrets), shared by every process.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { AppContext } from '../context.ts'
import { appSecret } from '../lib/cursor.ts'
import type { Sql } from './delivery-queries.ts'

export type TokenKind = 'o' | 'c' | 'u'

export interface TrackingTokens {
  sign(kind: TokenKind, notificationId: string, index?: number): string
  verify(kind: TokenKind, token: string): { notificationId: string; index: number } | null
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export function createTrackingTokens(key: Buffer): TrackingTokens {
  const mac = (body: string) => createHmac('sha256', key).update(body).digest().subarray(0, 16)
  return {
    sign(kind, notificationId, index = 0) {
      // The id's 16 bytes and the index keep tokens short (they end up in every link of an email).
      const body = Buffer.concat([Buffer.from(notificationId.replace(/-/g, ''), 'hex'), Buffer.from(String(index))]).toString('base64url')
      return `${body}.${mac(`${kind}.${body}`).toString('base64url')}`
    },
    verify(kind, token) {
      if (token.length > 200) return null
      const dot = token.indexOf('.')
      if (dot <= 0) return null
      const body = token.slice(0, dot)
      const macText = token.slice(dot + 1)
      const given = Buffer.from(macText, 'base64url')
      // Node's decoder ignores padding, stray characters and a last character's unused bits: only the
      // text sign() writes is the token (any other spelling of the same bytes is an alteration, a 404).
      if (given.toString('base64url') !== macText) return null
      const expected = mac(`${kind}.${body}`)
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
      const raw = Buffer.from(body, 'base64url')
      if (raw.length < 17) return null
      const hex = raw.subarray(0, 16).toString('hex')
      const notificationId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
      const index = Number(raw.subarray(16).toString())
      if (!UUID_RE.test(notificationId) || !Number.isInteger(index) || index < 0) return null
      return { notificationId, index }
    },
  }
}

export async function trackingTokens(ctx: Pick<AppContext, 'config'> & { sql: Sql }): Promise<TrackingTokens> {
  const key = ctx.config.trackingSecret ? Buffer.from(ctx.config.trackingSecret) : await appSecret(ctx.sql as never, 'tracking')
  return createTrackingTokens(key)
}

// At PUBLIC_BASE_URL's root, as contract-engines §3 names them (the /api/v1 paths serve older links).
// Each URL is signed when it is read: an in-app or Telegram message uses none of them, and the
// dispatcher builds this for every message (two HMACs each on the in-app path, for nothing).
export const trackingUrls = (base: string, tokens: TrackingTokens, notificationId: string) => ({
  get open() {
    return `${base}/t/o/${tokens.sign('o', notificationId)}.gif`
  },
  click: (index: number) => `${base}/t/c/${tokens.sign('c', notificationId, index)}`,
  get unsubscribe() {
    return `${base}/t/u/${tokens.sign('u', notificationId)}`
  },
})

// What a channel call came to. The dispatcher maps it onto the notification's lifecycle (§3).
export type Outcome =
  /** The channel accepted it (SMTP 250, Telegram ok, push service 201). */
  | { kind: 'delivered' }
  /** Permanent refusal of the address (SMTP 5xx to the recipient): `bounced`, the address undeliverable. */
  | { kind: 'bounced'; error: string }
  /** Worth trying again (network, 5xx, 429), after retryAfterSec when the peer said so. */
  | { kind: 'retry'; error: string; retryAfterSec?: number }
  /** Permanent; the contact point was removed where the channel said so (Telegram 403, push 404/410). */
  | { kind: 'failed'; error: string }
  /**
   * Not sent, nor tried: its rules' check grew too old while it waited for a connection. Due again at
   * once, to be checked again (responsible gaming: checked right before sending); no attempt counted.
   */
  | { kind: 'unsent'; reason: string }

/** Retry-After as seconds (delta-seconds or an HTTP date), or undefined. */
export function retryAfterSeconds(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value
  if (!v) return undefined
  if (/^\d+$/.test(v.trim())) return Number(v.trim())
  const at = Date.parse(v)
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now) / 1000)) : undefined
}

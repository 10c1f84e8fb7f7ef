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

/**
 * The outcome with these credentials cut out of its error text. The error is stored on the notification
 * and read back through the API (read scope), and a peer's reply may repeat them: a proxy's error page
 * quoting the requested path `/bot<token>/sendMessage`, an SMTP server naming the user it refused (some
 * providers' users are API tokens). Values shorter than 4 characters are left alone (they would mangle text).
 */
export function withoutSecrets<O extends Outcome>(outcome: O, secrets: (string | null | undefined)[]): O {
  if (!('error' in outcome) || !outcome.error) return outcome
  let error = outcome.error
  for (const s of secrets) if (s && s.length >= 4) error = error.split(s).join('***')
  return error === outcome.error ? outcome : { ...outcome, error }
}

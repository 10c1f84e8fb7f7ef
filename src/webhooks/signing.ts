// Webhook signatures (contract-engines §2). Secrets are `whsec_` + base64 of 32 random bytes.
// - X-Respin-Signature: `sha256=<hex>`, HMAC-SHA256 of the raw body keyed by the whole secret string
//   (the scheme GitHub uses, so @octokit/webhooks-methods verifies it).
// - Standard Webhooks: `webhook-signature: v1,<base64>` over `{id}.{timestamp}.{body}` keyed by the
//   base64-decoded part of the secret; during a rotation's overlap a second `v1,` signature by the old one.
import { createHmac, randomBytes } from 'node:crypto'

export const SECRET_PREFIX = 'whsec_'

export const generateSecret = (): string => `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`

export const respinSignature = (secret: string, body: string): string =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`

export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

/** The signature headers of one attempt. `previousSecret`: the pre-rotation secret while it still signs. */
export function signatureHeaders(input: {
  deliveryId: string
  timestamp: number
  body: string
  secret: string
  previousSecret?: string | null
}): Record<string, string> {
  const signatures = [standardSignature(input.secret, input.deliveryId, input.timestamp, input.body)]
  if (input.previousSecret) signatures.push(standardSignature(input.previousSecret, input.deliveryId, input.timestamp, input.body))
  return {
    'x-respin-signature': respinSignature(input.secret, input.body),
    'webhook-id': input.deliveryId,
    'webhook-timestamp': String(input.timestamp),
    'webhook-signature': signatures.join(' '),
  }
}

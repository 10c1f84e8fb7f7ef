import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto'

export const KEY_PREFIX = 'rsp_'
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/** `rsp_` + 40 base62 characters (~238 bits). Rejection sampling keeps every character uniform. */
export function generateApiKey(): string {
  let out = KEY_PREFIX
  while (out.length < KEY_PREFIX.length + 40) {
    for (const byte of randomBytes(48)) {
      if (byte < 248 && out.length < KEY_PREFIX.length + 40) out += BASE62[byte % 62]
    }
  }
  return out
}

/** Runs on every authenticated request: the one-shot hash avoids a Hash object per call. */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex')
}

/** What we keep to let an operator recognise a key in listings: `rsp_` and its next 8 characters. */
export const displayPrefix = (key: string) => key.slice(0, KEY_PREFIX.length + 8)

export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest()
  const hb = createHash('sha256').update(b).digest()
  return timingSafeEqual(ha, hb)
}

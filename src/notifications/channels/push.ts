// Web Push: the payload encrypted (RFC 8291, aes128gcm) and the VAPID JWT (RFC 8292) made by web-push's
// generateRequestDetails, sent with our pinned outbound client (web-push's own sendNotification only
// speaks https through node's https module and would bypass the URL policy's pinning).
import webpush from 'web-push'
import type { OutboundHttp } from '../../lib/outbound-http.ts'
import { UrlPolicyError } from '../../lib/url-policy.ts'
import { retryAfterSeconds, type Outcome } from './outcome.ts'
import type { TargetCache } from './targets.ts'

export interface PushTarget {
  id: string
  endpoint: string
  p256dh: string
  auth: string
}

export function createPushChannel(deps: { http: OutboundHttp; targets: TargetCache; timeoutMs: number }) {
  return {
    /** One subscription. `gone` when the push service says it no longer exists (404/410). */
    async send(s: { vapidSubject: string; vapidPublicKey: string; vapidPrivateKey: string }, sub: PushTarget, payload: string): Promise<Outcome & { gone?: boolean }> {
      let details
      try {
        details = webpush.generateRequestDetails({ endpoint: sub.endpoint, keys: { p256dh: sub.p256dh, auth: sub.auth } }, payload, {
          vapidDetails: { subject: s.vapidSubject, publicKey: s.vapidPublicKey, privateKey: s.vapidPrivateKey },
          TTL: 24 * 3600,
          contentEncoding: 'aes128gcm',
        })
      } catch (err) {
        return { kind: 'failed', error: `push: ${(err as Error).message}` }
      }
      let target
      try {
        target = await deps.targets.check(details.endpoint)
      } catch (err) {
        return { kind: 'failed', error: `push endpoint refused: ${err instanceof UrlPolicyError ? err.message : (err as Error).message}` }
      }
      const headers: Record<string, string> = {}
      for (const [k, v] of Object.entries(details.headers)) headers[k] = String(v)
      let res
      try {
        res = await deps.http.request(target, { method: details.method, headers, body: details.body ?? undefined, timeoutMs: deps.timeoutMs })
      } catch (err) {
        return { kind: 'retry', error: `push: ${(err as Error).message}` }
      }
      const what = `push ${res.status}: ${res.bodyPrefix.slice(0, 200)}`.trim()
      if (res.status >= 200 && res.status < 300) return { kind: 'delivered' }
      if (res.status === 404 || res.status === 410) return { kind: 'failed', error: what, gone: true }
      if (res.status === 429 || res.status >= 500) return { kind: 'retry', error: what, retryAfterSec: retryAfterSeconds(res.headers['retry-after']) }
      return { kind: 'failed', error: what }
    },
  }
}

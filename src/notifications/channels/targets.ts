// The URL policy's check, cached per origin for a minute: a dispatcher sends many messages to one push
// service or bot API, and resolving the host for each would cost a DNS round trip per message. The
// cached address is still the checked one (pinned); a minute bounds how stale a DNS change can be.
import { checkUrl, type CheckedUrl } from '../../lib/url-policy.ts'

const TTL_MS = 60_000

export function createTargetCache(opts: { allowPrivate: boolean }) {
  const byOrigin = new Map<string, { at: number; checked: Promise<CheckedUrl> }>()
  return {
    async check(raw: string): Promise<CheckedUrl> {
      const url = new URL(raw)
      const hit = byOrigin.get(url.origin)
      if (hit && Date.now() - hit.at < TTL_MS) return { ...(await hit.checked), url }
      const checked = checkUrl(raw, { allowPrivate: opts.allowPrivate })
      byOrigin.set(url.origin, { at: Date.now(), checked })
      checked.catch(() => byOrigin.delete(url.origin))
      return { ...(await checked), url }
    },
  }
}
export type TargetCache = ReturnType<typeof createTargetCache>

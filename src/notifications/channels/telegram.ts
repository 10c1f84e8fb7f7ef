// Telegram through the Bot API's sendMessage (HTML parse mode), at the brand's api_base_url, over the
// pinned outbound client. 429 honours retry_after; 403 (bot blocked, user deactivated) is permanent and
// the caller removes the chat id.
import type { OutboundHttp } from '../../lib/outbound-http.ts'
import { UrlPolicyError } from '../../lib/url-policy.ts'
import { withoutSecrets, type Outcome } from './outcome.ts'
import type { TargetCache } from './targets.ts'

export function createTelegramChannel(deps: { http: OutboundHttp; targets: TargetCache; timeoutMs: number }) {
  return {
    async send(s: { apiBaseUrl: string; botToken: string }, chatId: string, text: string): Promise<Outcome & { blocked?: boolean }> {
      // The token is in the request path, which error pages and refusals may quote.
      return withoutSecrets(await sendMessage(s, chatId, text), [s.botToken, encodeURIComponent(s.botToken)])
    },
  }

  async function sendMessage(s: { apiBaseUrl: string; botToken: string }, chatId: string, text: string): Promise<Outcome & { blocked?: boolean }> {
    let target
    try {
      target = await deps.targets.check(`${s.apiBaseUrl}/bot${s.botToken}/sendMessage`)
    } catch (err) {
      return { kind: 'retry', error: `telegram api_base_url refused: ${err instanceof UrlPolicyError ? err.message : (err as Error).message}` }
    }
    let res
    try {
      res = await deps.http.request(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ chat_id: chatId, text, parse_mode: 'HTML' }),
        timeoutMs: deps.timeoutMs,
      })
    } catch (err) {
      return { kind: 'retry', error: `telegram: ${(err as Error).message}` }
    }
    let body: { ok?: boolean; description?: string; parameters?: { retry_after?: number } } = {}
    try {
      body = JSON.parse(res.bodyPrefix)
    } catch {
      // Not JSON (a proxy's error page): judged by the status alone.
    }
    const what = `telegram ${res.status}: ${body.description ?? res.bodyPrefix.slice(0, 200)}`
    if (res.status === 200 && body.ok) return { kind: 'delivered' }
    if (res.status === 429) return { kind: 'retry', error: what, retryAfterSec: body.parameters?.retry_after ?? 1 }
    if (res.status === 403) return { kind: 'failed', error: what, blocked: true }
    if (res.status >= 500) return { kind: 'retry', error: what }
    return { kind: 'failed', error: what }
  }
}

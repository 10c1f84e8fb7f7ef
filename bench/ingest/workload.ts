// Synthetic operator traffic: several tenants, ~10k players each, realistic canonical events with ~20%
// money events, and a share of re-sent event_ids (client retries) that must come back as duplicates.
import { randomBytes } from 'node:crypto'
import { type TransformResult, transformGroup } from '../../src/events/transform.ts'

const COUNTRIES = ['SE', 'DE', 'GB', 'FI', 'NO', 'ES', 'IT', 'BR', 'CA', 'MT']
const GAMES = ['book-of-ra', 'starburst', 'gates-of-olympus', 'sweet-bonanza', 'blackjack', 'roulette', 'crazy-time']
const PROVIDERS = ['netent', 'pragmatic', 'evolution', 'playngo']
const DEVICES = ['mobile', 'desktop', 'tablet']

let n = 0
const id = () => `${randomBytes(6).toString('hex')}-${(n++).toString(36)}`
const pick = <T>(a: readonly T[]) => a[Math.floor(Math.random() * a.length)] as T

/** One event of a player: ~20% money (deposit, withdrawal, bet, win), the rest sessions and gameplay. */
export function makeEvent(player: number, now: number): Record<string, unknown> {
  const r = Math.random()
  const base = { player_id: `player-${player}`, event_id: id(), timestamp: new Date(now - Math.floor(Math.random() * 60_000)).toISOString(), session_id: `s-${player}-${Math.floor(now / 600_000)}` }
  if (r < 0.08) return { ...base, event_type: 'bet', payload: { amount: Math.round(Math.random() * 2000) / 100, currency: 'EUR', game: pick(GAMES), provider: pick(PROVIDERS), category: 'slots', round_id: id() } }
  if (r < 0.14) return { ...base, event_type: 'win', payload: { amount: Math.round(Math.random() * 5000) / 100, currency: 'EUR', game: pick(GAMES), provider: pick(PROVIDERS), category: 'slots', round_id: id() } }
  if (r < 0.18) return { ...base, event_type: 'deposit', payload: { amount: [10, 20, 50, 100][Math.floor(Math.random() * 4)], currency: 'EUR', method: 'card' } }
  if (r < 0.2) return { ...base, event_type: 'withdrawal', payload: { amount: 50, currency: 'EUR', method: 'bank' } }
  if (r < 0.5) return { ...base, event_type: 'game_start', payload: { game: pick(GAMES), provider: pick(PROVIDERS), category: 'slots', device: pick(DEVICES), platform: 'web' } }
  if (r < 0.7) return { ...base, event_type: 'login', payload: { country: pick(COUNTRIES), device: pick(DEVICES), os: 'android', browser: 'chrome', platform: 'web' } }
  if (r < 0.85) return { ...base, event_type: 'logout', payload: { device: pick(DEVICES) } }
  if (r < 0.9) return { ...base, event_type: 'page_view', payload: { path: '/lobby', ref: 'home' } }
  return { ...base, event_type: 'registration', payload: { country: pick(COUNTRIES), language: 'en', currency: 'EUR', device: pick(DEVICES), email: `p${player}@example.com` } }
}

/**
 * Request bodies, pre-serialised so the load generator only sends bytes. `repeatShare` of the events
 * re-use an event_id sent earlier (a retry), spread over the run.
 */
export function makeBodies(opts: { count: number; batchSize: number; players: number; repeatShare: number }): string[] {
  const now = Date.now()
  const recent: Record<string, unknown>[] = []
  const bodies: string[] = []
  for (let b = 0; b < opts.count; b++) {
    const events: Record<string, unknown>[] = []
    for (let i = 0; i < opts.batchSize; i++) {
      if (recent.length > 200 && Math.random() < opts.repeatShare) events.push(recent[Math.floor(Math.random() * recent.length)] as Record<string, unknown>)
      else {
        const e = makeEvent(Math.floor(Math.random() * opts.players), now)
        events.push(e)
        if (recent.length < 5000) recent.push(e)
        else recent[Math.floor(Math.random() * recent.length)] = e
      }
    }
    // A retry of an event inside its own batch would be an in-batch duplicate; fine, also counted.
    bodies.push(JSON.stringify(opts.batchSize === 1 ? events[0] : { events }))
  }
  return bodies
}

/** The workers' transform over these request bodies as one group, as the pipeline hands them over. */
export function transformBodies(list: string[], ids: { tenantId: string; brandId: string }): TransformResult & { events: number } {
  const bufs = list.map((b) => Buffer.from(b))
  const all = new Uint8Array(bufs.reduce((a, b) => a + b.length, 0))
  const bounds = new Int32Array(bufs.length * 2)
  let off = 0
  let events = 0
  bufs.forEach((b, i) => {
    all.set(b, off)
    bounds[2 * i] = off
    off += b.length
    bounds[2 * i + 1] = off
    const body = JSON.parse(list[i] as string) as { events?: unknown[] }
    events += Array.isArray(body.events) ? body.events.length : 1
  })
  const result = transformGroup({
    tenantIds: list.map(() => ids.tenantId), bodies: all, bounds, brandIds: list.map(() => ids.brandId), mappingKeys: list.map(() => '0'),
    receivedAt: list.map(() => Date.now()), keep: new Uint8Array(events).fill(1), mappings: { '0': { rules: [] } }, seqBase: 1,
  })
  return { ...result, events }
}

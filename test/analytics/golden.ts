// The golden dataset of the analytics tests, with every figure computed by hand in golden.test.ts.
// Two currencies, rollbacks of both kinds, bonus costs, failed deposits, registrations across months,
// events around midnight in Europe/Rome and on its DST day (2026-03-29: 23 hours, CET → CEST at 01:00Z).
const ev = (player_id: string, event_type: string, timestamp: string, payload: Record<string, unknown> = {}, n = 0) => ({
  event_id: `${player_id}-${event_type}-${timestamp}-${n}`, player_id, event_type, timestamp, payload,
})

const STARBURST = { game: 'starburst', provider: 'netent', category: 'slots' }
const BOOK = { game: 'book', provider: 'playngo', category: 'slots' }
const BLACKJACK = { game: 'blackjack', provider: 'evolution', category: 'live' }

export const GOLDEN_EVENTS = [
  // p1: EUR, Italy, registered in February.
  ev('p1', 'registration', '2026-02-10T10:00:00Z', { country: 'IT', device: 'mobile', os: 'ios', browser: 'safari', platform: 'app', currency: 'EUR' }),
  ev('p1', 'deposit', '2026-02-10T10:05:00Z', { amount: 100.1, currency: 'EUR', method: 'card' }),
  ev('p1', 'deposit_failed', '2026-02-11T09:00:00Z', { amount: 50, currency: 'EUR', method: 'card' }),
  ev('p1', 'bet', '2026-03-28T22:30:00Z', { amount: 20, currency: 'EUR', ...STARBURST, round_id: 'r1' }), // Sat 23:30 CET
  ev('p1', 'win', '2026-03-28T23:10:00Z', { amount: 5.5, currency: 'EUR', ...STARBURST, round_id: 'r1' }), // Sun 00:10 CET
  ev('p1', 'bet', '2026-03-29T10:00:00Z', { amount: 10, currency: 'EUR', ...STARBURST, round_id: 'r2' }), // Sun 12:00 CEST
  ev('p1', 'bet_rollback', '2026-03-29T10:01:00Z', { amount: 10, currency: 'EUR', ...STARBURST, round_id: 'r2' }),
  ev('p1', 'bonus_granted', '2026-03-30T08:00:00Z', { bonus_id: 'B1', amount: 10, currency: 'EUR' }), // Mon 10:00
  ev('p1', 'bet', '2026-03-30T09:00:00Z', { amount: 30, currency: 'EUR', ...BOOK }),
  ev('p1', 'win', '2026-03-30T09:05:00Z', { amount: 12, currency: 'EUR', ...BOOK }),
  ev('p1', 'win_rollback', '2026-03-30T09:06:00Z', { amount: 2, currency: 'EUR', ...BOOK }),
  ev('p1', 'bonus_completed', '2026-04-01T08:00:00Z', { bonus_id: 'B1', amount: 10, currency: 'EUR' }), // Wed 10:00
  // p2: USD, United States, registered in March.
  ev('p2', 'registration', '2026-03-05T12:00:00Z', { country: 'US', device: 'desktop', os: 'windows', browser: 'chrome', platform: 'web', currency: 'USD' }),
  ev('p2', 'deposit', '2026-03-15T12:10:00Z', { amount: 50, currency: 'USD', method: 'card' }),
  ev('p2', 'deposit', '2026-04-02T12:00:00Z', { amount: 25.25, currency: 'USD', method: 'card' }),
  ev('p2', 'bet', '2026-04-02T13:00:00Z', { amount: 40, currency: 'USD', ...BLACKJACK }),
  ev('p2', 'win', '2026-04-02T13:30:00Z', { amount: 60, currency: 'USD', ...BLACKJACK }),
  ev('p2', 'withdrawal', '2026-04-03T09:00:00Z', { amount: 30, currency: 'USD', method: 'bank' }),
  ev('p2', 'bonus_granted', '2026-04-03T10:00:00Z', { bonus_id: 'B2', amount: 5, currency: 'USD' }),
  ev('p2', 'bonus_completed', '2026-04-04T10:00:00Z', { bonus_id: 'B2', amount: 5, currency: 'USD' }),
  // p3: no registration event, a login and a failed deposit only.
  ev('p3', 'login', '2026-04-05T10:00:00Z', { country: 'IT', device: 'mobile', os: 'android', browser: 'chrome', platform: 'web' }),
  ev('p3', 'deposit_failed', '2026-04-05T10:05:00Z', { amount: 20, currency: 'EUR', method: 'card' }),
  // p5: registered at 00:30 CEST on Monday 30 March (still the 29th in UTC).
  ev('p5', 'registration', '2026-03-29T22:30:00Z', { country: 'DE', device: 'tablet', currency: 'EUR' }),
]

/** "Now" of the analytics routes in the tests. */
export const GOLDEN_NOW = new Date('2026-04-10T12:00:00Z')

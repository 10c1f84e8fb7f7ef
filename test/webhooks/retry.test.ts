import t from 'tap'
import { retryDelayMs } from '../../src/webhooks/dispatcher.ts'

t.test('retry delays follow WEBHOOK_RETRY_DELAYS with ±10 % jitter', async (t) => {
  const delays = [60, 300, 900, 3600]
  for (const [made, base] of [[1, 60], [2, 300], [3, 900], [4, 3600]] as const) {
    t.equal(retryDelayMs(delays, made, () => 0.5), base * 1000, `after attempt ${made}`)
    t.equal(retryDelayMs(delays, made, () => 0), base * 900)
    t.equal(retryDelayMs(delays, made, () => 0.999999), Math.round(base * 1000 * (0.9 + 0.2 * 0.999999)))
  }
  const spread = new Set(Array.from({ length: 50 }, () => retryDelayMs([1, 1, 1, 1], 1)))
  t.ok(spread.size > 10, 'jitter spreads retries')
  t.ok([...spread].every((ms) => ms >= 900 && ms <= 1100))
})

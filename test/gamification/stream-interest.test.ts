// The gamification consumer's stream pre-test (src/gamification/rules.ts, tournamentInterest): every
// event a tournament scores passes its interest filters on the ingest worker, over a grid of configs and
// events (a refused event that would have scored would be a lost score).
import t from 'tap'
import type { StreamEvent } from '../../src/engine/event-stream.ts'
import { conditionHolds } from '../../src/lib/event-filter.ts'
import { tournamentDelta, tournamentInterest, type GameConfig } from '../../src/gamification/rules.ts'

const configs: GameConfig[] = []
for (const metric of ['bet_amount', 'bet_count', 'win_amount', 'ggr'] as const) {
  for (const games of [undefined, [], ['starburst'], ['starburst', '7']]) {
    for (const currency of [undefined, 'eur']) {
      for (const min_bet of [undefined, 0, 5]) configs.push({ metric, games, currency, min_bet, providers: games?.length ? ['netent'] : undefined })
    }
  }
}
const events: StreamEvent[] = []
for (const type of ['bet', 'win', 'bet_rollback', 'win_rollback', 'deposit']) {
  for (const game of [undefined, 'starburst', 'roulette', 7]) {
    for (const amount of [undefined, '0', '4.99', '5', '120.5', '-3']) {
      for (const currency of [undefined, 'EUR', 'USD']) {
        for (const provider of ['netent', 'pragmatic']) {
          events.push({
            id: '1', tenantId: 't', brandId: 'b', playerId: 'p', externalId: 'x', eventId: null, type, sourceType: type,
            eventTime: new Date(), receivedAt: new Date(), payload: null,
            fields: { ...(game === undefined ? {} : { game }), ...(amount === undefined ? {} : { amount }), ...(currency ? { currency } : {}), provider },
          })
        }
      }
    }
  }
}

t.test('every scored event passes the interest; events of other types are not asked for', async (t) => {
  let scored = 0
  let spared = 0
  const misses: string[] = []
  for (const g of configs) {
    const interest = tournamentInterest(g)
    for (const e of events) {
      const entry = interest.find((i) => (typeof i === 'string' ? i : i.type) === e.type)
      const passes = !!entry && (typeof entry === 'string' || entry.filters.every((c) => conditionHolds(e, c)))
      const delta = tournamentDelta(g, e)
      if (delta !== null) {
        scored++
        if (!passes) misses.push(`${JSON.stringify(g)} ${e.type} ${JSON.stringify(e.fields)}`)
      } else if (!passes) spared++
    }
  }
  t.same(misses.slice(0, 5), [], 'no scored event is filtered out')
  t.ok(scored > 1000, `${scored} scored events checked`)
  t.ok(spared > scored, `the filters spare events: ${spared} of those scoring nothing never become rows`)
})

// periodStart keeps the periods it computed lately ([start, next start) per type and zone): its answers
// must be exactly those of startOfDay / startOfIsoWeek, across DST changes and odd offsets, in any order.
import t from 'tap'
import { periodStart } from '../../src/gamification/periods.ts'
import { startOfDay, startOfIsoWeek } from '../../src/lib/zoned-time.ts'

const zones = ['UTC', 'Europe/Berlin', 'America/St_Johns', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/Santiago', 'Pacific/Chatham', 'America/Havana']

// A pure computation (~15 s of CPU): the servers run would repeat it exactly, so it runs in the embedded one.
const pureRepeat = process.env.DATABASE_URL ? 'pure computation, no store: checked by the embedded run' : false
t.test('same answers as the uncached computation, around DST changes and at random', { skip: pureRepeat }, async (t) => {
  const instants: number[] = []
  // Every 13 minutes across the weeks of the 2026 DST changes of the northern and southern zones above...
  for (const [from, to] of [['2026-03-06', '2026-03-16'], ['2026-03-27', '2026-04-07'], ['2026-09-24', '2026-10-08'], ['2026-10-23', '2026-11-03']]) {
    for (let x = Date.parse(from as string); x < Date.parse(to as string); x += 13 * 60_000) instants.push(x)
  }
  // ...and at random over two years, shuffled in with them (out of order: hits and misses mixed).
  for (let i = 0; i < 1500; i++) instants.push(Date.parse('2025-06-01') + Math.floor(Math.random() * 2 * 365 * 86_400_000))
  for (let i = instants.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[instants[i], instants[j]] = [instants[j] as number, instants[i] as number]
  }
  let wrong = 0
  for (const tz of zones) {
    for (const x of instants) {
      const at = new Date(x)
      if (periodStart('daily', tz, at)?.getTime() !== startOfDay(at, tz).getTime()) wrong++
      if (periodStart('weekly', tz, at)?.getTime() !== startOfIsoWeek(at, tz).getTime()) wrong++
    }
  }
  t.equal(wrong, 0, `${instants.length * zones.length * 2} answers checked`)
  t.equal(periodStart('one_time', 'UTC', new Date()), null)
})

t.test('an instant just before and at a period start', async (t) => {
  const start = startOfDay(new Date('2026-03-29T12:00:00Z'), 'Europe/Berlin')
  t.equal(periodStart('daily', 'Europe/Berlin', new Date(start.getTime() + 1000))?.getTime(), start.getTime())
  t.equal(periodStart('daily', 'Europe/Berlin', new Date(start.getTime() - 1))?.getTime(), startOfDay(new Date(start.getTime() - 1), 'Europe/Berlin').getTime())
  t.equal(periodStart('daily', 'Europe/Berlin', start)?.getTime(), start.getTime())
})

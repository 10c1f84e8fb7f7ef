// The send rules, table-driven: every suppression reason, both classes, caps in a non-UTC zone across a
// day and a week boundary, quiet hours wrapping midnight.
import t from 'tap'
import { capWindows, decide, DEFAULT_DELIVERY_SETTINGS, type DeliverySettings, type RuleFacts } from '../../src/notifications/rules.ts'
import { instantOf, startOfDay, startOfIsoWeek, windowEnd } from '../../src/lib/zoned-time.ts'

const noon = new Date('2026-03-04T12:00:00Z') // a Wednesday

type Over = Omit<Partial<RuleFacts>, 'player' | 'settings'> & { player?: Partial<RuleFacts['player']>; settings?: Partial<DeliverySettings> }

function facts(over: Over = {}): RuleFacts {
  return {
    class: 'marketing',
    channel: 'in_app',
    hasAddress: true,
    undeliverable: false,
    campaignCancelled: false,
    capCounts: [],
    now: noon,
    ...over,
    player: { status: 'active', consent: {}, timezone: null, ...over.player },
    settings: { ...DEFAULT_DELIVERY_SETTINGS, ...over.settings },
  }
}

const cases: [string, Over, ReturnType<typeof decide>][] = [
  ['an active player, opt-out channel, no caps: send', {}, { action: 'send' }],
  ['self-excluded: suppressed', { player: { status: 'self_excluded' } }, { action: 'suppress', reason: 'self_excluded' }],
  ['suspended: suppressed', { player: { status: 'suspended' } }, { action: 'suppress', reason: 'suspended' }],
  ['closed: suppressed', { player: { status: 'closed' } }, { action: 'suppress', reason: 'closed' }],
  ['transactional to a closed player: suppressed', { class: 'transactional', player: { status: 'closed' } }, { action: 'suppress', reason: 'closed' }],
  ['transactional to a self-excluded player: sent', { class: 'transactional', player: { status: 'self_excluded' } }, { action: 'send' }],
  ['transactional to a suspended player: sent', { class: 'transactional', player: { status: 'suspended' } }, { action: 'send' }],
  ['opt-in channel without consent: no_consent', { channel: 'email' }, { action: 'suppress', reason: 'no_consent' }],
  ['opt-in channel with consent: send', { channel: 'email', player: { consent: { email: { granted: true } } } }, { action: 'send' }],
  ['opt-out channel, consent withdrawn: no_consent', { channel: 'push', player: { consent: { push: { granted: false } } } }, { action: 'suppress', reason: 'no_consent' }],
  ['withdrawn by unsubscribe: unsubscribed', { channel: 'email', player: { consent: { email: { granted: false, source: 'unsubscribe' } } } }, { action: 'suppress', reason: 'unsubscribed' }],
  ['transactional skips consent', { class: 'transactional', channel: 'email', player: { consent: { email: { granted: false, source: 'unsubscribe' } } } }, { action: 'send' }],
  ['brand policy opt_in for in_app', { settings: { consent_policy: { ...DEFAULT_DELIVERY_SETTINGS.consent_policy, in_app: 'opt_in' } } }, { action: 'suppress', reason: 'no_consent' }],
  ['no address', { hasAddress: false }, { action: 'suppress', reason: 'no_address' }],
  ['transactional without address', { class: 'transactional', hasAddress: false }, { action: 'suppress', reason: 'no_address' }],
  ['undeliverable address', { channel: 'email', player: { consent: { email: { granted: true } } }, undeliverable: true }, { action: 'suppress', reason: 'undeliverable_address' }],
  ['campaign cancelled', { campaignCancelled: true }, { action: 'suppress', reason: 'campaign_cancelled' }],
  ['campaign paused: waits for the resume', { campaignPaused: true }, { action: 'wait' }],
  ['campaign paused, player self-excluded: suppressed, not kept', { campaignPaused: true, player: { status: 'self_excluded' } }, { action: 'suppress', reason: 'self_excluded' }],
  ['cap reached', { settings: { frequency_caps: [{ channel: 'any', max: 2, per: 'day' }] }, capCounts: [2] }, { action: 'suppress', reason: 'frequency_cap' }],
  ['cap not reached', { settings: { frequency_caps: [{ channel: 'any', max: 2, per: 'day' }] }, capCounts: [1] }, { action: 'send' }],
  ['transactional ignores caps', { class: 'transactional', settings: { frequency_caps: [{ channel: 'any', max: 0, per: 'day' }] }, capCounts: [5] }, { action: 'send' }],
  [
    'quiet hours hold until their end (Rome, 22:00-08:00, 23:30 local)',
    { now: new Date('2026-03-04T22:30:00Z'), settings: { quiet_hours: { start: '22:00', end: '08:00', timezone: 'Europe/Rome' } } },
    { action: 'hold', until: new Date('2026-03-05T07:00:00Z') },
  ],
  [
    "quiet hours in the player's own zone (New York 07:00 = 12:00Z is inside)",
    { player: { timezone: 'America/New_York' }, settings: { quiet_hours: { start: '22:00', end: '08:00', timezone: 'Europe/Rome' } } },
    { action: 'hold', until: new Date('2026-03-04T13:00:00Z') },
  ],
  ['outside quiet hours: send', { settings: { quiet_hours: { start: '22:00', end: '08:00', timezone: 'Europe/Rome' } } }, { action: 'send' }],
  ['transactional ignores quiet hours', { class: 'transactional', now: new Date('2026-03-04T22:30:00Z'), settings: { quiet_hours: { start: '22:00', end: '08:00', timezone: 'UTC' } } }, { action: 'send' }],
  ['self-exclusion wins over quiet hours', { player: { status: 'self_excluded' }, settings: { quiet_hours: { start: '00:00', end: '23:59', timezone: 'UTC' } } }, { action: 'suppress', reason: 'self_excluded' }],
]

for (const [name, input, expected] of cases) {
  t.test(name, async (t) => {
    t.same(decide(facts(input)), expected)
  })
}

t.test('cap windows: only caps of the channel or any, starting at the local day / ISO week', async (t) => {
  const settings: DeliverySettings = {
    ...DEFAULT_DELIVERY_SETTINGS,
    frequency_caps: [
      { channel: 'email', max: 1, per: 'day' },
      { channel: 'any', max: 5, per: 'week' },
      { channel: 'push', max: 1, per: 'day' },
    ],
  }
  // 23:30 UTC on Sunday 2026-03-08 is already Monday 00:30 in Rome (UTC+1): a new day and a new ISO week.
  const now = new Date('2026-03-08T23:30:00Z')
  const w = capWindows(settings, 'email', 'Europe/Rome', now)
  t.equal(w.length, 2)
  t.same(w[0]!.since, new Date('2026-03-08T23:00:00Z'))
  t.same(w[1]!.since, new Date('2026-03-08T23:00:00Z'))
  // The same instant in UTC is still Sunday: the week began Monday 2026-03-02.
  const utc = capWindows(settings, 'email', 'UTC', now)
  t.same(utc[0]!.since, new Date('2026-03-08T00:00:00Z'))
  t.same(utc[1]!.since, new Date('2026-03-02T00:00:00Z'))
})

t.test('zoned time across DST and offsets', async (t) => {
  // Rome switches to summer time on 2026-03-29: midnight is 23:00Z before, 22:00Z after.
  t.same(startOfDay(new Date('2026-03-28T12:00:00Z'), 'Europe/Rome'), new Date('2026-03-27T23:00:00Z'))
  t.same(startOfDay(new Date('2026-03-30T12:00:00Z'), 'Europe/Rome'), new Date('2026-03-29T22:00:00Z'))
  t.same(startOfIsoWeek(new Date('2026-03-04T12:00:00Z'), 'Asia/Tokyo'), new Date('2026-03-01T15:00:00Z'))
  t.same(instantOf({ year: 2026, month: 7, day: 1, hour: 8, minute: 0 }, 'America/New_York'), new Date('2026-07-01T12:00:00Z'))
  t.equal(windowEnd(new Date('2026-03-04T12:00:00Z'), { start: '09:00', end: '17:00' }, 'UTC')?.toISOString(), '2026-03-04T17:00:00.000Z')
  t.equal(windowEnd(new Date('2026-03-04T18:00:00Z'), { start: '09:00', end: '17:00' }, 'UTC'), null)
  t.equal(windowEnd(new Date('2026-03-04T02:00:00Z'), { start: '22:00', end: '08:00' }, 'UTC')?.toISOString(), '2026-03-04T08:00:00.000Z')
})

// Pure scoring rules of docs/players.md: no I/O.
import t from 'tap'
import { lifecycleStage, marketingChannel, nextBestAction, scores, type ScoringInput } from '../../src/players/scoring.ts'

const NOW = new Date('2026-06-01T12:00:00Z')
const daysAgo = (d: number) => new Date(NOW.getTime() - d * 86_400_000)

function player(o: Partial<ScoringInput> = {}): ScoringInput {
  return {
    status: 'active',
    created_at: daysAgo(100),
    deposit_count: 0,
    deposit_total: 0,
    first_deposit_at: null,
    last_deposit_at: null,
    last_login_at: null,
    last_seen_at: null,
    bet_total: 0,
    win_total: 0,
    ggr: 0,
    event_count: 0,
    consent: {},
    has_email: true,
    ...o,
  }
}

t.test('lifecycle stages follow the documented rules in order', async (t) => {
  t.equal(lifecycleStage(player({ created_at: daysAgo(2) }), NOW), 'new', 'registered, no deposit')
  t.equal(lifecycleStage(player({ created_at: daysAgo(60), last_seen_at: daysAgo(10) }), NOW), 'new', 'no deposit, still around')
  t.equal(lifecycleStage(player({ created_at: daysAgo(60) }), NOW), 'churned', 'no deposit, gone for 60 days')
  const ftd = { deposit_count: 1, deposit_total: 20, first_deposit_at: daysAgo(1), last_deposit_at: daysAgo(1) }
  t.equal(lifecycleStage(player(ftd), NOW), 'ftd')
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 2 }), NOW), 'active')
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 2, deposit_total: 5000 }), NOW), 'vip')
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 5, last_deposit_at: daysAgo(20) , first_deposit_at: daysAgo(40) }), NOW), 'at_risk')
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 9, deposit_total: 90_000, last_deposit_at: daysAgo(20) }), NOW), 'at_risk', 'recency beats VIP')
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 9, last_deposit_at: daysAgo(31) }), NOW), 'churned')
  // Boundaries: exactly 14 / 30 idle days are not yet past the threshold.
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 3, last_deposit_at: daysAgo(14) }), NOW), 'active')
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 3, last_deposit_at: daysAgo(30) }), NOW), 'at_risk')
  // Any activity counts: a login keeps an old depositor active.
  t.equal(lifecycleStage(player({ ...ftd, deposit_count: 3, last_deposit_at: daysAgo(50), last_login_at: daysAgo(1) }), NOW), 'active')
})

t.test('scores are bounded 0..100 and move the documented way', async (t) => {
  const fresh = scores(player({ last_seen_at: daysAgo(0) }), NOW)
  t.equal(fresh.churn, 0)
  t.equal(scores(player({ last_seen_at: daysAgo(3) }), NOW).churn, 0)
  t.equal(scores(player({ last_seen_at: daysAgo(16.5) }), NOW).churn, 50)
  t.equal(scores(player({ last_seen_at: daysAgo(45) }), NOW).churn, 100)
  t.equal(scores(player({ deposit_total: 0, ggr: 0 }), NOW).value, 0)
  t.equal(scores(player({ deposit_total: 999, ggr: 999 }), NOW).value, 75)
  t.equal(scores(player({ deposit_total: 1e9, ggr: 1e9 }), NOW).value, 100)
  t.equal(scores(player({ deposit_total: 100, ggr: -500 }), NOW).value, 35, 'negative GGR adds nothing')
  const busy = scores(player({ last_seen_at: daysAgo(0), event_count: 10_000, deposit_count: 10 }), NOW)
  t.equal(busy.engagement, 100)
  t.equal(scores(player({ created_at: daysAgo(400) }), NOW).engagement, 0)
  for (const s of [fresh, busy]) for (const v of Object.values(s)) t.ok(v >= 0 && v <= 100)
})

t.test('blocked players never get a marketing action', async (t) => {
  const valuable = { deposit_count: 20, deposit_total: 50_000, last_deposit_at: daysAgo(40) }
  const excluded = nextBestAction(player({ ...valuable, status: 'self_excluded' }), NOW)
  t.same(excluded, { action: 'respect_exclusion', priority: 'low', channelHint: 'any', reason: excluded.reason })
  t.match(excluded.reason, /self-excluded/)
  for (const status of ['suspended', 'closed']) {
    const nba = nextBestAction(player({ ...valuable, status }), NOW)
    t.equal(nba.action, 'none', status)
    t.match(nba.reason, status)
  }
})

t.test('the decision table', async (t) => {
  const at = (o: Partial<ScoringInput>) => nextBestAction(player(o), NOW)
  t.match(at({ created_at: daysAgo(2) }), { action: 'ftd_welcome_offer', priority: 'high', channelHint: 'email' })
  t.match(at({ created_at: daysAgo(20), last_seen_at: daysAgo(2) }), { action: 'deposit_reminder', priority: 'medium' })
  t.match(at({ deposit_count: 1, deposit_total: 10, last_deposit_at: daysAgo(1) }), { action: 'second_deposit_offer', priority: 'high' })
  t.match(at({ deposit_count: 5, deposit_total: 5000, last_deposit_at: daysAgo(20) }), { action: 'vip_retention_call', priority: 'high', channelHint: 'personal' })
  t.match(at({ deposit_count: 5, deposit_total: 50, last_deposit_at: daysAgo(20) }), { action: 'retention_bonus', priority: 'high' })
  t.match(at({ deposit_count: 5, deposit_total: 50_000, last_deposit_at: daysAgo(90) }), { action: 'vip_winback_call', priority: 'high', channelHint: 'personal' })
  t.match(at({ deposit_count: 5, deposit_total: 50, last_deposit_at: daysAgo(90) }), { action: 'winback_offer', priority: 'medium' })
  t.match(at({ created_at: daysAgo(90) }), { action: 'winback_offer', priority: 'low' })
  t.match(at({ deposit_count: 10, deposit_total: 9000, last_deposit_at: daysAgo(0), event_count: 5000 }), { action: 'vip_personal_offer', priority: 'medium', channelHint: 'personal' })
  t.match(at({ deposit_count: 2, deposit_total: 9000, last_deposit_at: daysAgo(13) }), { action: 'vip_reengagement', priority: 'high' })
  t.match(at({ deposit_count: 3, deposit_total: 100, last_deposit_at: daysAgo(12) }), { action: 'engagement_mission', priority: 'medium', channelHint: 'push' })
  t.match(at({ deposit_count: 10, deposit_total: 300, last_seen_at: daysAgo(0), event_count: 5000 }), { action: 'loyalty_reward', priority: 'low' })
  for (const nba of [at({}), at({ created_at: daysAgo(1) })]) t.type(nba.reason, 'string')
})

t.test('the channel hint respects consent', async (t) => {
  const refused = { granted: false, at: null }
  const granted = { granted: true, at: null }
  t.equal(marketingChannel(player()), 'email')
  t.equal(marketingChannel(player({ has_email: false })), 'any', 'nothing known')
  t.equal(marketingChannel(player({ has_email: false, consent: { push: granted } })), 'push')
  t.equal(marketingChannel(player({ consent: { email: refused } })), 'push', 'email refused, push not refused')
  t.equal(marketingChannel(player({ consent: { email: refused, push: refused } })), 'any')
  const nba = nextBestAction(player({ deposit_count: 3, deposit_total: 100, last_deposit_at: daysAgo(12), consent: { push: refused } }), NOW)
  t.equal(nba.action, 'engagement_mission')
  t.equal(nba.channelHint, 'email', 'no push when push was refused')
})

import t from 'tap'
import { ALLOWED_MOVES, CAMPAIGN_STATUSES, checkTransition, isTerminal, type CampaignStatus } from '../../src/campaigns/status.ts'
import { SPEC_MOVES } from './spec-table.ts'

const TABLE = SPEC_MOVES as [CampaignStatus, CampaignStatus][]

t.test('every move of the spec table is allowed', async (t) => {
  for (const [from, to] of TABLE) t.same(checkTransition(from, to), { ok: true, from, to }, `${from} → ${to}`)
})

t.test('every move not in the table is disallowed, naming from, to and the allowed targets', async (t) => {
  for (const from of CAMPAIGN_STATUSES) {
    for (const to of CAMPAIGN_STATUSES) {
      if (TABLE.some(([f, x]) => f === from && x === to)) continue
      const allowed = TABLE.filter(([f]) => f === from).map(([, x]) => x)
      t.same(checkTransition(from, to), { ok: false, from, to, allowed }, `${from} → ${to}`)
    }
  }
})

t.test('a move to the current status is disallowed', async (t) => {
  for (const s of CAMPAIGN_STATUSES) t.equal(checkTransition(s, s).ok, false, s)
})

t.test('completed and cancelled are terminal, and only they are', async (t) => {
  t.same(CAMPAIGN_STATUSES.filter(isTerminal), ['completed', 'cancelled'])
  t.same(ALLOWED_MOVES.completed, [])
  t.same(ALLOWED_MOVES.cancelled, [])
})

t.test('cancelled (the DELETE move) is reachable only from scheduled, running and paused', async (t) => {
  t.same(CAMPAIGN_STATUSES.filter((s) => checkTransition(s, 'cancelled').ok), ['scheduled', 'running', 'paused'])
})

t.test('the allowed list in a refusal is a copy, not the table itself', async (t) => {
  const r = checkTransition('running', 'draft')
  if (r.ok) {
    t.fail('expected a refusal')
    return
  }
  r.allowed.push('draft')
  t.same(ALLOWED_MOVES.running, ['paused', 'cancelled'])
})

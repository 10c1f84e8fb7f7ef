// Mapping-rule globs without backtracking (src/events/glob.ts): the same answers as the regular expression
// they replace, in time linear in the event type, and a cap on wildcards per rule at the admin API.
import t from 'tap'
import { compileGlob, MAX_GLOB_WILDCARDS } from '../../src/events/glob.ts'
import { compileMapping } from '../../src/events/mapping.ts'
import { startHarness } from '../helpers/harness.ts'

/** What rules meant before: the glob as an anchored regular expression (correct, but backtracking). */
const reference = (pattern: string) =>
  new RegExp(`^${pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`, 's')

t.test('the same answers as the regular expression, on fixed and random cases', async (t) => {
  const fixed: [string, string, boolean][] = [
    ['*', '', true], ['*', 'anything', true], ['a*', 'a', true], ['*a', 'ba', true], ['a*a', 'a', false],
    ['a*a', 'aa', true], ['ab*ba', 'aba', false], ['ab*ba', 'abba', true], ['*.*', 'x.y', true], ['x.y', 'xzy', false],
    ['test_*', 'test_', true], ['*_ping*', 'a_ping_b', true], ['**a**', 'a', true], ['a*b*c', 'aXbYc', true], ['a*b*c', 'acb', false],
    ['*ab*ab*', 'abab', true], ['*ab*ab*', 'aab', false], ['*aba*', 'abxba', false],
  ]
  for (const [pattern, text, expected] of fixed) t.equal(compileGlob(pattern)(text), expected, `${pattern} ~ ${JSON.stringify(text)}`)
  // A small alphabet makes overlaps and near-misses common.
  let seed = 17
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n)
  const word = (len: number, alphabet: string) => Array.from({ length: len }, () => alphabet[random(alphabet.length)]).join('')
  let disagreements = 0
  for (let i = 0; i < 20_000; i++) {
    const pattern = word(1 + random(8), 'ab*')
    const text = word(random(12), 'ab')
    if (compileGlob(pattern)(text) !== reference(pattern).test(text)) disagreements++
  }
  t.equal(disagreements, 0, '20,000 random pattern/text pairs')
})

t.test('the worst pattern on a 128-character event type takes under a millisecond', async (t) => {
  // Near misses that make the regular expression backtrack: many `a`s and no `b`.
  const type = 'a'.repeat(128)
  const worst = [`${'*a'.repeat(MAX_GLOB_WILDCARDS - 1)}*b`, `${'*a'.repeat(MAX_GLOB_WILDCARDS - 2)}*b*`, '*a*a*a*a*b', `*${'a'.repeat(60)}*${'a'.repeat(60)}b*`]
  for (const pattern of worst) {
    const match = compileGlob(pattern)
    const rounds = 1000
    const started = performance.now()
    for (let i = 0; i < rounds; i++) match(type)
    const perCallMs = (performance.now() - started) / rounds
    t.ok(perCallMs < 1, `${pattern}: ${(perCallMs * 1000).toFixed(2)} µs per match`)
    t.equal(match(type), false)
  }
  // Through the mapping, as ingestion uses it (the memo is bypassed by distinct types).
  const mapping = compileMapping({ rules: [{ match: '*a*a*a*a*b', type: 'x' }] })
  const started = performance.now()
  for (let i = 0; i < 100; i++) mapping.resolve(`${'a'.repeat(125)}${String(i).padStart(3, '0')}`)
  t.ok((performance.now() - started) / 100 < 1, 'under a millisecond per event type through compileMapping')
})

t.test('the admin API refuses a rule with more wildcards than the cap, naming the field', async (t) => {
  const h = await startHarness(t)
  const tenant = await h.createTenant()
  const tooMany = `${'*a'.repeat(MAX_GLOB_WILDCARDS)}*`
  const refused = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: 'ok_*' }, { match: tooMany, action: 'ignore' }] })
  t.equal(refused.status, 400)
  t.match(refused.body.details.errors, [{ in: 'body', field: 'rules.1.match', message: /more than 8/ }])
  const atCap = `${'*a'.repeat(MAX_GLOB_WILDCARDS - 1)}*`
  const accepted = await h.admin('PUT', `/brands/${tenant.brand.id}/event-mapping`, { rules: [{ match: atCap, action: 'ignore' }] })
  t.equal(accepted.status, 200)
})

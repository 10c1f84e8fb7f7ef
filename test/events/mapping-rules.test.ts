// Pure rule evaluation and field derivation (no I/O).
import t from 'tap'
import { compileMapping, deriveFields, readPath } from '../../src/events/mapping.ts'
import { microsToDecimal, toMicros } from '../../src/events/transform.ts'

t.test('rules are tried in order; * matches any run of characters; default_action applies otherwise', async (t) => {
  const m = compileMapping({
    rules: [
      { match: 'dep_ok', type: 'deposit' },
      { match: 'test_*', action: 'reject' },
      { match: '*_ping', action: 'ignore' },
      { match: 'a*b*c', type: 'login' },
      { match: 'x.y', type: 'logout' },
    ],
    default_action: 'accept',
  })
  t.match(m.resolve('dep_ok'), { action: 'store', type: 'deposit', rule: 0, unknown: false })
  t.match(m.resolve('test_ping'), { action: 'reject', rule: 1 })
  t.match(m.resolve('my_ping'), { action: 'ignore', rule: 2 })
  t.match(m.resolve('aXXbYYc'), { action: 'store', type: 'login' })
  t.match(m.resolve('xzy'), { action: 'store', type: 'xzy', unknown: true }, 'a dot is literal, not a regex')
  t.match(m.resolve('login'), { action: 'store', type: 'login', rule: -1, unknown: false })
  t.match(m.resolve('custom'), { action: 'store', unknown: true })
  t.match(compileMapping({ rules: [], default_action: 'reject' }).resolve('login'), { action: 'reject' })
  t.match(compileMapping({ rules: [{ match: 'foo' }] }).resolve('foo'), { action: 'store', type: 'foo', unknown: false }, 'matched means mapped, not unknown')
})

t.test('canonical fields come from payload by name, overridden by rule paths', async (t) => {
  const event = { player_id: 'p', event_type: 'dep', payload: { amount: 5, amt: '7.5', currency: 'EUR', meta: { m: 'card' }, extra: 1 } }
  t.same(deriveFields(event, 'deposit', undefined), { amount: 5, currency: 'EUR' })
  t.same(deriveFields(event, 'deposit', { match: 'dep', fields: { amount: 'payload.amt', method: 'payload.meta.m', country: 'payload.none' } }), { amount: '7.5', currency: 'EUR', method: 'card' })
  t.same(deriveFields(event, 'custom', undefined), {})
  t.equal(readPath(event, 'payload.meta.m'), 'card')
  t.equal(readPath(event, 'player_id.length'), undefined)
})

t.test('money is summed exactly', async (t) => {
  t.equal(toMicros('0.1') + toMicros(0.2), toMicros(0.3))
  t.equal(microsToDecimal(toMicros('10.5') + toMicros('0.25')), '10.75')
  t.equal(microsToDecimal(toMicros(-3.000001)), '-3.000001')
  t.ok(Number.isNaN(toMicros('abc')))
  t.ok(Number.isNaN(toMicros(null)))
})

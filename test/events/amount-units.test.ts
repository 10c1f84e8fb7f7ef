// Amounts in ClickHouse's Decimal(38, 8) exactly as the operator wrote them (src/events/transform.ts, toUnits8).
import t from 'tap'
import { toUnits8 } from '../../src/events/transform.ts'

t.test('units of 1e-8, from numbers and strings, half away from zero beyond 8 decimals', async (t) => {
  const cases: [unknown, bigint][] = [
    [0.12345678, 12345678n],
    [0.00000001, 1n],
    ['0.00000001', 1n],
    [1e-8, 1n],
    [1.5e-7, 15n],
    ['1.5E-7', 15n],
    [0.000000005, 1n],
    [0.0000000049, 0n],
    [-0.000000005, -1n],
    ['-12.3456789', -1234567890n],
    [999999999.99, 99999999999000000n],
    [1e9, 100000000000000000n],
    ['1e9', 100000000000000000n],
    ['  7 ', 700000000n],
    ['.5', 50000000n],
    ['5.', 500000000n],
    ['+2.25', 225000000n],
    [0.1 + 0.2, 30000000n],
    ['0.123456785', 12345679n],
    ['0.1234567849999', 12345678n],
    ['0x10', 1600000000n],
    [`0.${'0'.repeat(60)}1`, 0n],
    ['1e-9999', 0n],
    [1234567.12345678, 123456712345678n],
    [9999999.99999999, 999999999999999n],
    [12345678.12345678, 1234567812345678n],
    [0.1234567, 12345670n],
    [0, 0n],
    ['-0', 0n],
  ]
  for (const [v, units] of cases) t.equal(toUnits8(v), units, JSON.stringify(v))
})

t.test('a long amount string counts as its number, not as 0', async (t) => {
  t.equal(toUnits8(`12.5${'0'.repeat(40)}`), 1250000000n)
  t.equal(toUnits8(''), 0n)
  t.equal(toUnits8('.'), 0n)
})

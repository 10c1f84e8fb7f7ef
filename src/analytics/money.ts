// Exact money per currency. ClickHouse sums Decimal(38, 8); figures arrive as decimal strings (or JSON
// numbers inside maps) and are combined here as integers of 1e-8 units, never as floats.
export type Money = Record<string, number>

const SCALE = 100_000_000n

/** A decimal string or number ("12.5", "-0.00000001", 1e-8) as an exact count of 1e-8 units. */
export function units(value: string | number): bigint {
  const s = typeof value === 'number' ? value.toFixed(8) : value.trim()
  const m = /^(-?)(\d+)(?:\.(\d{1,8})\d*)?$/.exec(s)
  if (!m) throw new Error(`not a decimal amount: ${s}`)
  const whole = BigInt(m[2] as string) * SCALE + BigInt(((m[3] ?? '') + '00000000').slice(0, 8))
  return m[1] ? -whole : whole
}

/** Units back to a JSON number (the shortest decimal the double round-trips to, e.g. 125.5). */
export function toNumber(u: bigint): number {
  const neg = u < 0n
  const a = neg ? -u : u
  const frac = (a % SCALE).toString().padStart(8, '0').replace(/0+$/, '')
  return Number(`${neg ? '-' : ''}${a / SCALE}${frac ? `.${frac}` : ''}`)
}

/** ISO 4217's code for "no currency": where analytics reports amounts that came without one. */
export const NO_CURRENCY = 'XXX'

/** A per-currency accumulator of exact units. */
export class MoneyMap {
  readonly by = new Map<string, bigint>()
  add(currency: string, amount: bigint | string | number, sign: 1n | -1n = 1n): this {
    // An amount sent without a currency (or with one that is no code) is money all the same: reported
    // under ISO 4217's XXX ("no currency"), never dropped. The profile counts it in the player's own
    // currency, which ClickHouse does not know per event (docs/analytics.md).
    const code = currency || NO_CURRENCY
    const u = typeof amount === 'bigint' ? amount : units(amount)
    this.by.set(code, (this.by.get(code) ?? 0n) + sign * u)
    return this
  }
  addMap(map: Record<string, string | number> | undefined, sign: 1n | -1n = 1n): this {
    for (const [c, v] of Object.entries(map ?? {})) this.add(c, v, sign)
    return this
  }
  plus(other: MoneyMap, sign: 1n | -1n = 1n): MoneyMap {
    const out = new MoneyMap()
    for (const [c, v] of this.by) out.add(c, v)
    for (const [c, v] of other.by) out.add(c, v, sign)
    return out
  }
  /** `{ "EUR": 125.5 }`: currencies with a non-zero figure, sorted. */
  toJSON(): Money {
    const out: Money = {}
    for (const c of [...this.by.keys()].sort()) {
      const v = this.by.get(c) as bigint
      if (v !== 0n) out[c] = toNumber(v)
    }
    return out
  }
  /** Each currency's figure divided by n, rounded half away from zero to 1e-8 ({} when n is 0). */
  per(n: number): Money {
    const out: Money = {}
    if (n <= 0) return out
    const d = BigInt(n)
    for (const [c, v] of [...this.by].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (v === 0n) continue
      out[c] = toNumber(divideRounded(v, d))
    }
    return out
  }
}

/** a / b rounded half away from zero (b ≠ 0). */
export function divideRounded(a: bigint, b: bigint): bigint {
  const neg = a < 0n !== b < 0n
  const x = a < 0n ? -a : a
  const y = b < 0n ? -b : b
  const q = (2n * x + y) / (2n * y)
  return neg ? -q : q
}

/** (gain − cost) / cost, exactly, rounded half away from zero at 1e-6; null when cost is 0. */
export function roiOf(gain: bigint, cost: bigint): number | null {
  if (cost === 0n) return null
  return Number(divideRounded((gain - cost) * 1_000_000n, cost)) / 1e6
}

export const moneyOf = (map: Record<string, string | number> | undefined) => new MoneyMap().addMap(map)

/**
 * GGR = (bets − bet rollbacks) − (wins − win rollbacks); NGR = GGR − bonus costs (contract.md).
 */
export function ggrOf(m: { bets: MoneyMap; wins: MoneyMap; bet_rollbacks: MoneyMap; win_rollbacks: MoneyMap }): MoneyMap {
  return m.bets.plus(m.bet_rollbacks, -1n).plus(m.wins, -1n).plus(m.win_rollbacks)
}

// Rule validation is pure; the compilation checks use the database only to describe and run the query.
import t from 'tap'
import { lifecycleStage } from '../../src/players/scoring.ts'
import { scoringInputOf } from '../../src/players/service.ts'
import type { PlayerWithProfileRow } from '../../src/players/queries.ts'
import { FIELDS, lifecycleStageSql } from '../../src/segments/fields.ts'
import { compileRules, resolveTime, RULE_LIMITS, validateRules } from '../../src/segments/rules.ts'
import { startHarness } from '../helpers/harness.ts'

const badRules = (type: 'dynamic' | 'static', rules: unknown) => {
  try {
    validateRules(type, rules as Record<string, unknown>)
    return undefined
  } catch (err) {
    return (err as { details: { errors: { field: string; message: string }[] } }).details.errors
  }
}

t.test('validateRules accepts the grammar and names every problem', async (t) => {
  t.same(validateRules('dynamic', undefined), {})
  t.same(validateRules('dynamic', {}), {})
  t.same(validateRules('static', undefined), { player_ids: [] })
  const nested = { all: [{ any: [{ field: 'country', op: 'eq', value: 'IT' }, { not: { field: 'metadata.a.b', op: 'exists' } }] }] }
  t.same(validateRules('dynamic', nested), nested)
  t.same(badRules('dynamic', { all: [{ field: 'x', op: 'eq', value: 1 }, { field: 'country', op: 'like', value: 'I' }] }), [
    { in: 'body', field: 'rules.all.0.field', message: "unknown field 'x'" },
    { in: 'body', field: 'rules.all.1.op', message: "unknown operator 'like'" },
  ])
  t.match(badRules('dynamic', { field: 'metadata.', op: 'exists' }), [{ message: "unknown field 'metadata.'" }])
  t.match(badRules('dynamic', { field: 'metadata.a..b', op: 'exists' }), [{ field: 'rules.field' }])
  t.match(badRules('dynamic', { field: 'deposit_count', op: 'exists', value: 'yes' }), [{ message: /boolean/ }])
  t.match(badRules('dynamic', { field: 'status', op: 'in', value: ['active', 'gone'] }), [{ field: 'rules.value.1' }])
  t.match(badRules('dynamic', { field: 'email', op: 'contains', value: '' }), [{ message: /empty/ }])
  t.match(badRules('dynamic', { field: 'metadata.x', op: 'eq', value: { nested: true } }), [{ message: /string, number or boolean/ }])
  t.match(badRules('dynamic', { field: 'metadata.x', op: 'gt', value: true }), [{ message: /number or a string/ }])
  t.match(badRules('dynamic', { field: 'consent.email', op: 'gt', value: true }), [{ message: /does not apply/ }])
  t.match(badRules('dynamic', { all: ['x'] }), [{ field: 'rules.all.0', message: /must be an object/ }])

  let deep: unknown = { field: 'country', op: 'exists' }
  for (let i = 0; i < RULE_LIMITS.depth + 1; i++) deep = { not: deep }
  t.match(badRules('dynamic', deep), [{ message: /deeper/ }])
  const many = { any: Array.from({ length: RULE_LIMITS.conditions + 5 }, () => ({ field: 'country', op: 'exists' })) }
  t.match(badRules('dynamic', many), [{ message: /more than/ }])

  t.match(badRules('static', { player_ids: 'x' }), [{ field: 'rules.player_ids' }])
  t.match(badRules('static', { player_ids: [], extra: 1 }), [{ field: 'rules.extra' }])
  const id = '6F9619FF-8B86-4011-B42D-00C04FC964FF'
  t.same(validateRules('static', { player_ids: [id, id.toLowerCase()] }), { player_ids: [id.toLowerCase()] })
})

t.test('resolveTime: ISO date-times and times relative to now', async (t) => {
  const now = new Date('2026-06-01T00:00:00Z')
  t.equal(resolveTime('now', now)?.toISOString(), '2026-06-01T00:00:00.000Z')
  t.equal(resolveTime('now-30d', now)?.toISOString(), '2026-05-02T00:00:00.000Z')
  t.equal(resolveTime('now+2h', now)?.toISOString(), '2026-06-01T02:00:00.000Z')
  t.equal(resolveTime('now-1w', now)?.toISOString(), '2026-05-25T00:00:00.000Z')
  t.equal(resolveTime('2026-01-02T03:04:05+01:00', now)?.toISOString(), '2026-01-02T02:04:05.000Z')
  t.equal(resolveTime('2026-01-02', now)?.toISOString(), '2026-01-02T00:00:00.000Z')
  for (const bad of ['yesterday', 'now-30', 'now-3y', '2026-13-45T00:00:00Z', '1700000000', '0000-01-01', 'now+999999w', 'now-999999d']) {
    t.equal(resolveTime(bad, now), undefined, bad)
  }
  t.equal(resolveTime('0001-01-01', now)?.toISOString(), '0001-01-01T00:00:00.000Z')
  t.equal(resolveTime('9999-12-31T23:59:59Z', now)?.toISOString(), '9999-12-31T23:59:59.000Z')
})

t.test('compiled rules', async (t) => {
  const h = await startHarness(t)
  const sql = h.app.ctx.sql
  const now = new Date()

  t.test('user values are bound parameters, never SQL text', async (t) => {
    const evil = "x'); drop table players; --"
    const rules = validateRules('dynamic', {
      any: [
        { field: 'email', op: 'contains', value: evil },
        { field: 'country', op: 'in', value: [evil] },
        { field: `metadata.${evil.replace(/[.\s]/g, '_')}`, op: 'eq', value: evil },
        { field: 'last_login_at', op: 'gt', value: 'now-7d' },
        { field: 'deposit_total', op: 'gte', value: 12.5 },
      ],
    })
    const query = () => sql`select p.id from players p left join player_profiles pp on pp.player_id = p.id where ${compileRules(sql, rules, now)}`
    const described = await query().describe()
    t.notMatch(described.string, /drop table|12\.5|'x'/i)
    t.ok(described.types.length >= 5, 'one parameter per value')
    t.ok(Array.isArray(await query()), 'and it runs')
  })

  t.test('every field compiles and runs with each of its operators', async (t) => {
    const sample: Record<string, unknown> = { string: 'a', enum: undefined, number: 1, datetime: 'now-1d', boolean: true }
    for (const [name, def] of Object.entries(FIELDS)) {
      const value = def.type === 'enum' ? def.values![0] : sample[def.type]
      const conds = [{ field: name, op: 'eq', value }, { field: name, op: 'neq', value }, { field: name, op: 'exists' }]
      if (def.type === 'number' || def.type === 'datetime') conds.push({ field: name, op: 'lte', value })
      const rules = validateRules('dynamic', { any: conds })
      await sql`select count(*) from players p left join player_profiles pp on pp.player_id = p.id where ${compileRules(sql, rules, now)}`
    }
    t.pass(`${Object.keys(FIELDS).length} fields`)
  })

  t.test('lifecycle_stage in SQL agrees with scoring.ts', async (t) => {
    const tenant = await h.createTenant()
    const day = 86_400_000
    const at = (d: number | null) => (d === null ? null : new Date(now.getTime() - d * day))
    const cases: { created: number; deposits: number; total: number; lastDeposit: number | null; lastLogin: number | null; lastSeen: number | null }[] = []
    for (const created of [1, 20, 60]) {
      for (const [deposits, total] of [[0, 0], [1, 10], [3, 100], [4, 5000], [2, 4999.99]] as const) {
        for (const last of [null, 0.5, 13.9, 14.1, 29.9, 30.1, 90]) {
          cases.push({ created, deposits, total, lastDeposit: deposits ? last : null, lastLogin: last === null ? null : last + 1, lastSeen: null })
        }
      }
    }
    for (const [i, c] of cases.entries()) {
      const res = await h.request('POST', '/players', { key: tenant.key, body: { external_id: `c${i}` } })
      const id = res.body.data.id
      await sql`update players set created_at = ${at(c.created)} where id = ${id}`
      await sql`update player_profiles set deposit_count = ${c.deposits}, deposit_total = ${c.total},
        last_deposit_at = ${at(c.lastDeposit)}, last_login_at = ${at(c.lastLogin)}, last_seen_at = ${at(c.lastSeen)} where player_id = ${id}`
    }
    const rows = await sql<(PlayerWithProfileRow & { sql_stage: string })[]>`
      select p.*, pp.*, ${lifecycleStageSql({ sql, now })} as sql_stage
      from players p left join player_profiles pp on pp.player_id = p.id where p.tenant_id = ${tenant.id}`
    t.equal(rows.length, cases.length)
    const mismatches = rows.filter((r) => lifecycleStage(scoringInputOf(r), now) !== r.sql_stage)
    t.same(mismatches.map((r) => r.external_id), [])
    t.same(new Set(rows.map((r) => r.sql_stage)), new Set(['new', 'ftd', 'active', 'vip', 'at_risk', 'churned']), 'every stage is exercised')
  })
})

// A rollup added by an upgrade is backfilled from the events already stored (clickhouse/0010, 0013, 0015:
// each migration inserts what its view would have written). Two chDB stores get the same events: one
// migrated to the release before the rollups and upgraded after the events are in (the backfill), one
// migrated first and fed in several inserts (the views). Every rollup table must hold the same thing.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openClickHouse, type ClickHouse } from '../../src/db/clickhouse.ts'
import { migrateClickHouse } from '../../src/db/migrate.ts'
import { createLogger } from '../../src/lib/log.ts'

const TENANT = '0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3'
const BRANDS = ['fedcba98-7654-4321-8fed-cba987654321', '12345678-9abc-4def-8123-456789abcdef']
const EVENTS = 6_000
/** The first migration that adds a rollup: the store "before the upgrade" has only the events table. */
const FIRST_ROLLUP_MIGRATION = '0010'

/** A fresh chDB store for fn, closed after it (chDB holds one data directory per process at a time). */
async function withStore<T>(fn: (ch: ClickHouse) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'respin-backfill-'))
  const ch = await openClickHouse({ clickhouseUrl: undefined, dataDir: dir }, createLogger('silent'))
  try {
    return await fn(ch)
  } finally {
    await ch.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

// Events numbered from..to-1: every type the rollups read, two brands, two currencies, failed deposits,
// games on game events (and now and then on others), attributes on some, ~4 h apart over ~2.7 years (so
// every time differs: argMax never meets a tie), 150 players.
const insertEvents = (ch: ClickHouse, from: number, to: number) =>
  ch.command(
    `INSERT INTO events (tenant_id, brand_id, event_id, player_id, event_type, source_type, event_time, received_at, seq,
                         amount, currency, status, game, provider, category, bonus_id, country, device, os, browser, platform)
     SELECT toUUID({tenant:String}), if(number % 7 = 0, toUUID({b1:String}), toUUID({b0:String})), concat('e', toString(number)),
            concat('p', toString(number % 150)) AS player,
            ['registration', 'deposit', 'withdrawal', 'bet', 'win', 'bet_rollback', 'win_rollback', 'game_start',
             'bonus_completed', 'login', 'deposit', 'bet', 'win'][number % 13 + 1] AS type,
            type, addMilliseconds(toDateTime64('2024-03-01 00:00:00', 3, 'UTC'), number * 14400037) AS at,
            addMilliseconds(at, 1500), number + 1,
            if(type IN ('registration', 'login', 'game_start'), toDecimal128('0', 8), toDecimal128(concat(toString(number % 997), '.25'), 8)),
            if(type IN ('registration', 'login', 'game_start'), '', if(number % 3 = 0, 'USD', 'EUR')),
            if(type = 'deposit' AND number % 5 = 0, 'failed', ''),
            if(type IN ('bet', 'win', 'bet_rollback', 'win_rollback', 'game_start'), concat('game-', toString(number % 17)),
               if(number % 29 = 0, 'game-3', '')),
            if(type IN ('bet', 'win', 'bet_rollback', 'win_rollback', 'game_start'), concat('prov-', toString(number % 5)), ''),
            if(type IN ('bet', 'win', 'bet_rollback', 'win_rollback', 'game_start'), ['slots', 'live', 'table'][number % 3 + 1], ''),
            if(type = 'bonus_completed', concat('bonus-', toString(number % 4)), ''),
            if(type IN ('registration', 'login') AND number % 2 = 0, ['IT', 'DE', 'MT'][number % 3 + 1], ''),
            if(type = 'login', ['mobile', 'desktop'][number % 2 + 1], ''),
            if(type = 'login' AND number % 3 = 0, 'ios', ''),
            if(type = 'login' AND number % 4 = 0, 'safari', ''),
            if(type = 'registration', 'web', '')
     FROM numbers({from:UInt64}, {count:UInt64})`,
    { tenant: TENANT, b0: BRANDS[0], b1: BRANDS[1], from, count: to - from },
  )

/** Every rollup table's content, merged (OPTIMIZE FINAL) and in a comparable form: aggregate states finalized. */
async function rollups(ch: ClickHouse): Promise<Record<string, string[]>> {
  const tables = await ch.query<{ name: string }>(
    "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE 'rollup\\_%' AND engine != 'MaterializedView' ORDER BY name",
  )
  const out: Record<string, string[]> = {}
  for (const { name } of tables) {
    await ch.command(`OPTIMIZE TABLE ${name} FINAL`)
    const columns = await ch.query<{ name: string; type: string }>(
      'SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {table:String} ORDER BY position',
      { table: name },
    )
    const values = columns.map((c) => (c.type.startsWith('AggregateFunction(') ? `toString(finalizeAggregation(${c.name}))` : `toString(${c.name})`))
    const rows = await ch.query<{ row: string }>(`SELECT concat(${values.join(", '|', ")}) AS row FROM ${name} ORDER BY row`)
    out[name] = rows.map((r) => r.row)
  }
  return out
}

t.test('rollups added by an upgrade are backfilled exactly as their views would have filled them', async (t) => {
  const expected = await withStore(async (live) => {
    await migrateClickHouse(live)
    // Several inserts: the views write partial rows per insert, which merging folds like the backfill's.
    for (let from = 0; from < EVENTS; from += 1_000) await insertEvents(live, from, from + 1_000)
    return rollups(live)
  })
  const names = Object.keys(expected)
  for (const table of ['rollup_buckets', 'rollup_player_buckets', 'rollup_player_totals', 'rollup_player_months', 'rollup_players', 'rollup_game_months', 'rollup_player_keys']) {
    t.ok((expected[table]?.length ?? 0) > 0, `${table} is compared, with rows`)
  }

  await withStore(async (upgraded) => {
    t.same(await migrateClickHouse(upgraded, { before: FIRST_ROLLUP_MIGRATION }), ['0001_events.sql', '0002_events_insert_dedup.sql'], 'the store before the rollups')
    await insertEvents(upgraded, 0, EVENTS)
    const applied = await migrateClickHouse(upgraded)
    t.ok(applied.includes('0015_player_keys.sql') && applied.includes('0013_game_rollup.sql'), "the upgrade ran the rollups' migrations")
    const got = await rollups(upgraded)
    t.same(Object.keys(got), names, 'the same rollup tables')
    for (const table of names) t.same(got[table], expected[table], `${table}: backfilled = filled by its view`)

    // A second start finds every migration applied and adds nothing (the backfills are guarded too).
    t.same(await migrateClickHouse(upgraded), [], 'nothing left to apply')
    t.same(await rollups(upgraded), expected, 'and nothing added twice')
  })
})

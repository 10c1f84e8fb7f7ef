// `npm run migrate`: applies sql/ and clickhouse/ migrations to the configured stores and exits.
import { loadConfig } from '../config.ts'
import { createLogger } from '../lib/log.ts'
import { openClickHouse } from './clickhouse.ts'
import { migrateClickHouse, migratePostgres } from './migrate.ts'
import { openPostgres } from './postgres.ts'

const config = loadConfig()
const log = createLogger(config.logLevel)
const pg = await openPostgres({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, max: 2 }, log)
const ch = await openClickHouse({ clickhouseUrl: config.clickhouseUrl, dataDir: config.dataDir }, log)
try {
  const postgres = await migratePostgres(pg.sql)
  const clickhouse = await migrateClickHouse(ch)
  log.info({ postgres, clickhouse }, postgres.length + clickhouse.length ? 'migrations applied' : 'nothing to migrate')
} finally {
  await ch.close()
  await pg.close()
}

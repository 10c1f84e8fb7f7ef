// Run by the harness in a child process (chDB opens one data directory per process): migrates an empty
// embedded ClickHouse directory that test processes then copy (harness.ts, seedEmbeddedClickHouse).
import { openClickHouse } from '../../src/db/clickhouse.ts'
import { migrateClickHouse } from '../../src/db/migrate.ts'
import { createLogger } from '../../src/lib/log.ts'

const dataDir = process.argv[2]
if (!dataDir) throw new Error('usage: build-chdb-template.ts <data dir>')
const ch = await openClickHouse({ clickhouseUrl: undefined, dataDir }, createLogger('silent'))
await migrateClickHouse(ch)
await ch.close()

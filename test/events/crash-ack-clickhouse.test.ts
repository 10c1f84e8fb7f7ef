// INGEST_ACK_AFTER=clickhouse: see crash.ts.
import { crashTest } from './crash.ts'

crashTest('clickhouse')

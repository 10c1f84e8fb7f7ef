// INGEST_ACK_AFTER=postgres: see crash.ts.
import { crashTest } from './crash.ts'

crashTest('postgres')

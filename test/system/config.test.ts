// The ingestion acknowledgement settings: defaults, accepted values, and a refused value named.
import t from 'tap'
import { loadConfig } from '../../src/config.ts'

t.test('INGEST_ACK_AFTER and INGEST_FLUSH_INTERVAL_MS', async (t) => {
  const defaults = loadConfig({})
  t.equal(defaults.ingestAckAfter, 'postgres')
  t.equal(defaults.ingestFlushIntervalMs, 1000)
  const spool = loadConfig({ INGEST_ACK_AFTER: 'postgres', INGEST_FLUSH_INTERVAL_MS: '250' })
  t.equal(spool.ingestAckAfter, 'postgres')
  t.equal(spool.ingestFlushIntervalMs, 250)
  t.throws(() => loadConfig({ INGEST_ACK_AFTER: 'redis' }), /invalid configuration: INGEST_ACK_AFTER/)
  t.throws(() => loadConfig({ INGEST_FLUSH_INTERVAL_MS: '0' }), /INGEST_FLUSH_INTERVAL_MS/)
})

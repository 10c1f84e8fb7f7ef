-- Spooled events (INGEST_ACK_AFTER=postgres) are inserted with an insert_deduplication_token per flush
-- batch, so a flush redone after a crash stores nothing twice. Non-replicated MergeTree deduplicates only
-- within this window of recent inserts; a spool flush happens about once a second per process, so 10,000
-- inserts cover hours, far more than a restart takes. Ordinary inserts carry unique seq values, so the
-- block hashes this keeps never drop a legitimate insert.
ALTER TABLE events MODIFY SETTING non_replicated_deduplication_window = 10000;

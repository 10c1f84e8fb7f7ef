-- Spooled rows may be deflate-compressed (raw deflate, level 1, done on the ingest workers): RowBinary
-- events shrink ~5x (414 → 82 bytes each in the bench workload), which cuts the PostgreSQL CPU per
-- spooled event (TOAST chunks, WAL, the flusher's reads and deletes) from ~7.5 to ~4.7 µs and the spool's
-- size at its backlog limit from ~0.8 GB to ~0.16 GB. Rows written before this column keep 'rowbinary'.
alter table event_spool add column encoding text not null default 'rowbinary'
  check (encoding in ('rowbinary', 'rowbinary-deflate'));

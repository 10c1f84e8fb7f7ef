-- The event spool (INGEST_ACK_AFTER=postgres, docs/ingestion.md): each row holds one ingest group's
-- events as ClickHouse RowBinary rows, committed in the same transaction as that group's players and
-- profiles. A flusher moves the rows into ClickHouse in large inserts and deletes them.
--   sink:   which ClickHouse the rows are for (processes sharing PostgreSQL may write to different ones)
--   writer: the process that committed the row (dedupe verification flushes other writers' rows first)
--   batch:  set when a flusher claims the row; the ClickHouse insert's deduplication token, so a flush
--           redone after a crash cannot store its events twice
create table event_spool (
  id          bigserial primary key,
  sink        text not null,
  writer      uuid not null,
  rows        bytea not null,
  row_count   integer not null check (row_count > 0),
  batch       bigint,
  claimed_at  timestamptz,
  created_at  timestamptz not null default now()
);
-- No pglz: compressing every group's rows costs hot-path CPU to save space for rows that live a second.
alter table event_spool alter column rows set storage external;
create index event_spool_sink on event_spool (sink, id) where batch is null;
create index event_spool_batch on event_spool (batch) where batch is not null;
create sequence event_spool_batch_seq;

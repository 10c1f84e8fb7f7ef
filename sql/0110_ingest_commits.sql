-- Ingest groups committed, by a key the writer chose before sending the transaction. When the connection
-- drops while the COMMIT is on its way (a failover, pg_terminate_backend), the writer cannot tell whether
-- it committed; it looks its key up here before writing the group again, and the primary key refuses a
-- second commit of the same group, so a group's events and profile deltas are never stored twice. Rows are
-- needed only for seconds; the spool's upkeep deletes them after ten minutes (src/events/spool.ts).
create table ingest_commits (
  group_key uuid primary key,
  -- The spool batch claimed in the transaction (INGEST_ACK_AFTER=clickhouse), to insert it after all.
  batch bigint,
  committed_at timestamptz not null default now()
);

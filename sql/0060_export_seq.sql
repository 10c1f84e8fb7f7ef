-- Export order of ClickHouse events (docs/analytics.md, "Insertion order"). Every event gets its `seq`
-- when the spool moves it to ClickHouse, from a counter per ClickHouse (sink), in the claim that precedes
-- the insert; the spool row keeps that number (seq_base: its first row's seq, the others follow) until
-- the insert has returned and the row is deleted. So every seq below
--   least(export_seq.next, min(seq_base) of the sink's spool rows not set aside)
-- is in ClickHouse already or never will be: exports read only below that watermark, and a cursor never
-- passes a row that becomes visible later.
create table export_seq (
  sink text primary key,
  next bigint not null check (next > 0)
);
alter table event_spool add column seq_base bigint;
create index event_spool_seq_base on event_spool (sink, seq_base) where seq_base is not null and quarantined_at is null;

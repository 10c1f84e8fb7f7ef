-- Export read-ahead (src/exports/service.ts): a process keeps the pages after the one it served, read in
-- the same ClickHouse query, for the client's next requests. Rows below the watermark never change by
-- ingestion, but an erasure (src/players/data-rights.ts) rewrites a player's events and the retention
-- drops months of them. Each such change bumps the sink's epoch after it is done, and a page read under an
-- older epoch is never served.
alter table export_seq add column epoch bigint not null default 0;

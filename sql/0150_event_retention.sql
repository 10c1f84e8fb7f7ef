-- The ledger of EVENT_RETENTION_DAYS's month drops (src/events/retention.ts), per ClickHouse store (sink):
-- a drop opens a generation, records what the month added to the all-time player totals under it
-- (clickhouse/0012), drops the month everywhere and closes it. A drop left open by a crash is finished
-- under the same generation, so its subtraction is never counted twice.
create table if not exists event_retention_drops (
  sink       text not null,
  month      text not null,
  generation int not null,
  done_at    timestamptz,
  created_at timestamptz not null default now(),
  primary key (sink, month, generation)
);

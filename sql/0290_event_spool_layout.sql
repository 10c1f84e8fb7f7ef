-- Which column list a spool row's RowBinary bytes follow (src/events/event-rows.ts, EVENT_LAYOUT): rows
-- spooled before `extra_fields` (clickhouse/0016) are layout 1 and are inserted naming those columns.
alter table event_spool add column layout smallint not null default 1;

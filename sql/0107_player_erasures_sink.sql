-- Which ClickHouse an erasure job's events are in (ClickHouse.sinkId, like event_spool.sink): processes
-- sharing PostgreSQL may write to different ClickHouses (embedded chDB each), and only a process writing
-- to that one can pseudonymise them.
alter table player_erasures add column sink text not null default '';

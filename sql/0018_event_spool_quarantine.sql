-- A spool row whose events ClickHouse refuses as malformed data (a parse or type error: the same bytes are
-- refused at every attempt) is set aside instead of holding up every flush behind it. The flusher first
-- splits a refused batch into its groups, so that only the group at fault is set aside; that row keeps its
-- events and gets quarantined_at and ClickHouse's error. Such events were acknowledged (their profiles
-- are committed); an operator who has fixed the cause puts them back in the queue with
--   update event_spool set batch = null, claimed_at = null, quarantined_at = null, error = null
--   where quarantined_at is not null;
alter table event_spool add column quarantined_at timestamptz, add column error text;

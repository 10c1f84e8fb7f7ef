-- Ingestion updates every touched player's profile once per group (src/events/queries.ts updateProfiles),
-- and players on registration data and status changes. None of those updates changes an indexed column,
-- so PostgreSQL can make them HOT (heap-only: the new row version goes on the same page and no index is
-- touched), but only when that page has room. Leaving 20% of each page free keeps that room: an update then
-- costs no index insertions and its dead versions are pruned in place, without waiting for vacuum.
-- The setting applies to pages written from now on; existing full pages gain it as rows move (or at once
-- with VACUUM FULL at a quiet time, which locks the tables: not done here).
alter table player_profiles set (fillfactor = 80);
alter table players set (fillfactor = 80);

-- When the player's status was last set: the event time of an applied status_change, or now() for a change
-- through the API. A status_change to active older than it is ignored (a late retry never lifts a newer
-- self-exclusion); one to any other status always applies (events/queries.ts applyStatuses).
alter table players add column if not exists status_at timestamptz;

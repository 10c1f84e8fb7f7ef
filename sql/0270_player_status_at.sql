-- When the player's status was last set: the event time of an applied status_change, or now() for a change
-- through the API. A status_change to active older than it is ignored (a late retry never lifts a newer
-- self-exclusion); one to any other status always applies (events/queries.ts applyStatuses).
alter table players add column if not exists status_at timestamptz;
-- Players restricted before this column existed: as of their last change, so an older lift does not undo
-- the restriction (a null status_at lets any lift through). Only the few restricted rows are written.
update players set status_at = updated_at where status <> 'active' and status_at is null;

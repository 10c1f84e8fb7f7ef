-- Erasure jobs run on the work loop every other queue uses (src/engine/work-loop.ts): a due time and the
-- claim's owner, instead of a lease column of their own renewed by a timer of their own and guarded by the
-- attempts count. A claimed job is leased by pushing due_at forward; the loop renews it while the job runs
-- (ClickHouse mutations can queue for minutes), and each stage's state change is guarded by lease_owner.
alter table player_erasures add column due_at timestamptz, add column lease_owner text;
-- A job leased by a process running the old code keeps its lease's end; the rest are due at once.
update player_erasures set due_at = coalesce(lease_until, created_at);
alter table player_erasures alter column due_at set not null, alter column due_at set default now();
alter table player_erasures drop column lease_until;
drop index if exists player_erasures_due;
create index player_erasures_due on player_erasures (due_at) where state <> 'done';

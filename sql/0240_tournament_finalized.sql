-- When the engine ended a tournament: final ranks written, prizes granted, tournament.ended queued (once).
-- A tournament set `ended` through the API is ended by the engine's next tick (its finalized_at still
-- null), so that status always comes with its ranks and prizes. Those ended before this column existed
-- keep what they have.
alter table tournaments add column if not exists finalized_at timestamptz;
update tournaments set finalized_at = updated_at where status = 'ended' and finalized_at is null;
create index if not exists tournaments_to_finalize on tournaments (id) where status = 'ended' and finalized_at is null;

-- Runs and journey participants are worked off by the shared work loop (src/engine/work-loop.ts): a claim
-- pushes the due column (due_at, wake_at) to the end of the lease and writes the claim's token here.
alter table campaign_runs add column lease_owner text;
alter table campaign_participants add column lease_owner text;
-- The work loop's lease replaces the engine's own lease column.
alter table campaign_runs drop column leased_until;
alter table campaign_participants drop column leased_until;

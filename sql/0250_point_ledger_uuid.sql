-- A ledger entry's id in the API is a UUID like every resource's (spec, Conventions); the bigserial stays
-- the order of entries (newest first) and is never shown: it counted every tenant's entries.
-- A volatile default rewrites the table under an ACCESS EXCLUSIVE lock (migrations run in one transaction
-- at start, so a separate backfill would hold it as long): on a large ledger, run this migration with the
-- engines stopped (npm run migrate) before starting the new version.
alter table point_ledger add column if not exists entry_id uuid not null default gen_random_uuid();

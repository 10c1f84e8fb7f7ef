-- A ledger entry's id in the API is a UUID like every resource's (spec, Conventions); the bigserial stays
-- the order of entries (newest first) and is never shown: it counted every tenant's entries.
alter table point_ledger add column if not exists entry_id uuid not null default gen_random_uuid();

-- A ledger entry's id in the API is a UUID like every resource's (spec, Conventions); the bigserial stays
-- the order of entries (newest first) and is never shown: it counted every tenant's entries.
-- Added without a volatile default (that would rewrite the table under an ACCESS EXCLUSIVE lock while the
-- old processes still serve): the default applies to new rows, the backfill takes only row locks on an
-- append-only table, so credits and debits go on meanwhile.
alter table point_ledger add column if not exists entry_id uuid;
alter table point_ledger alter column entry_id set default gen_random_uuid();
update point_ledger set entry_id = gen_random_uuid() where entry_id is null;

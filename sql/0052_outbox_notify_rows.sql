-- The outbox trigger of sql/0050 fired for every INSERT statement, even those that inserted no row (the
-- ingestion CTEs run their outbox INSERT for every group), and a NOTIFY serialises commits on PostgreSQL's
-- notification queue. Notify only when the statement inserted rows.
create or replace function respin_outbox_notify() returns trigger language plpgsql as $$
begin
  if exists (select 1 from inserted_rows) then
    perform pg_notify('respin_outbox', '');
  end if;
  return null;
end $$;
drop trigger outbox_notify on outbox;
create trigger outbox_notify after insert on outbox referencing new table as inserted_rows
  for each statement execute function respin_outbox_notify();

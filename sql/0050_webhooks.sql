-- Outbound webhooks (issue 12): endpoints, and the persistent delivery queue the dispatcher works off
-- (src/webhooks/dispatcher.ts, on the shared work loop of src/engine/work-loop.ts).

create table webhook_endpoints (
  id              uuid primary key default gen_random_uuid(),
  tenant_id       uuid not null references tenants (id),
  -- null: tenant-wide (every brand's events); else only this brand's events.
  brand_id        uuid references brands (id),
  url             text not null,
  events          text[] not null,
  active          boolean not null default true,
  -- Signing secrets sealed by src/lib/secret-box.ts: the key is not in the database.
  secret_sealed   text not null,
  -- After a rotation the old secret keeps signing (second signature) until previous_secret_until.
  previous_secret_sealed text,
  previous_secret_until  timestamptz,
  -- Start of the current run of failed attempts (null after a success); 5 days of it deactivates.
  failing_since   timestamptz,
  deactivated_at  timestamptz,
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);
create index webhook_endpoints_tenant on webhook_endpoints (tenant_id, created_at desc, id desc);
-- Fan-out: the active endpoints of a tenant.
create index webhook_endpoints_active on webhook_endpoints (tenant_id) where active;

create table webhook_deliveries (
  id              uuid primary key default gen_random_uuid(),
  tenant_id       uuid not null references tenants (id),
  endpoint_id     uuid not null references webhook_endpoints (id) on delete cascade,
  -- The outbox row this delivery carries (null for pings); redeliveries name the delivery they repeat.
  outbox_id       bigint,
  redelivery_of   uuid,
  event           text not null,
  -- The exact body sent and signed, identical on every attempt and redelivery.
  body            text not null,
  status          text not null default 'pending' check (status in ('pending', 'successful', 'failed')),
  attempt_count   int not null default 0,
  next_attempt_at timestamptz default now(),
  -- Work-loop columns: when the row may be claimed next (a claim pushes it to the end of its lease),
  -- and the claim token of the process working on it.
  run_at          timestamptz not null default now(),
  lease_owner     text,
  -- [{ n, at, response_code, duration_ms, error, response_body }]
  attempts        jsonb not null default '[]',
  created_at      timestamptz not null default now(),
  completed_at    timestamptz
);
-- Fan-out happens once per (endpoint, outbox row), whichever process does it.
create unique index webhook_deliveries_once on webhook_deliveries (endpoint_id, outbox_id)
  where outbox_id is not null and redelivery_of is null;
create index webhook_deliveries_due on webhook_deliveries (run_at) where status = 'pending';
create index webhook_deliveries_list on webhook_deliveries (endpoint_id, created_at desc, id desc);
create index webhook_deliveries_done on webhook_deliveries (completed_at) where completed_at is not null;

-- Retention of the outbox: dispatched rows are pruned by age.
create index outbox_dispatched on outbox (dispatched_at) where dispatched_at is not null;

-- Wake the dispatchers of every process (LISTEN respin_outbox) when events are committed; one
-- notification per statement, folded per transaction by PostgreSQL.
create function respin_outbox_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('respin_outbox', '');
  return null;
end $$;
create trigger outbox_notify after insert on outbox for each statement execute function respin_outbox_notify();

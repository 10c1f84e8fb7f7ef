-- Transactional outbox: a feature inserts its platform event (player.created, campaign.created, ...) in the
-- same transaction as the change; the webhook dispatcher delivers from here.
create table outbox (
  id          bigint generated always as identity primary key,
  tenant_id   uuid not null references tenants (id),
  brand_id    uuid references brands (id),
  event       text not null,
  data        jsonb not null,
  created_at  timestamptz not null default now(),
  dispatched_at timestamptz
);
create index outbox_pending on outbox (id) where dispatched_at is null;
create index outbox_tenant on outbox (tenant_id, id);

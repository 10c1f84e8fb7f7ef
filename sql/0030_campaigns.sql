-- Campaigns (issue 4). A campaign belongs to one brand; the status machine lives in src/campaigns/status.ts
-- and every status change is a conditional UPDATE (where status = <expected>), so concurrent moves cannot
-- both succeed. target_segment_id is a plain uuid: segments are another feature, and the reference is
-- checked when the execution engine resolves the audience.
create table campaigns (
  id                 uuid primary key default gen_random_uuid(),
  tenant_id          uuid not null references tenants (id),
  brand_id           uuid not null references brands (id),
  name               text not null,
  description        text,
  status             text not null default 'draft'
                     check (status in ('draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled')),
  type               text not null check (type in ('one_shot', 'recurring', 'triggered', 'journey')),
  channels           text[] not null
                     check (cardinality(channels) >= 1 and channels <@ array['email', 'telegram', 'push', 'in_app']),
  target_segment_id  uuid,
  schedule           jsonb not null default '{}',
  config             jsonb not null default '{}',
  -- Counters maintained by the execution engine (a later issue); zero until then.
  stats              jsonb not null default
                     '{"sent": 0, "delivered": 0, "opened": 0, "clicked": 0, "bounced": 0, "unsubscribed": 0, "converted": 0}',
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now()
);
-- The list: one brand, optionally one status, newest first.
create index campaigns_brand_created on campaigns (brand_id, created_at desc, id desc);
create index campaigns_brand_status_created on campaigns (brand_id, status, created_at desc, id desc);
create index campaigns_tenant on campaigns (tenant_id);

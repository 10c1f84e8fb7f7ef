-- Segments: a dynamic segment's members are the brand's players matching `rules` now; a static segment
-- lists its members in rules.player_ids. player_count and members_fingerprint are written by the periodic
-- recompute (src/segments/recompute.ts); the fingerprint (count + order-independent hash of the member
-- ids) tells it whether membership changed since the last run, so segment.recomputed fires only then.
create table segments (
  id                   uuid primary key default gen_random_uuid(),
  tenant_id            uuid not null references tenants (id),
  brand_id             uuid not null references brands (id),
  name                 text not null,
  type                 text not null check (type in ('dynamic', 'static')),
  rules                jsonb not null default '{}',
  player_count         integer,
  members_fingerprint  text,
  last_computed_at     timestamptz,
  created_at           timestamptz not null default now(),
  updated_at           timestamptz not null default now()
);
create index segments_brand on segments (brand_id, created_at, id);
create index segments_tenant on segments (tenant_id);
-- The recompute picks the stalest segments first.
create index segments_recompute on segments (last_computed_at nulls first, id);

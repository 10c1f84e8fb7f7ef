-- Tournament definitions per brand. Participants, scoring and leaderboards come with the tournament engine.
create table tournaments (
  id                uuid primary key default gen_random_uuid(),
  tenant_id         uuid not null references tenants (id),
  brand_id          uuid not null references brands (id),
  name              text not null,
  description       text,
  status            text not null default 'draft' check (status in ('draft', 'active', 'ended', 'cancelled')),
  game_config       jsonb not null default '{}',
  prize_pool        jsonb not null default '{}',
  max_participants  integer check (max_participants >= 1),
  starts_at         timestamptz,
  ends_at           timestamptz,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  check (starts_at is null or ends_at is null or ends_at > starts_at)
);
create index tournaments_brand on tournaments (brand_id, created_at, id);
create index tournaments_tenant on tournaments (tenant_id);

-- Players (the operator's player, keyed by brand + external id) and one profile row per player holding
-- what ingestion derives from canonical events. Money columns are in the profile's currency; amounts in
-- other currencies are kept per currency in totals_by_currency and never converted.
create table players (
  id           uuid primary key default gen_random_uuid(),
  tenant_id    uuid not null references tenants (id),
  brand_id     uuid not null references brands (id),
  external_id  text not null,
  email        text,
  phone        text,
  status       text not null default 'active'
               check (status in ('active', 'suspended', 'self_excluded', 'closed')),
  metadata     jsonb not null default '{}',
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  unique (brand_id, external_id)
);
-- Listing and keyset export in creation order, per brand.
create index players_brand_created on players (brand_id, created_at, id);
create index players_tenant on players (tenant_id);

create table player_profiles (
  player_id            uuid primary key references players (id) on delete cascade,
  tenant_id            uuid not null,
  brand_id             uuid not null,
  language             text not null default 'en',
  currency             text not null default 'EUR',
  country              text,
  name                 text,
  device               text,
  os                   text,
  browser              text,
  platform             text,
  first_seen_at        timestamptz,
  last_seen_at         timestamptz,
  last_login_at        timestamptz,
  event_count          bigint not null default 0,
  deposit_count        integer not null default 0,
  deposit_total        numeric not null default 0,
  first_deposit_at     timestamptz,
  first_deposit_amount numeric,
  last_deposit_at      timestamptz,
  withdrawal_count     integer not null default 0,
  withdrawal_total     numeric not null default 0,
  bet_count            integer not null default 0,
  bet_total            numeric not null default 0,
  win_count            integer not null default 0,
  win_total            numeric not null default 0,
  bet_rollback_total   numeric not null default 0,
  win_rollback_total   numeric not null default 0,
  bonus_cost           numeric not null default 0,
  -- GGR = (bets − bet rollbacks) − (wins − win rollbacks), in the profile currency.
  ggr                  numeric generated always as
                         ((bet_total - bet_rollback_total) - (win_total - win_rollback_total)) stored,
  totals_by_currency   jsonb not null default '{}',
  -- Per channel (email, telegram, push, in_app, sms): { "email": { "granted": true, "at": "..." } }.
  consent              jsonb not null default '{}',
  updated_at           timestamptz not null default now()
);
create index player_profiles_brand on player_profiles (brand_id);

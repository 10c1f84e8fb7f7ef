-- Gamification definitions (levels, missions, badges, point currencies), per brand, and the per-player state
-- the gamification engine will maintain (point balances, mission progress, earned badges).
create table gamification_levels (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null references tenants (id),
  brand_id    uuid not null references brands (id),
  name        text not null,
  tier        integer not null check (tier >= 1),
  min_points  bigint not null check (min_points >= 0),
  max_points  bigint check (max_points >= 0),
  benefits    jsonb not null default '{}',
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  check (max_points is null or max_points >= min_points)
);
create index gamification_levels_brand on gamification_levels (brand_id, tier, min_points);
create index gamification_levels_tenant on gamification_levels (tenant_id);

create table gamification_missions (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null references tenants (id),
  brand_id    uuid not null references brands (id),
  name        text not null,
  description text,
  type        text not null check (type in ('daily', 'weekly', 'one_time', 'progressive', 'collaborative')),
  status      text not null default 'active' check (status in ('active', 'completed', 'expired', 'cancelled')),
  rules       jsonb not null default '{}',
  rewards     jsonb not null default '{}',
  max_completions_per_player integer check (max_completions_per_player >= 1),
  starts_at   timestamptz,
  ends_at     timestamptz,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  check (starts_at is null or ends_at is null or ends_at > starts_at)
);
create index gamification_missions_brand on gamification_missions (brand_id, created_at, id);
create index gamification_missions_tenant on gamification_missions (tenant_id);

create table gamification_badges (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null references tenants (id),
  brand_id    uuid not null references brands (id),
  name        text not null,
  description text,
  icon_url    text,
  criteria    jsonb not null default '{}',
  rarity      text not null default 'common' check (rarity in ('common', 'rare', 'epic', 'legendary')),
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
create index gamification_badges_brand on gamification_badges (brand_id, created_at, id);
create index gamification_badges_tenant on gamification_badges (tenant_id);

create table gamification_currencies (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null references tenants (id),
  brand_id    uuid not null references brands (id),
  name        text not null,
  symbol      text not null,
  type        text not null check (type in ('real', 'virtual', 'bonus')),
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
create index gamification_currencies_brand on gamification_currencies (brand_id, created_at, id);
create index gamification_currencies_tenant on gamification_currencies (tenant_id);

-- Per-player state. Deleting a definition deletes the players' state for it.
create table player_point_balances (
  player_id        uuid not null references players (id) on delete cascade,
  currency_id      uuid not null references gamification_currencies (id) on delete cascade,
  tenant_id        uuid not null,
  -- Spendable balance, and everything ever earned (the level is computed from the latter).
  balance          numeric not null default 0,
  lifetime_earned  numeric not null default 0,
  updated_at       timestamptz not null default now(),
  primary key (player_id, currency_id)
);

create table player_missions (
  player_id     uuid not null references players (id) on delete cascade,
  mission_id    uuid not null references gamification_missions (id) on delete cascade,
  tenant_id     uuid not null,
  progress      jsonb not null default '{}',
  completions   integer not null default 0,
  last_completed_at timestamptz,
  updated_at    timestamptz not null default now(),
  primary key (player_id, mission_id)
);

create table player_badges (
  player_id   uuid not null references players (id) on delete cascade,
  badge_id    uuid not null references gamification_badges (id) on delete cascade,
  tenant_id   uuid not null,
  earned_at   timestamptz not null default now(),
  primary key (player_id, badge_id)
);

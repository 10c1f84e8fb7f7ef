-- The gamification engine's state (src/gamification/engine.ts, docs/gamification.md "Engine").

-- Points: every credit and debit is a ledger entry; balances never go below 0.
create table point_ledger (
  id           bigserial primary key,
  tenant_id    uuid not null,
  brand_id     uuid not null,
  player_id    uuid not null references players (id) on delete cascade,
  currency_id  uuid not null references gamification_currencies (id) on delete cascade,
  amount       numeric not null check (amount <> 0),
  balance_after numeric not null,
  -- manual | mission | tournament
  source       text not null,
  source_id    text,
  reason       text,
  created_at   timestamptz not null default now()
);
create index point_ledger_player on point_ledger (player_id, currency_id, id);
alter table player_point_balances add constraint player_point_balances_not_negative check (balance >= 0);

-- Per-player engine state: the level last announced and the missions completed (badge criteria).
create table player_gamification (
  player_id          uuid primary key references players (id) on delete cascade,
  tenant_id          uuid not null,
  level_id           uuid references gamification_levels (id) on delete set null,
  missions_completed integer not null default 0,
  updated_at         timestamptz not null default now()
);

-- Mission progress: the value of the current period (or of all time), the stages reached, the period.
alter table player_missions
  add column value numeric not null default 0,
  add column stage integer not null default 0,
  add column period_start timestamptz,
  -- This period's (or for one_time/progressive: the mission's) completion is done.
  add column period_done boolean not null default false,
  add column joined_at timestamptz;
-- Collaborative missions: the brand-wide total.
alter table gamification_missions add column total numeric not null default 0;

-- Badge progress of event criteria (measure over all time).
create table player_badge_progress (
  player_id  uuid not null references players (id) on delete cascade,
  badge_id   uuid not null references gamification_badges (id) on delete cascade,
  value      numeric not null default 0,
  primary key (player_id, badge_id)
);

-- What a bet/win with a round_id added to a mission or tournament, so its rollback can take it back.
create table gamification_round_credits (
  target_id    uuid not null,
  player_id    uuid not null references players (id) on delete cascade,
  round_id     text not null,
  -- bet | win
  kind         text not null,
  amount       numeric not null,
  period_start timestamptz,
  created_at   timestamptz not null default now(),
  primary key (player_id, round_id, kind, target_id)
);

-- Bonus grants, and refusals (player not active) recorded the same way.
create table bonus_grants (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null,
  brand_id    uuid not null,
  bonus_id    uuid not null references bonuses (id) on delete cascade,
  player_id   uuid not null references players (id) on delete cascade,
  -- granted | refused
  status      text not null check (status in ('granted', 'refused')),
  refusal_reason text,
  reason      text,
  -- manual | mission | badge | tournament
  source      text not null,
  source_id   text,
  expires_at  timestamptz,
  created_at  timestamptz not null default now()
);
create index bonus_grants_player on bonus_grants (player_id, created_at, id);

-- Tournament participants and scores. version orders the leaderboard cache's updates (Redis / memory).
create table tournament_participants (
  tournament_id uuid not null references tournaments (id) on delete cascade,
  player_id     uuid not null references players (id) on delete cascade,
  tenant_id     uuid not null,
  external_id   text not null,
  score         numeric not null default 0,
  -- When the score was reached (event time): equal scores rank who reached them first higher.
  reached_at    timestamptz not null,
  version       bigint not null default 1,
  final_rank    integer,
  updated_at    timestamptz not null default now(),
  primary key (tournament_id, player_id)
);
create index tournament_participants_rank on tournament_participants (tournament_id, score desc, reached_at, player_id);
alter table tournaments add column participants integer not null default 0;

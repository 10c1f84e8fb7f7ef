-- Campaign execution (issue 16, docs/campaigns.md "Execution"). Every send of a campaign goes through a
-- row of campaign_sends whose primary key is (campaign, run, player, step, channel): the notification is
-- enqueued in the same transaction that inserts that row, so at most one notification exists per key,
-- whatever crashes, restarts, duplicate events or concurrent processes do.

-- When the engine next has to look at the campaign itself: start_at of a scheduled campaign, the next cron
-- tick of a running recurring one, end_at of a running one (the earliest of these). Written by the
-- service on every status or schedule change and by the engine after each visit; null = nothing due.
alter table campaigns add column engine_due_at timestamptz;
-- A running recurring campaign's next cron tick (the instant, in UTC).
alter table campaigns add column next_tick_at timestamptz;
-- The first move to running: triggered campaigns enroll only events stored after it.
alter table campaigns add column started_at timestamptz;
create index campaigns_engine_due on campaigns (engine_due_at) where engine_due_at is not null;

-- One run: the one-shot's start, a recurring tick, a triggering event, or a journey's start from the
-- segment. run_key is unique per campaign ('start', 'tick:<iso instant>', 'event:<stream event id>'), so
-- two processes that decide on the same run create one row.
create table campaign_runs (
  id           uuid primary key default gen_random_uuid(),
  campaign_id  uuid not null references campaigns (id) on delete cascade,
  tenant_id    uuid not null,
  brand_id     uuid not null,
  run_key      text not null,
  -- pending: the audience is still to be selected; selected: campaign_audience holds it and its rows are
  -- being enqueued chunk by chunk; done; cancelled.
  state        text not null default 'pending' check (state in ('pending', 'selected', 'done', 'cancelled')),
  -- Not before this instant (delay_seconds of a triggered campaign).
  due_at       timestamptz not null,
  -- A process working on the run holds it until then; another may take it over afterwards.
  leased_until timestamptz,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  unique (campaign_id, run_key)
);
create index campaign_runs_due on campaign_runs (due_at) where state in ('pending', 'selected');

-- The players a run selected, frozen when it started (a dynamic segment is evaluated once, then). control =
-- held out by the deterministic hash. enqueued marks the members whose messages are in the queue; a run
-- resumed after a crash continues with the members not yet marked.
create table campaign_audience (
  run_id       uuid not null references campaign_runs (id) on delete cascade,
  player_id    uuid not null,
  campaign_id  uuid not null,
  control      boolean not null,
  enqueued     boolean not null default false,
  selected_at  timestamptz not null,
  primary key (run_id, player_id)
);
create index campaign_audience_todo on campaign_audience (run_id, player_id) where not enqueued and not control;
create index campaign_audience_campaign on campaign_audience (campaign_id, player_id);

-- The exactly-once key of every message a campaign sends. step is '' outside journeys.
create table campaign_sends (
  campaign_id      uuid not null,
  run_id           uuid not null,
  player_id        uuid not null,
  step             text not null default '',
  channel          text not null,
  notification_id  uuid,
  created_at       timestamptz not null default now(),
  primary key (campaign_id, run_id, player_id, step, channel)
);
create index campaign_sends_player on campaign_sends (campaign_id, player_id, created_at);

-- Triggered enrolments per player, for max_per_player (an atomic counter: two events of one player in two
-- processes cannot both take the last place).
create table campaign_enrolments (
  campaign_id  uuid not null references campaigns (id) on delete cascade,
  player_id    uuid not null,
  count        integer not null,
  primary key (campaign_id, player_id)
);

-- A player's way through a journey. id is the journey entry: the "run" of its sends.
create table campaign_participants (
  id           uuid primary key default gen_random_uuid(),
  campaign_id  uuid not null references campaigns (id) on delete cascade,
  tenant_id    uuid not null,
  brand_id     uuid not null,
  player_id    uuid not null,
  step         text,
  status       text not null check (status in ('active', 'waiting', 'completed', 'exited')),
  -- active: advance now; waiting: advance at wake_at (end of a wait, timeout of a wait_for_event).
  wake_at      timestamptz,
  leased_until timestamptz,
  entered_at   timestamptz not null,
  updated_at   timestamptz not null,
  unique (campaign_id, player_id)
);
create index campaign_participants_due on campaign_participants (wake_at) where status in ('active', 'waiting');
create index campaign_participants_list on campaign_participants (campaign_id, entered_at, id);
create index campaign_participants_player on campaign_participants (player_id) where status in ('active', 'waiting');

-- Conversions: a player counts once per campaign, in its arm.
create table campaign_conversions (
  campaign_id   uuid not null references campaigns (id) on delete cascade,
  player_id     uuid not null,
  control       boolean not null,
  converted_at  timestamptz not null,
  primary key (campaign_id, player_id)
);

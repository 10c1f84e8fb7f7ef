-- Message delivery (issue 14, contract-engines §3): the notification lifecycle, brand channel and delivery
-- settings, player contact points and the player's time zone.

-- The canonical field `timezone` (IANA name) of registration / profile_update, for caps and quiet hours.
alter table player_profiles add column if not exists timezone text;

-- Per brand and channel: the non-secret settings as JSON and the secret part (SMTP password, bot token,
-- VAPID private key) sealed with src/lib/secret-box.ts, never readable through the API.
create table if not exists brand_channel_settings (
  brand_id    uuid not null references brands (id),
  tenant_id   uuid not null references tenants (id),
  channel     text not null check (channel in ('email', 'telegram', 'push', 'in_app')),
  settings    jsonb not null,
  secret      text,
  updated_at  timestamptz not null default now(),
  primary key (brand_id, channel)
);

-- Per brand: frequency caps, quiet hours and consent policy (the whole object of PUT /settings/delivery).
create table if not exists brand_delivery_settings (
  brand_id    uuid primary key references brands (id),
  tenant_id   uuid not null references tenants (id),
  settings    jsonb not null,
  updated_at  timestamptz not null default now()
);

-- Contact points beside the player's email: the Telegram chat id, and the address that hard-bounced (the
-- email is undeliverable while players.email still equals it, so a changed address is tried again).
create table if not exists player_contacts (
  player_id            uuid primary key references players (id) on delete cascade,
  tenant_id            uuid not null,
  brand_id             uuid not null,
  telegram_chat_id     text,
  undeliverable_email  text,
  updated_at           timestamptz not null default now()
);

create table if not exists push_subscriptions (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null,
  brand_id    uuid not null,
  player_id   uuid not null references players (id) on delete cascade,
  endpoint    text not null,
  p256dh      text not null,
  auth        text not null,
  created_at  timestamptz not null default now(),
  unique (player_id, endpoint)
);

-- The lifecycle of §3. A row stays 'queued' while it waits (held by quiet hours: scheduled_at) and while a
-- dispatcher holds its lease (lease_until); the final statuses are delivered, suppressed, bounced, failed.
alter table notifications
  add column if not exists class text not null default 'marketing' check (class in ('marketing', 'transactional')),
  add column if not exists campaign_id uuid,
  -- A caller's key (a campaign: campaign, run, player, step, channel) making the enqueue idempotent.
  add column if not exists idempotency_key text,
  -- Inline content of a send without a template: { subject, body }.
  add column if not exists content jsonb,
  add column if not exists reason text,
  add column if not exists error text,
  add column if not exists attempts integer not null default 0,
  add column if not exists lease_until timestamptz,
  -- The rendered message (subject, body) as the player received it: the in-app inbox reads it.
  add column if not exists rendered jsonb,
  -- The message's own links, in order: click tracking redirects only to these (no open redirect).
  add column if not exists links text[] not null default '{}',
  add column if not exists sent_at timestamptz,
  add column if not exists delivered_at timestamptz,
  add column if not exists opened_at timestamptz,
  add column if not exists clicked_at timestamptz,
  add column if not exists read_at timestamptz,
  add column if not exists unsubscribed_at timestamptz,
  add column if not exists updated_at timestamptz not null default now();

create unique index if not exists notifications_idempotency on notifications (tenant_id, idempotency_key)
  where idempotency_key is not null;
-- GET /notifications, newest first, optionally per player / campaign.
create index if not exists notifications_tenant_created on notifications (tenant_id, created_at desc, id desc);
create index if not exists notifications_campaign on notifications (campaign_id, status) where campaign_id is not null;
-- Frequency caps count a player's marketing messages handed to a channel since the window's start.
create index if not exists notifications_player_sent on notifications (player_id, sent_at)
  where class = 'marketing' and sent_at is not null;
-- The inbox: a player's delivered in-app messages, newest first.
create index if not exists notifications_inbox on notifications (player_id, delivered_at desc, id desc)
  where channel = 'in_app' and status = 'delivered';

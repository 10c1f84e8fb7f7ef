-- Notification templates and the queue of single sends (issue 4). Rendering and delivery come later: a
-- send waits here as 'queued'.
create table notification_templates (
  id                  uuid primary key default gen_random_uuid(),
  tenant_id           uuid not null references tenants (id),
  brand_id            uuid not null references brands (id),
  name                text not null,
  channel             text not null check (channel in ('email', 'telegram', 'push', 'in_app')),
  locale              text not null default 'en' check (locale in ('en', 'it', 'es')),
  subject             text,
  body                text not null,
  -- What the caller declared in `variables`; the exposed `variables` is this plus every {{name}} found in
  -- subject and body, recomputed on each write (src/notifications/variables.ts).
  declared_variables  text[] not null default '{}',
  variables           text[] not null default '{}',
  active              boolean not null default true,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now()
);
create index notification_templates_brand_list on notification_templates (brand_id, active, created_at desc, id desc);
create index notification_templates_tenant on notification_templates (tenant_id);

create table notifications (
  id            uuid primary key default gen_random_uuid(),
  tenant_id     uuid not null references tenants (id),
  -- The player's brand.
  brand_id      uuid not null references brands (id),
  player_id     uuid not null references players (id) on delete cascade,
  channel       text not null check (channel in ('email', 'telegram', 'push', 'in_app')),
  template_id   uuid references notification_templates (id),
  payload       jsonb not null default '{}',
  status        text not null default 'queued',
  scheduled_at  timestamptz not null default now(),
  created_at    timestamptz not null default now()
);
-- What the delivery worker (a later issue) will scan: due queued notifications, oldest first.
create index notifications_due on notifications (scheduled_at, id) where status = 'queued';
create index notifications_tenant_player on notifications (tenant_id, player_id, created_at);

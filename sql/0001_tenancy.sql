-- Tenants, their brands, and operator API keys (only the SHA-256 of a key is ever stored).
create table tenants (
  id          uuid primary key default gen_random_uuid(),
  name        text not null,
  slug        text not null unique,
  created_at  timestamptz not null default now()
);

create table brands (
  id             uuid primary key default gen_random_uuid(),
  tenant_id      uuid not null references tenants (id),
  name           text not null,
  slug           text not null,
  is_default     boolean not null default false,
  active         boolean not null default true,
  -- The per-brand event mapping of the contract ("Event mapping"); applied by ingestion.
  event_mapping  jsonb not null default '{"rules": [], "default_action": "accept"}',
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  unique (tenant_id, slug)
);
-- At most one default brand per tenant.
create unique index brands_one_default_per_tenant on brands (tenant_id) where is_default;

create table api_keys (
  id          uuid primary key default gen_random_uuid(),
  tenant_id   uuid not null references tenants (id),
  brand_id    uuid references brands (id),
  name        text not null,
  key_hash    text not null unique,
  prefix      text not null,
  scopes      text[] not null default '{}',
  created_at  timestamptz not null default now(),
  expires_at  timestamptz,
  revoked_at  timestamptz
);
create index api_keys_tenant on api_keys (tenant_id, created_at);

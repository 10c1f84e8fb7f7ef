-- Bonus definitions per brand. Grants and wagering progress come with the bonus engine.
create table bonuses (
  id                    uuid primary key default gen_random_uuid(),
  tenant_id             uuid not null references tenants (id),
  brand_id              uuid not null references brands (id),
  name                  text not null,
  type                  text not null check (type in ('welcome', 'reload', 'cashback', 'free_spins', 'no_deposit', 'custom')),
  value                 numeric not null check (value >= 0),
  value_type            text not null,
  wagering_requirement  numeric not null default 0 check (wagering_requirement >= 0),
  config                jsonb not null default '{}',
  expires_in_hours      integer check (expires_in_hours >= 1),
  active                boolean not null default true,
  created_at            timestamptz not null default now(),
  updated_at            timestamptz not null default now()
);
create index bonuses_brand on bonuses (brand_id, created_at, id);
create index bonuses_tenant on bonuses (tenant_id);

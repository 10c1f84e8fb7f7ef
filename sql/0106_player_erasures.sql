-- Erasure jobs (DELETE /players/{id}, src/players/data-rights.ts). The PostgreSQL part of an erasure is done
-- in the request's transaction (the player row and everything cascading from it are deleted); this row
-- carries the ClickHouse part, which runs in the background and survives restarts:
--   pending   → copy the player's events under `token` with personal fields stripped from raw
--   deleting  → delete the originals
--   done      → external_id and token cleared: nothing left links the pseudonym to anyone
-- Claimed with a lease (lease_until) by one process at a time; a crashed process's job is retried after it.
create table player_erasures (
  id           uuid primary key default gen_random_uuid(),
  tenant_id    uuid not null references tenants (id),
  brand_id     uuid not null references brands (id),
  -- The erased player's id; its row is gone, so no foreign key. One erasure per player.
  player_id    uuid not null unique,
  external_id  text,
  token        text,
  -- Events received up to this instant are the erased player's; later ones belong to whoever registers next.
  cutoff       timestamptz not null,
  state        text not null default 'pending' check (state in ('pending', 'deleting', 'done')),
  attempts     integer not null default 0,
  last_error   text,
  lease_until  timestamptz,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  finished_at  timestamptz
);
create index player_erasures_due on player_erasures (created_at) where state <> 'done';
create index player_erasures_tenant on player_erasures (tenant_id, created_at);

-- Bulk campaign sends in a delivery lane of their own (src/notifications/dispatcher.ts): a one-shot or
-- recurring campaign's chunks are `bulk`, and the dispatch key (the work loop's actor key) names the lane.
-- The work loop leaves a key out of its claims while it holds maxPerKey of its rows, and shares its
-- concurrency among keys in turn: so a triggered welcome, a journey step or a single send is claimed and
-- sent beside a 100k newsletter's backlog instead of behind it.
alter table notifications add column if not exists bulk boolean not null default false;
alter table notifications drop column if exists dispatch_key;
alter table notifications add column dispatch_key text
  generated always as (channel || ':' || brand_id::text || case when bulk then ':bulk' else '' end) stored;

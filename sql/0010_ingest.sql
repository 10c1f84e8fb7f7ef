-- Ingestion helpers for player profile aggregation (src/events/queries.ts).
-- A batch's money deltas arrive as jsonb per player: { "<currency>": { "deposit_total": "10.5", ... } },
-- with "" standing for "no currency given" (= the profile currency).

-- The delta of one money key in the profile currency (plus the currency-less events).
create or replace function respin_money(m jsonb, cur text, k text) returns numeric
language sql immutable as $$
  select coalesce((m -> cur ->> k)::numeric, 0) + coalesce((m -> '' ->> k)::numeric, 0)
$$;

-- Adds the deltas of every other currency into totals_by_currency, key by key.
create or replace function respin_merge_totals(old jsonb, delta jsonb, cur text) returns jsonb
language sql immutable as $$
  select case when (delta - cur - '') = '{}'::jsonb then old else (
    select coalesce(jsonb_object_agg(c, v), '{}'::jsonb) from (
      select c, jsonb_object_agg(k, s) as v from (
        select c, k, sum(n) as s from (
          select e.key as c, f.key as k, (f.value #>> '{}')::numeric as n
            from jsonb_each(old) e, jsonb_each(e.value) f
          union all
          select e.key, f.key, (f.value #>> '{}')::numeric
            from jsonb_each(delta - cur - '') e, jsonb_each(e.value) f
        ) x group by c, k
      ) y group by c
    ) z
  ) end
$$;

-- A profile's counts (deposit_count, bet_count, ...) count the events of every currency: a deposit in
-- another currency than the profile's is still a deposit (lifecycle `ftd`, segments on deposit_count).
-- Totals stay in the profile currency; every currency's own counts and totals are in totals_by_currency.
-- src/events/queries.ts (updateProfiles) calls this only when the group's deltas hold another currency.
create or replace function respin_count_all(m jsonb, k text) returns numeric
language sql immutable as $$
  select coalesce(sum((v ->> k)::numeric), 0) from jsonb_each(m) as e(c, v)
$$;

-- Profiles written before: add the other currencies' counts from totals_by_currency.
update player_profiles p set
  deposit_count = p.deposit_count + coalesce((select sum((v ->> 'deposit_count')::numeric) from jsonb_each(p.totals_by_currency) e(c, v) where c <> p.currency), 0),
  withdrawal_count = p.withdrawal_count + coalesce((select sum((v ->> 'withdrawal_count')::numeric) from jsonb_each(p.totals_by_currency) e(c, v) where c <> p.currency), 0),
  bet_count = p.bet_count + coalesce((select sum((v ->> 'bet_count')::numeric) from jsonb_each(p.totals_by_currency) e(c, v) where c <> p.currency), 0),
  win_count = p.win_count + coalesce((select sum((v ->> 'win_count')::numeric) from jsonb_each(p.totals_by_currency) e(c, v) where c <> p.currency), 0)
where p.totals_by_currency is not null and p.totals_by_currency <> '{}'::jsonb;

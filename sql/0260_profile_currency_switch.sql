-- A profile's money columns hold its own currency (docs/ingestion.md); every other currency's figures are
-- in totals_by_currency, which never holds the profile currency. A new profile currency (registration,
-- profile_update, POST /players) moves the old one's figures into totals_by_currency and takes the new
-- one's out of it, so nothing is relabelled (100 EUR never become 100 USD). Counts stay: the columns
-- count every currency's events (sql/0220), so the old currency's own counts are the columns' minus the
-- other currencies'.
create or replace function respin_switch_currency(pid uuid, cur text) returns void
language plpgsql as $$
declare
  p player_profiles;
  old_bucket jsonb;
  taken jsonb;
begin
  select * into p from player_profiles where player_id = pid for update;
  if not found or cur is null or p.currency = cur then return; end if;
  select jsonb_build_object(
      'deposit_count', p.deposit_count - coalesce(sum((v->>'deposit_count')::numeric), 0),
      'withdrawal_count', p.withdrawal_count - coalesce(sum((v->>'withdrawal_count')::numeric), 0),
      'bet_count', p.bet_count - coalesce(sum((v->>'bet_count')::numeric), 0),
      'win_count', p.win_count - coalesce(sum((v->>'win_count')::numeric), 0),
      'deposit_total', p.deposit_total, 'withdrawal_total', p.withdrawal_total, 'bet_total', p.bet_total,
      'win_total', p.win_total, 'bet_rollback_total', p.bet_rollback_total, 'win_rollback_total', p.win_rollback_total,
      'bonus_cost', p.bonus_cost)
    into old_bucket
    from jsonb_each(p.totals_by_currency) e(k, v) where k <> p.currency;
  if not exists (select 1 from jsonb_each(old_bucket) where (value #>> '{}')::numeric <> 0) then old_bucket := null; end if;
  taken := coalesce(p.totals_by_currency -> cur, '{}'::jsonb);
  update player_profiles set
    currency = cur,
    totals_by_currency = case when old_bucket is null then p.totals_by_currency - cur
      else respin_merge_totals(p.totals_by_currency - cur, jsonb_build_object(p.currency, old_bucket), cur) end,
    deposit_total = coalesce((taken->>'deposit_total')::numeric, 0),
    withdrawal_total = coalesce((taken->>'withdrawal_total')::numeric, 0),
    bet_total = coalesce((taken->>'bet_total')::numeric, 0),
    win_total = coalesce((taken->>'win_total')::numeric, 0),
    bet_rollback_total = coalesce((taken->>'bet_rollback_total')::numeric, 0),
    win_rollback_total = coalesce((taken->>'win_rollback_total')::numeric, 0),
    bonus_cost = coalesce((taken->>'bonus_cost')::numeric, 0),
    updated_at = now()
  where player_id = pid;
end $$;

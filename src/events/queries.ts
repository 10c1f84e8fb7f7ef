// PostgreSQL writes of ingestion: players, their profile aggregates and the outbox, for one group of
// requests (of one or several tenants: each player row carries its tenant). Every statement is set-based
// over unnest() arrays (one statement per group, not per event) and touches players in (brand_id,
// external_id) order, so concurrent groups cannot deadlock.
import type { ReservedSql, TransactionSql } from 'postgres'
import type { Sql } from '../db/postgres.ts'
import { apiTimeSql } from '../lib/rows.ts'
import type { PlayerColumns, StatusColumns } from './transform.ts'

type Tx = Sql | TransactionSql | ReservedSql

/**
 * The delta of one count (deposit_count, ...) of a group's money: every currency's events (sql/0220: a
 * deposit in another currency is a deposit), through the one-currency shortcut when the deltas hold no
 * other (respin_money is inlined; respin_count_all walks the map).
 */
const countDelta = (tx: Tx, key: string) =>
  tx`(case when d.money is null then 0
       when (d.money - coalesce(d.currency, p.currency) - '') = '{}'::jsonb then respin_money(d.money, coalesce(d.currency, p.currency), ${key})
       else respin_count_all(d.money, ${key}) end)::int`

/** player.updated's data as PATCH /players writes it (players/service.ts applyChanges), from a row's columns. */
const playerUpdated = (tx: Tx, changed: ReturnType<Tx>) =>
  tx`jsonb_build_object(
    'player_id', id, 'external_id', external_id, 'email', email, 'phone', phone, 'status', status,
    'metadata', coalesce(metadata, '{}'::jsonb),
    'created_at', ${tx.unsafe(apiTimeSql('created_at'))}, 'updated_at', ${tx.unsafe(apiTimeSql('updated_at'))}, 'changed', ${changed})`

export interface PlayerKeyColumns {
  tenant_id: string[]
  brand_id: string[]
  external_id: string[]
  email: (string | null)[]
  phone: (string | null)[]
  /** The profile currency the group sets (a new player's profile starts in it). */
  currency: (string | null)[]
}

/**
 * Upserts these players (email/phone from registration data), creates missing profiles and queues
 * `player.created` for new players and `player.updated` for known ones whose email or phone changed, in (brand_id, external_id) order; the rows stay locked until the
 * transaction ends. Sent at once (`execute`): statements go out in the order they are called.
 */
export function upsertPlayers(tx: Tx, p: PlayerKeyColumns) {
  return tx<{ id: string; brand_id: string; external_id: string; created: boolean }[]>`
    with input as (
      select * from unnest(${p.tenant_id}::uuid[], ${p.brand_id}::uuid[], ${p.external_id}::text[], ${p.email}::text[], ${p.phone}::text[],
                           ${p.currency}::text[])
        as t(tenant_id, brand_id, external_id, email, phone, currency)
    ), old as (
      -- The stored email and phone of the players this group may change (only events carrying either:
      -- most carry neither, and cost no read), to tell player.updated what changed.
      select p.brand_id, p.external_id, p.email, p.phone, p.status, p.metadata, p.created_at from input i
      join players p on p.brand_id = i.brand_id and p.external_id = i.external_id
      where i.email is not null or i.phone is not null
    ), up as (
      insert into players (tenant_id, brand_id, external_id, email, phone)
      select tenant_id, brand_id, external_id, email, phone from input order by brand_id, external_id
      on conflict (brand_id, external_id) do update
        set email = coalesce(excluded.email, players.email),
            phone = coalesce(excluded.phone, players.phone),
            updated_at = case when coalesce(excluded.email, players.email) is distinct from players.email
                                or coalesce(excluded.phone, players.phone) is distinct from players.phone
                              then now() else players.updated_at end
      returning id, tenant_id, brand_id, external_id, email, phone, (xmax = 0) as created
    ), changed as (
      -- Status, metadata and created_at are not changed here: the stored ones; updated_at is now() when
      -- the email or phone changed.
      select up.id, up.tenant_id, up.brand_id, up.external_id, up.email, up.phone, old.status, old.metadata, old.created_at,
             now() as updated_at,
             array_remove(array[case when up.email is distinct from old.email then 'email' end,
                                case when up.phone is distinct from old.phone then 'phone' end], null) as fields
      from up join old on old.brand_id = up.brand_id and old.external_id = up.external_id
      where not up.created
    ), upd as (
      insert into outbox (tenant_id, brand_id, event, data)
      select tenant_id, brand_id, 'player.updated', ${playerUpdated(tx, tx`to_jsonb(fields)`)}
      from changed where cardinality(fields) > 0
    ), prof as (
      -- A new player's profile starts in the currency its group names (a registration's): no switch later.
      insert into player_profiles (player_id, tenant_id, brand_id, currency)
      select up.id, up.tenant_id, up.brand_id, coalesce(i.currency, 'EUR') from up
      join input i on i.brand_id = up.brand_id and i.external_id = up.external_id
      where up.created
      on conflict (player_id) do nothing
    ), ob as (
      insert into outbox (tenant_id, brand_id, event, data)
      select tenant_id, brand_id, 'player.created', jsonb_build_object('player_id', id, 'external_id', external_id)
      from up where created
    )
    select id, brand_id, external_id, created from up`.execute()
}

/**
 * Profiles whose currency the group sets to another one are switched first (sql/0260: the old currency's
 * figures move into totals_by_currency, the new one's come out of it), so nothing is relabelled and the
 * group's own money then lands in the new currency. Rare: a new player's profile starts in its group's
 * currency (upsertPlayers). When one is due, every profile of the group (`groupBrandIds`,
 * `groupExternalIds`) is locked first in player id order, as updateProfiles locks them: locking only the
 * switching ones first would take them out of that order (a deadlock with another group).
 */
export function switchCurrencies(tx: Tx, groupBrandIds: string[], groupExternalIds: string[], brandIds: string[], externalIds: string[], currencies: string[]) {
  return tx`
    with due as materialized (
      select pl.id, x.cur
      from unnest(${brandIds}::uuid[], ${externalIds}::text[], ${currencies}::text[]) as x(brand_id, external_id, cur)
      join players pl on pl.brand_id = x.brand_id and pl.external_id = x.external_id
      join player_profiles pp on pp.player_id = pl.id and pp.currency <> x.cur
    ), locked as materialized (
      select pp.player_id from player_profiles pp
      where pp.player_id in (
        select pl.id from unnest(${groupBrandIds}::uuid[], ${groupExternalIds}::text[]) as g(brand_id, external_id)
        join players pl on pl.brand_id = g.brand_id and pl.external_id = g.external_id)
      order by pp.player_id for update
    )
    -- The calls in the sorted subquery's order; the group's locks (an initplan) taken before the first,
    -- and only when some switch is due. \`n\` must be read above (the filter), or the planner drops the
    -- initplan with the unused column and nothing is locked.
    select respin_switch_currency(s.id, s.cur) from (
      select d.id, d.cur, (select count(*) from locked) as n from due d order by d.id offset 0
    ) s where s.n >= 0`.execute()
}

/**
 * Folds the group's deltas into the profiles of these players; a first deposit queues `player.converted`.
 * `knownIds` holds each player's id where the caller knows it, null where not (players upserted earlier
 * in the same transaction): those are looked up by key, one unique-index probe each. Rows are locked in
 * player id order first, so concurrent groups cannot deadlock. Fails with SQLSTATE RSP01 (sql/0016; nothing written)
 * when a player does not exist, so it can be sent pipelined with the COMMIT.
 */
export function updateProfiles(tx: Tx, knownIds: (string | null)[], p: PlayerColumns) {
  return tx`
    with input as materialized (
      -- Materialized so that each jsonb is parsed once per row, not at every reference (an inlined CTE
      -- would repeat the cast in each of the money expressions below).
      -- jsonb travels as text: the driver would otherwise encode each element as a JSON string.
      -- The lookup is a scalar subquery, evaluated only for unknown ids, one probe of the unique index
      -- each: as a join over every player of the group, it cost the embedded mode (PGlite, on the main
      -- thread) ~45 µs more per event.
      -- Times come as ms since the epoch: a float8 and to_timestamp cost less than parsing ISO text (and
      -- formatting it on the worker); exact to the ms.
      select coalesce(t.known_id, (select pl.id from players pl where pl.brand_id = t.brand_id and pl.external_id = t.external_id)) as player_id,
             t.*, money_text::jsonb as money, consent_text::jsonb as consent,
             to_timestamp(first_seen_ms / 1000) as first_seen, to_timestamp(last_seen_ms / 1000) as last_seen,
             to_timestamp(last_login_ms / 1000) as last_login, to_timestamp(first_deposit_ms / 1000) as first_deposit_at,
             to_timestamp(last_deposit_ms / 1000) as last_deposit_at
      from unnest(
        ${knownIds}::uuid[], ${p.brand_id}::uuid[], ${p.external_id}::text[], ${p.language}::text[], ${p.currency}::text[],
        ${p.country}::text[], ${p.name}::text[], ${p.timezone}::text[], ${p.device}::text[], ${p.os}::text[], ${p.browser}::text[],
        ${p.platform}::text[], ${p.first_seen}::float8[], ${p.last_seen}::float8[],
        ${p.last_login}::float8[], ${p.event_count}::int[], ${p.money}::text[], ${p.consent}::text[],
        ${p.first_deposit_at}::float8[], ${p.first_deposit_amount}::numeric[], ${p.first_deposit_currency}::text[],
        ${p.last_deposit_at}::float8[]
      ) as t(known_id, brand_id, external_id, language, currency, country, name, timezone, device, os, browser, platform, first_seen_ms,
             last_seen_ms, last_login_ms, event_count, money_text, consent_text, first_deposit_ms, first_deposit_amount,
             first_deposit_currency, last_deposit_ms)
    ), d as materialized (
      -- The input with its players' profiles locked, in player id order. no_deposit_before is read from the
      -- row as locked: with a concurrent group's update waited for, this is its committed version, so it
      -- sees a first deposit that group just recorded (the statement's snapshot would not). One CTE, not a
      -- second one joined back: the planner estimates these CTEs at one row, and a join of two of them
      -- became a nested loop, quadratic in the group's players.
      select i.*, p.first_deposit_at is null as no_deposit_before
      from input i join player_profiles p on p.player_id = i.player_id
      order by p.player_id for update of p
    ), upd as (
      update player_profiles p set
        language = coalesce(d.language, p.language),
        currency = coalesce(d.currency, p.currency),
        country = coalesce(d.country, p.country),
        name = coalesce(d.name, p.name),
        timezone = coalesce(d.timezone, p.timezone),
        device = coalesce(d.device, p.device),
        os = coalesce(d.os, p.os),
        browser = coalesce(d.browser, p.browser),
        platform = coalesce(d.platform, p.platform),
        first_seen_at = least(p.first_seen_at, d.first_seen),
        last_seen_at = greatest(p.last_seen_at, d.last_seen),
        last_login_at = greatest(p.last_login_at, d.last_login),
        event_count = p.event_count + d.event_count,
        -- Counts take every currency's events (countDelta); totals only the profile currency's.
        deposit_count = p.deposit_count + ${countDelta(tx, 'deposit_count')},
        deposit_total = p.deposit_total + respin_money(d.money, coalesce(d.currency, p.currency), 'deposit_total'),
        withdrawal_count = p.withdrawal_count + ${countDelta(tx, 'withdrawal_count')},
        withdrawal_total = p.withdrawal_total + respin_money(d.money, coalesce(d.currency, p.currency), 'withdrawal_total'),
        bet_count = p.bet_count + ${countDelta(tx, 'bet_count')},
        bet_total = p.bet_total + respin_money(d.money, coalesce(d.currency, p.currency), 'bet_total'),
        win_count = p.win_count + ${countDelta(tx, 'win_count')},
        win_total = p.win_total + respin_money(d.money, coalesce(d.currency, p.currency), 'win_total'),
        bet_rollback_total = p.bet_rollback_total + respin_money(d.money, coalesce(d.currency, p.currency), 'bet_rollback_total'),
        win_rollback_total = p.win_rollback_total + respin_money(d.money, coalesce(d.currency, p.currency), 'win_rollback_total'),
        bonus_cost = p.bonus_cost + respin_money(d.money, coalesce(d.currency, p.currency), 'bonus_cost'),
        -- respin_merge_totals is not inlined (a subquery): call it only when other currencies are there.
        totals_by_currency = case when d.money is null or (d.money - coalesce(d.currency, p.currency) - '') = '{}'::jsonb
          then p.totals_by_currency else respin_merge_totals(p.totals_by_currency, d.money, coalesce(d.currency, p.currency)) end,
        -- Per channel, the consent with the later time wins, whatever order the events arrive in (a late
        -- retry of an old grant must not undo a newer refusal); at the same time, the later arrival.
        consent = case when d.consent is null then p.consent else (
          select coalesce(jsonb_object_agg(key, case
            when n.value is null then o.value
            when o.value is null then n.value
            when (n.value->>'at')::timestamptz >= (o.value->>'at')::timestamptz then n.value
            else o.value end), '{}'::jsonb)
          from jsonb_each(coalesce(p.consent, '{}'::jsonb)) o full join jsonb_each(d.consent) n using (key)) end,
        -- The first deposit is the earliest by event time, whatever order the deposits arrive in (as
        -- first_seen_at, and as analytics' FTD); player.converted still fires once, at the first arrival.
        first_deposit_at = least(p.first_deposit_at, d.first_deposit_at),
        first_deposit_amount = case when p.first_deposit_at is null or d.first_deposit_at < p.first_deposit_at
          then d.first_deposit_amount else p.first_deposit_amount end,
        last_deposit_at = greatest(p.last_deposit_at, d.last_deposit_at),
        updated_at = now()
      from d
      where p.player_id = d.player_id
      returning p.player_id, p.tenant_id, p.brand_id, d.external_id,
        (d.no_deposit_before and d.first_deposit_at is not null) as converted,
        d.first_deposit_at, d.first_deposit_amount, coalesce(d.first_deposit_currency, p.currency) as first_deposit_currency
    ), ob as (
      insert into outbox (tenant_id, brand_id, event, data)
      select tenant_id, brand_id, 'player.converted', jsonb_build_object(
        'player_id', player_id, 'external_id', external_id, 'conversion', 'first_deposit',
        'amount', first_deposit_amount, 'currency', first_deposit_currency,
        -- as every other time the API and its webhooks write (a campaign conversion's at included)
        'at', ${tx.unsafe(apiTimeSql('first_deposit_at'))})
      from upd where converted
    )
    select respin_expect_rows(${p.brand_id.length}, (select count(*) from upd), 'profiles to update')`.execute()
}

/**
 * Applies status_change events to players.status, each player's in event-time order, every real transition
 * queueing `player.updated` and `player.status_changed` (suspended then active in one group: two of each).
 * Responsible gaming decides the order across groups: a change that restricts (to anything but active)
 * always counts, one that lifts a restriction (to active) only when it is not older than the player's last
 * applied change (`status_at`, sql/0270; API changes stamp it with now()), so a late retry of an old
 * `active` never undoes a newer self-exclusion, while a late self-exclusion is never lost. The players are
 * locked in (brand, external id) order, as upsertPlayers locks them, and before any profile (profiles.ts
 * sends this before updateProfiles), as every other writer locks a player before its profile.
 */
export function applyStatuses(tx: Tx, s: StatusColumns) {
  return tx<{ changed: string }[]>`
    with d as (
      select * from unnest(${s.brand_id}::uuid[], ${s.external_id}::text[], ${s.status}::text[], ${s.reason}::text[], ${s.at}::float8[])
        with ordinality as t(brand_id, external_id, status, reason, at_ms, ord)
    ), cur as materialized (
      select p.id, p.status, p.status_at, p.brand_id, p.external_id from players p
      where (p.brand_id, p.external_id) in (select brand_id, external_id from d)
      order by p.brand_id, p.external_id for update of p
    ), seq as (
      select c.id, d.status, d.reason, d.ord, to_timestamp(d.at_ms / 1000) as at,
        lag(d.status, 1, c.status) over (partition by c.id order by d.ord) as previous_status
      from d join cur c on c.brand_id = d.brand_id and c.external_id = d.external_id
      where d.status <> 'active' or c.status_at is null or to_timestamp(d.at_ms / 1000) >= c.status_at
    ), changes as materialized (
      select * from seq where status <> previous_status
    ), last as (
      select distinct on (id) id, status, max(at) over (partition by id) as at from seq order by id, ord desc
    ), u as (
      update players p set status = l.status, status_at = greatest(p.status_at, l.at),
        updated_at = case when exists (select 1 from changes c where c.id = l.id) then now() else p.updated_at end
      from last l
      where p.id = l.id
      returning p.id, p.tenant_id, p.brand_id, p.external_id, p.email, p.phone, p.metadata, p.created_at, p.updated_at
    ), ob as (
      -- As PATCH /players does: player.updated (changed: status), then player.status_changed, per transition.
      insert into outbox (tenant_id, brand_id, event, data)
      select tenant_id, brand_id, e.event, case when e.event = 'player.updated' then ${playerUpdated(tx, tx`jsonb_build_array('status')`)}
        else jsonb_build_object(
          'player_id', id, 'external_id', external_id, 'status', status, 'previous_status', previous_status, 'reason', reason) end
      from (
        select u.tenant_id, u.brand_id, u.id, u.external_id, u.email, u.phone, c.status, u.metadata, u.created_at, u.updated_at,
          c.previous_status, c.reason, c.ord
        from changes c join u on u.id = c.id
      ) x cross join (values (1, 'player.updated'), (2, 'player.status_changed')) as e(n, event)
      order by x.id, x.ord, e.n
    )
    select count(*) as changed from changes`.execute()
}

-- Analytics and exports (docs/analytics.md). Rollups are filled by materialized views on every insert
-- into `events`, so they hold exactly what `events` holds: late events land in their own (old) bucket,
-- rollbacks are events of their own type that the queries subtract, and a flush retried under the same
-- insert_deduplication_token is dropped for the views as for the table (deduplicate_blocks_in_dependent_
-- materialized_views = 1 on inserts; each rollup keeps the same deduplication window as `events`).
-- All money is Decimal(38, 8): sums stay exact.

-- Exports page by seq in (tenant, brand): this projection keeps (tenant, brand, seq, type) sorted by seq,
-- so finding the next page's seq range reads a few granules instead of the brand's whole seq column.
ALTER TABLE events ADD PROJECTION IF NOT EXISTS events_by_seq (SELECT tenant_id, brand_id, seq, event_type ORDER BY tenant_id, brand_id, seq);
ALTER TABLE events MATERIALIZE PROJECTION events_by_seq SETTINGS mutations_sync = 1;

-- 15-minute buckets per event type and currency. Every IANA zone's UTC offset since 2000 is a multiple of
-- 15 minutes, so days, weeks and hours of any `tz` are whole sets of buckets.
CREATE TABLE IF NOT EXISTS rollup_buckets (
  tenant_id  UUID,
  brand_id   UUID,
  bucket     DateTime('UTC'),
  event_type LowCardinality(String),
  currency   LowCardinality(String),
  events     UInt64,
  amount     Decimal(38, 8)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (tenant_id, brand_id, bucket, event_type, currency)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_buckets_mv TO rollup_buckets AS
SELECT tenant_id, brand_id, toStartOfFifteenMinutes(event_time) AS bucket, event_type, currency,
       count() AS events, sum(amount) AS amount
FROM events GROUP BY tenant_id, brand_id, bucket, event_type, currency;

-- 15-minute buckets per player and currency: activity (distinct players) and each player's money.
CREATE TABLE IF NOT EXISTS rollup_player_buckets (
  tenant_id     UUID,
  brand_id      UUID,
  bucket        DateTime('UTC'),
  player_id     String,
  currency      LowCardinality(String),
  events        UInt64,
  deposit_count UInt64,
  deposits      Decimal(38, 8),
  bets          Decimal(38, 8),
  wins          Decimal(38, 8),
  bet_rollbacks Decimal(38, 8),
  win_rollbacks Decimal(38, 8),
  bonus_cost    Decimal(38, 8)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (tenant_id, brand_id, bucket, player_id, currency)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_player_buckets_mv TO rollup_player_buckets AS
SELECT tenant_id, brand_id, toStartOfFifteenMinutes(event_time) AS bucket, player_id, currency,
       count() AS events,
       countIf(event_type = 'deposit') AS deposit_count,
       sumIf(amount, event_type = 'deposit') AS deposits,
       sumIf(amount, event_type = 'bet') AS bets,
       sumIf(amount, event_type = 'win') AS wins,
       sumIf(amount, event_type = 'bet_rollback') AS bet_rollbacks,
       sumIf(amount, event_type = 'win_rollback') AS win_rollbacks,
       sumIf(amount, event_type = 'bonus_completed') AS bonus_cost
FROM events GROUP BY tenant_id, brand_id, bucket, player_id, currency;

-- Per player and currency, all time: what player-keyed figures without `from` read (revenue by a
-- player dimension, cohorts' money, reports by country or status) instead of every bucket.
CREATE TABLE IF NOT EXISTS rollup_player_totals (
  tenant_id     UUID,
  brand_id      UUID,
  player_id     String,
  currency      LowCardinality(String),
  events        UInt64,
  deposit_count UInt64,
  deposits      Decimal(38, 8),
  bets          Decimal(38, 8),
  wins          Decimal(38, 8),
  bet_rollbacks Decimal(38, 8),
  win_rollbacks Decimal(38, 8),
  bonus_cost    Decimal(38, 8)
)
ENGINE = SummingMergeTree
ORDER BY (tenant_id, brand_id, player_id, currency)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_player_totals_mv TO rollup_player_totals AS
SELECT tenant_id, brand_id, player_id, currency,
       count() AS events,
       countIf(event_type = 'deposit') AS deposit_count,
       sumIf(amount, event_type = 'deposit') AS deposits,
       sumIf(amount, event_type = 'bet') AS bets,
       sumIf(amount, event_type = 'win') AS wins,
       sumIf(amount, event_type = 'bet_rollback') AS bet_rollbacks,
       sumIf(amount, event_type = 'win_rollback') AS win_rollbacks,
       sumIf(amount, event_type = 'bonus_completed') AS bonus_cost
FROM events GROUP BY tenant_id, brand_id, player_id, currency;

-- Players active per calendar month (UTC): cohort retention.
CREATE TABLE IF NOT EXISTS rollup_player_months (
  tenant_id UUID,
  brand_id  UUID,
  month     Date,
  player_id String,
  events    UInt64
)
ENGINE = SummingMergeTree
ORDER BY (tenant_id, brand_id, month, player_id)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_player_months_mv TO rollup_player_months AS
SELECT tenant_id, brand_id, toStartOfMonth(event_time) AS month, player_id, count() AS events
FROM events GROUP BY tenant_id, brand_id, month, player_id;

-- One row per player: registration time (first `registration` event), first event, and the latest
-- non-empty value of each player dimension.
CREATE TABLE IF NOT EXISTS rollup_players (
  tenant_id     UUID,
  brand_id      UUID,
  player_id     String,
  registered_at SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
  first_seen_at SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
  first_received_at SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
  deposit_count SimpleAggregateFunction(sum, UInt64),
  first_deposit_at SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
  country       AggregateFunction(argMax, String, DateTime64(3, 'UTC')),
  device        AggregateFunction(argMax, String, DateTime64(3, 'UTC')),
  os            AggregateFunction(argMax, String, DateTime64(3, 'UTC')),
  browser       AggregateFunction(argMax, String, DateTime64(3, 'UTC')),
  platform      AggregateFunction(argMax, String, DateTime64(3, 'UTC'))
)
ENGINE = AggregatingMergeTree
ORDER BY (tenant_id, brand_id, player_id)
SETTINGS non_replicated_deduplication_window = 10000;

-- registered_at, first_deposit_at: 2299-12-31 stands for "none" (min() keeps any real one).
CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_players_mv TO rollup_players AS
SELECT tenant_id, brand_id, player_id,
       min(if(event_type = 'registration', event_time, toDateTime64('2299-12-31 00:00:00', 3, 'UTC'))) AS registered_at,
       min(event_time) AS first_seen_at,
       min(received_at) AS first_received_at,
       countIf(event_type = 'deposit') AS deposit_count,
       min(if(event_type = 'deposit', event_time, toDateTime64('2299-12-31 00:00:00', 3, 'UTC'))) AS first_deposit_at,
       argMaxState(toString(country), if(country != '', event_time, toDateTime64(0, 3, 'UTC'))) AS country,
       argMaxState(toString(device), if(device != '', event_time, toDateTime64(0, 3, 'UTC'))) AS device,
       argMaxState(toString(os), if(os != '', event_time, toDateTime64(0, 3, 'UTC'))) AS os,
       argMaxState(toString(browser), if(browser != '', event_time, toDateTime64(0, 3, 'UTC'))) AS browser,
       argMaxState(toString(platform), if(platform != '', event_time, toDateTime64(0, 3, 'UTC'))) AS platform
FROM events GROUP BY tenant_id, brand_id, player_id;

-- Backfill: events stored before these views existed. Migrations run at startup, before this process
-- moves any event; the guard keeps a re-run (crash before the migration was recorded) from counting twice.
INSERT INTO rollup_buckets
SELECT tenant_id, brand_id, toStartOfFifteenMinutes(event_time) AS bucket, event_type, currency, count(), sum(amount)
FROM events WHERE (SELECT count() FROM rollup_buckets) = 0
GROUP BY tenant_id, brand_id, bucket, event_type, currency;

INSERT INTO rollup_player_buckets
SELECT tenant_id, brand_id, toStartOfFifteenMinutes(event_time) AS bucket, player_id, currency,
       count(), countIf(event_type = 'deposit'), sumIf(amount, event_type = 'deposit'), sumIf(amount, event_type = 'bet'),
       sumIf(amount, event_type = 'win'), sumIf(amount, event_type = 'bet_rollback'), sumIf(amount, event_type = 'win_rollback'),
       sumIf(amount, event_type = 'bonus_completed')
FROM events WHERE (SELECT count() FROM rollup_player_buckets) = 0
GROUP BY tenant_id, brand_id, bucket, player_id, currency;

INSERT INTO rollup_players
SELECT tenant_id, brand_id, player_id,
       min(if(event_type = 'registration', event_time, toDateTime64('2299-12-31 00:00:00', 3, 'UTC'))),
       min(event_time), min(received_at), countIf(event_type = 'deposit'),
       min(if(event_type = 'deposit', event_time, toDateTime64('2299-12-31 00:00:00', 3, 'UTC'))),
       argMaxState(toString(country), if(country != '', event_time, toDateTime64(0, 3, 'UTC'))),
       argMaxState(toString(device), if(device != '', event_time, toDateTime64(0, 3, 'UTC'))),
       argMaxState(toString(os), if(os != '', event_time, toDateTime64(0, 3, 'UTC'))),
       argMaxState(toString(browser), if(browser != '', event_time, toDateTime64(0, 3, 'UTC'))),
       argMaxState(toString(platform), if(platform != '', event_time, toDateTime64(0, 3, 'UTC')))
FROM events WHERE (SELECT count() FROM rollup_players) = 0
GROUP BY tenant_id, brand_id, player_id;

INSERT INTO rollup_player_totals
SELECT tenant_id, brand_id, player_id, currency,
       count(), countIf(event_type = 'deposit'), sumIf(amount, event_type = 'deposit'), sumIf(amount, event_type = 'bet'),
       sumIf(amount, event_type = 'win'), sumIf(amount, event_type = 'bet_rollback'), sumIf(amount, event_type = 'win_rollback'),
       sumIf(amount, event_type = 'bonus_completed')
FROM events WHERE (SELECT count() FROM rollup_player_totals) = 0
GROUP BY tenant_id, brand_id, player_id, currency;

INSERT INTO rollup_player_months
SELECT tenant_id, brand_id, toStartOfMonth(event_time) AS month, player_id, count()
FROM events WHERE (SELECT count() FROM rollup_player_months) = 0
GROUP BY tenant_id, brand_id, month, player_id;

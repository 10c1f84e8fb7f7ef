-- Revenue by game, provider and category over all time (src/analytics/service.ts, revenue): the money of
-- the bets, wins and their rollbacks per month, game, provider, category, type and currency, instead of
-- every game event (~70 % of a casino's events). The distinct players of those routes still come from
-- `events`; revenue `from` an instant reads `events` too (its primary key prunes by day).
-- Kept exact like rollup_buckets: not keyed by player, so an erasure's copies are skipped (clickhouse/0011)
-- and the originals' figures stay; partitioned by month, so a retention drop (src/events/retention.ts)
-- drops the same partition.
CREATE TABLE IF NOT EXISTS rollup_game_months (
  tenant_id  UUID,
  brand_id   UUID,
  month      Date,
  game       LowCardinality(String),
  provider   LowCardinality(String),
  category   LowCardinality(String),
  event_type LowCardinality(String),
  currency   LowCardinality(String),
  events     UInt64,
  amount     Decimal(38, 8)
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(month)
ORDER BY (tenant_id, brand_id, month, game, provider, category, event_type, currency)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_game_months_mv TO rollup_game_months AS
SELECT tenant_id, brand_id, toStartOfMonth(event_time) AS month, game, provider, category, event_type, currency,
       count() AS events, sum(amount) AS amount
FROM events WHERE erasure_copy = 0 AND event_type IN ('bet', 'win', 'bet_rollback', 'win_rollback')
GROUP BY tenant_id, brand_id, month, game, provider, category, event_type, currency;

-- Backfill from the events already stored (once: a re-run after a crash finds rows and adds nothing).
INSERT INTO rollup_game_months
SELECT tenant_id, brand_id, toStartOfMonth(event_time) AS month, game, provider, category, event_type, currency, count(), sum(amount)
FROM events
WHERE erasure_copy = 0 AND event_type IN ('bet', 'win', 'bet_rollback', 'win_rollback') AND (SELECT count() FROM rollup_game_months) = 0
GROUP BY tenant_id, brand_id, month, game, provider, category, event_type, currency;

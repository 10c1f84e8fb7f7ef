-- EVENT_RETENTION_DAYS (src/events/retention.ts) drops whole months of `events` and the same partitions of
-- the rollups partitioned by month (rollup_buckets, rollup_player_buckets), and deletes the month's rows
-- of rollup_player_months. rollup_player_totals holds all time in one row per player and currency, so a
-- month cannot be dropped from it: what each dropped month had added is kept here, and the routes that
-- read all-time totals subtract it once any month was dropped (analytics/queries.ts, PLAYER_TOTALS_NET).
-- Keyed by the month and the drop's generation (the PostgreSQL ledger event_retention_drops, sql/0150):
-- an expiry repeated after a crash replaces its own rows instead of subtracting twice, and a later drop of
-- late events of the same month adds rows of its own. Signed counters: these rows are subtracted.
CREATE TABLE IF NOT EXISTS rollup_player_totals_expired (
  tenant_id     UUID,
  brand_id      UUID,
  player_id     String,
  currency      LowCardinality(String),
  month         String,
  generation    UInt32,
  events        Int64,
  deposit_count Int64,
  deposits      Decimal(38, 8),
  bets          Decimal(38, 8),
  wins          Decimal(38, 8),
  bet_rollbacks Decimal(38, 8),
  win_rollbacks Decimal(38, 8),
  bonus_cost    Decimal(38, 8)
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, brand_id, player_id, currency, month, generation);

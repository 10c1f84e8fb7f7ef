-- Ingested player events: one row per stored event, canonical columns next to the raw event. Derived
-- fields without a column (email, phone, name, reason) are in `raw` (and in PostgreSQL): no JSON copy.
-- Analytics read by (tenant, brand, time, type); exports page by `seq` (insertion order, see docs/ingestion.md).
-- amount is Decimal(38, 8): sums of money stay exact (Float64 would drift on sums of cents).
CREATE TABLE IF NOT EXISTS events (
  tenant_id    UUID,
  brand_id     UUID,
  event_id     String,
  player_id    String,
  event_type   LowCardinality(String),
  source_type  LowCardinality(String),
  event_time   DateTime64(3, 'UTC'),
  received_at  DateTime64(3, 'UTC'),
  seq          UInt64,
  session_id   String,
  amount       Decimal(38, 8),
  currency     LowCardinality(String),
  method       LowCardinality(String),
  game         String,
  provider     LowCardinality(String),
  category     LowCardinality(String),
  round_id     String,
  country      LowCardinality(String),
  language     LowCardinality(String),
  device       LowCardinality(String),
  os           LowCardinality(String),
  browser      LowCardinality(String),
  platform     LowCardinality(String),
  status       LowCardinality(String),
  bonus_id     String,
  channel      LowCardinality(String),
  granted      Nullable(UInt8),
  raw          String,
  -- Dedupe verification looks events up by event_id (src/events/dedupe.ts); exports page by seq.
  INDEX idx_event_id event_id TYPE bloom_filter(0.01) GRANULARITY 4,
  INDEX idx_seq seq TYPE minmax GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(event_time)
ORDER BY (tenant_id, brand_id, toDate(event_time), event_type, player_id, seq);

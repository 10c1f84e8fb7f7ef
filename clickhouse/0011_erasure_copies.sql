-- An erasure (src/players/data-rights.ts) copies a player's events under a token, then deletes the
-- originals. Materialized views see inserts only, never deletes, so each kind of rollup is kept exact its
-- own way:
--  - rollups keyed by player (rollup_player_*, rollup_players) take the copies, under the token, and the
--    erasure deletes the original player's rows from them afterwards;
--  - rollup_buckets, not keyed by player, keeps counting the originals' figures: the copies are the same
--    events, so it skips them (erasure_copy = 1).
ALTER TABLE events ADD COLUMN IF NOT EXISTS erasure_copy UInt8 DEFAULT 0;

ALTER TABLE rollup_buckets_mv MODIFY QUERY
SELECT tenant_id, brand_id, toStartOfFifteenMinutes(event_time) AS bucket, event_type, currency,
       count() AS events, sum(amount) AS amount
FROM events WHERE erasure_copy = 0 GROUP BY tenant_id, brand_id, bucket, event_type, currency;

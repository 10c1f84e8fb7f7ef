-- Which players ever had an event of each type, and of each game, provider and category, over all time
-- (src/analytics/service.ts: reports players × event_type and × game, revenue by game, provider and
-- category): one row per (dimension, key, player) with the player's latest such event, instead of every
-- event. `game`, `provider` and `category` rows come from game events (GAME_TYPES in
-- src/analytics/queries.ts), the revenue routes' players; `other_game` rows from the other events (their
-- game, '' for almost all), which reports by game add. On the bench's 10M events: 2.2M rows for event
-- types (of 10M events), 6.2M for games, 3.3M for providers and 1.0M for categories (of 6.4M game events),
-- 0.2M other games. A count by game over these rows hashes as many players as over the events, and still
-- takes ~40 % less: the rows of one key are adjacent, so its set is built while it is in the cache.
--
-- AggregatingMergeTree: rows of parts not yet merged repeat a (dimension, key, player), which a distinct
-- count does not mind. Not partitioned (all time in one row per key and player), so a retention drop
-- (src/events/retention.ts) deletes the rows whose latest event is in the months dropped, which are the
-- oldest: a row with a later event stays, and with it the player. Keyed by player, so an erasure deletes
-- and rebuilds its rows like every per-player rollup (src/players/data-rights.ts) and the copies count.
CREATE TABLE IF NOT EXISTS rollup_player_keys (
  tenant_id  UUID,
  brand_id   UUID,
  dimension  LowCardinality(String),
  key        LowCardinality(String),
  player_id  String,
  last_event SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
)
ENGINE = AggregatingMergeTree
ORDER BY (tenant_id, brand_id, dimension, key, player_id)
SETTINGS non_replicated_deduplication_window = 10000;

-- Every event gives its type; a game event its game, provider and category, another event its game as
-- `other_game`; empty ones included (the routes' null key).
CREATE MATERIALIZED VIEW IF NOT EXISTS rollup_player_keys_mv TO rollup_player_keys AS
SELECT tenant_id, brand_id, dk.1 AS dimension, dk.2 AS key, player_id, max(event_time) AS last_event
FROM events
ARRAY JOIN if(event_type IN ('bet', 'win', 'bet_rollback', 'win_rollback', 'game_start'),
              [('event_type', toString(event_type)), ('game', toString(game)), ('provider', toString(provider)), ('category', toString(category))],
              [('event_type', toString(event_type)), ('other_game', toString(game))]) AS dk
GROUP BY tenant_id, brand_id, dimension, key, player_id;

-- Backfill from the events already stored (once: a re-run after a crash finds rows and adds nothing).
INSERT INTO rollup_player_keys
SELECT tenant_id, brand_id, dk.1 AS dimension, dk.2 AS key, player_id, max(event_time) AS last_event
FROM events
ARRAY JOIN if(event_type IN ('bet', 'win', 'bet_rollback', 'win_rollback', 'game_start'),
              [('event_type', toString(event_type)), ('game', toString(game)), ('provider', toString(provider)), ('category', toString(category))],
              [('event_type', toString(event_type)), ('other_game', toString(game))]) AS dk
WHERE (SELECT count() FROM rollup_player_keys) = 0
GROUP BY tenant_id, brand_id, dimension, key, player_id;

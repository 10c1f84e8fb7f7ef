-- The gamification consumer reads a batch's players' tournament rows (player_id = any(...) and
-- tournament_id = any(...)). With the key led by tournament_id, the btree probed every (tournament,
-- player) pair of the two lists: ~5,000 probes and 12-45 ms a 500-event batch under the bench's load.
-- Led by player_id, it reads each player's few rows once. Per-tournament reads (ranks, counts, the
-- leaderboard rebuild) use tournament_participants_rank, which leads with tournament_id.
alter table tournament_participants drop constraint tournament_participants_pkey;
alter table tournament_participants add primary key (player_id, tournament_id);

-- Mission and badge progress rows are rewritten by nearly every batch that touches their player (the
-- gamification engine's set-based upserts, src/gamification/engine.ts step 4). With full pages each
-- rewrite was a new tuple on another page plus a new primary-key entry, and the next batch's read walked
-- the dead versions; room on the page lets PostgreSQL update them in place (HOT: no index entry).
alter table player_missions set (fillfactor = 70);
alter table player_badge_progress set (fillfactor = 70);
alter table player_gamification set (fillfactor = 80);

-- The progress jsonb repeated value, stage and period_start (sql/0081), was built for every rewritten row
-- and read by nothing; a player's data export showed it beside the columns it copied.
alter table player_missions drop column if exists progress;

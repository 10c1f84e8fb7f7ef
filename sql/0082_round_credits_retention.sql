-- Round credits (what a bet/win added, for its rollback) are kept 7 days; the engine's timer deletes older
-- ones by this index.
create index gamification_round_credits_age on gamification_round_credits (created_at);

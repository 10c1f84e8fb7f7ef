-- A capped tournament now counts its participant rows while its row is locked (src/gamification/engine.ts,
-- 3c), exact also when max_participants is set or changed on a running tournament; an uncapped one locks
-- nothing. The counter every batch updated (a hot row per tournament) goes.
alter table tournaments drop column if exists participants;

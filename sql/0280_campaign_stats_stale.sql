-- A finished campaign's stored stats (the list shows them) are refreshed by the engine for a day after it
-- ends; what changes them later (an open, click, unsubscribe or inbox read, a conversion within a long
-- window) marks them stale, and the engine's next refresh counts them again (campaigns/stats.ts).
alter table campaigns add column if not exists stats_stale boolean not null default false;

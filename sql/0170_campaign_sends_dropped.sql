-- The exactly-once key of a campaign's sends is now the notification's own idempotency key, unique per
-- tenant (sql/0070 notifications_idempotency; src/campaigns/sends.ts): campaign_sends wrote the same key a
-- second time for every message.
drop table if exists campaign_sends;

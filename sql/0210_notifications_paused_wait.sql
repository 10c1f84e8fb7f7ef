-- A queued message the dispatcher found waiting on its paused campaign (its retry, if any, was already
-- due then). Resuming the campaign makes these due at once, together with the messages never attempted;
-- a message still waiting out a retry delay keeps it (campaigns/execution.ts, onStatusChange).
alter table notifications add column if not exists paused_wait boolean not null default false;

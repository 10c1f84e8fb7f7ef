-- The delivery queue as the shared work loop (src/engine/work-loop.ts) claims it: due_at is when the row may
-- next be claimed (scheduled time, retry time, or the end of a claim's lease), lease_owner the claim's
-- token. scheduled_at stays the public "not before" (quiet hours hold move it). The actor key groups a
-- brand's channel, so each channel target (an SMTP pool, a bot) has its own concurrency limit.
alter table notifications
  add column if not exists due_at timestamptz not null default now(),
  add column if not exists lease_owner text,
  add column if not exists dispatch_key text generated always as (channel || ':' || brand_id::text) stored;
update notifications set due_at = scheduled_at where status = 'queued';
create index if not exists notifications_due_at on notifications (due_at) where status = 'queued';
drop index if exists notifications_due;
alter table notifications drop column if exists lease_until;

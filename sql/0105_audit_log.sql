-- The audit trail (src/audit/service.ts): one row per admin-API call and per change of settings, keys,
-- mappings and webhooks, written in the transaction of the change. Secrets are masked before they get here.
--   actor:        'admin' (the platform owner's ADMIN_KEY) or 'key' (an operator API key, actor_key_id)
--   action:       the route's operationId (adminSetEventMapping, createWebhook, ...)
--   target_*:     what was acted on, when one thing was
create table audit_log (
  id            bigint generated always as identity primary key,
  tenant_id     uuid,
  actor         text not null check (actor in ('admin', 'key', 'system')),
  actor_key_id  uuid,
  action        text not null,
  target_type   text,
  target_id     text,
  before        jsonb,
  after         jsonb,
  request_id    text,
  created_at    timestamptz not null default now()
);
-- GET /admin/audit pages newest first, over everything or one tenant.
create index audit_log_tenant on audit_log (tenant_id, id desc);

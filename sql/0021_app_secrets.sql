-- Installation-wide secrets generated on first use and shared by every process (src/lib/cursor.ts signs
-- opaque pagination cursors with the one named 'cursor'). Never exposed through the API.
create table app_secrets (
  name        text primary key,
  secret      bytea not null,
  created_at  timestamptz not null default now()
);

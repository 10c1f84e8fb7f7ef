-- The event stream (src/engine/event-stream.ts, docs/engines.md "Event stream"): one row per (consumer,
-- stored event some active rule of that consumer could match), written in the same transaction that
-- commits the event to the spool, deleted in the transaction that applies it. So an acknowledged event is
-- never lost (it commits with the 200's transaction) and never applied twice (its row and its effect
-- commit together).
create table event_stream (
  id bigserial primary key,
  consumer text not null,
  tenant_id uuid not null,
  brand_id uuid not null,
  -- Looked up when written (the player row commits in the same transaction); null only if it vanished.
  player_id uuid,
  external_id text not null,
  event_id text,
  event_type text not null,
  source_type text not null,
  event_time timestamptz not null,
  received_at timestamptz not null,
  -- The canonical fields derived by the mapping (amount as an exact decimal string), and the payload.
  fields jsonb not null,
  payload jsonb,
  -- A handler that threw: retried after available_at; set aside (failed_at) after too many attempts.
  attempts int not null default 0,
  available_at timestamptz not null default now(),
  failed_at timestamptz,
  error text
);

-- The claim: a consumer's oldest available rows.
create index event_stream_claim on event_stream (consumer, id) where failed_at is null;

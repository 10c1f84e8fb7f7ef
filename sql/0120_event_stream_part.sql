-- The event stream's lanes (src/engine/event-stream.ts, docs/engines.md "Event stream"): each row carries a
-- hash of its player (brand + external id, the player's key at ingestion, so rows whose player_id is null
-- hash too). A process runs several claim loops per consumer, loop i of n claiming only rows with
-- part % n = i: one player's rows always go to the same loop, so they are applied in stream order while
-- other players' rows are applied in parallel. n is a process setting (EVENT_STREAM_LOOPS), not stored:
-- part is 0..32767 whatever n is.
create function event_stream_part(brand_id uuid, external_id text) returns smallint
  language sql immutable parallel safe
  as $$ select (hashtext(brand_id::text || ':' || external_id) & 32767)::smallint $$;

alter table event_stream add column part smallint;
-- Rows already waiting (an upgrade with a backlog) get theirs too: a player's old and new rows then share a loop.
update event_stream set part = event_stream_part(brand_id, external_id);
alter table event_stream alter column part set not null;

-- The times a campaign was paused, as [paused_at, resumed_at or null] pairs (ISO text), oldest first. The
-- campaigns consumer judges an event by when it was received, not when the stream applies it: one stored
-- while the campaign was paused enrolls nobody even when applied after the resume, and one stored while it
-- ran still counts when applied during a later pause (campaigns/events.ts).
alter table campaigns add column if not exists paused_spans jsonb not null default '[]';
-- Campaigns paused when this runs: paused since their last change, as far as anyone can tell.
update campaigns set paused_spans = jsonb_build_array(jsonb_build_array(to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), null))
where status = 'paused' and paused_spans = '[]'::jsonb;

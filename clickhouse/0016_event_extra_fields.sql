-- The canonical fields without a column of their own (email, phone, name, timezone, reason: contract.md
-- "Canonical events"), as the event mapping derived them, for exports (engines §6: an `events` row carries
-- its type's canonical fields): a JSON object, '' for an event with none (every type but registration,
-- profile_update and status_change). One String column, empty for most rows: one byte per event on insert,
-- and no analytics query reads it. Rows stored before it read ''.
ALTER TABLE events ADD COLUMN IF NOT EXISTS extra_fields String DEFAULT '';

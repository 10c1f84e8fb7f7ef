-- `game` as LowCardinality(String), like provider and category: an operator has hundreds to a few
-- thousand games, and the routes that group game events by game (revenue by game, reports by game)
-- hashed the full string of every row. A mutation rewrites the column of the parts already stored, once
-- (synchronously here, so the process starts on the new type); RowBinary inserts are unchanged (a
-- LowCardinality(String) value is written as a String).
ALTER TABLE events MODIFY COLUMN game LowCardinality(String) SETTINGS mutations_sync = 2;

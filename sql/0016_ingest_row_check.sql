-- Ingestion sends a group's statements and its COMMIT to PostgreSQL together (pipelined, no round trip in
-- between), so a statement that finds fewer rows than it was given must fail by itself, turning the COMMIT
-- into a ROLLBACK: the profile update checks its row count with this function. SQLSTATE RSP01 tells the
-- writer that players it believed to exist were deleted meanwhile.
create or replace function respin_expect_rows(expected bigint, actual bigint, what text) returns bigint
language plpgsql as $$
begin
  if expected <> actual then
    raise exception using errcode = 'RSP01', message = format('%s: expected %s rows, found %s', what, expected, actual);
  end if;
  return actual;
end $$;

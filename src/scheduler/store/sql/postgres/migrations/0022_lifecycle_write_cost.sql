-- 0022: what a task's lifecycle writes (issue 41, the stampede's PostgreSQL WAL).
-- The completion ledger's index on completed_at alone becomes a BRIN index: no statement
-- reads the ledger through an index by that column alone (the watchdog reads it by
-- tenant and type, job or schedule), the rows arrive in completed_at order, and a
-- time window still reads only its own block ranges (autosummarize: a range is
-- summarised once filled, not at the next vacuum); a completion no longer adds a btree
-- entry (65 B of WAL a task). Task partitions are filled to 70% by inserts
-- (fillfactor): every state change of a task is a non-HOT update (status is in the
-- predicates of the partial indexes), and with room on its page the new version of
-- the dispatch and of the completion stays there: a smaller WAL record (prefix and
-- suffix compression), no lock record for the old version, and pruning reclaims the
-- dead versions in place, so a finished partition ends smaller than one filled to
-- 100% (docs/benchmarks.md, "PostgreSQL's writes a task"). New partitions get it from
-- tickwheel_ensure_partition, existing ones for their future inserts (no rewrite).
DROP INDEX idx_task_completions_at;
CREATE INDEX idx_task_completions_at ON task_completions USING brin (completed_at)
    WITH (autosummarize = on);

CREATE OR REPLACE FUNCTION tickwheel_ensure_partition(day DATE) RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
DECLARE
    part TEXT := 'tasks_p' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(7429001, (day - DATE '2000-01-01'));
    IF to_regclass(part) IS NOT NULL THEN
        RETURN FALSE;
    END IF;
    EXECUTE format(
        'CREATE TABLE %I PARTITION OF tasks FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 70)',
        part,
        (day::timestamp AT TIME ZONE 'UTC'),
        ((day + 1)::timestamp AT TIME ZONE 'UTC'));
    PERFORM tickwheel_secure_partition(part);
    RETURN TRUE;
END;
$$;

DO $$
DECLARE
    r RECORD;
BEGIN
    FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'tasks'::regclass LOOP
        EXECUTE format('ALTER TABLE %I SET (fillfactor = 70)', r.relname);
    END LOOP;
END
$$;

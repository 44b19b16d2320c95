-- 0022: what a task's lifecycle writes (issue 41, the stampede's PostgreSQL CPU and WAL).
-- The completion ledger's index on completed_at alone is a BRIN index: no statement
-- reads the ledger by that column alone through an index (the watchdog reads it by
-- tenant and type, job or schedule), and the rows arrive in completed_at order, so a
-- time window still reads only its own block ranges, while a completion no longer adds
-- a btree entry (one of the two a ledger row had: 65 B of WAL and a btree descent a
-- task). Task partitions are filled to 70% by inserts (fillfactor), leaving room on the
-- page for the new versions of a task's dispatch and completion (every state change is
-- a non-HOT update: status is in the predicates of the partial indexes): an update on
-- the tuple's own page writes a smaller WAL record (prefix and suffix compression) and
-- no lock record for the old version, needs no free-space-map search, and pruning
-- reclaims the dead versions in place, so a finished partition ends smaller than one
-- filled to 100%. New partitions get it from tickwheel_ensure_partition; existing ones
-- for their future inserts (no rewrite).
DROP INDEX idx_task_completions_at;
CREATE INDEX idx_task_completions_at ON task_completions USING brin (completed_at);

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

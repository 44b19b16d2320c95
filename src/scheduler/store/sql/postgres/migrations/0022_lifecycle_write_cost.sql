-- 0022: what a task's completion writes (issue 41, the stampede's PostgreSQL WAL).
-- The completion ledger's index on completed_at alone becomes a BRIN index: no statement
-- reads the ledger through an index by that column alone (the watchdog reads it by
-- tenant and type, job or schedule), the rows arrive in completed_at order, and a
-- time window still reads only its own block ranges (autosummarize: a range is
-- summarised once filled, not at the next vacuum); a completion no longer adds a btree
-- entry (65 B of WAL a task). Task partitions stay at fillfactor 100: at 70 the
-- dispatch and completion wrote 117 B less WAL a task at the same CPU, but the 100k
-- burst started 25-35% fewer tasks a second (docs/benchmarks.md, "PostgreSQL's writes
-- a task").
DROP INDEX idx_task_completions_at;
CREATE INDEX idx_task_completions_at ON task_completions USING brin (completed_at)
    WITH (autosummarize = on);

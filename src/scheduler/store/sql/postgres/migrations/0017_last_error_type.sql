-- 0017: a failed attempt's error type and traceback as the worker sent them
-- (Failure.error_type, Failure.traceback; issue 36): the dashboard's task page shows
-- them on top. NULL: none sent, or the last error was not a worker's (a lease expiry,
-- an upstream failure).
ALTER TABLE tasks ADD COLUMN last_error_type TEXT;
ALTER TABLE tasks ADD COLUMN last_traceback TEXT;
-- ListWorkers' overdue groups (by tenant, type and pool, the "no worker" badge) read
-- the forecast's due_at index, which now carries the type too: an index-only range
-- scan of the overdue entries (70-330 ms for 0-100,000 overdue of 1,000,000 tasks on a
-- loaded 2-core machine), where without the type the planner took a parallel
-- sequential scan of every task (1.1-1.4 s).
DROP INDEX idx_tasks_forecast_due;
CREATE INDEX idx_tasks_forecast_due ON tasks (due_at) INCLUDE (pool, tenant_id, type)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');

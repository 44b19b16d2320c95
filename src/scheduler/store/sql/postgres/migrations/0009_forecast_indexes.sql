-- 0009: GetForecast (issue 18) counts the tasks still to fire (SCHEDULED, PRELOADED,
-- RETRYING) by due_at (firing, overdue) and by scheduled_at (nominal) over a window.
-- No index covered those three states (idx_tasks_claimable: SCHEDULED and RETRYING;
-- idx_tasks_preloader: SCHEDULED and PRELOADED), so each part was a sequential scan of
-- every partition: 466 ms for the next hour with 1,000,000 tasks. Partial covering
-- indexes make each part an index-only range scan (157 ms; docs/benchmarks.md). A task
-- enters them on insert and on the move to PRELOADED, and leaves them when dispatched.
CREATE INDEX idx_tasks_forecast_due ON tasks (due_at) INCLUDE (pool, tenant_id)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');
CREATE INDEX idx_tasks_forecast_nominal ON tasks (scheduled_at) INCLUDE (pool, tenant_id)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');

-- SQLite statements for DAG workflows, cron schedules, expectations and canaries
-- (issue 8). Times are integer microseconds (UTC), ids text.

-- name: insert_workflow
INSERT INTO workflows (id, tenant_id, name, idempotency_key, on_upstream_failure, node_count,
    created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING *

-- name: workflow_by_key
SELECT * FROM workflows WHERE tenant_id = ? AND idempotency_key = ?

-- name: get_workflow
SELECT * FROM workflows WHERE id = ?

-- name: workflow_tasks
SELECT * FROM tasks WHERE workflow_id = ? ORDER BY scheduled_at, id

-- name: workflow_edges
SELECT parent_task_id, child_task_id FROM task_dependencies WHERE workflow_id = ?

-- name: failed_parent_policy
SELECT w.on_upstream_failure FROM tasks t JOIN workflows w ON w.id = t.workflow_id
WHERE t.id = ? AND t.scheduled_at = ? AND t.status IN ({{states:DEAD_LETTER,CANCELLED}})

-- name: resolve_child
-- Policy continue: one failed parent counts as resolved for this child. Only the
-- counter moves (never below zero); the child stays SCHEDULED for the pre-loader.
UPDATE tasks SET unresolved_dependencies = max(unresolved_dependencies - 1, 0), updated_at = ?
WHERE id = ? AND unresolved_dependencies > 0

-- name: cancel_waiting
UPDATE tasks SET status = 'CANCELLED', last_error = ?, last_error_type = NULL,
    last_traceback = NULL, updated_at = ?
WHERE id = ? AND status IN ({{from:SCHEDULED|to:CANCELLED}})
RETURNING id, scheduled_at, fencing_token

-- name: insert_schedule
INSERT INTO cron_schedules (id, tenant_id, name, cron_expr, timezone, task_type, payload, pool,
    strict_timing, jitter_mode, max_retries, enabled, next_fire_at, last_fired_at, created_at,
    updated_at, interval_s, overlap_policy, catchup_window_s, jitter_s, timeout_s, buffered_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 'none', ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, NULL)
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING *

-- name: get_schedule
SELECT * FROM cron_schedules WHERE id = ?

-- name: list_schedules
SELECT * FROM cron_schedules WHERE tenant_id = ? ORDER BY name

-- name: set_schedule_enabled
UPDATE cron_schedules SET enabled = ?, next_fire_at = ?, buffered_at = NULL, updated_at = ?
WHERE id = ?
RETURNING *

-- name: delete_schedule
DELETE FROM cron_schedules WHERE id = ?

-- name: due_schedules
SELECT * FROM cron_schedules
WHERE enabled AND (next_fire_at <= ? OR buffered_at IS NOT NULL)
ORDER BY next_fire_at
LIMIT ?

-- name: advance_schedule
UPDATE cron_schedules SET next_fire_at = ?, last_fired_at = coalesce(?, last_fired_at),
    buffered_at = ?, updated_at = ?
WHERE id = ? AND next_fire_at IS ? AND enabled
RETURNING id

-- name: active_schedule_tasks
SELECT count(*) FROM tasks
WHERE schedule_id = ?
  AND status IN ({{states:SCHEDULED,PRELOADED,DISPATCHED,RUNNING,RETRYING}})

-- name: upsert_expectation
INSERT INTO job_expectations (id, tenant_id, job_id, interval_s, tolerance_s, created_at,
    schedule_id, max_runtime_s)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant_id, job_id) DO UPDATE SET interval_s = excluded.interval_s,
    tolerance_s = excluded.tolerance_s, schedule_id = excluded.schedule_id,
    max_runtime_s = excluded.max_runtime_s
RETURNING *

-- name: list_expectations
SELECT * FROM job_expectations WHERE (? IS NULL OR tenant_id = ?) ORDER BY tenant_id, job_id

-- name: canary_insert
INSERT INTO canary_executions (id, scheduled_time, status) VALUES (?, ?, 'PENDING')
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: canary_update
UPDATE canary_executions SET
    dispatched_time = coalesce(dispatched_time, ?),
    completed_time = coalesce(?, completed_time),
    status = CASE WHEN ? IS NOT NULL THEN 'COMPLETED'
                  WHEN ? IS NOT NULL THEN 'DISPATCHED' ELSE status END
WHERE id = ?

-- History, workflows list/cancel, expectations delete (issue 19)
-- name: list_workflows
SELECT * FROM workflows WHERE tenant_id = ? ORDER BY created_at DESC, id DESC LIMIT ?

-- name: delete_expectation
DELETE FROM job_expectations WHERE tenant_id = ? AND job_id = ?

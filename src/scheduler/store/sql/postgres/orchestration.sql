-- PostgreSQL statements for DAG workflows, cron schedules, expectations and canaries
-- (issue 8). The hot path (completion -> child decrement) stays in queries.sql.

-- name: insert_workflow
INSERT INTO workflows (id, tenant_id, name, idempotency_key, on_upstream_failure, node_count,
    created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING *

-- name: workflow_by_key
SELECT * FROM workflows WHERE tenant_id = $1 AND idempotency_key = $2

-- name: get_workflow
SELECT * FROM workflows WHERE id = $1

-- name: workflow_tasks
-- One probe of idx_tasks_workflow per partition (a workflow's tasks may span days).
SELECT * FROM tasks WHERE workflow_id = $1 ORDER BY scheduled_at, id

-- name: workflow_edges
SELECT parent_task_id, child_task_id FROM task_dependencies WHERE workflow_id = $1

-- name: failed_parent_policies
-- Of the given keys, the workflow tasks that are DEAD_LETTER or CANCELLED, with policy.
-- Run inside the transaction that moved them (PostgresOrchestration._apply_upstream).
SELECT t.id, t.scheduled_at, w.on_upstream_failure
FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, scheduled_at)
JOIN tasks t ON t.id = u.id AND t.scheduled_at = u.scheduled_at
JOIN workflows w ON w.id = t.workflow_id
WHERE t.status IN ({{states:DEAD_LETTER,CANCELLED}})
  AND t.scheduled_at >= $3 AND t.scheduled_at <= $4

-- name: cancel_descendants
-- Every waiting descendant of the parents $1 -> CANCELLED (reason $3). Descendants of
-- a parent that never completed are all SCHEDULED with a count above zero.
WITH RECURSIVE down(id, scheduled_at) AS (
    SELECT d.child_task_id, d.child_scheduled_at
    FROM task_dependencies d WHERE d.parent_task_id = ANY($1::uuid[])
    UNION
    SELECT d.child_task_id, d.child_scheduled_at
    FROM task_dependencies d JOIN down ON d.parent_task_id = down.id
), c AS (
    UPDATE tasks t SET status = 'CANCELLED', last_error = $3, last_error_type = NULL,
        last_traceback = NULL, updated_at = $2
    FROM down
    WHERE t.id = down.id AND t.scheduled_at = down.scheduled_at
      AND t.status IN ({{from:SCHEDULED|to:CANCELLED}})
    RETURNING t.id, t.scheduled_at, t.fencing_token
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT id, scheduled_at, 'SCHEDULED', 'CANCELLED', fencing_token, $4, $2, $3 FROM c
)
SELECT id, scheduled_at FROM c

-- name: resolve_children
-- Policy continue: the failed parents $1 count as resolved for their direct children.
-- Only the counters move (never below zero); the children stay SCHEDULED and the
-- pre-loader's claim_preload takes those at zero like any due task. $2 now.
WITH edges AS (
    SELECT d.child_task_id AS id, d.child_scheduled_at AS scheduled_at, count(*)::int AS n
    FROM task_dependencies d
    WHERE d.parent_task_id = ANY($1::uuid[])
    GROUP BY 1, 2
)
UPDATE tasks t SET
    unresolved_dependencies = greatest(t.unresolved_dependencies - e.n, 0),
    updated_at = $2
FROM edges e
WHERE t.id = e.id AND t.scheduled_at = e.scheduled_at AND t.unresolved_dependencies > 0
RETURNING t.id, t.scheduled_at, t.unresolved_dependencies, t.shard_id

-- name: insert_schedule
INSERT INTO cron_schedules (id, tenant_id, name, cron_expr, timezone, task_type, payload, pool,
    strict_timing, jitter_mode, max_retries, enabled, next_fire_at, last_fired_at, created_at,
    updated_at, interval_s, overlap_policy, catchup_window_s, jitter_s, timeout_s, buffered_at)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, TRUE, 'none', $9, $10, $11, NULL, $12, $12,
    $13, $14, $15, $16, $17, NULL)
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING *

-- name: get_schedule
SELECT * FROM cron_schedules WHERE id = $1

-- name: list_schedules
SELECT * FROM cron_schedules WHERE tenant_id = $1 ORDER BY name

-- name: set_schedule_enabled
UPDATE cron_schedules SET enabled = $2, next_fire_at = $3, buffered_at = NULL, updated_at = $4
WHERE id = $1
RETURNING *

-- name: delete_schedule
DELETE FROM cron_schedules WHERE id = $1

-- name: due_schedules
SELECT * FROM cron_schedules
WHERE enabled AND (next_fire_at <= $1 OR buffered_at IS NOT NULL)
ORDER BY next_fire_at
LIMIT $2

-- name: advance_schedule
UPDATE cron_schedules SET next_fire_at = $3, last_fired_at = coalesce($4, last_fired_at),
    buffered_at = $5, updated_at = $6
WHERE id = $1 AND next_fire_at IS NOT DISTINCT FROM $2 AND enabled
RETURNING id

-- name: active_schedule_tasks
SELECT schedule_id, count(*) FROM tasks
WHERE schedule_id = ANY($1::uuid[])
  AND status IN ({{states:SCHEDULED,PRELOADED,DISPATCHED,RUNNING,RETRYING}})
GROUP BY schedule_id

-- name: upsert_expectation
INSERT INTO job_expectations (id, tenant_id, job_id, interval_s, tolerance_s, created_at,
    schedule_id, max_runtime_s)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, job_id) DO UPDATE SET interval_s = EXCLUDED.interval_s,
    tolerance_s = EXCLUDED.tolerance_s, schedule_id = EXCLUDED.schedule_id,
    max_runtime_s = EXCLUDED.max_runtime_s
RETURNING *

-- name: list_expectations
SELECT * FROM job_expectations WHERE ($1::uuid IS NULL OR tenant_id = $1) ORDER BY tenant_id, job_id

-- name: canary_insert
INSERT INTO canary_executions (id, scheduled_time, status) VALUES ($1, $2, 'PENDING')
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: canary_update
UPDATE canary_executions SET
    dispatched_time = coalesce(dispatched_time, $2),
    completed_time = coalesce($3, completed_time),
    status = CASE WHEN $3::timestamptz IS NOT NULL THEN 'COMPLETED'
                  WHEN $2::timestamptz IS NOT NULL THEN 'DISPATCHED' ELSE status END
WHERE id = $1

-- History, workflows list/cancel, expectations delete (issue 19)
-- name: list_workflows
SELECT * FROM workflows WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2

-- name: delete_expectation
DELETE FROM job_expectations WHERE tenant_id = $1 AND job_id = $2

-- SQLite statements (one connection, one thread; a batch is a loop inside one
-- transaction). Guards are expanded from scheduler.states like the PostgreSQL ones.

-- name: insert_tenant
INSERT INTO tenants VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: get_tenant
SELECT * FROM tenants WHERE id = ?

-- name: known_tenant
SELECT 1 FROM tenants WHERE id = ?

-- name: update_tenant
UPDATE tenants SET name = ?, tier = ?, rate_limit_rps = ?,
    max_concurrent_workers = ?, home_region = ?
WHERE id = ?

-- name: insert_api_key
INSERT INTO api_keys (id, tenant_id, name, secret_hash, created_at) VALUES (?, ?, ?, ?, ?)

-- name: tenant_for_key_hash
SELECT tenant_id FROM api_keys WHERE secret_hash = ?1 AND NOT revoked
    AND (expires_at IS NULL OR expires_at > ?2)

-- name: insert_task
INSERT INTO tasks (id, tenant_id, type, scheduled_at, due_at, status, idempotency_key,
    max_retries, payload, unresolved_dependencies, shard_id, pool, strict_timing,
    jitter_mode, timeout_s, trace_context, workflow_id, schedule_id, created_at, updated_at,
    retry_policy, concurrency_key, rate_limit_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING

-- name: debounce_key
SELECT task_id, first_at FROM debounce_keys WHERE tenant_id = ? AND debounce_key = ?

-- name: set_debounce_key
-- $1 tenant, $2 key, $3 task, $4 first submission (µs)
INSERT INTO debounce_keys (tenant_id, debounce_key, task_id, first_at) VALUES (?, ?, ?, ?)
ON CONFLICT (tenant_id, debounce_key)
DO UPDATE SET task_id = excluded.task_id, first_at = excluded.first_at

-- name: debounce_push
-- The burst's task, if still pending: its new due time, and the latest payload (or NULL
-- to keep the first).
UPDATE tasks SET due_at = max(due_at, ?), payload = coalesce(?, payload), updated_at = ?
WHERE id = ? AND status IN ('SCHEDULED', 'PRELOADED')

-- name: throttle_key
SELECT task_id, next_at FROM throttle_keys WHERE tenant_id = ? AND throttle_key = ?

-- name: set_throttle_key
INSERT INTO throttle_keys (tenant_id, throttle_key, task_id, next_at) VALUES (?, ?, ?, ?)
ON CONFLICT (tenant_id, throttle_key)
DO UPDATE SET task_id = excluded.task_id, next_at = excluded.next_at

-- name: set_key_window
UPDATE tasks SET key_expires_at = ?, key_until_finished = ? WHERE id = ?

-- name: retire_key
-- The key's window is over: the old task's key gets char(1) and its id appended (read
-- back without them), which frees the key (issue 43).
UPDATE tasks SET idempotency_key = idempotency_key || char(1) || id WHERE id = ?

-- name: task_by_idempotency
SELECT * FROM tasks WHERE tenant_id = ? AND idempotency_key = ?

-- name: get_task
SELECT * FROM tasks WHERE id = ?

-- name: get_task_by_key
SELECT * FROM tasks WHERE id = ? AND scheduled_at = ?

-- name: list_tasks
SELECT * FROM tasks WHERE tenant_id = ?1
  AND (?2 IS NULL OR status IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR type = ?3) AND scheduled_at >= ?4 AND scheduled_at < ?5
  AND (?9 IS NULL OR pool IN (SELECT value FROM json_each(?9)))
  AND (scheduled_at > ?6 OR (scheduled_at = ?6 AND id > ?7))
ORDER BY scheduled_at, id LIMIT ?8

-- name: list_tasks_scheduled_desc
SELECT * FROM tasks WHERE tenant_id = ?1
  AND (?2 IS NULL OR status IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR type = ?3) AND scheduled_at >= ?4 AND scheduled_at < ?5
  AND (?9 IS NULL OR pool IN (SELECT value FROM json_each(?9)))
  AND (scheduled_at < ?6 OR (scheduled_at = ?6 AND id < ?7))
ORDER BY scheduled_at DESC, id DESC LIMIT ?8

-- name: list_tasks_created_asc
SELECT * FROM tasks WHERE tenant_id = ?1
  AND (?2 IS NULL OR status IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR type = ?3) AND scheduled_at >= ?4 AND scheduled_at < ?5
  AND (?9 IS NULL OR pool IN (SELECT value FROM json_each(?9)))
  AND ?6 IS NOT NULL AND id > ?7
ORDER BY id LIMIT ?8

-- name: list_tasks_created_desc
SELECT * FROM tasks WHERE tenant_id = ?1
  AND (?2 IS NULL OR status IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR type = ?3) AND scheduled_at >= ?4 AND scheduled_at < ?5
  AND (?9 IS NULL OR pool IN (SELECT value FROM json_each(?9)))
  AND ?6 IS NOT NULL AND id < ?7
ORDER BY id DESC LIMIT ?8

-- name: count_tasks
-- ?1 tenant (NULL: every tenant, grouped by tenant too), ?2 states, ?3 type, ?4 pools
-- (JSON arrays; NULL: any), ?5/?6 the scheduled_at window
SELECT CASE WHEN ?1 IS NULL THEN tenant_id END AS tenant, status, type, pool, count(*) AS n
FROM tasks
WHERE (?1 IS NULL OR tenant_id = ?1)
  AND (?2 IS NULL OR status IN (SELECT value FROM json_each(?2)))
  AND (?3 IS NULL OR type = ?3)
  AND (?4 IS NULL OR pool IN (SELECT value FROM json_each(?4)))
  AND scheduled_at >= ?5 AND scheduled_at < ?6
GROUP BY 1, status, type, pool

-- name: forecast
-- ?1 tenant (NULL: every tenant), ?2 window start (us), ?3 bucket width (us), ?4 window
-- end (us), ?5 pools (JSON array; NULL: any); rows as PostgreSQL's forecast
SELECT 'f' AS kind, (due_at - ?2) / ?3 AS bucket, pool, count(*) AS n
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND due_at >= ?2 AND due_at < ?4
  AND (?1 IS NULL OR tenant_id = ?1) AND (?5 IS NULL OR pool IN (SELECT value FROM json_each(?5)))
GROUP BY 2, 3
UNION ALL
SELECT 'n', (scheduled_at - ?2) / ?3, pool, count(*)
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND scheduled_at >= ?2 AND scheduled_at < ?4
  AND (?1 IS NULL OR tenant_id = ?1) AND (?5 IS NULL OR pool IN (SELECT value FROM json_each(?5)))
GROUP BY 2, 3
UNION ALL
SELECT 'o', -1, pool, count(*)
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND due_at < ?2
  AND (?1 IS NULL OR tenant_id = ?1) AND (?5 IS NULL OR pool IN (SELECT value FROM json_each(?5)))
GROUP BY 3

-- name: overdue
-- ?1 tenant (NULL: every tenant), ?2 now (us), ?3 most groups; rows as PostgreSQL's
SELECT tenant_id, type, pool, count(*) AS n, min(due_at) AS oldest
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND due_at < ?2
  AND (?1 IS NULL OR tenant_id = ?1)
GROUP BY tenant_id, type, pool
ORDER BY oldest, tenant_id, type, pool
LIMIT ?3

-- name: insert_dependency
INSERT OR IGNORE INTO task_dependencies VALUES (?, ?, ?)

-- name: claim_candidates
SELECT id, status, shard_id FROM tasks
WHERE status IN ({{from:SCHEDULED,RETRYING|to:PRELOADED}})
  AND due_at <= ?1 AND unresolved_dependencies = 0
  AND (status <> 'RETRYING' OR due_at <= ?2)
ORDER BY due_at

-- name: claim_preload
-- One candidate of claim_candidates; the write carries the claim's whole guard itself
-- (state, dependencies, horizon), as PostgreSQL's claim_preload does.
UPDATE tasks SET status = 'PRELOADED', updated_at = ?1
WHERE id = ?2 AND status IN ({{from:SCHEDULED,RETRYING|to:PRELOADED}})
  AND due_at <= ?3 AND unresolved_dependencies = 0
  AND (status <> 'RETRYING' OR due_at <= ?4)
RETURNING *

-- name: load_preloaded
SELECT * FROM tasks
WHERE status IN ({{states:PRELOADED}}) AND due_at <= ?
  AND (? IS NULL OR updated_at >= ?)
  AND (scheduled_at > ? OR (scheduled_at = ? AND id > ?))
ORDER BY scheduled_at, id

-- name: mark_dispatched
-- The first parameter is the new status: DISPATCHED, or RUNNING for a worker that
-- starts tasks on delivery. Then the shard epoch (NULL: no check), twice; the last:
-- keyed (0: a task with a concurrency key is left alone, for the caller to count its
-- key's slots first).
UPDATE tasks SET status = ?, fencing_token = fencing_token + 1,
    worker_id = ?, lease_expires_at = ?, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND status IN ({{from:PRELOADED|to:DISPATCHED,RUNNING}})
  AND (? IS NULL OR EXISTS (
      SELECT 1 FROM shard_epochs se WHERE se.shard_id = tasks.shard_id AND se.epoch = ?))
  AND (? OR concurrency_key IS NULL)
RETURNING *

-- name: ack
UPDATE tasks SET status = 'RUNNING', lease_expires_at = ?, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN ({{from:DISPATCHED|to:RUNNING}})
RETURNING fencing_token, worker_id

-- name: extend_running
UPDATE tasks SET lease_expires_at = ?, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ? AND status IN ({{states:RUNNING}})
RETURNING id

-- name: heartbeat
UPDATE tasks SET lease_expires_at = ?, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN ({{states:DISPATCHED,RUNNING}})
RETURNING id

-- name: checkpoint
UPDATE tasks SET checkpoint = ?, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ? AND status IN ({{states:RUNNING}})
RETURNING id

-- name: exists_key
SELECT 1 FROM tasks WHERE id = ? AND scheduled_at = ?

-- name: complete
UPDATE tasks SET status = 'COMPLETED', result_payload = ?, lease_expires_at = NULL,
    updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN ({{from:RUNNING|to:COMPLETED}})
RETURNING *

-- name: ledger
INSERT INTO task_completions (task_id, scheduled_at, tenant_id, type, schedule_id, job_id,
    fencing_token, worker_id, completed_at)
VALUES (?, ?, ?, ?, ?, (SELECT name FROM cron_schedules WHERE id = ?), ?, ?, ?)

-- name: children
SELECT child_task_id FROM task_dependencies WHERE parent_task_id = ?

-- name: decrement_child
UPDATE tasks SET unresolved_dependencies = max(unresolved_dependencies - 1, 0),
    status = CASE WHEN unresolved_dependencies - 1 <= 0
                   AND status IN ({{from:SCHEDULED|to:PRELOADED}})
                  THEN 'PRELOADED' ELSE status END,
    updated_at = ?
WHERE id = ? AND unresolved_dependencies > 0
RETURNING *

-- name: fail
-- Parameters: retryable, error type, retryable, error type, the engine's retry time, now,
-- spread factor, then the key. A task with its own retry policy (retry_policy JSON:
-- base_s/cap_s, errors) gets its backoff here; an error type it lists dead-letters.
UPDATE tasks SET
    status = CASE WHEN ? AND retry_count < max_retries
                   AND NOT EXISTS (SELECT 1 FROM json_each(coalesce(retry_policy, '{}'), '$.errors')
                                   WHERE value = ?)
                  THEN 'RETRYING' ELSE 'DEAD_LETTER' END,
    due_at = CASE WHEN ? AND retry_count < max_retries
                   AND NOT EXISTS (SELECT 1 FROM json_each(coalesce(retry_policy, '{}'), '$.errors')
                                   WHERE value = ?)
                  THEN CASE WHEN json_extract(retry_policy, '$.base_s') IS NULL THEN ?
                            ELSE ? + CAST(min(json_extract(retry_policy, '$.cap_s'),
                                              json_extract(retry_policy, '$.base_s')
                                                  * (1 << min(retry_count, 60)))
                                          * ? * 1000000 AS INTEGER) END
                  ELSE due_at END,
    retry_count = retry_count + 1,
    last_error = ?, last_error_type = nullif(?, ''), last_traceback = nullif(?, ''),
    lease_expires_at = NULL, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN ({{from:RUNNING|to:RETRYING}})
RETURNING status, fencing_token, worker_id, workflow_id, retry_count, max_retries

-- name: lock_fenced
SELECT * FROM tasks WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN (?, ?)

-- name: release
UPDATE tasks SET
    status = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'PRELOADED' END,
    lease_expires_at = NULL, checkpoint = coalesce(?, checkpoint), updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN ({{from:RUNNING,DISPATCHED|to:PRELOADED}})
RETURNING status, workflow_id

-- name: confirm_cancel
UPDATE tasks SET status = 'CANCELLED', lease_expires_at = NULL, updated_at = ?
WHERE id = ? AND scheduled_at = ? AND fencing_token = ?
  AND status IN ({{from:RUNNING|to:CANCELLED}}) AND cancel_requested
RETURNING fencing_token, worker_id, workflow_id

-- name: expired
SELECT * FROM tasks
WHERE status IN ({{states:DISPATCHED,RUNNING}}) AND lease_expires_at < ?
ORDER BY lease_expires_at

-- name: reclaim_one
UPDATE tasks SET
    status = CASE
        WHEN cancel_requested THEN 'CANCELLED'
        WHEN status = 'DISPATCHED' THEN 'PRELOADED'
        WHEN retry_count < max_retries THEN 'RETRYING'
        ELSE 'DEAD_LETTER' END,
    due_at = CASE WHEN status = 'RUNNING' AND NOT cancel_requested
                  AND retry_count < max_retries THEN ? ELSE due_at END,
    last_error = CASE WHEN status = 'RUNNING' AND NOT cancel_requested
                      THEN 'lease expired' ELSE last_error END,
    last_error_type = CASE WHEN status = 'RUNNING' AND NOT cancel_requested
                           THEN NULL ELSE last_error_type END,
    last_traceback = CASE WHEN status = 'RUNNING' AND NOT cancel_requested
                          THEN NULL ELSE last_traceback END,
    retry_count = CASE WHEN status = 'RUNNING' AND NOT cancel_requested
                       THEN retry_count + 1 ELSE retry_count END,
    lease_expires_at = NULL, updated_at = ?
WHERE id = ?
RETURNING *

-- name: set_status
UPDATE tasks SET status = ?1, updated_at = ?2,
    cancel_requested = CASE WHEN ?1 = 'CANCELLED' THEN 0 ELSE cancel_requested END,
    lease_expires_at = CASE WHEN ?1 IN ('DISPATCHED', 'RUNNING') THEN lease_expires_at END,
    retry_count = CASE WHEN ?1 = 'SCHEDULED' AND status = 'DEAD_LETTER'
                       THEN 0 ELSE retry_count END,
    due_at = coalesce(?3, due_at)
WHERE id = ?4 AND status IN (SELECT value FROM json_each(?5))
RETURNING *

-- name: request_cancel
UPDATE tasks SET cancel_requested = 1, updated_at = ?
WHERE id = ? AND status IN ({{states:DISPATCHED,RUNNING}})
RETURNING *

-- name: audit
INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token,
    actor, at, reason, due_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: transitions_of
SELECT from_status, to_status, fencing_token, actor, at, reason, due_at FROM task_transitions
WHERE task_id = ? ORDER BY seq

-- name: claim_shard
INSERT INTO shard_epochs (shard_id, epoch, owner, updated_at) VALUES (?, 1, ?, ?)
ON CONFLICT (shard_id) DO UPDATE
    SET epoch = shard_epochs.epoch + 1, owner = excluded.owner, updated_at = excluded.updated_at
RETURNING shard_id, epoch

-- name: record_claim
INSERT INTO shard_claims (shard_id, epoch, owner, claimed_at) VALUES (?, ?, ?, ?)

-- name: shard_claims
SELECT shard_id, epoch, owner, claimed_at FROM shard_claims ORDER BY shard_id, epoch

-- ---- API keys: scopes, expiry, revocation, last use, rotation (issue 15) ----

-- name: insert_scoped_api_key
INSERT INTO api_keys (id, tenant_id, name, secret_hash, created_at, scopes, expires_at,
    rotated_from)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)

-- name: api_key_by_hash
SELECT id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from
FROM api_keys WHERE secret_hash = ?

-- name: get_api_key
SELECT id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from
FROM api_keys WHERE id = ?

-- name: list_api_keys
SELECT id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from
FROM api_keys WHERE tenant_id = ? ORDER BY created_at, id

-- name: revoke_api_key
UPDATE api_keys SET revoked = 1, revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1

-- name: expire_api_key
UPDATE api_keys SET expires_at = MIN(COALESCE(expires_at, ?2), ?2) WHERE id = ?1

-- name: touch_api_key
UPDATE api_keys SET last_used_at = MAX(COALESCE(last_used_at, ?2), ?2) WHERE id = ?1

-- name: list_tenants
SELECT * FROM tenants WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2

-- ---- Refused worker writes and recent activity (issue 18) ----

-- name: record_refused
-- Only on a refusal: tenant and current token from the task row.
INSERT INTO refused_writes (task_id, tenant_id, at, fencing_token, current_token, actor,
    write_kind, reason)
SELECT t.id, t.tenant_id, ?3, ?4, t.fencing_token, ?5, ?6, ?7
FROM tasks t WHERE t.id = ?1 AND t.scheduled_at = ?2

-- name: refused_of
SELECT at, fencing_token, current_token, actor, write_kind, reason FROM (
    SELECT * FROM refused_writes WHERE task_id = ? ORDER BY seq DESC LIMIT 1000
) ORDER BY seq

-- name: activity
-- GetActivity's rows of the window ?1..?2 (microseconds, both included; a row at ?2 is
-- in the last bucket, ?5), tenant ?3 (NULL: all): the
-- bucket index, whether the row is a dispatch, a completion or a failed attempt, and a
-- dispatch's lateness in microseconds. Bucketed and ranked by the caller.
SELECT min((a.at - ?1) / ?4, ?5) AS b,
    a.from_status = 'PRELOADED' AS dispatched,
    a.to_status = 'COMPLETED' AS completed,
    a.from_status = 'RUNNING' AND a.to_status IN ('RETRYING', 'DEAD_LETTER') AS failed,
    max(a.at - coalesce(a.due_at, a.at), 0) AS late
FROM task_transitions a
WHERE a.at >= ?1 AND a.at <= ?2
  AND ((a.from_status = 'PRELOADED' AND a.to_status IN ('DISPATCHED', 'RUNNING'))
       OR a.to_status = 'COMPLETED'
       OR (a.from_status = 'RUNNING' AND a.to_status IN ('RETRYING', 'DEAD_LETTER')))
  AND (?3 IS NULL OR EXISTS (
      SELECT 1 FROM tasks t WHERE t.id = a.task_id AND t.tenant_id = ?3))

-- name: concurrency_of
-- The concurrency key of a PRELOADED task and its key's slots: its limit (1 without a
-- row) and how many of its tasks are DISPATCHED or RUNNING (one writer: exact).
SELECT t.concurrency_key, coalesce(l.max_running, 1) AS lim, (
    SELECT count(*) FROM tasks a
    WHERE a.tenant_id = t.tenant_id AND a.type = t.type
      AND a.concurrency_key = t.concurrency_key AND a.concurrency_key IS NOT NULL
      AND a.status IN ('DISPATCHED', 'RUNNING')
) AS active
FROM tasks t
LEFT JOIN concurrency_limits l ON l.tenant_id = t.tenant_id AND l.type = t.type
WHERE t.id = ? AND t.scheduled_at = ? AND t.concurrency_key IS NOT NULL

-- name: set_concurrency_limit
INSERT INTO concurrency_limits (tenant_id, type, max_running, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (tenant_id, type) DO UPDATE SET max_running = excluded.max_running,
    updated_at = excluded.updated_at

-- name: clear_concurrency_limit
DELETE FROM concurrency_limits WHERE tenant_id = ? AND type = ?

-- name: concurrency_limits
SELECT tenant_id, type, max_running FROM concurrency_limits
WHERE (? IS NULL OR tenant_id = ?) ORDER BY tenant_id, type

-- SQLite statements of the metrics endpoint (scheduler.metrics); times are
-- microseconds since the epoch.

-- name: queue_depth
SELECT pool, status,
       CASE WHEN due_at <= ?1 THEN 'due'
            WHEN due_at <= ?1 + 60000000 THEN 'minute'
            WHEN due_at <= ?1 + 3600000000 THEN 'hour'
            ELSE 'later' END AS horizon,
       count(*) AS n,
       min(CASE WHEN unresolved_dependencies = 0 THEN due_at END) AS oldest
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'DISPATCHED', 'RUNNING', 'RETRYING')
GROUP BY 1, 2, 3

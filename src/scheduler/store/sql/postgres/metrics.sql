-- PostgreSQL statements of the metrics endpoint (scheduler.metrics), run every
-- depth interval with SYSTEM scope: system-wide, never on the hot path.

-- name: queue_depth
SELECT pool, status,
       CASE WHEN due_at <= $1 THEN 'due'
            WHEN due_at <= $1 + interval '1 minute' THEN 'minute'
            WHEN due_at <= $1 + interval '1 hour' THEN 'hour'
            ELSE 'later' END AS horizon,
       count(*) AS n,
       min(due_at) FILTER (WHERE unresolved_dependencies = 0) AS oldest
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'DISPATCHED', 'RUNNING', 'RETRYING')
GROUP BY 1, 2, 3

-- name: replication_lag
SELECT count(*) AS standbys,
       COALESCE(max(EXTRACT(EPOCH FROM replay_lag)), 0)::float8 AS lag_s
FROM pg_stat_replication

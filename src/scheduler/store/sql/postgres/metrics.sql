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
-- replay_lag is NULL while a standby is caught up and idle (and for a role without
-- pg_monitor); lag_bytes is WAL written here that the slowest standby has not replayed
-- (pg_current_wal_lsn() is not callable on a standby, which has no rows anyway).
SELECT count(*) AS standbys,
       COALESCE(max(EXTRACT(EPOCH FROM replay_lag)), 0)::float8 AS lag_s,
       COALESCE(max(pg_wal_lsn_diff(
           CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn() END,
           replay_lsn)), 0)::float8 AS lag_bytes
FROM pg_stat_replication

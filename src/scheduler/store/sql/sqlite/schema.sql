-- Tickwheel's embedded schema (SQLite, one file, WAL). Same tables as PostgreSQL minus
-- partitions: times are integer microseconds since the Unix epoch (UTC), UUIDs are
-- text, JSON is text. Idempotency is a plain unique index (no partition key to include).
CREATE TABLE IF NOT EXISTS tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    tier TEXT NOT NULL DEFAULT 'STANDARD',
    rate_limit_rps INTEGER NOT NULL DEFAULT 1000,
    max_concurrent_workers INTEGER NOT NULL DEFAULT 200,
    home_region TEXT NOT NULL DEFAULT 'local',
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    -- API keys (issue 15); a file made before them gets these columns from
    -- scheduler.store.sqlite._db.upgrade (same names and defaults).
    scopes TEXT NOT NULL DEFAULT 'submit,read,work',
    expires_at INTEGER,
    revoked_at INTEGER,
    last_used_at INTEGER,
    rotated_from TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    type TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'SCHEDULED' CHECK (status IN (
        'SCHEDULED', 'PRELOADED', 'DISPATCHED', 'RUNNING', 'RETRYING',
        'COMPLETED', 'CANCELLED', 'DEAD_LETTER')),
    fencing_token INTEGER NOT NULL DEFAULT 1,
    idempotency_key TEXT NOT NULL,
    retry_count INTEGER NOT NULL DEFAULT 0,
    max_retries INTEGER NOT NULL DEFAULT 3,
    payload TEXT NOT NULL,
    result_payload TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    unresolved_dependencies INTEGER NOT NULL DEFAULT 0,
    due_at INTEGER NOT NULL,
    shard_id INTEGER NOT NULL,
    pool TEXT NOT NULL DEFAULT 'standard',
    strict_timing INTEGER NOT NULL DEFAULT 0,
    jitter_mode TEXT NOT NULL DEFAULT 'symmetric',
    timeout_s REAL NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    worker_id TEXT,
    last_error TEXT,
    checkpoint TEXT,
    trace_context TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    workflow_id TEXT,
    schedule_id TEXT,
    retry_policy TEXT, -- a task's own retry policy (JSON: base_s, cap_s, errors); NULL: defaults
    last_error_type TEXT, -- the last failed attempt's error type (Failure.error_type)
    last_traceback TEXT, -- and its traceback (Failure.traceback); NULL: none sent
    concurrency_key TEXT, -- at most the type's limit of a key's tasks run at once
    rate_limit_key TEXT, -- issue 43: TaskSpec.rate_limit_key; NULL: none
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS idx_tasks_claimable ON tasks (due_at)
    WHERE status IN ('SCHEDULED', 'RETRYING');
CREATE INDEX IF NOT EXISTS idx_tasks_preloaded ON tasks (scheduled_at, id)
    WHERE status = 'PRELOADED';
CREATE INDEX IF NOT EXISTS idx_tasks_leased ON tasks (lease_expires_at)
    WHERE status IN ('DISPATCHED', 'RUNNING');
CREATE INDEX IF NOT EXISTS idx_tasks_tenant ON tasks (tenant_id, scheduled_at, id);
CREATE INDEX IF NOT EXISTS idx_tasks_workflow ON tasks (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_tasks_schedule ON tasks (schedule_id) WHERE schedule_id IS NOT NULL;
-- GetForecast: the tasks still to fire, by due time (firing, overdue) and requested time.
CREATE INDEX IF NOT EXISTS idx_tasks_forecast_due ON tasks (due_at, pool, tenant_id)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');
CREATE INDEX IF NOT EXISTS idx_tasks_forecast_nominal ON tasks (scheduled_at, pool, tenant_id)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');
CREATE TABLE IF NOT EXISTS workflows (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL,
    on_upstream_failure TEXT NOT NULL DEFAULT 'cancel'
        CHECK (on_upstream_failure IN ('cancel', 'continue')),
    node_count INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE TABLE IF NOT EXISTS task_dependencies (
    workflow_id TEXT NOT NULL,
    parent_task_id TEXT NOT NULL,
    child_task_id TEXT NOT NULL,
    PRIMARY KEY (workflow_id, parent_task_id, child_task_id)
);
CREATE INDEX IF NOT EXISTS idx_task_dependencies_parent ON task_dependencies (parent_task_id);
CREATE TABLE IF NOT EXISTS canary_executions (
    id TEXT PRIMARY KEY,
    scheduled_time INTEGER NOT NULL,
    dispatched_time INTEGER,
    completed_time INTEGER,
    status TEXT NOT NULL DEFAULT 'PENDING'
);
CREATE TABLE IF NOT EXISTS cron_schedules (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    cron_expr TEXT NOT NULL,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    task_type TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    pool TEXT NOT NULL DEFAULT 'standard',
    strict_timing INTEGER NOT NULL DEFAULT 0,
    jitter_mode TEXT NOT NULL DEFAULT 'symmetric',
    max_retries INTEGER NOT NULL DEFAULT 3,
    enabled INTEGER NOT NULL DEFAULT 1,
    next_fire_at INTEGER,
    last_fired_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    interval_s REAL NOT NULL DEFAULT 0,
    overlap_policy TEXT NOT NULL DEFAULT 'skip'
        CHECK (overlap_policy IN ('skip', 'allow', 'buffer_one')),
    catchup_window_s REAL NOT NULL DEFAULT 60,
    jitter_s REAL NOT NULL DEFAULT 0,
    timeout_s REAL NOT NULL DEFAULT 0,
    buffered_at INTEGER,
    UNIQUE (tenant_id, name)
);
CREATE TABLE IF NOT EXISTS job_expectations (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    job_id TEXT NOT NULL,
    interval_s INTEGER NOT NULL CHECK (interval_s > 0),
    tolerance_s INTEGER NOT NULL DEFAULT 300 CHECK (tolerance_s >= 0),
    created_at INTEGER NOT NULL,
    last_alerted_at INTEGER,
    schedule_id TEXT,
    max_runtime_s INTEGER,
    UNIQUE (tenant_id, job_id)
);
CREATE TABLE IF NOT EXISTS task_completions (
    task_id TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    type TEXT NOT NULL,
    schedule_id TEXT,
    job_id TEXT,
    fencing_token INTEGER NOT NULL,
    worker_id TEXT,
    completed_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_task_completions_job ON task_completions (job_id, completed_at);
CREATE INDEX IF NOT EXISTS idx_task_completions_schedule
    ON task_completions (schedule_id, completed_at);
CREATE INDEX IF NOT EXISTS idx_task_completions_type
    ON task_completions (tenant_id, type, completed_at);
CREATE INDEX IF NOT EXISTS idx_canary_executions_scheduled ON canary_executions (scheduled_time);
CREATE TABLE IF NOT EXISTS shard_epochs (
    shard_id INTEGER PRIMARY KEY,
    epoch INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS shard_claims (
    shard_id INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    owner TEXT NOT NULL,
    claimed_at INTEGER NOT NULL,
    PRIMARY KEY (shard_id, epoch)
);
CREATE TABLE IF NOT EXISTS task_transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    from_status TEXT NOT NULL,
    to_status TEXT NOT NULL,
    fencing_token INTEGER NOT NULL,
    actor TEXT NOT NULL,
    at INTEGER NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    due_at INTEGER
);
CREATE INDEX IF NOT EXISTS idx_task_transitions_task ON task_transitions (task_id);
CREATE INDEX IF NOT EXISTS idx_task_transitions_at ON task_transitions (at);
CREATE TRIGGER IF NOT EXISTS task_transitions_no_update BEFORE UPDATE ON task_transitions
BEGIN SELECT RAISE(ABORT, 'task_transitions is append-only'); END;
CREATE TRIGGER IF NOT EXISTS task_transitions_no_delete BEFORE DELETE ON task_transitions
BEGIN SELECT RAISE(ABORT, 'task_transitions is append-only'); END;

-- A worker's write refused for a stale fencing token or a task held by another session
-- (PostgreSQL migration 0008); append-only.
CREATE TABLE IF NOT EXISTS refused_writes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    fencing_token INTEGER NOT NULL,
    current_token INTEGER NOT NULL,
    actor TEXT NOT NULL,
    write_kind TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_refused_writes_task ON refused_writes (task_id, at);
CREATE TRIGGER IF NOT EXISTS refused_writes_no_update BEFORE UPDATE ON refused_writes
BEGIN SELECT RAISE(ABORT, 'refused_writes is append-only'); END;
CREATE TRIGGER IF NOT EXISTS refused_writes_no_delete BEFORE DELETE ON refused_writes
BEGIN SELECT RAISE(ABORT, 'refused_writes is append-only'); END;

-- Debounce by key (issue 43; PostgreSQL migration 0020): each (tenant, key) points at the
-- task of its current burst; the first submission's time bounds the burst (max_delay).
CREATE TABLE IF NOT EXISTS debounce_keys (
    tenant_id TEXT NOT NULL,
    debounce_key TEXT NOT NULL,
    task_id TEXT NOT NULL,
    first_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, debounce_key)
);

-- Throttle by key (issue 43; PostgreSQL migration 0020): next_at is the first due time
-- the key's next task may have.
CREATE TABLE IF NOT EXISTS throttle_keys (
    tenant_id TEXT NOT NULL,
    throttle_key TEXT NOT NULL,
    task_id TEXT NOT NULL,
    next_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, throttle_key)
);

-- Concurrency keys (issue 43; PostgreSQL migration 0018): the limit of every key of a
-- (tenant, type); a type without a row: 1. The running tasks of a key are counted in the
-- dispatching transaction (the index is made by _db.upgrade: an older file gains the
-- column there).
CREATE TABLE IF NOT EXISTS concurrency_limits (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    type TEXT NOT NULL,
    max_running INTEGER NOT NULL CHECK (max_running BETWEEN 1 AND 100000),
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, type)
);

-- Flow control (PostgreSQL migration 0019, issue 43): rate limits per (tenant, key) and
-- dispatch pauses (tenant_id the nil UUID: every tenant; '' type or pool: every one).
CREATE TABLE IF NOT EXISTS rate_limits (
    tenant_id TEXT NOT NULL,
    key TEXT NOT NULL,
    rate REAL NOT NULL CHECK (rate > 0),
    burst INTEGER NOT NULL CHECK (burst >= 1),
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE TABLE IF NOT EXISTS dispatch_pauses (
    tenant_id TEXT NOT NULL,
    task_type TEXT NOT NULL DEFAULT '',
    pool TEXT NOT NULL DEFAULT '',
    paused_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, task_type, pool)
);

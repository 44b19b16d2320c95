-- 0002: what Tickwheel's features need on top of the seed.

-- The seed's unique index dedupes only per (tenant, key, scheduled_at) because a unique
-- index on a partitioned table must contain the partition key. task_keys replaces it.
DROP INDEX idx_tasks_tenant_idempotency;

ALTER TABLE tenants ADD COLUMN home_region VARCHAR(64) NOT NULL DEFAULT 'local';

ALTER TABLE tasks
    ADD COLUMN due_at TIMESTAMP WITH TIME ZONE,
    ADD COLUMN shard_id INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN pool VARCHAR(16) NOT NULL DEFAULT 'standard',
    ADD COLUMN strict_timing BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN jitter_mode VARCHAR(16) NOT NULL DEFAULT 'symmetric',
    ADD COLUMN timeout_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at TIMESTAMP WITH TIME ZONE,
    ADD COLUMN worker_id VARCHAR(256),
    ADD COLUMN last_error TEXT,
    ADD COLUMN checkpoint JSONB,
    ADD COLUMN trace_context JSONB,
    ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN workflow_id UUID,
    ADD COLUMN schedule_id UUID;
UPDATE tasks SET due_at = scheduled_at WHERE due_at IS NULL;
ALTER TABLE tasks ALTER COLUMN due_at SET NOT NULL;
ALTER TABLE tasks ALTER COLUMN shard_id DROP DEFAULT;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN (
    'SCHEDULED', 'PRELOADED', 'DISPATCHED', 'RUNNING', 'RETRYING',
    'COMPLETED', 'CANCELLED', 'DEAD_LETTER'));
ALTER TABLE tasks ADD CONSTRAINT tasks_pool_check
    CHECK (pool IN ('critical', 'standard', 'bulk'));
ALTER TABLE tasks ADD CONSTRAINT tasks_jitter_mode_check
    CHECK (jitter_mode IN ('symmetric', 'late_only', 'none'));

-- Pre-loader claim: SCHEDULED/RETRYING by effective due time.
CREATE INDEX idx_tasks_claimable ON tasks (due_at)
    WHERE status IN ('SCHEDULED', 'RETRYING');
-- Lease reclaim.
CREATE INDEX idx_tasks_leased ON tasks (lease_expires_at)
    WHERE status IN ('DISPATCHED', 'RUNNING');
-- Tenant listing (keyset on scheduled_at, id).
CREATE INDEX idx_tasks_tenant ON tasks (tenant_id, scheduled_at, id);

-- Idempotency and id lookup: one small non-partitioned row per task.
CREATE TABLE task_keys (
    tenant_id UUID NOT NULL,
    idempotency_key VARCHAR(128) NOT NULL,
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE UNIQUE INDEX idx_task_keys_task_id ON task_keys (task_id);

-- DAG edges carry the child's partition key so the decrement prunes.
ALTER TABLE task_dependencies ADD COLUMN child_scheduled_at TIMESTAMP WITH TIME ZONE;
UPDATE task_dependencies d SET child_scheduled_at = k.scheduled_at
    FROM task_keys k WHERE k.task_id = d.child_task_id;
ALTER TABLE task_dependencies ALTER COLUMN child_scheduled_at SET NOT NULL;
CREATE INDEX idx_task_dependencies_parent ON task_dependencies (parent_task_id);

CREATE TABLE api_keys (
    id UUID PRIMARY KEY,
    tenant_id UUID NOT NULL REFERENCES tenants(id),
    name VARCHAR(128) NOT NULL,
    secret_hash BYTEA NOT NULL UNIQUE,
    created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    revoked BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE cron_schedules (
    id UUID PRIMARY KEY,
    tenant_id UUID NOT NULL REFERENCES tenants(id),
    name VARCHAR(128) NOT NULL,
    cron_expr VARCHAR(128) NOT NULL,
    timezone VARCHAR(64) NOT NULL DEFAULT 'UTC',
    task_type VARCHAR(64) NOT NULL,
    payload JSONB NOT NULL DEFAULT '{}',
    pool VARCHAR(16) NOT NULL DEFAULT 'standard',
    strict_timing BOOLEAN NOT NULL DEFAULT FALSE,
    jitter_mode VARCHAR(16) NOT NULL DEFAULT 'symmetric',
    max_retries INTEGER NOT NULL DEFAULT 3,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    next_fire_at TIMESTAMP WITH TIME ZONE,
    last_fired_at TIMESTAMP WITH TIME ZONE,
    created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX idx_cron_schedules_next ON cron_schedules (next_fire_at) WHERE enabled;

-- Dead man's switch: what must complete, how often.
CREATE TABLE job_expectations (
    id UUID PRIMARY KEY,
    tenant_id UUID NOT NULL REFERENCES tenants(id),
    job_id VARCHAR(128) NOT NULL,
    interval_s INTEGER NOT NULL CHECK (interval_s > 0),
    tolerance_s INTEGER NOT NULL DEFAULT 300 CHECK (tolerance_s >= 0),
    created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    last_alerted_at TIMESTAMP WITH TIME ZONE,
    UNIQUE (tenant_id, job_id)
);

-- The completion ledger the watchdog reads (written in the completing transaction).
CREATE TABLE task_completions (
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    tenant_id UUID NOT NULL,
    type VARCHAR(64) NOT NULL,
    schedule_id UUID,
    job_id VARCHAR(128),
    fencing_token BIGINT NOT NULL,
    worker_id VARCHAR(256),
    completed_at TIMESTAMP WITH TIME ZONE NOT NULL
);
CREATE INDEX idx_task_completions_job ON task_completions (job_id, completed_at)
    WHERE job_id IS NOT NULL;
CREATE INDEX idx_task_completions_at ON task_completions (completed_at);

-- Shard ownership epochs (brief §7).
CREATE TABLE shard_epochs (
    shard_id INTEGER PRIMARY KEY,
    epoch BIGINT NOT NULL DEFAULT 0,
    owner VARCHAR(256),
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW()
);

-- Append-only audit of every state transition.
CREATE TABLE task_transitions (
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    from_status VARCHAR(32) NOT NULL,
    to_status VARCHAR(32) NOT NULL,
    fencing_token BIGINT NOT NULL,
    actor VARCHAR(256) NOT NULL,
    at TIMESTAMP WITH TIME ZONE NOT NULL
);
CREATE INDEX idx_task_transitions_task ON task_transitions (task_id);

CREATE FUNCTION tickwheel_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'task_transitions is append-only';
END;
$$;
CREATE TRIGGER task_transitions_append_only
    BEFORE UPDATE OR DELETE ON task_transitions
    FOR EACH ROW EXECUTE FUNCTION tickwheel_append_only();

-- Day partitions, created idempotently (serialised per day by an advisory lock).
CREATE FUNCTION tickwheel_ensure_partition(day DATE) RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
DECLARE
    part TEXT := 'tasks_p' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(7429001, (day - DATE '2000-01-01'));
    IF to_regclass(part) IS NOT NULL THEN
        RETURN FALSE;
    END IF;
    EXECUTE format(
        'CREATE TABLE %I PARTITION OF tasks FOR VALUES FROM (%L) TO (%L)',
        part,
        (day::timestamp AT TIME ZONE 'UTC'),
        ((day + 1)::timestamp AT TIME ZONE 'UTC'));
    RETURN TRUE;
END;
$$;

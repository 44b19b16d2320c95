-- 0001: the seed's DDL, verbatim (sections 4 and 6), minus its example partition:
-- day partitions are created by the store (ahead and on demand).

-- 1. Tenants & Isolation Quotas
CREATE TABLE tenants (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name VARCHAR(128) NOT NULL,
    tier VARCHAR(32) NOT NULL DEFAULT 'STANDARD', -- 'STANDARD', 'ENTERPRISE', 'SYSTEM'
    rate_limit_rps INTEGER NOT NULL DEFAULT 1000,
    max_concurrent_workers INTEGER NOT NULL DEFAULT 200,
    created_at TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);

-- 2. Master Tasks Table (Time-Bucket Partitioned by Day)
CREATE TABLE tasks (
    id UUID NOT NULL, -- UUIDv7 time-ordered identifier
    tenant_id UUID NOT NULL REFERENCES tenants(id),
    type VARCHAR(64) NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    status VARCHAR(32) NOT NULL DEFAULT 'SCHEDULED',
    fencing_token BIGINT NOT NULL DEFAULT 1,
    idempotency_key VARCHAR(128) NOT NULL,
    retry_count INTEGER NOT NULL DEFAULT 0,
    max_retries INTEGER NOT NULL DEFAULT 3,
    payload JSONB NOT NULL,
    result_payload JSONB,
    created_at TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    updated_at TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    PRIMARY KEY (scheduled_at, id)
) PARTITION BY RANGE (scheduled_at);

-- COMPOSITE PARTIAL INDEX: Fast lookahead queries for Pre-Loader
CREATE INDEX idx_tasks_preloader
    ON tasks (scheduled_at, status)
    WHERE status IN ('SCHEDULED', 'PRELOADED');

-- IDEMPOTENCY CONSTRAINT: Prevent duplicate task creation per tenant
CREATE UNIQUE INDEX idx_tasks_tenant_idempotency
    ON tasks (tenant_id, idempotency_key, scheduled_at);

-- 3. Canary Heartbeat Execution Table
CREATE TABLE canary_executions (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    scheduled_time TIMESTAMP WITH TIME ZONE NOT NULL,
    dispatched_time TIMESTAMP WITH TIME ZONE,
    completed_time TIMESTAMP WITH TIME ZONE,
    status VARCHAR(32) NOT NULL DEFAULT 'PENDING'
);

-- Deep Dive 6: DAG in-degree tracking
CREATE TABLE task_dependencies (
    workflow_id UUID NOT NULL,
    parent_task_id UUID NOT NULL,
    child_task_id UUID NOT NULL,
    PRIMARY KEY (workflow_id, parent_task_id, child_task_id)
);

ALTER TABLE tasks ADD COLUMN unresolved_dependencies INTEGER NOT NULL DEFAULT 0;

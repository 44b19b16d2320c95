-- 0019: flow control by key (issue 43). A task's rate limit key (TaskSpec
-- .rate_limit_key; NULL: none), the token buckets set per (tenant, key) by
-- SetRateLimit, and the dispatch pauses of PauseDispatch (tenant_id the nil UUID: every
-- tenant; task_type '' and pool '': every type, every pool). Every node re-reads the
-- two small tables every flow_refresh_s and applies them in its dispatch rounds.
ALTER TABLE tasks ADD COLUMN rate_limit_key VARCHAR(128);
CREATE TABLE rate_limits (
    tenant_id UUID NOT NULL,
    key VARCHAR(128) NOT NULL,
    rate DOUBLE PRECISION NOT NULL CHECK (rate > 0),
    burst INTEGER NOT NULL CHECK (burst >= 1),
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE TABLE dispatch_pauses (
    tenant_id UUID NOT NULL,
    task_type VARCHAR(64) NOT NULL DEFAULT '',
    pool TEXT NOT NULL DEFAULT '',
    paused_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, task_type, pool)
);

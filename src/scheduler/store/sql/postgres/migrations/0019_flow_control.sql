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
-- Row-level security as on every tenant-owned table (migration 0007): the store reads
-- and writes both tables on its system paths; a tenant scope sees its own rows.
ALTER TABLE rate_limits ENABLE ROW LEVEL SECURITY;
ALTER TABLE rate_limits FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON rate_limits USING (tickwheel_scope_is(tenant_id));
ALTER TABLE dispatch_pauses ENABLE ROW LEVEL SECURITY;
ALTER TABLE dispatch_pauses FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON dispatch_pauses USING (tickwheel_scope_is(tenant_id));

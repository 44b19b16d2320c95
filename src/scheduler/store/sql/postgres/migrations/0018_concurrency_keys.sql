-- 0018: concurrency keys (issue 43). A task may name a key; at most `max_running` tasks
-- of one (tenant, type, key) are DISPATCHED or RUNNING at once, cluster-wide. The count
-- is the tasks' own status (no counter to keep): a slot frees the moment its task
-- leaves DISPATCHED/RUNNING, by whatever path (completion, failure, release, cancel,
-- lease expiry), and never twice. mark_dispatched takes an advisory lock per key and
-- counts in a later statement (PostgresStore.mark_dispatched), so two nodes never both
-- take the last slot.
ALTER TABLE tasks ADD COLUMN concurrency_key TEXT;
-- The running tasks of a key: what a keyed dispatch counts (empty on a deployment that
-- names no key).
CREATE INDEX idx_tasks_concurrency_active ON tasks (tenant_id, type, concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status IN ('DISPATCHED', 'RUNNING');
-- The limit of every key of a (tenant, type); a type without a row: 1 (a mutex per key).
CREATE TABLE concurrency_limits (
    tenant_id UUID NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    max_running INTEGER NOT NULL CHECK (max_running BETWEEN 1 AND 100000),
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, type)
);
ALTER TABLE concurrency_limits ENABLE ROW LEVEL SECURITY;
ALTER TABLE concurrency_limits FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON concurrency_limits USING (tickwheel_scope_is(tenant_id));

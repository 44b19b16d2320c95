-- 0008: issue 18's dashboard API. Every audit row says why (`reason`; '' for rows
-- written before this migration) and a dispatch row carries the due time it was
-- dispatched for (`due_at`, NULL on other rows), so GetActivity's lateness is exact
-- even for retried tasks. BRIN on `at`: the table is append-only and `at` grows with
-- the physical order, so a window reads only its own block ranges (a few kB of index
-- for millions of rows; a BRIN index is only summarised per block range on insert).
-- refused_writes: a worker's write the store refused (stale fencing token, or a task
-- held by another session), written only on refusal; append-only like the audit.

ALTER TABLE task_transitions ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE task_transitions ADD COLUMN due_at TIMESTAMP WITH TIME ZONE;
CREATE INDEX idx_task_transitions_at ON task_transitions USING brin (at);

CREATE TABLE refused_writes (
    task_id UUID NOT NULL,
    tenant_id UUID NOT NULL,
    at TIMESTAMP WITH TIME ZONE NOT NULL,
    fencing_token BIGINT NOT NULL,
    current_token BIGINT NOT NULL,
    actor VARCHAR(256) NOT NULL,
    write_kind VARCHAR(32) NOT NULL,
    reason VARCHAR(64) NOT NULL
);
CREATE INDEX idx_refused_writes_task ON refused_writes (task_id, at);
CREATE TRIGGER refused_writes_append_only
    BEFORE UPDATE OR DELETE ON refused_writes
    FOR EACH ROW EXECUTE FUNCTION tickwheel_append_only();

ALTER TABLE refused_writes ENABLE ROW LEVEL SECURITY;
ALTER TABLE refused_writes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON refused_writes USING (tickwheel_scope_is(tenant_id));

-- 0010: the dashboard's two slowest reads with 1,000,000 tasks (issue 18).
-- The row-level-security functions of 0007 read only current_setting: PARALLEL SAFE
-- (a parallel worker gets the leader's settings, tickwheel.tenant included), so a
-- policy no longer keeps CountTasks' scan of every row of a tenant on one process.
ALTER FUNCTION tickwheel_scope_all() PARALLEL SAFE;
ALTER FUNCTION tickwheel_scoped() PARALLEL SAFE;
ALTER FUNCTION tickwheel_scope_is(uuid) PARALLEL SAFE;
-- ListTasks newest first (by id, UUIDv7) of a tenant without a filter: no index gave
-- (tenant_id, id) order, so every one of the tenant's rows was read and sorted for a
-- page of 100. With it, each partition's index is read backwards and a Merge Append
-- under the LIMIT stops after the page (docs/benchmarks.md).
CREATE INDEX idx_tasks_tenant_created ON tasks (tenant_id, id);

-- 0007: row-level security on every tenant-owned table (issue 15), the second line of
-- tenant isolation behind the tenant_id in every query. A row is visible only when the
-- transaction's setting tickwheel.tenant is its tenant's id, or '*' (the scheduler's
-- own system paths, which mix tenants by design). Unset or empty: no row at all (fail
-- closed). FORCE: the application role owns the tables, and owners bypass RLS without
-- it (superusers and BYPASSRLS roles always bypass it: docs/security.md).
-- Numbered 7: 0005 and 0006 belong to other branches; the runner allows gaps.

CREATE FUNCTION tickwheel_scope_all() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('tickwheel.tenant', true) = '*', false)
$$;

CREATE FUNCTION tickwheel_scoped() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('tickwheel.tenant', true), '') <> ''
$$;

-- Inlined into each policy; '*' is answered before the row's tenant is looked at.
CREATE FUNCTION tickwheel_scope_is(tenant uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE coalesce(current_setting('tickwheel.tenant', true), '')
        WHEN '*' THEN true
        WHEN '' THEN false
        ELSE tenant::text = current_setting('tickwheel.tenant', true) END
$$;

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON tenants USING (tickwheel_scope_is(id));

ALTER TABLE tasks ENABLE ROW LEVEL SECURITY;
ALTER TABLE tasks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON tasks USING (tickwheel_scope_is(tenant_id));

ALTER TABLE task_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE task_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON task_keys USING (tickwheel_scope_is(tenant_id));

ALTER TABLE workflows ENABLE ROW LEVEL SECURITY;
ALTER TABLE workflows FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON workflows USING (tickwheel_scope_is(tenant_id));

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON api_keys USING (tickwheel_scope_is(tenant_id));

ALTER TABLE cron_schedules ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron_schedules FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON cron_schedules USING (tickwheel_scope_is(tenant_id));

ALTER TABLE job_expectations ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_expectations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON job_expectations USING (tickwheel_scope_is(tenant_id));

ALTER TABLE task_completions ENABLE ROW LEVEL SECURITY;
ALTER TABLE task_completions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON task_completions USING (tickwheel_scope_is(tenant_id));

-- No tenant_id of their own: visible with the task they belong to (an edge: its child),
-- which is itself filtered by its policy.
ALTER TABLE task_transitions ENABLE ROW LEVEL SECURITY;
ALTER TABLE task_transitions FORCE ROW LEVEL SECURITY;
-- The audit trail is read with its task's visibility; appended from any scoped
-- transaction (its rows come from the moves the same statement made on visible tasks,
-- and a check naming `tasks` would put every partition into each hot-path plan);
-- never updated or deleted (no policy for either, and the append-only trigger).
CREATE POLICY tenant_read ON task_transitions FOR SELECT USING (
    tickwheel_scope_all() OR EXISTS (
        SELECT 1 FROM tasks t
        WHERE t.id = task_transitions.task_id AND t.scheduled_at = task_transitions.scheduled_at));
CREATE POLICY scoped_append ON task_transitions FOR INSERT WITH CHECK (tickwheel_scoped());

ALTER TABLE task_dependencies ENABLE ROW LEVEL SECURITY;
ALTER TABLE task_dependencies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON task_dependencies USING (
    tickwheel_scope_all() OR EXISTS (
        SELECT 1 FROM tasks t
        WHERE t.id = task_dependencies.child_task_id
          AND t.scheduled_at = task_dependencies.child_scheduled_at));

-- Day partitions: a query through `tasks` uses the parent's policy; one that names a
-- partition directly uses the partition's, so each gets the same (existing ones here,
-- new ones in tickwheel_ensure_partition).
CREATE FUNCTION tickwheel_secure_partition(part TEXT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', part);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', part);
    EXECUTE format('CREATE POLICY tenant_scope ON %I USING (tickwheel_scope_is(tenant_id))', part);
END;
$$;

SELECT tickwheel_secure_partition(c.relname)
FROM pg_class c
WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
  AND (c.relname ~ '^tasks_p[0-9]{8}$' OR c.relname ~ '^tasks_detached_p[0-9]{8}$');

CREATE OR REPLACE FUNCTION tickwheel_ensure_partition(day DATE) RETURNS BOOLEAN
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
    PERFORM tickwheel_secure_partition(part);
    RETURN TRUE;
END;
$$;

-- Tickwheel's PostgreSQL schema for a fresh install. It must equal the result of
-- applying every file in migrations/ in order (tests/integration/store/test_migrations.py).
-- Start: the seed's DDL (migrations/0001_seed.sql); additions: 0002_tickwheel.sql,
-- 0003_workflows_schedules.sql and later migrations (each in a section below).

CREATE TABLE tenants (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name VARCHAR(128) NOT NULL,
    tier VARCHAR(32) NOT NULL DEFAULT 'STANDARD', -- 'STANDARD', 'ENTERPRISE', 'SYSTEM'
    rate_limit_rps INTEGER NOT NULL DEFAULT 1000,
    max_concurrent_workers INTEGER NOT NULL DEFAULT 200,
    created_at TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    home_region VARCHAR(64) NOT NULL DEFAULT 'local'
);

-- Day partitions on scheduled_at (the client's requested time, immutable), named
-- tasks_pYYYYMMDD (UTC days); created by tickwheel_ensure_partition().
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
    unresolved_dependencies INTEGER NOT NULL DEFAULT 0,
    due_at TIMESTAMP WITH TIME ZONE NOT NULL, -- effective time: jitter, retry backoff
    shard_id INTEGER NOT NULL,
    pool VARCHAR(16) NOT NULL DEFAULT 'standard',
    strict_timing BOOLEAN NOT NULL DEFAULT FALSE,
    jitter_mode VARCHAR(16) NOT NULL DEFAULT 'symmetric',
    timeout_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMP WITH TIME ZONE,
    worker_id VARCHAR(256),
    last_error TEXT,
    checkpoint JSONB,
    trace_context JSONB,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    workflow_id UUID,
    schedule_id UUID,
    PRIMARY KEY (scheduled_at, id),
    CONSTRAINT tasks_status_check CHECK (status IN (
        'SCHEDULED', 'PRELOADED', 'DISPATCHED', 'RUNNING', 'RETRYING',
        'COMPLETED', 'CANCELLED', 'DEAD_LETTER')),
    CONSTRAINT tasks_pool_check CHECK (pool IN ('critical', 'standard', 'bulk')),
    CONSTRAINT tasks_jitter_mode_check CHECK (jitter_mode IN ('symmetric', 'late_only', 'none'))
) PARTITION BY RANGE (scheduled_at);

CREATE INDEX idx_tasks_preloader
    ON tasks (scheduled_at, status)
    WHERE status IN ('SCHEDULED', 'PRELOADED');
CREATE INDEX idx_tasks_claimable ON tasks (due_at)
    WHERE status IN ('SCHEDULED', 'RETRYING');
CREATE INDEX idx_tasks_leased ON tasks (lease_expires_at)
    WHERE status IN ('DISPATCHED', 'RUNNING');
CREATE INDEX idx_tasks_tenant ON tasks (tenant_id, scheduled_at, id);
CREATE INDEX idx_tasks_workflow ON tasks (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX idx_tasks_schedule ON tasks (schedule_id) WHERE schedule_id IS NOT NULL;

CREATE TABLE workflows (
    id UUID PRIMARY KEY,
    tenant_id UUID NOT NULL REFERENCES tenants(id),
    name VARCHAR(128) NOT NULL DEFAULT '',
    idempotency_key VARCHAR(128) NOT NULL,
    on_upstream_failure VARCHAR(16) NOT NULL DEFAULT 'cancel'
        CHECK (on_upstream_failure IN ('cancel', 'continue')),
    node_count INTEGER NOT NULL,
    created_at TIMESTAMP WITH TIME ZONE NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);

CREATE TABLE task_keys (
    tenant_id UUID NOT NULL,
    idempotency_key VARCHAR(128) NOT NULL,
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE UNIQUE INDEX idx_task_keys_task_id ON task_keys (task_id);

CREATE TABLE canary_executions (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    scheduled_time TIMESTAMP WITH TIME ZONE NOT NULL,
    dispatched_time TIMESTAMP WITH TIME ZONE,
    completed_time TIMESTAMP WITH TIME ZONE,
    status VARCHAR(32) NOT NULL DEFAULT 'PENDING'
);
CREATE INDEX idx_canary_executions_scheduled ON canary_executions (scheduled_time);

CREATE TABLE task_dependencies (
    workflow_id UUID NOT NULL,
    parent_task_id UUID NOT NULL,
    child_task_id UUID NOT NULL,
    child_scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (workflow_id, parent_task_id, child_task_id)
);
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
    interval_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    overlap_policy VARCHAR(16) NOT NULL DEFAULT 'skip'
        CHECK (overlap_policy IN ('skip', 'allow', 'buffer_one')),
    catchup_window_s DOUBLE PRECISION NOT NULL DEFAULT 60,
    jitter_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    timeout_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    buffered_at TIMESTAMP WITH TIME ZONE,
    UNIQUE (tenant_id, name)
);
CREATE INDEX idx_cron_schedules_next ON cron_schedules (next_fire_at) WHERE enabled;

CREATE TABLE job_expectations (
    id UUID PRIMARY KEY,
    tenant_id UUID NOT NULL REFERENCES tenants(id),
    job_id VARCHAR(128) NOT NULL,
    interval_s INTEGER NOT NULL CHECK (interval_s > 0),
    tolerance_s INTEGER NOT NULL DEFAULT 300 CHECK (tolerance_s >= 0),
    created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    last_alerted_at TIMESTAMP WITH TIME ZONE,
    schedule_id UUID,
    max_runtime_s INTEGER,
    UNIQUE (tenant_id, job_id)
);

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
CREATE INDEX idx_task_completions_schedule ON task_completions (schedule_id, completed_at)
    WHERE schedule_id IS NOT NULL;
CREATE INDEX idx_task_completions_type ON task_completions (tenant_id, type, completed_at);

CREATE TABLE shard_epochs (
    shard_id INTEGER PRIMARY KEY,
    epoch BIGINT NOT NULL DEFAULT 0,
    owner VARCHAR(256),
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW()
);

CREATE TABLE shard_claims (
    shard_id INTEGER NOT NULL,
    epoch BIGINT NOT NULL,
    owner VARCHAR(256) NOT NULL,
    claimed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (shard_id, epoch)
);

CREATE TABLE task_transitions (
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    from_status VARCHAR(32) NOT NULL,
    to_status VARCHAR(32) NOT NULL,
    fencing_token BIGINT NOT NULL,
    actor VARCHAR(256) NOT NULL,
    at TIMESTAMP WITH TIME ZONE NOT NULL,
    epoch BIGINT
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

-- ---- API keys (migration 0005) ----
-- Issue 15: API keys with scopes, expiry, revocation time, last use and rotation.
-- `revoked` keeps its meaning (the key is revoked); `revoked_at` says when (NULL for
-- keys revoked before this migration). Keys made before it get the default scopes
-- (submit, read, work: everything but admin), so they keep working as before.

ALTER TABLE api_keys ADD COLUMN scopes TEXT[] NOT NULL DEFAULT ARRAY['submit', 'read', 'work']::TEXT[];
ALTER TABLE api_keys ADD COLUMN expires_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE api_keys ADD COLUMN revoked_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE api_keys ADD COLUMN last_used_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE api_keys ADD COLUMN rotated_from UUID;
CREATE INDEX idx_api_keys_tenant ON api_keys (tenant_id, created_at);

-- ---------------------------------------------------------------------------------
-- 0006_retry_policy: a task's own retry policy (NULL: the server's defaults).
-- {"base_s": float, "cap_s": float, "errors": ["TypeName", ...]}
-- ---------------------------------------------------------------------------------
ALTER TABLE tasks ADD COLUMN retry_policy JSONB;

-- == Row-level security (migrations/0007_row_level_security.sql) ==============
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

-- == Task history reasons, refused writes, activity index (migrations/0008_history_activity.sql) ==
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

-- == Forecast indexes (migrations/0009_forecast_indexes.sql) ==
-- 0009: GetForecast (issue 18) counts the tasks still to fire (SCHEDULED, PRELOADED,
-- RETRYING) by due_at (firing, overdue) and by scheduled_at (nominal) over a window.
-- No index covered those three states (idx_tasks_claimable: SCHEDULED and RETRYING;
-- idx_tasks_preloader: SCHEDULED and PRELOADED), so each part was a sequential scan of
-- every partition: 466 ms for the next hour with 1,000,000 tasks. Partial covering
-- indexes make each part an index-only range scan (157 ms; docs/benchmarks.md). A task
-- enters them on insert and on the move to PRELOADED, and leaves them when dispatched.
CREATE INDEX idx_tasks_forecast_due ON tasks (due_at) INCLUDE (pool, tenant_id)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');
CREATE INDEX idx_tasks_forecast_nominal ON tasks (scheduled_at) INCLUDE (pool, tenant_id)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');

-- == Dashboard reads (migrations/0010_dashboard_reads.sql) ==
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

-- == Fencing generation (migrations/0011_fencing_generation.sql) ==
-- 0011: the fencing generation (issue 16, disaster recovery). One row: the generation
-- g, raised by `tickwheel dr promote` on a promoted standby (old g + 1 + a random salt
-- in [0, 1024)), and when and by what it was raised. Every fencing token and shard
-- epoch issued is at least (g << 40) + 1 (mark_dispatched, claim_shards), so after a
-- promote every token and epoch is above every one the lost primary ever issued, and a
-- worker or node of the old primary is refused - without rewriting every row. g = 0
-- (a database never promoted) gives base 0: no change.
CREATE TABLE fencing_generation (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0 AND generation < 8388608),
    raised_at timestamptz,
    raised_by text
);
INSERT INTO fencing_generation (singleton, generation) VALUES (true, 0)
    ON CONFLICT (singleton) DO NOTHING;

-- == Tenant moves (migrations/0012_tenant_move.sql) ==
-- 0012: moving a tenant's home (issue 16, `tickwheel tenants move`). One row per tenant
-- that is moving or has moved, in each of the two regions' databases:
--   role 'source', phase 'frozen': this region is its home and is handing it over; its
--     nodes neither dispatch its tasks nor answer its calls (UNAVAILABLE: retry);
--   role 'source', phase 'done': it has left (its live rows are gone, home_region names
--     the new home): calls are forwarded there;
--   role 'target', phase 'frozen': its rows are arriving here and are not served yet;
--   role 'target', phase 'done': it lives here (the same as no row).
-- Nodes read the table every EngineConfig.move_poll_interval_s; `fingerprint` is the
-- copied state the flip checks, so a re-run of the command resumes.
CREATE TABLE tenant_moves (
    tenant_id UUID PRIMARY KEY,
    role VARCHAR(8) NOT NULL CHECK (role IN ('source', 'target')),
    phase VARCHAR(8) NOT NULL CHECK (phase IN ('frozen', 'done')),
    from_region VARCHAR(64) NOT NULL,
    to_region VARCHAR(64) NOT NULL,
    started_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW()
);
ALTER TABLE tenant_moves ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_moves FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON tenant_moves USING (tickwheel_scope_is(tenant_id));

-- == Scope once per statement (migrations/0013_scope_once_per_statement.sql) ==
-- 0013: the row-level security policies read the scope once per statement, not once per
-- row (issue 20). The policies of 0007 call tickwheel_scope_is(tenant_id), inlined into
-- a CASE over current_setting('tickwheel.tenant') that ran for every row a statement
-- read or wrote (twice for an UPDATE: USING and the implied WITH CHECK). Each function
-- call below sits in its own scalar subquery, so PostgreSQL evaluates it once as an
-- InitPlan and the per-row test is a boolean and a uuid comparison. Same visibility:
-- '*' every row; empty or unset none; a tenant's id (lowercase, as the store writes
-- it) that tenant's rows; anything else none (docs/security.md). Measured with
-- 200,000 rows of one tenant: a count 47.6 -> 27.5 ms; a 10,000-task insert 5% less
-- PostgreSQL time (docs/benchmarks.md).

-- The scope's tenant, or NULL for '*', empty, unset or anything that is not a
-- lowercase UUID (NULL matches no row).
CREATE FUNCTION tickwheel_scope_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN s ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        THEN s::uuid END
    FROM coalesce(current_setting('tickwheel.tenant', true), '') AS s
$$;

ALTER POLICY tenant_scope ON tenants
    USING ((SELECT tickwheel_scope_all()) OR id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON tasks
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON task_keys
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON workflows
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON api_keys
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON cron_schedules
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON job_expectations
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON task_completions
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON refused_writes
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_scope ON tenant_moves
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));
ALTER POLICY tenant_read ON task_transitions USING (
    (SELECT tickwheel_scope_all()) OR EXISTS (
        SELECT 1 FROM tasks t
        WHERE t.id = task_transitions.task_id AND t.scheduled_at = task_transitions.scheduled_at));
ALTER POLICY scoped_append ON task_transitions WITH CHECK ((SELECT tickwheel_scoped()));
ALTER POLICY tenant_scope ON task_dependencies USING (
    (SELECT tickwheel_scope_all()) OR EXISTS (
        SELECT 1 FROM tasks t
        WHERE t.id = task_dependencies.child_task_id
          AND t.scheduled_at = task_dependencies.child_scheduled_at));

-- Day partitions (each has the parent's policy for a query that names it): new ones
-- through tickwheel_secure_partition, existing ones here.
CREATE OR REPLACE FUNCTION tickwheel_secure_partition(part TEXT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', part);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', part);
    EXECUTE format('CREATE POLICY tenant_scope ON %I USING ((SELECT tickwheel_scope_all())'
                   ' OR tenant_id = (SELECT tickwheel_scope_tenant()))', part);
END;
$$;

DO $$
DECLARE
    part TEXT;
BEGIN
    FOR part IN
        SELECT c.relname FROM pg_class c
        WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
          AND (c.relname ~ '^tasks_p[0-9]{8}$' OR c.relname ~ '^tasks_detached_p[0-9]{8}$')
    LOOP
        EXECUTE format('ALTER POLICY tenant_scope ON %I USING ((SELECT tickwheel_scope_all())'
                       ' OR tenant_id = (SELECT tickwheel_scope_tenant()))', part);
    END LOOP;
END;
$$;

-- == Uniform columns (migrations/0014_uniform_columns.sql) ==
-- 0014: a batch's column whose every value is the same travels as one value (issue 20).
-- The hot statements take a batch as arrays, one per column, read by unnest. Most
-- columns of a batch hold one value throughout (a submit's tenant, type, state, times,
-- pool; a dispatch round's worker, lease and mode), and asyncpg spends about 0.2 us a
-- value encoding each (an isinstance check against three ABCs and the value's codec):
-- 3.95 us a task for the 15 columns of a submit, 0.83 for its 4 that differ. The store
-- sends such a column as a one-element array (store.postgres._db.column), and the
-- statement spreads it back to the batch's length with this function.
CREATE FUNCTION tickwheel_fill(a anyarray, n integer) RETURNS anyarray
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN cardinality(a) = 1 AND n > 1 THEN array_fill(a[1], ARRAY[n]) ELSE a END
$$;

-- == Key-first lookups (migrations/0015_key_first_lookups.sql) ==
-- 0015: every hot statement finds its tasks by key, whatever the statistics say (issue 41).
-- A stampede puts every task of a minute on one scheduled_at (jitter moves only due_at).
-- The by-key writes (dispatch, ack, heartbeat, completion, failure, release) join their
-- batch on (id, scheduled_at) and guard on status; the planner could also serve that
-- join from any index that leads with scheduled_at (the PK's range between the batch's
-- bounds, idx_tasks_preloader, idx_tasks_forecast_nominal) or from a partial index whose
-- predicate the status guard implies. Statuses churn in seconds, so the statistics that
-- price those paths are always stale: with an ANALYZE taken while the minute was still
-- SCHEDULED, each 1,000-task dispatch read every PRELOADED task of the minute (49,700
-- index entries a task with 100,000 outstanding; docs/benchmarks.md, "The stampede").
-- The fix pins the plan in the schema:
-- * the primary key leads with id: a range on scheduled_at (the statements' partition
--   bounds) can no longer be served by it, only an equality on id;
-- * idx_tasks_preloader (scheduled_at, status), the seed's, which no statement needed
--   since the claim orders by due_at, is dropped; load_preloaded's keyset pages get a
--   partial index of PRELOADED tasks in their (scheduled_at, id) order.
-- The by-key writes read their status guard through an InitPlan (queries.sql), so no
-- partial index (this one, the lease, claimable and forecast indexes) is implied by a
-- guard: only the primary key can serve them.
ALTER TABLE tasks DROP CONSTRAINT tasks_pkey;
ALTER TABLE tasks ADD PRIMARY KEY (id, scheduled_at);
DROP INDEX idx_tasks_preloader;
CREATE INDEX idx_tasks_preloaded ON tasks (scheduled_at, id) WHERE status = 'PRELOADED';

-- == Unique tenant names (migrations/0016_unique_tenant_names.sql) ==
-- 0016: tenant names are unique (issue 40); the migration first renames an older
-- database's duplicates (all but the oldest of a name get -<8 hex digits of the id>).
CREATE UNIQUE INDEX tenants_name_key ON tenants (name);

-- == Last error type (migrations/0017_last_error_type.sql) ==
-- 0017: a failed attempt's error type and traceback as the worker sent them
-- (Failure.error_type, Failure.traceback; issue 36): the dashboard's task page shows
-- them on top. NULL: none sent, or the last error was not a worker's (a lease expiry,
-- an upstream failure).
ALTER TABLE tasks ADD COLUMN last_error_type TEXT;
ALTER TABLE tasks ADD COLUMN last_traceback TEXT;
-- ListWorkers' overdue groups (by tenant, type and pool, the "no worker" badge) read
-- the forecast's due_at index, which now carries the type too: an index-only range
-- scan of the overdue entries (70-330 ms for 0-100,000 overdue of 1,000,000 tasks on a
-- loaded 2-core machine), where without the type the planner took a parallel
-- sequential scan of every task (1.1-1.4 s).
DROP INDEX idx_tasks_forecast_due;
CREATE INDEX idx_tasks_forecast_due ON tasks (due_at) INCLUDE (pool, tenant_id, type)
    WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING');

-- == Concurrency keys (migrations/0018_concurrency_keys.sql) ==
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
-- == Flow control (migrations/0019_flow_control.sql) ==
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

-- == Debounce, throttle, idempotency windows (migrations/0020_debounce.sql) ==
-- 0020: debounce and throttle by key, and idempotency windows (issue 43). Debounce: debounce_keys points each (tenant, key) at the task
-- of its current burst; tickwheel_debounce() decides, under the key row's lock, whether
-- a submission joins that task (still SCHEDULED or PRELOADED: not yet dispatched) or
-- starts a new burst. Concurrent submissions to several nodes queue on that one row
-- lock, so a burst has exactly one task. A key row outlives its task (it is repointed by
-- the next burst); the first submission's time bounds the burst (max_delay).
CREATE TABLE debounce_keys (
    tenant_id UUID NOT NULL,
    debounce_key VARCHAR(128) NOT NULL,
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    first_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (tenant_id, debounce_key)
);
ALTER TABLE debounce_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE debounce_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON debounce_keys
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));

-- One debounced submission. Returns the burst's task: r_created true means the caller
-- inserts p_task (its key row already points at it, in this transaction); false means
-- the pending task took the submission (its due time pushed to now + period, capped at
-- the burst's first submission + max_delay when max_delay > 0; its payload replaced
-- unless p_first).
CREATE FUNCTION tickwheel_debounce(
    p_tenant uuid, p_key text, p_task uuid, p_scheduled timestamptz, p_now timestamptz,
    p_period float8, p_max_delay float8, p_first boolean, p_payload text,
    OUT r_task uuid, OUT r_scheduled timestamptz, OUT r_due timestamptz, OUT r_shard int,
    OUT r_created boolean, OUT r_preloaded boolean)
LANGUAGE plpgsql AS $$
DECLARE
    k record;
BEGIN
    INSERT INTO debounce_keys (tenant_id, debounce_key, task_id, scheduled_at, first_at)
    VALUES (p_tenant, p_key, p_task, p_scheduled, p_now)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        r_task := p_task; r_scheduled := p_scheduled; r_created := true;
        RETURN;
    END IF;
    SELECT d.task_id, d.scheduled_at, d.first_at INTO k FROM debounce_keys d
    WHERE d.tenant_id = p_tenant AND d.debounce_key = p_key
    FOR UPDATE;
    -- The due time never moves back: two nodes' submissions may commit out of the
    -- order of their clocks' readings.
    UPDATE tasks t SET
        due_at = GREATEST(t.due_at, CASE WHEN p_max_delay > 0
            THEN LEAST(p_now + make_interval(secs => p_period),
                       GREATEST(p_now, k.first_at + make_interval(secs => p_max_delay)))
            ELSE p_now + make_interval(secs => p_period) END),
        payload = CASE WHEN p_first THEN t.payload ELSE p_payload::jsonb END,
        updated_at = p_now
    WHERE t.id = k.task_id AND t.scheduled_at = k.scheduled_at
      AND t.status IN ('SCHEDULED', 'PRELOADED')
    RETURNING t.id, t.scheduled_at, t.due_at, t.shard_id, t.status = 'PRELOADED'
    INTO r_task, r_scheduled, r_due, r_shard, r_preloaded;
    IF FOUND THEN
        r_created := false;
        RETURN;
    END IF;
    -- The burst's task was dispatched (or cancelled, or is gone): a new burst.
    UPDATE debounce_keys d SET task_id = p_task, scheduled_at = p_scheduled, first_at = p_now
    WHERE d.tenant_id = p_tenant AND d.debounce_key = p_key;
    r_task := p_task; r_scheduled := p_scheduled; r_created := true;
END
$$;

-- Throttle by key: at most one task per period of due time per (tenant, key).
-- next_at is the first due time the key's next task may have; tickwheel_throttle()
-- moves it only for a submission due at or after it, under the row's lock.
CREATE TABLE throttle_keys (
    tenant_id UUID NOT NULL,
    throttle_key VARCHAR(128) NOT NULL,
    task_id UUID NOT NULL,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL,
    next_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (tenant_id, throttle_key)
);
ALTER TABLE throttle_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE throttle_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON throttle_keys
    USING ((SELECT tickwheel_scope_all()) OR tenant_id = (SELECT tickwheel_scope_tenant()));

-- One throttled submission due at p_due: r_created true means the caller inserts
-- p_task (it opened a new period); false names the task whose period it falls in.
CREATE FUNCTION tickwheel_throttle(
    p_tenant uuid, p_key text, p_task uuid, p_scheduled timestamptz, p_due timestamptz,
    p_period float8, OUT r_task uuid, OUT r_scheduled timestamptz, OUT r_created boolean)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO throttle_keys AS k (tenant_id, throttle_key, task_id, scheduled_at, next_at)
    VALUES (p_tenant, p_key, p_task, p_scheduled, p_due + make_interval(secs => p_period))
    ON CONFLICT (tenant_id, throttle_key) DO UPDATE
        SET task_id = EXCLUDED.task_id, scheduled_at = EXCLUDED.scheduled_at,
            next_at = EXCLUDED.next_at
        WHERE k.next_at <= p_due;
    IF FOUND THEN
        r_task := p_task; r_scheduled := p_scheduled; r_created := true;
        RETURN;
    END IF;
    SELECT k.task_id, k.scheduled_at INTO r_task, r_scheduled FROM throttle_keys k
    WHERE k.tenant_id = p_tenant AND k.throttle_key = p_key;
    r_created := false;
END
$$;

-- The idempotency key's window: expires_at (a TTL from the submission; NULL: none) and
-- until_finished (the key dedupes only while its task is not finished). A key whose
-- window is over is retired by the next submission of it: its row's key becomes
-- chr(1) || 'retired:' || task id (the old task keeps its id lookup and its own
-- tasks.idempotency_key) and the key is free for the new task.
ALTER TABLE task_keys ADD COLUMN expires_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE task_keys ADD COLUMN until_finished BOOLEAN NOT NULL DEFAULT FALSE;

-- == The idempotency keys with a TTL, by tenant (migrations/0021_key_ttl_index.sql) ==
-- 0021: the idempotency keys with a window in time, by tenant (issue 43). A tenant's
-- home move copies the finished tasks whose key's TTL has not run out
-- (store/postgres/move_flow.py), on every copy round, one inside the tenant's pause:
-- without this it read every key row the tenant ever had (one per task). Partial: only
-- the keys submitted with idempotency_ttl_s.
CREATE INDEX idx_task_keys_ttl ON task_keys (tenant_id, expires_at)
    WHERE expires_at IS NOT NULL;

-- == A tenant's listing through task_keys (migrations/0022_listing_on_keys.sql) ==
-- 0022: a tenant's listing reads its tasks through task_keys (issue 41). Every state
-- change of a task is a non-HOT update (status is in the partial indexes' predicates),
-- so each one wrote a new entry in every full index of `tasks`: the primary key and the
-- two listing indexes, (tenant_id, scheduled_at, id) and (tenant_id, id). A task's
-- task_keys row (one a task, written with it, left alone by its state changes) carries
-- the same tenant, id and scheduled_at, so the listing indexes move there: each is
-- written once a task instead of once a state change (four times in a task's life:
-- submitted, pre-loaded, dispatched, completed). ListTasks, CountTasks of one tenant
-- and a tenant's move walk them and probe `tasks` by its primary key.
CREATE INDEX idx_task_keys_listing ON task_keys (tenant_id, scheduled_at, task_id);
CREATE INDEX idx_task_keys_created ON task_keys (tenant_id, task_id) INCLUDE (scheduled_at);
DROP INDEX idx_tasks_tenant;
DROP INDEX idx_tasks_tenant_created;

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

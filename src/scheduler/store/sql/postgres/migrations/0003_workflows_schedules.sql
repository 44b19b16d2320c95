-- Issue 8: DAG workflows, cron schedule policies, dead man's switch expectations.

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
CREATE INDEX idx_tasks_workflow ON tasks (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX idx_tasks_schedule ON tasks (schedule_id) WHERE schedule_id IS NOT NULL;

ALTER TABLE cron_schedules
    ADD COLUMN interval_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    ADD COLUMN overlap_policy VARCHAR(16) NOT NULL DEFAULT 'skip'
        CHECK (overlap_policy IN ('skip', 'allow', 'buffer_one')),
    ADD COLUMN catchup_window_s DOUBLE PRECISION NOT NULL DEFAULT 60,
    ADD COLUMN jitter_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    ADD COLUMN timeout_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    ADD COLUMN buffered_at TIMESTAMP WITH TIME ZONE;

ALTER TABLE job_expectations
    ADD COLUMN schedule_id UUID,
    ADD COLUMN max_runtime_s INTEGER;

CREATE INDEX idx_task_completions_schedule ON task_completions (schedule_id, completed_at)
    WHERE schedule_id IS NOT NULL;
CREATE INDEX idx_task_completions_type ON task_completions (tenant_id, type, completed_at);
CREATE INDEX idx_canary_executions_scheduled ON canary_executions (scheduled_time);

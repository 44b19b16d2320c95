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

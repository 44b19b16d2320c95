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

-- PostgreSQL statements of the store. Every statement on `tasks` in the hot path names
-- exact (scheduled_at, id) keys AND the batch's scheduled_at bounds ($lo, $hi) so the
-- planner prunes to the partitions of those days (brief §12). Guards like
-- {{from:RUNNING|to:COMPLETED}} are expanded from scheduler.states (see _sql.py).
--
-- Key first (issue 41): a by-key write reads its status guard through an InitPlan,
-- `t.status = ANY((SELECT ARRAY[...])::text[])`, never as `t.status IN (...)`. The planner cannot
-- see the states, so no partial index on status (lease, claimable, forecast, preloaded)
-- is implied by the guard, and the statistics of status (stale within seconds in a
-- stampede) price nothing. And it reads its batch through arrays the planner cannot see
-- either: `unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), ...)` (each array an
-- InitPlan; the claim and the reaper pack the keys they found into arrays, `k`).
-- PostgreSQL prices unnest of an array it cannot see as 10 rows, so the join is ten
-- primary-key probes against any scan of the partition, whatever the batch, the
-- partition's size or its statistics: a nested loop that probes (id, scheduled_at)
-- once a key. With the arrays visible, a batch of 1,000 on 10,000 tasks was priced
-- cheaper as a hash join over a walk of the tenant index (10 tuples a task; turning
-- hash joins off instead gave, on a partition without statistics, a nested loop driven
-- from a walk of the primary key: 50 a task on 50,000). The `t.id = ANY($1)` that sat
-- beside the join, to price such walks above the probes, is gone: the planner drove
-- nested loops from it too, the array's 1,000 keys read from the primary key outside
-- and the batch scanned again inside for each, a million comparisons a batch
-- (tests/integration/store/test_plans.py; docs/benchmarks.md).

-- name: insert_tenant
INSERT INTO tenants (id, name, tier, rate_limit_rps, max_concurrent_workers, home_region, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id, name, tier, rate_limit_rps, max_concurrent_workers, home_region, created_at

-- name: get_tenant
SELECT id, name, tier, rate_limit_rps, max_concurrent_workers, home_region, created_at
FROM tenants WHERE id = $1

-- name: update_tenant
UPDATE tenants SET name = $2, tier = $3, rate_limit_rps = $4, max_concurrent_workers = $5,
    home_region = $6
WHERE id = $1
RETURNING id, name, tier, rate_limit_rps, max_concurrent_workers, home_region, created_at

-- name: known_tenants
SELECT id FROM tenants WHERE id = ANY($1::uuid[])

-- name: insert_api_key
INSERT INTO api_keys (id, tenant_id, name, secret_hash, created_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, tenant_id, name, created_at, revoked

-- name: tenant_for_key_hash
SELECT tenant_id FROM api_keys WHERE secret_hash = $1 AND NOT revoked
    AND (expires_at IS NULL OR expires_at > NOW())

-- name: ensure_partition
SELECT tickwheel_ensure_partition($1::date)

-- name: list_partitions
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'tasks'::regclass

-- name: insert_tasks
-- Keys first: a key that already exists (another batch, or earlier in this one) makes
-- the task row a duplicate and it is not inserted. Nor is the task of a tenant whose
-- home is moving away from here or has moved (migration 0012): checked in the writing
-- statement, so a call that passed the node's check before the move reached it cannot
-- add a row behind the move's flip (the flip locks `tasks`; this statement's snapshot
-- is taken after its lock, so it sees the flip). A column the store found uniform comes
-- as one value and tickwheel_fill spreads it to the batch (migration 0014).
WITH new_keys AS (
    INSERT INTO task_keys (tenant_id, idempotency_key, task_id, scheduled_at)
    SELECT * FROM unnest(tickwheel_fill($2::uuid[], cardinality($1::uuid[])), $7::text[],
                         $1::uuid[], tickwheel_fill($4::timestamptz[], cardinality($1::uuid[])))
        AS n(tenant_id, idem, task_id, scheduled_at)
    WHERE NOT EXISTS (
        SELECT 1 FROM tenant_moves m WHERE m.tenant_id = n.tenant_id AND m.role = 'source')
    ON CONFLICT DO NOTHING
    RETURNING task_id
)
INSERT INTO tasks (
    id, tenant_id, type, scheduled_at, due_at, status, idempotency_key, max_retries,
    payload, unresolved_dependencies, shard_id, pool, strict_timing, jitter_mode,
    timeout_s, trace_context, workflow_id, schedule_id, created_at, updated_at, retry_policy,
    concurrency_key, rate_limit_key)
SELECT u.id, u.tenant_id, u.type, u.scheduled_at, u.due_at, u.status, u.idem, u.max_retries,
    u.payload::jsonb, u.deps, u.shard, u.pool, u.strict, u.jitter,
    u.timeout, u.trace::jsonb, u.wf, u.sched, $19, $19, u.retry::jsonb, u.ckey, u.rkey
FROM unnest($1::uuid[],
            tickwheel_fill($2::uuid[], cardinality($1::uuid[])),
            tickwheel_fill($3::text[], cardinality($1::uuid[])),
            tickwheel_fill($4::timestamptz[], cardinality($1::uuid[])),
            tickwheel_fill($5::timestamptz[], cardinality($1::uuid[])),
            tickwheel_fill($6::text[], cardinality($1::uuid[])),
            $7::text[],
            tickwheel_fill($8::int[], cardinality($1::uuid[])),
            $9::text[],
            tickwheel_fill($10::int[], cardinality($1::uuid[])),
            $11::int[],
            tickwheel_fill($12::text[], cardinality($1::uuid[])),
            tickwheel_fill($13::bool[], cardinality($1::uuid[])),
            tickwheel_fill($14::text[], cardinality($1::uuid[])),
            tickwheel_fill($15::float8[], cardinality($1::uuid[])),
            $16::text[], $17::uuid[], $18::uuid[], $20::text[], $21::text[], $22::text[])
    AS u(id, tenant_id, type, scheduled_at, due_at, status, idem, max_retries, payload,
         deps, shard, pool, strict, jitter, timeout, trace, wf, sched, retry, ckey, rkey)
JOIN new_keys k ON k.task_id = u.id
RETURNING id

-- name: moving_tenant
-- One of these tenants whose home is moving away from here or has moved (0012).
SELECT tenant_id FROM tenant_moves WHERE tenant_id = ANY($1::uuid[]) AND role = 'source' LIMIT 1

-- name: tasks_by_idempotency
SELECT u.ord, k.expires_at AS key_expires_at, k.until_finished AS key_until_finished, t.*
FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS u(tenant_id, idem, ord)
JOIN task_keys k ON k.tenant_id = u.tenant_id AND k.idempotency_key = u.idem
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at

-- name: get_task
SELECT t.* FROM task_keys k
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at
WHERE k.task_id = $1

-- name: debounce
-- One debounced submission (migration 0020): the burst's task, and whether it is new.
SELECT r_task, r_scheduled, r_due, r_shard, r_created, r_preloaded
FROM tickwheel_debounce($1, $2, $3, $4, $5, $6, $7, $8, $9)

-- name: throttle
-- One throttled submission (migration 0020): the period's task, and whether it is new.
SELECT r_task, r_scheduled, r_created FROM tickwheel_throttle($1, $2, $3, $4, $5, $6)

-- name: set_key_window
-- $1 task ids, $2 their keys' expiry (NULL: none), $3 until_finished (migration 0020)
UPDATE task_keys k SET expires_at = u.expires_at, until_finished = u.until_finished
FROM unnest($1::uuid[], $2::timestamptz[], $3::bool[]) AS u(task_id, expires_at, until_finished)
WHERE k.task_id = u.task_id

-- name: retire_keys
-- Free keys whose window is over ($3 now): renamed to chr(1) || 'retired:' || task id,
-- so the old task keeps its id lookup (migration 0020). Checked again here, under the
-- row's lock: of two submissions racing on one key, the second finds it renamed.
UPDATE task_keys k SET idempotency_key = chr(1) || 'retired:' || k.task_id::text
FROM unnest($1::uuid[], $2::text[]) AS u(tenant_id, idem)
WHERE k.tenant_id = u.tenant_id AND k.idempotency_key = u.idem
  AND (k.expires_at <= $3 OR (k.until_finished AND EXISTS (
      SELECT 1 FROM tasks t WHERE t.id = k.task_id AND t.scheduled_at = k.scheduled_at
        AND t.status IN ('COMPLETED', 'CANCELLED', 'DEAD_LETTER'))))

-- name: get_task_by_key
SELECT * FROM tasks WHERE id = $1 AND scheduled_at = $2

-- name: lock_task
SELECT * FROM tasks WHERE id = $1 AND scheduled_at = $2 FOR UPDATE

-- name: list_tasks
-- A tenant's tasks are read through task_keys (migration 0022): unfiltered, its listing
-- indexes are walked in the page's order and each task is one probe of the primary
-- key; with a filter on the task's state, type or pool the planner may start from
-- `tasks` instead (a selective filter far down the tenant's order). Always planned for
-- the call's values (Db.conn(custom=True)): the generic plan of the orders by id
-- walked the primary key of `tasks` in id order and read every task of the partition
-- (test_plans). `t.tenant_id = $1` and the window on `t` repeat what the key row holds
-- (the window prunes partitions).
SELECT t.* FROM task_keys k
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at
WHERE k.tenant_id = $1
  AND k.scheduled_at >= $4 AND k.scheduled_at < $5
  AND (k.scheduled_at, k.task_id) > ($6, $7)
  AND t.tenant_id = $1 AND t.scheduled_at >= $4 AND t.scheduled_at < $5
  AND ($2::text[] IS NULL OR t.status = ANY($2::text[]))
  AND ($3::text IS NULL OR t.type = $3)
  AND ($9::text[] IS NULL OR t.pool = ANY($9::text[]))
ORDER BY k.scheduled_at, k.task_id
LIMIT $8

-- name: list_tasks_scheduled_desc
SELECT t.* FROM task_keys k
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at
WHERE k.tenant_id = $1
  AND k.scheduled_at >= $4 AND k.scheduled_at < $5
  AND (k.scheduled_at, k.task_id) < ($6, $7)
  AND t.tenant_id = $1 AND t.scheduled_at >= $4 AND t.scheduled_at < $5
  AND ($2::text[] IS NULL OR t.status = ANY($2::text[]))
  AND ($3::text IS NULL OR t.type = $3)
  AND ($9::text[] IS NULL OR t.pool = ANY($9::text[]))
ORDER BY k.scheduled_at DESC, k.task_id DESC
LIMIT $8

-- name: list_tasks_created_asc
-- $6 (the token's scheduled_at) is unused: ids alone order by creation (UUIDv7)
SELECT t.* FROM task_keys k
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at
WHERE k.tenant_id = $1
  AND k.scheduled_at >= $4 AND k.scheduled_at < $5
  AND $6::timestamptz IS NOT NULL AND k.task_id > $7
  AND t.tenant_id = $1 AND t.scheduled_at >= $4 AND t.scheduled_at < $5
  AND ($2::text[] IS NULL OR t.status = ANY($2::text[]))
  AND ($3::text IS NULL OR t.type = $3)
  AND ($9::text[] IS NULL OR t.pool = ANY($9::text[]))
ORDER BY k.task_id
LIMIT $8

-- name: list_tasks_created_desc
SELECT t.* FROM task_keys k
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at
WHERE k.tenant_id = $1
  AND k.scheduled_at >= $4 AND k.scheduled_at < $5
  AND $6::timestamptz IS NOT NULL AND k.task_id < $7
  AND t.tenant_id = $1 AND t.scheduled_at >= $4 AND t.scheduled_at < $5
  AND ($2::text[] IS NULL OR t.status = ANY($2::text[]))
  AND ($3::text IS NULL OR t.type = $3)
  AND ($9::text[] IS NULL OR t.pool = ANY($9::text[]))
ORDER BY k.task_id DESC
LIMIT $8

-- name: count_tasks
-- $1 tenant (NULL: every tenant, grouped by tenant too), $2 states, $3 type, $4 pools
-- (NULL: any), $5/$6 the scheduled_at window, $7 groups returned at most. `groups` and
-- `total` count every group, also those past the limit.
SELECT CASE WHEN $1::uuid IS NULL THEN tenant_id END AS tenant, status, type, pool,
       count(*) AS n, count(*) OVER () AS groups, sum(count(*)) OVER () AS total
FROM tasks
WHERE ($1::uuid IS NULL OR tenant_id = $1::uuid)
  AND ($2::text[] IS NULL OR status = ANY($2::text[]))
  AND ($3::text IS NULL OR type = $3)
  AND ($4::text[] IS NULL OR pool = ANY($4::text[]))
  AND scheduled_at >= $5 AND scheduled_at < $6
GROUP BY 1, status, type, pool
ORDER BY 1, CASE status WHEN 'SCHEDULED' THEN 1 WHEN 'PRELOADED' THEN 2 WHEN 'DISPATCHED' THEN 3
    WHEN 'RUNNING' THEN 4 WHEN 'RETRYING' THEN 5 WHEN 'COMPLETED' THEN 6 WHEN 'CANCELLED' THEN 7
    ELSE 8 END, type, CASE pool WHEN 'critical' THEN 1 WHEN 'standard' THEN 2 ELSE 3 END
LIMIT $7

-- name: tenant_is_big
-- Whether tenant $1 has at least a twentieth of all tasks (and at least 10,000) with
-- scheduled_at in [$2, $3): an index-only range of task_keys stopped at that many.
-- CountTasks of one tenant counts a big one with count_tasks, a scan of the window's
-- partitions (`tasks` has no index by tenant since migration 0022; the scan reads most
-- of their rows anyway, and a primary-key probe costs about twenty rows of a scan), and
-- a smaller one through task_keys (count_tenant_tasks).
WITH c AS MATERIALIZED (
    SELECT greatest(10000, (sum(p.reltuples) / 20)::bigint) AS cap
    FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid
    WHERE i.inhparent = 'tasks'::regclass
)
SELECT count(*) >= (SELECT cap FROM c) AS big
FROM (SELECT 1 FROM task_keys k
      WHERE k.tenant_id = $1 AND k.scheduled_at >= $2 AND k.scheduled_at < $3
      LIMIT (SELECT cap FROM c)) s

-- name: count_tenant_tasks
-- count_tasks of one tenant ($1; the same parameters), its tasks read through task_keys
-- as list_tasks does (a tenant that is not big: tenant_is_big).
SELECT NULL::uuid AS tenant, t.status, t.type, t.pool,
       count(*) AS n, count(*) OVER () AS groups, sum(count(*)) OVER () AS total
FROM task_keys k
JOIN tasks t ON t.id = k.task_id AND t.scheduled_at = k.scheduled_at
WHERE k.tenant_id = $1::uuid AND k.scheduled_at >= $5 AND k.scheduled_at < $6
  AND t.tenant_id = $1::uuid AND t.scheduled_at >= $5 AND t.scheduled_at < $6
  AND ($2::text[] IS NULL OR t.status = ANY($2::text[]))
  AND ($3::text IS NULL OR t.type = $3)
  AND ($4::text[] IS NULL OR t.pool = ANY($4::text[]))
GROUP BY t.status, t.type, t.pool
ORDER BY CASE t.status WHEN 'SCHEDULED' THEN 1 WHEN 'PRELOADED' THEN 2 WHEN 'DISPATCHED' THEN 3
    WHEN 'RUNNING' THEN 4 WHEN 'RETRYING' THEN 5 WHEN 'COMPLETED' THEN 6 WHEN 'CANCELLED' THEN 7
    ELSE 8 END, t.type, CASE t.pool WHEN 'critical' THEN 1 WHEN 'standard' THEN 2 ELSE 3 END
LIMIT $7

-- name: forecast
-- $1 tenant (NULL: every tenant), $2 window start, $3 bucket width (s), $4 window end,
-- $5 pools (NULL: any). Rows: ('f', bucket, pool, n) by due_at (firing), ('n', ...) by
-- scheduled_at (nominal), ('o', -1, pool, n) due before the start (overdue). Each part
-- is a range on an indexed column (due_at: idx_tasks_forecast_due; scheduled_at:
-- idx_tasks_forecast_nominal, and the partition key, pruned to the window's days).
SELECT 'f' AS kind, floor(extract(epoch FROM due_at - $2::timestamptz) / $3::int)::int AS bucket,
       pool, count(*) AS n
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND due_at >= $2 AND due_at < $4
  AND ($1::uuid IS NULL OR tenant_id = $1::uuid) AND ($5::text[] IS NULL OR pool = ANY($5::text[]))
GROUP BY 2, 3
UNION ALL
SELECT 'n', floor(extract(epoch FROM scheduled_at - $2::timestamptz) / $3::int)::int, pool, count(*)
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND scheduled_at >= $2 AND scheduled_at < $4
  AND ($1::uuid IS NULL OR tenant_id = $1::uuid) AND ($5::text[] IS NULL OR pool = ANY($5::text[]))
GROUP BY 2, 3
UNION ALL
SELECT 'o', -1, pool, count(*)
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND due_at < $2
  AND ($1::uuid IS NULL OR tenant_id = $1::uuid) AND ($5::text[] IS NULL OR pool = ANY($5::text[]))
GROUP BY 3

-- name: overdue
-- $1 tenant (NULL: every tenant), $2 now, $3 most groups. Tasks still to be dispatched
-- whose due_at has passed (as the forecast's overdue part counts them), by tenant, type
-- and pool, the oldest first: an index-only range on idx_tasks_forecast_due.
SELECT tenant_id, type, pool, count(*) AS n, min(due_at) AS oldest
FROM tasks
WHERE status IN ('SCHEDULED', 'PRELOADED', 'RETRYING') AND due_at < $2
  AND ($1::uuid IS NULL OR tenant_id = $1::uuid)
GROUP BY tenant_id, type, pool
ORDER BY oldest, tenant_id, type, pool
LIMIT $3

-- name: claim_preload
-- $1 horizon, $2 shards (NULL = all), $3/$4 scheduled_at window, $5 limit, $6 now, $7 actor,
-- $8 retry horizon (a RETRYING task waits out its backoff as RETRYING)
WITH c AS (
    SELECT id, scheduled_at, status FROM tasks
    WHERE status IN ({{from:SCHEDULED,RETRYING|to:PRELOADED}})
      AND due_at <= $1 AND unresolved_dependencies = 0
      AND (status <> 'RETRYING' OR due_at <= $8)
      AND ($2::int[] IS NULL OR shard_id = ANY($2::int[]))
      AND scheduled_at >= $3 AND scheduled_at < $4
    ORDER BY due_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), k AS (
    -- The claimed keys as arrays (see the top of this file: unnest of arrays the
    -- planner cannot see is priced as 10 keys, so the update probes the primary key).
    SELECT array_agg(id) AS ids, array_agg(scheduled_at) AS ats, array_agg(status) AS sts
    FROM c
), moved AS (
    UPDATE tasks t SET status = 'PRELOADED', updated_at = $6
    FROM k, unnest(k.ids, k.ats, k.sts) AS u(id, scheduled_at, status)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at
      AND t.scheduled_at >= $3 AND t.scheduled_at < $4
    RETURNING t.id, t.scheduled_at, t.due_at, t.tenant_id, t.shard_id, t.pool, t.type,
        t.rate_limit_key,
        t.fencing_token, t.status, u.status AS from_status
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT m.id, m.scheduled_at, p.f, p.t, m.fencing_token, $7, $6,
        CASE m.from_status WHEN 'RETRYING' THEN 'retry due' ELSE 'preloaded' END
    FROM moved m JOIN {{paths}} ON p.start = m.from_status AND p.finish = m.status
)
SELECT id, scheduled_at, due_at, tenant_id, shard_id, pool, type, rate_limit_key FROM moved

-- name: load_preloaded
-- $6: only rows changed at or after it (NULL: all).
SELECT id, scheduled_at, due_at, tenant_id, shard_id, pool, type, rate_limit_key FROM tasks
WHERE status IN ({{states:PRELOADED}}) AND due_at <= $1
  AND ($2::int[] IS NULL OR shard_id = ANY($2::int[]))
  AND ($6::timestamptz IS NULL OR updated_at >= $6)
  AND (scheduled_at, id) > ($3, $4)
ORDER BY scheduled_at, id
LIMIT $5

-- name: load_preloaded_packed
-- The rows and keyset pages of load_preloaded, packed per (tenant, type, pool): one row
-- per group whose ids, times and shards are concatenated binary (uuid_send: 16 bytes;
-- timestamptz_send: int8 µs since 2000-01-01; int4send), so a client decodes a few
-- values per group, not seven per task. Item i of each aggregate is the same row (the
-- aggregates of one group read its rows in one pass). last_at/last_id: the page's last
-- key, where the next page starts.
WITH page AS MATERIALIZED (
    SELECT id, scheduled_at, due_at, tenant_id, shard_id, pool, type, rate_limit_key
    FROM tasks
    WHERE status IN ({{states:PRELOADED}}) AND due_at <= $1
      AND ($2::int[] IS NULL OR shard_id = ANY($2::int[]))
      AND ($6::timestamptz IS NULL OR updated_at >= $6)
      AND (scheduled_at, id) > ($3, $4)
    ORDER BY scheduled_at, id
    LIMIT $5
), last AS (
    SELECT scheduled_at, id FROM page ORDER BY scheduled_at DESC, id DESC LIMIT 1
)
SELECT p.tenant_id, p.type COLLATE "C" AS type, p.pool COLLATE "C" AS pool,
       p.rate_limit_key COLLATE "C" AS rate_limit_key, count(*) AS n,
       string_agg(uuid_send(p.id), ''::bytea) AS ids,
       string_agg(timestamptz_send(p.scheduled_at), ''::bytea) AS scheduled,
       string_agg(timestamptz_send(p.due_at), ''::bytea) AS due,
       string_agg(int4send(p.shard_id), ''::bytea) AS shards,
       (SELECT l.scheduled_at FROM last l) AS last_at, (SELECT l.id FROM last l) AS last_id
FROM page p
GROUP BY p.tenant_id, p.type COLLATE "C", p.pool COLLATE "C", p.rate_limit_key COLLATE "C"

-- name: mark_dispatched
-- $1 ids, $2 scheduled_at, $3 worker ids, $4 leases, $5 now, $6/$7 bounds, $8 actor,
-- $9 shard epochs (NULL: no epoch check, single node), $10 running (true: the worker
-- starts tasks on delivery, so the dispatch commits RUNNING instead of DISPATCHED),
-- $11 keyed (false: a task with a concurrency key is left PRELOADED, for the keyed path
-- of PostgresStore.mark_dispatched, which counts its key's slots under a lock first).
-- The caller sends each key once (a repeated request gets no row). A request that
-- carries an epoch matches only while its shard's epoch is still that one: a node that
-- lost the shard (frozen past its etcd lease, say) can no longer dispatch from it.
-- The token is at least the fencing generation's base (g << 40) + 1 (migration 0011):
-- after `tickwheel dr promote` every token is above every one the lost primary issued.
-- The base is one uncorrelated one-row read per statement (an InitPlan), not per row.
WITH d AS (
    UPDATE tasks t SET
        status = CASE WHEN u.running THEN 'RUNNING' ELSE 'DISPATCHED' END,
        fencing_token = GREATEST(t.fencing_token,
            (SELECT g.generation << 40 FROM fencing_generation g)) + 1,
        worker_id = u.worker_id, lease_expires_at = u.lease, updated_at = $5
    FROM unnest((SELECT $1::uuid[]),
                (SELECT tickwheel_fill($2::timestamptz[], cardinality($1::uuid[]))),
                (SELECT tickwheel_fill($3::text[], cardinality($1::uuid[]))),
                (SELECT tickwheel_fill($4::timestamptz[], cardinality($1::uuid[]))),
                (SELECT $9::bigint[]),
                (SELECT tickwheel_fill($10::bool[], cardinality($1::uuid[]))))
        AS u(id, scheduled_at, worker_id, lease, epoch, running)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at
      AND t.status = ANY((SELECT ARRAY[{{from:PRELOADED|to:DISPATCHED,RUNNING}}])::text[])
      AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
      AND ($11::bool OR t.concurrency_key IS NULL)
      AND (u.epoch IS NULL OR EXISTS (
          SELECT 1 FROM shard_epochs se WHERE se.shard_id = t.shard_id AND se.epoch = u.epoch))
    RETURNING t.id, t.scheduled_at, t.tenant_id, t.type, t.payload, t.fencing_token,
        t.retry_count, t.max_retries, t.due_at, t.checkpoint, t.trace_context, t.pool,
        t.timeout_s, u.epoch, t.status, t.concurrency_key
), audit AS (
    INSERT INTO task_transitions
        (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, epoch,
         reason, due_at)
    SELECT id, scheduled_at, 'PRELOADED', status, fencing_token, $8, $5, epoch,
        CASE status WHEN 'RUNNING' THEN 'dispatched, started on delivery' ELSE 'dispatched' END,
        due_at
    FROM d
)
-- Only what the Assignment needs beyond the request (key, worker and lease are the
-- caller's); the store reads these columns by position.
SELECT id, tenant_id, type, payload, fencing_token, retry_count, max_retries, due_at,
    checkpoint, trace_context, pool, timeout_s, concurrency_key
FROM d

-- name: lock_keyed
-- Of the PRELOADED tasks ($1 ids, $2 scheduled_at, $3/$4 bounds), those with a
-- concurrency key, each with its tenant, type, key and the key's limit (1 without a
-- row); and one transaction-scoped advisory lock per distinct key taken (a 64-bit hash
-- of tenant, type and key, in hash order, so two dispatchers take shared keys in the
-- same order; a collision only makes two keys wait for each other). The locks are held
-- to the commit: the next dispatcher of a key counts only after this one's dispatches
-- are written. The lock subquery is uncorrelated: run once, before the first row is
-- returned.
WITH k AS MATERIALIZED (
    SELECT t.id, t.tenant_id, t.type, t.concurrency_key, coalesce(l.max_running, 1) AS lim,
        hashtextextended(t.tenant_id::text || '/' || t.type || '/' || t.concurrency_key, 0) AS h
    FROM unnest($1::uuid[], tickwheel_fill($2::timestamptz[], cardinality($1::uuid[])))
        AS u(id, scheduled_at)
    CROSS JOIN LATERAL (
        SELECT t.id, t.tenant_id, t.type, t.concurrency_key FROM tasks t
        WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at
          AND t.scheduled_at >= $3 AND t.scheduled_at <= $4
          AND t.status = ANY((SELECT ARRAY[{{states:PRELOADED}}])::text[])
          AND t.concurrency_key IS NOT NULL
        LIMIT 1
    ) t
    LEFT JOIN concurrency_limits l ON l.tenant_id = t.tenant_id AND l.type = t.type
)
SELECT k.id, k.tenant_id, k.type, k.concurrency_key, k.lim,
    (SELECT count(pg_advisory_xact_lock(s.h)) FROM (SELECT DISTINCT h FROM k ORDER BY h) s)
        AS locked
FROM k

-- name: mark_dispatched_keyed
-- mark_dispatched for tasks with a concurrency key, run after lock_keyed in the same
-- transaction: its snapshot, taken after the locks were granted, sees every dispatch
-- of these keys committed before. The caller groups the requests by key from
-- lock_keyed's rows: $13-$16 each distinct key's tenant,
-- type, key and limit; $11 each request's key (1-based into them), $12 its rank among
-- its key's requests in request order. A key's free slots (its limit - its tasks
-- DISPATCHED or RUNNING, counted once a key: a probe of idx_tasks_concurrency_active
-- in every partition, since a key's running tasks may be in any day's) go to its
-- requests of rank up to that; the others stay PRELOADED. $1-$10 as mark_dispatched's;
-- $12-$14 and $16 may be one value for all (tickwheel_fill); $11 NULL: request i's key
-- is key i (every key once). No probe of the tasks but the update's own, no sort.
WITH f AS MATERIALIZED (
    SELECT array_agg(k.lim - (
            SELECT count(*) FROM tasks a
            WHERE a.tenant_id = k.tenant_id AND a.type = k.type AND a.concurrency_key = k.ckey
              AND a.concurrency_key IS NOT NULL AND a.status IN ('DISPATCHED', 'RUNNING')
        ) ORDER BY k.i) AS free
    FROM unnest(tickwheel_fill($13::uuid[], cardinality($15::text[])),
                tickwheel_fill($14::text[], cardinality($15::text[])),
                $15::text[],
                tickwheel_fill($16::int[], cardinality($15::text[])))
        WITH ORDINALITY AS k(tenant_id, type, ckey, lim, i)
), d AS (
    UPDATE tasks t SET
        status = CASE WHEN u.running THEN 'RUNNING' ELSE 'DISPATCHED' END,
        fencing_token = GREATEST(t.fencing_token,
            (SELECT g.generation << 40 FROM fencing_generation g)) + 1,
        worker_id = u.worker_id, lease_expires_at = u.lease, updated_at = $5
    FROM unnest((SELECT $1::uuid[]),
                (SELECT tickwheel_fill($2::timestamptz[], cardinality($1::uuid[]))),
                (SELECT tickwheel_fill($3::text[], cardinality($1::uuid[]))),
                (SELECT tickwheel_fill($4::timestamptz[], cardinality($1::uuid[]))),
                (SELECT $9::bigint[]),
                (SELECT tickwheel_fill($10::bool[], cardinality($1::uuid[]))),
                (SELECT $11::int[]),
                (SELECT tickwheel_fill($12::int[], cardinality($1::uuid[]))))
        WITH ORDINALITY AS u(id, scheduled_at, worker_id, lease, epoch, running, k, rank, i)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at
      AND u.rank <= (SELECT f.free FROM f)[coalesce(u.k, u.i)]
      AND t.status = ANY((SELECT ARRAY[{{from:PRELOADED|to:DISPATCHED,RUNNING}}])::text[])
      AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
      AND t.concurrency_key IS NOT NULL
      AND (u.epoch IS NULL OR EXISTS (
          SELECT 1 FROM shard_epochs se WHERE se.shard_id = t.shard_id AND se.epoch = u.epoch))
    RETURNING t.id, t.scheduled_at, t.tenant_id, t.type, t.payload, t.fencing_token,
        t.retry_count, t.max_retries, t.due_at, t.checkpoint, t.trace_context, t.pool,
        t.timeout_s, u.epoch, t.status, t.concurrency_key
), audit AS (
    INSERT INTO task_transitions
        (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, epoch,
         reason, due_at)
    SELECT id, scheduled_at, 'PRELOADED', status, fencing_token, $8, $5, epoch,
        CASE status WHEN 'RUNNING' THEN 'dispatched, started on delivery' ELSE 'dispatched' END,
        due_at
    FROM d
)
SELECT id, tenant_id, type, payload, fencing_token, retry_count, max_retries, due_at,
    checkpoint, trace_context, pool, timeout_s, concurrency_key
FROM d

-- name: set_concurrency_limit
INSERT INTO concurrency_limits (tenant_id, type, max_running, updated_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, type) DO UPDATE SET max_running = $3, updated_at = $4

-- name: clear_concurrency_limit
DELETE FROM concurrency_limits WHERE tenant_id = $1 AND type = $2

-- name: concurrency_limits
SELECT tenant_id, type, max_running FROM concurrency_limits
WHERE ($1::uuid IS NULL OR tenant_id = $1) ORDER BY tenant_id, type

-- name: ack
-- $1 ids, $2 scheduled_at, $3 tokens, $4 lease, $5 now, $6/$7 bounds
WITH a AS (
    UPDATE tasks t SET status = 'RUNNING', lease_expires_at = $4, updated_at = $5
    FROM unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), (SELECT $3::bigint[]))
        AS u(id, scheduled_at, token)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
      AND t.status = ANY((SELECT ARRAY[{{from:DISPATCHED|to:RUNNING}}])::text[])
      AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
    RETURNING t.id, t.scheduled_at, t.fencing_token, t.worker_id
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT id, scheduled_at, 'DISPATCHED', 'RUNNING', fencing_token, coalesce(worker_id, ''), $5,
        'acked'
    FROM a
)
SELECT id, fencing_token FROM a

-- name: heartbeat
-- Also answers a repeated ack ($8 = the states the lease may be extended in).
UPDATE tasks t SET lease_expires_at = $4, updated_at = $5
FROM unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), (SELECT $3::bigint[]))
    AS u(id, scheduled_at, token)
WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
  AND t.status = ANY((SELECT $8::text[])::text[])
  AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
RETURNING t.id, t.fencing_token

-- name: existing_keys
-- One primary-key probe a key: the LIMIT keeps the lookup a subquery per key (a join
-- it could be flattened into let the planner, without statistics, read the tenant
-- index's whole range of the minute instead: 50 tuples a key in test_plans).
SELECT t.id FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, scheduled_at)
CROSS JOIN LATERAL (
    SELECT t.id FROM tasks t
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at
      AND t.scheduled_at >= $3 AND t.scheduled_at <= $4
    LIMIT 1
) t

-- name: checkpoint
UPDATE tasks SET checkpoint = $4::jsonb, updated_at = $5
WHERE id = $1 AND scheduled_at = $2 AND fencing_token = $3
  AND status = ANY((SELECT ARRAY[{{states:RUNNING}}])::text[])
RETURNING id

-- name: complete
-- $1 ids, $2 scheduled_at, $3 tokens, $4 results (json text), $5 now, $6/$7 bounds,
-- $8 acked_at (NULL: a plain completion of a RUNNING task; a time: the task's ack is
-- written with it, DISPATCHED -> RUNNING -> COMPLETED, the ack's audit row at that time).
-- A completion with its ack matches only a DISPATCHED task, one without only a RUNNING
-- one, each with the current token; every step gets its audit row.
WITH done AS (
    UPDATE tasks t SET status = 'COMPLETED', result_payload = u.result::jsonb,
        lease_expires_at = NULL, updated_at = $5
    FROM unnest((SELECT $1::uuid[]),
                (SELECT tickwheel_fill($2::timestamptz[], cardinality($1::uuid[]))),
                (SELECT $3::bigint[]), (SELECT $4::text[]), (SELECT $8::timestamptz[]))
        AS u(id, scheduled_at, token, result, acked_at)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
      AND t.status = CASE WHEN u.acked_at IS NULL
                          THEN {{from:RUNNING|to:COMPLETED}}
                          ELSE {{from:DISPATCHED|to:RUNNING}} END
      AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
    RETURNING t.id, t.scheduled_at, t.tenant_id, t.type, t.schedule_id, t.fencing_token,
        t.worker_id, t.workflow_id, u.acked_at
), ledger AS (
    INSERT INTO task_completions (task_id, scheduled_at, tenant_id, type, schedule_id, job_id,
        fencing_token, worker_id, completed_at)
    SELECT d.id, d.scheduled_at, d.tenant_id, d.type, d.schedule_id, s.name,
        d.fencing_token, d.worker_id, $5
    FROM done d LEFT JOIN cron_schedules s ON s.id = d.schedule_id
), audit AS (
    -- The steps of route DISPATCHED -> RUNNING -> COMPLETED (_sql.ROUTES), as two plain
    -- selects: a join to the paths relation cost a VALUES scan per row.
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT id, scheduled_at, 'DISPATCHED', 'RUNNING', fencing_token, coalesce(worker_id, ''),
        acked_at, 'acked'
    FROM done WHERE acked_at IS NOT NULL
    UNION ALL
    SELECT id, scheduled_at, 'RUNNING', 'COMPLETED', fencing_token, coalesce(worker_id, ''), $5,
        'completed'
    FROM done
)
SELECT id, fencing_token, workflow_id FROM done

-- name: release_children
-- DAG: decrement the children of the completed parents ($1); those that reach zero
-- while SCHEDULED become PRELOADED. $2 now, $3 actor.
WITH edges AS (
    SELECT d.child_task_id AS id, d.child_scheduled_at AS scheduled_at,
        count(*)::int AS n, array_agg(d.parent_task_id) AS parents
    FROM task_dependencies d
    WHERE d.parent_task_id = ANY($1::uuid[])
    GROUP BY 1, 2
), dec AS (
    UPDATE tasks t SET
        unresolved_dependencies = greatest(t.unresolved_dependencies - e.n, 0),
        status = CASE WHEN t.unresolved_dependencies - e.n <= 0
                       AND t.status IN ({{from:SCHEDULED|to:PRELOADED}})
                      THEN 'PRELOADED' ELSE t.status END,
        updated_at = $2
    FROM edges e
    WHERE t.id = e.id AND t.scheduled_at = e.scheduled_at AND t.unresolved_dependencies > 0
    RETURNING t.id, t.scheduled_at, t.due_at, t.tenant_id, t.shard_id, t.pool, t.type,
        t.rate_limit_key,
        t.status, t.unresolved_dependencies, t.fencing_token, e.parents
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT id, scheduled_at, 'SCHEDULED', 'PRELOADED', fencing_token, $3, $2, 'dependencies met'
    FROM dec WHERE status = 'PRELOADED'
)
SELECT id, scheduled_at, due_at, tenant_id, shard_id, pool, type, rate_limit_key, parents
FROM dec WHERE status = 'PRELOADED'

-- name: fail
-- $1 ids, $2 scheduled_at, $3 tokens, $4 errors, $5 retryable, $6 retry_at, $7 now, $8/$9 bounds,
-- $10 error types, $11 spread factors (1 + up to 0.25), $12 tracebacks ('' for none). A task with its own retry policy
-- (retry_policy.base_s/cap_s) gets its backoff here; an error type its policy lists
-- dead-letters at once.
WITH f AS (
    UPDATE tasks t SET
        retry_count = t.retry_count + 1,
        status = CASE WHEN u.retryable AND t.retry_count < t.max_retries
                       AND NOT coalesce(jsonb_exists(t.retry_policy -> 'errors', u.error_type), false)
                      THEN 'RETRYING' ELSE 'DEAD_LETTER' END,
        due_at = CASE WHEN u.retryable AND t.retry_count < t.max_retries
                       AND NOT coalesce(jsonb_exists(t.retry_policy -> 'errors', u.error_type), false)
                      THEN CASE WHEN t.retry_policy ? 'base_s'
                                THEN $7::timestamptz + make_interval(secs => least(
                                    (t.retry_policy ->> 'cap_s')::float8,
                                    (t.retry_policy ->> 'base_s')::float8
                                        * power(2::float8, least(t.retry_count, 60)))
                                    * u.spread)
                                ELSE coalesce(u.retry_at, $7) END
                      ELSE t.due_at END,
        last_error = u.error, last_error_type = nullif(u.error_type, ''),
        last_traceback = nullif(u.traceback, ''), lease_expires_at = NULL, updated_at = $7
    FROM unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), (SELECT $3::bigint[]),
                (SELECT $4::text[]), (SELECT $5::bool[]), (SELECT $6::timestamptz[]),
                (SELECT $10::text[]), (SELECT $11::float8[]), (SELECT $12::text[]))
        AS u(id, scheduled_at, token, error, retryable, retry_at, error_type, spread, traceback)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
      AND t.status = ANY((SELECT ARRAY[{{from:RUNNING|to:RETRYING}}])::text[])
      AND t.scheduled_at >= $8 AND t.scheduled_at <= $9
    RETURNING t.id, t.scheduled_at, t.status, t.fencing_token, t.worker_id, t.workflow_id,
        t.retry_count, t.max_retries, u.error, u.retryable
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT f.id, f.scheduled_at, p.f, p.t, f.fencing_token, coalesce(f.worker_id, ''), $7,
        CASE WHEN p.t = 'DEAD_LETTER' THEN
                 CASE WHEN f.retryable AND f.retry_count > f.max_retries
                      THEN 'no attempts left' ELSE 'not retryable' END
             WHEN f.status = 'RETRYING' THEN
                 'failed: ' || left(f.error, 200)
                 || ' (retry ' || f.retry_count || ' of ' || f.max_retries || ')'
             ELSE 'failed: ' || left(f.error, 200) END
    FROM f JOIN {{paths}} ON p.start = 'RUNNING' AND p.finish = f.status
)
-- workflow_id: a workflow task that went DEAD_LETTER gets its upstream policy applied in
-- the same transaction (PostgresStore.fail).
SELECT id, fencing_token, status, workflow_id FROM f

-- name: release
-- RUNNING/DISPATCHED -> PRELOADED (or on to CANCELLED when a cancel is pending).
-- $1 ids, $2 scheduled_at, $3 tokens, $4 checkpoints (json text or NULL), $5 now, $6/$7 bounds,
-- $8 dispatched_only (a closed stream's give-back: DISPATCHED only, never RUNNING)
WITH old AS (
    SELECT t.id, t.scheduled_at, t.status, t.worker_id, u.checkpoint
    FROM tasks t
    JOIN unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), (SELECT $3::bigint[]),
                (SELECT $4::text[]), (SELECT $8::bool[]))
        AS u(id, scheduled_at, token, checkpoint, dispatched_only)
      ON t.id = u.id AND t.scheduled_at = u.scheduled_at
    WHERE t.fencing_token = u.token
      AND t.status = ANY((SELECT ARRAY[{{from:RUNNING,DISPATCHED|to:PRELOADED}}])::text[])
      AND (NOT u.dispatched_only OR t.status = 'DISPATCHED')
      AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
    FOR UPDATE OF t
), r AS (
    UPDATE tasks t SET
        status = CASE WHEN t.cancel_requested THEN 'CANCELLED' ELSE 'PRELOADED' END,
        lease_expires_at = NULL,
        checkpoint = coalesce(old.checkpoint::jsonb, t.checkpoint),
        updated_at = $5
    FROM old
    WHERE t.id = old.id AND t.scheduled_at = old.scheduled_at
      AND t.scheduled_at >= $6 AND t.scheduled_at <= $7
    RETURNING t.id, t.scheduled_at, t.status, old.status AS from_status, t.fencing_token,
        old.worker_id, t.workflow_id
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT r.id, r.scheduled_at, p.f, p.t, r.fencing_token, coalesce(r.worker_id, ''), $5,
        CASE p.t WHEN 'CANCELLED' THEN 'cancelled' ELSE 'released' END
    FROM r JOIN {{paths}} ON p.start = r.from_status AND p.finish = r.status
)
-- status and workflow_id: a workflow task that went CANCELLED (cancel pending) gets its
-- upstream policy applied in the same transaction (PostgresStore.release).
SELECT id, fencing_token, status, workflow_id FROM r

-- name: confirm_cancel
WITH c AS (
    UPDATE tasks t SET status = 'CANCELLED', lease_expires_at = NULL, updated_at = $4
    FROM unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), (SELECT $3::bigint[]))
        AS u(id, scheduled_at, token)
    WHERE t.id = u.id AND t.scheduled_at = u.scheduled_at AND t.fencing_token = u.token
      AND t.status = ANY((SELECT ARRAY[{{from:RUNNING|to:CANCELLED}}])::text[]) AND t.cancel_requested
      AND t.scheduled_at >= $5 AND t.scheduled_at <= $6
    RETURNING t.id, t.scheduled_at, t.fencing_token, t.worker_id, t.workflow_id
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT id, scheduled_at, 'RUNNING', 'CANCELLED', fencing_token, coalesce(worker_id, ''), $4,
        'cancelled, worker confirmed'
    FROM c
)
SELECT id, fencing_token, workflow_id FROM c

-- name: reclaim_expired
-- $1 now, $2 shards (NULL = all), $3 limit, $4 actor
WITH x AS (
    SELECT id, scheduled_at, status, cancel_requested, retry_count, max_retries
    FROM tasks
    WHERE status IN ({{states:DISPATCHED,RUNNING}}) AND lease_expires_at < $1
      AND ($2::int[] IS NULL OR shard_id = ANY($2::int[]))
    ORDER BY lease_expires_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), k AS (
    -- The expired keys as arrays, as claim_preload's.
    SELECT array_agg(id) AS ids, array_agg(scheduled_at) AS ats, array_agg(status) AS sts,
        array_agg(cancel_requested) AS cancels, array_agg(retry_count) AS retries,
        array_agg(max_retries) AS maxes
    FROM x
), r AS (
    UPDATE tasks t SET
        status = CASE
            WHEN x.cancel_requested THEN 'CANCELLED'
            WHEN x.status = 'DISPATCHED' THEN 'PRELOADED'
            WHEN x.retry_count < x.max_retries THEN 'RETRYING'
            ELSE 'DEAD_LETTER' END,
        retry_count = CASE WHEN x.status = 'RUNNING' AND NOT x.cancel_requested
                           THEN t.retry_count + 1 ELSE t.retry_count END,
        due_at = CASE WHEN x.status = 'RUNNING' AND NOT x.cancel_requested
                      AND x.retry_count < x.max_retries THEN $1 ELSE t.due_at END,
        last_error = CASE WHEN x.status = 'RUNNING' AND NOT x.cancel_requested
                          THEN 'lease expired' ELSE t.last_error END,
        last_error_type = CASE WHEN x.status = 'RUNNING' AND NOT x.cancel_requested
                               THEN NULL ELSE t.last_error_type END,
        last_traceback = CASE WHEN x.status = 'RUNNING' AND NOT x.cancel_requested
                              THEN NULL ELSE t.last_traceback END,
        lease_expires_at = NULL, updated_at = $1
    FROM k, unnest(k.ids, k.ats, k.sts, k.cancels, k.retries, k.maxes)
        AS x(id, scheduled_at, status, cancel_requested, retry_count, max_retries)
    WHERE t.id = x.id AND t.scheduled_at = x.scheduled_at
    RETURNING t.id, t.scheduled_at, t.due_at, t.tenant_id, t.shard_id, t.pool, t.type,
        t.rate_limit_key,
        t.status, x.status AS from_status, t.fencing_token, t.workflow_id
), audit AS (
    INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
    SELECT r.id, r.scheduled_at, p.f, p.t, r.fencing_token, $4, $1,
        CASE p.t WHEN 'DEAD_LETTER' THEN 'lease expired, no attempts left'
                 WHEN 'CANCELLED' THEN 'lease expired, cancel pending'
                 ELSE 'lease expired' END
    FROM r JOIN {{paths}} ON p.start = r.from_status AND p.finish = r.status
)
SELECT id, scheduled_at, due_at, tenant_id, shard_id, pool, type, rate_limit_key, status,
    workflow_id FROM r

-- name: set_status
-- Operator moves (cancel, redrive, transition): the caller checked the move in code;
-- the guard $4 (legal sources of the target) checks it again.
UPDATE tasks SET status = $3::text, updated_at = $5,
    cancel_requested = CASE WHEN $3::text = 'CANCELLED' THEN FALSE ELSE cancel_requested END,
    lease_expires_at = CASE WHEN $3::text IN ('DISPATCHED', 'RUNNING') THEN lease_expires_at END,
    retry_count = CASE WHEN $3::text = 'SCHEDULED' AND status = 'DEAD_LETTER'
                       THEN 0 ELSE retry_count END,
    due_at = coalesce($6::timestamptz, due_at)
WHERE id = $1 AND scheduled_at = $2 AND status = ANY((SELECT $4::text[])::text[])
RETURNING *

-- name: request_cancel
UPDATE tasks SET cancel_requested = TRUE, updated_at = $3
WHERE id = $1 AND scheduled_at = $2 AND status = ANY((SELECT ARRAY[{{states:DISPATCHED,RUNNING}}])::text[])
RETURNING *

-- name: audit
INSERT INTO task_transitions (task_id, scheduled_at, from_status, to_status, fencing_token, actor, at, reason)
SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::bigint[],
    $6::text[], $7::timestamptz[], $8::text[])

-- name: transitions_of
SELECT from_status, to_status, fencing_token, actor, at, epoch, reason, due_at
FROM task_transitions WHERE task_id = $1 ORDER BY at, ctid

-- name: insert_dependencies
INSERT INTO task_dependencies (workflow_id, parent_task_id, child_task_id, child_scheduled_at)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[])
ON CONFLICT DO NOTHING

-- name: partition_live_count
SELECT count(*) FROM tasks
WHERE scheduled_at >= $1 AND scheduled_at < $2
  AND status NOT IN ('COMPLETED', 'CANCELLED')

-- name: claim_shards
-- $1 shard ids, $2 owner, $3 now: epoch + 1 per shard, history appended. Like tokens,
-- an epoch is at least the fencing generation's base (g << 40) + 1 (migration 0011), so
-- a node of a lost primary, carrying a pre-promote epoch, cannot dispatch after it.
WITH b AS (
    SELECT coalesce((SELECT generation << 40 FROM fencing_generation), 0) AS base
), e AS (
    INSERT INTO shard_epochs (shard_id, epoch, owner, updated_at)
    SELECT s, b.base + 1, $2, $3 FROM unnest($1::int[]) AS s, b
    ON CONFLICT (shard_id) DO UPDATE
        SET epoch = GREATEST(shard_epochs.epoch, (SELECT base FROM b)) + 1, owner = EXCLUDED.owner, updated_at = EXCLUDED.updated_at
    RETURNING shard_id, epoch
), h AS (
    INSERT INTO shard_claims (shard_id, epoch, owner, claimed_at)
    SELECT shard_id, epoch, $2, $3 FROM e
)
SELECT shard_id, epoch FROM e

-- name: shard_claims
SELECT shard_id, epoch, owner, claimed_at FROM shard_claims ORDER BY shard_id, epoch

-- ---- API keys: scopes, expiry, revocation, last use, rotation (issue 15) ----

-- name: insert_scoped_api_key
INSERT INTO api_keys (id, tenant_id, name, secret_hash, created_at, scopes, expires_at,
    rotated_from)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from

-- name: api_key_by_hash
SELECT id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from
FROM api_keys WHERE secret_hash = $1

-- name: get_api_key
SELECT id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from
FROM api_keys WHERE id = $1

-- name: list_api_keys
SELECT id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from
FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id

-- name: revoke_api_key
UPDATE api_keys SET revoked = TRUE, revoked_at = COALESCE(revoked_at, $2)
WHERE id = $1
RETURNING id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from

-- name: expire_api_key
-- An expiry only ever moves earlier (LEAST ignores a NULL: no expiry yet).
UPDATE api_keys SET expires_at = LEAST(expires_at, $2)
WHERE id = $1
RETURNING id, tenant_id, name, created_at, revoked, scopes, expires_at, revoked_at, last_used_at, rotated_from

-- name: touch_api_keys
UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at)
WHERE k.id = u.id

-- name: list_tenants
SELECT id, name, tier, rate_limit_rps, max_concurrent_workers, home_region, created_at
FROM tenants WHERE ($1::uuid IS NULL OR id > $1) ORDER BY id LIMIT $2

-- name: tenant_moves
-- Every tenant a home move touched here (migration 0012), and where it left it.
SELECT tenant_id, CASE
    WHEN phase = 'frozen' THEN 'frozen'
    WHEN role = 'source' THEN 'gone'
    ELSE 'arrived' END AS state
FROM tenant_moves

-- ---- Refused worker writes and recent activity (issue 18, migration 0008) ----

-- name: record_refused
-- Only on a refusal (never on the hot path): tenant and current token from the task row.
-- $1 ids, $2 scheduled_at, $3 tokens, $4 actors, $5 write kinds, $6 reasons, $7 at
INSERT INTO refused_writes (task_id, tenant_id, at, fencing_token, current_token, actor,
    write_kind, reason)
SELECT t.id, t.tenant_id, $7, u.token, t.fencing_token, u.actor, u.kind, u.reason
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $4::text[], $5::text[], $6::text[])
    AS u(id, scheduled_at, token, actor, kind, reason)
JOIN tasks t ON t.id = u.id AND t.scheduled_at = u.scheduled_at

-- name: refused_of
-- The last 1,000, oldest first.
SELECT at, fencing_token, current_token, actor, write_kind, reason FROM (
    SELECT at, fencing_token, current_token, actor, write_kind, reason, ctid AS c
    FROM refused_writes WHERE task_id = $1 ORDER BY at DESC, ctid DESC LIMIT 1000
) r ORDER BY at, c

-- name: activity
-- GetActivity: per bucket of $3 seconds from $1 to $2 (both included: a row at $2 is
-- in the last bucket, $5), dispatches (with lateness from the dispatch row's due_at),
-- completions and failed attempts; $4 tenant (NULL: all).
-- The BRIN index on `at` keeps the scan to the window; a tenant's rows are joined to
-- their task by its primary key.
WITH x AS (
    SELECT least(floor(extract(epoch FROM (a.at - $1)) / $3)::int, $5) AS b,
        a.from_status, a.to_status,
        extract(epoch FROM (a.at - a.due_at)) AS late
    FROM task_transitions a
    WHERE a.at >= $1 AND a.at <= $2
      AND (a.to_status IN ('DISPATCHED', 'COMPLETED', 'RETRYING', 'DEAD_LETTER')
           OR (a.to_status = 'RUNNING' AND a.from_status = 'PRELOADED'))
      AND ($4::uuid IS NULL OR EXISTS (
          SELECT 1 FROM tasks t
          WHERE t.id = a.task_id AND t.scheduled_at = a.scheduled_at AND t.tenant_id = $4))
)
SELECT b,
    count(*) FILTER (WHERE from_status = 'PRELOADED') AS dispatched,
    count(*) FILTER (WHERE to_status = 'COMPLETED') AS completed,
    count(*) FILTER (WHERE from_status = 'RUNNING' AND to_status IN ('RETRYING', 'DEAD_LETTER'))
        AS failed,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY greatest(late, 0))
        FILTER (WHERE from_status = 'PRELOADED') AS p50,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY greatest(late, 0))
        FILTER (WHERE from_status = 'PRELOADED') AS p99
FROM x GROUP BY b ORDER BY b

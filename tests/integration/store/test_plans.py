"""Plan regression (issue 41): every hot statement touches task-partition tuples and index
entries in proportion to its batch, never to the tasks outstanding.

A stampede puts every task of a minute on one ``scheduled_at``. With 10,000 and 50,000
such tasks (half SCHEDULED, half PRELOADED), each statement of the pre-load, dispatch,
ack and completion paths runs under EXPLAIN (ANALYZE, BUFFERS) with a batch of 1,000
(the dispatcher's), in the transaction the store runs it in, under a custom and the
generic plan (a prepared statement's: ``tests.support.plans.explain``), with fresh
statistics, with statistics taken while the minute was still SCHEDULED (the autovacuum
ANALYZE before T that made each 1,000-task dispatch walk every PRELOADED task of the
minute) and with none (a partition not analyzed yet). The bound, 5 tuples a task,
counts what the scans of the task partitions returned plus what their filters threw
away. 10,000 is the case where the batch is a tenth of the partition: the planner
priced a hash join over a walk of the tenant index below the batch's key probes there
(10 tuples a task) until the by-key statements hid their arrays' length from it
(queries.sql, "Key first").
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from scheduler.store.postgres import Q
from tests.support.plans import BY_KEY_PROBES, HOT, Probe, explain, seed_stampede
from tests.support.stores import NOW

pytestmark = pytest.mark.postgres

TASKS = 50_000
SMALL = 10_000
"""A partition ten times the batch: the size where a scan looked cheaper than probes."""
BATCH = 1_000
PER_TASK = 5


@pytest.fixture
async def conn(pg_dsn: str) -> AsyncIterator[Any]:
    """A connection of the application role in the system scope."""
    c = await asyncpg.connect(pg_dsn)
    await c.execute("SET tickwheel.tenant = '*'")
    try:
        yield c
    finally:
        await c.close()


async def _stampede(conn: Any, *, stale: bool, analyze: bool = True, tasks: int = TASKS) -> Probe:
    tenant = uuid.uuid4()
    await conn.execute("INSERT INTO tenants (id, name) VALUES ($1, 'stampede')", tenant)
    await seed_stampede(conn, tenant, NOW, tasks)
    if not analyze:  # a partition that autovacuum has not analyzed yet
        return await Probe.prepare(conn, NOW, BATCH)
    if stale:
        # The statistics of a minute that was still all SCHEDULED, then pre-loaded.
        await conn.execute("UPDATE tasks SET status = 'SCHEDULED' WHERE status = 'PRELOADED'")
        await conn.execute("ANALYZE tasks")
        await conn.execute(
            "UPDATE tasks SET status = 'PRELOADED' WHERE right(idempotency_key, 1) IN"
            " ('1', '3', '5', '7', '9')"
        )
    probe = await Probe.prepare(conn, NOW, BATCH)
    if not stale:
        await conn.execute("ANALYZE tasks")
    return probe


@pytest.mark.parametrize("tasks", [SMALL, TASKS])
@pytest.mark.parametrize(
    ("stale", "analyze"),
    [(False, True), (True, True), (False, False)],
    ids=["fresh-stats", "stale-stats", "no-stats"],
)
async def test_hot_statements_touch_rows_in_proportion_to_the_batch(
    conn: Any, stale: bool, analyze: bool, tasks: int
) -> None:
    probe = await _stampede(conn, stale=stale, analyze=analyze, tasks=tasks)
    over: dict[str, tuple[float, list[str]]] = {}
    for generic in (False, True):
        for name in HOT:
            statement, args = probe.args(name)
            cost = await explain(
                conn, Q[statement], args, generic=generic, by_key=name in BY_KEY_PROBES
            )
            per_task = cost.tuples / BATCH
            if per_task > PER_TASK:
                over[f"{name} ({'generic' if generic else 'custom'})"] = (per_task, cost.scans)
    assert not over, f"tuples a task above {PER_TASK}: {over}"


@pytest.mark.parametrize("tasks", [SMALL, TASKS])
async def test_by_key_writes_use_only_the_primary_key(conn: Any, tasks: int) -> None:
    """The writes that name their keys read the task partitions through the primary key
    alone, under both plans: no partial index on status, no range of scheduled_at, no
    walk of another index."""
    probe = await _stampede(conn, stale=True, tasks=tasks)
    writes = ("mark_dispatched", "ack", "heartbeat", "complete", "complete_acked", "fail")
    for name, generic in itertools.product(writes, (False, True)):
        statement, args = probe.args(name)
        cost = await explain(conn, Q[statement], args, generic=generic)
        pkey = f"tasks_p{NOW:%Y%m%d}_pkey"
        indexes = {s.rsplit(" ", 1)[1] for s in cost.scans if "Index Scan" in s}
        assert indexes == {pkey}, (name, cost.scans)
        assert not [s for s in cost.scans if s.startswith("Seq Scan")], (name, cost.scans)


async def test_forecast_reads_indexes_only(conn: Any) -> None:
    """GetForecast's window parts stay index-only range scans on their indexes (a window
    after the stampede: the overdue part counts the stampede and may read it all)."""
    await _stampede(conn, stale=False)
    args = (None, NOW + timedelta(minutes=5), 60, NOW + timedelta(hours=1), None)
    raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {Q['forecast']}", *args)
    firing, nominal, _overdue = json.loads(raw)[0]["Plan"]["Plans"]
    for part, index in (
        (firing, "due_at_pool_tenant_id_type_idx"),
        (nominal, "scheduled_at_pool_tenant_id_idx"),
    ):
        scans = _scans(part)
        assert scans, part
        assert all(s.startswith("Index Only Scan") and index in s for s in scans), scans


@pytest.mark.parametrize("stale", [False, True], ids=["fresh-stats", "stale-stats"])
async def test_overdue_groups_read_the_forecast_index_only(conn: Any, stale: bool) -> None:
    """ListWorkers' overdue groups (tenant, type, pool) read a range of
    idx_tasks_forecast_due (index only, or a bitmap of it) while the stampede's 50,000
    waiting tasks are not due yet: not a sequential scan of every task (the planner took
    one on 1,000,000 tasks before the index carried the type). Once all of them are
    overdue a scan of the partition is the right plan, and it is cached (Watch)."""
    await _stampede(conn, stale=stale)
    now = NOW - timedelta(minutes=5)
    raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {Q['overdue']}", None, now, 1000)
    scans = _scans(json.loads(raw)[0]["Plan"], f"tasks_p{NOW:%Y%m%d}")
    assert scans, raw
    assert not [s for s in scans if s.startswith("Seq Scan")], scans
    assert f"tasks_p{NOW:%Y%m%d}_due_at_pool_tenant_id_type_idx" in raw, scans


async def _two_tenants(
    conn: Any, *, stale: bool, analyze: str, tasks: int = TASKS
) -> tuple[uuid.UUID, uuid.UUID]:
    """A stampede of ``tasks`` (:func:`_stampede`) and a tenant of 300 tasks beside it,
    then ``ANALYZE {analyze}`` (empty: every table): (the big tenant, the small one)."""
    await _stampede(conn, stale=stale, tasks=tasks)
    small = uuid.uuid4()
    await conn.execute("INSERT INTO tenants (id, name) VALUES ($1, 'small')", small)
    await seed_stampede(conn, small, NOW, 300, spread_s=300)
    await conn.execute(f"ANALYZE {analyze}")
    big = await conn.fetchval(
        "SELECT tenant_id FROM tasks GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    )
    return big, small


LISTINGS = (
    "list_tasks",
    "list_tasks_scheduled_desc",
    "list_tasks_created_asc",
    "list_tasks_created_desc",
)
PAGE = 100


@pytest.mark.parametrize("stale", [False, True], ids=["fresh-stats", "stale-stats"])
async def test_a_tenants_listing_reads_its_page_through_task_keys(conn: Any, stale: bool) -> None:
    """ListTasks and CountTasks of one tenant read ``tasks`` only by primary-key probes
    from task_keys' listing indexes (migration 0022: ``tasks`` has no index by tenant,
    so that a state change writes no listing entry): a page of 100 touches about 100
    tasks, of a tenant of 50,000 on one ``scheduled_at`` and of one of 300 beside it,
    never a scan of the partition. Custom plans only: the store plans these for each
    call (``_db.CUSTOM``)."""
    big, small = await _two_tenants(conn, stale=stale, analyze="task_keys")
    lo, hi = NOW - timedelta(days=1), NOW + timedelta(days=1)
    first, last = uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)
    over: dict[str, tuple[int, list[str]]] = {}
    for tenant, name in itertools.product((big, small), LISTINGS):
        after = (lo, first) if name.endswith(("tasks", "asc")) else (hi, last)
        args = (tenant, None, None, lo, hi, *after, PAGE + 1, None)
        cost = await explain(conn, Q[name], args, generic=False, by_key=False)
        if cost.tuples > 2 * PAGE or [s for s in cost.scans if not s.endswith("_pkey")]:
            over[f"{name} of {'big' if tenant == big else 'small'}"] = (cost.tuples, cost.scans)
    args = (small, None, None, None, lo, hi, 1000)
    cost = await explain(conn, Q["count_tenant_tasks"], args, generic=False, by_key=False)
    if cost.tuples > 2 * 300 or [s for s in cost.scans if not s.endswith("_pkey")]:
        over["count_tenant_tasks of small"] = (cost.tuples, cost.scans)
    assert not over, json.dumps(over, indent=1)


async def test_a_big_tenants_count_scans_and_counts_the_same(conn: Any) -> None:
    """CountTasks of one tenant takes one of two statements (tenant_is_big): a tenant
    with at least a twentieth of all tasks (and 10,000) is counted by count_tasks, a
    scan of the window's partitions, a smaller one through task_keys
    (count_tenant_tasks). Both count alike, with and without a filter."""
    big, small = await _two_tenants(conn, stale=False, analyze="", tasks=SMALL + 2_000)
    lo, hi = NOW - timedelta(days=1), NOW + timedelta(days=1)
    assert await conn.fetchval(Q["tenant_is_big"], big, lo, hi) is True
    assert await conn.fetchval(Q["tenant_is_big"], small, lo, hi) is False
    # A window that holds fewer of the big tenant's tasks than the threshold.
    assert await conn.fetchval(Q["tenant_is_big"], big, NOW + timedelta(hours=1), hi) is False
    for tenant, states in itertools.product((big, small), (None, ["PRELOADED"])):
        args = (tenant, states, None, None, lo, hi, 1000)
        scanned = [dict(r) for r in await conn.fetch(Q["count_tasks"], *args)]
        probed = [dict(r) for r in await conn.fetch(Q["count_tenant_tasks"], *args)]
        assert scanned, (tenant == big, states)
        assert scanned == probed, (tenant == big, states)
        assert sum(r["n"] for r in scanned) == await conn.fetchval(
            "SELECT count(*) FROM tasks WHERE tenant_id = $1"
            " AND ($2::text[] IS NULL OR status = ANY($2::text[]))",
            tenant,
            states,
        )


def _scans(node: dict[str, Any], relation: str = "tasks") -> list[str]:
    """The scans of the relations whose name starts with ``relation``."""
    out: list[str] = []
    if str(node.get("Relation Name", "")).startswith(relation):
        out.append(f"{node['Node Type']} {node.get('Index Name', '')}")
    for child in node.get("Plans", []) or []:
        out += _scans(child, relation)
    return out

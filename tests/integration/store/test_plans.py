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


def _scans(node: dict[str, Any], relation: str = "tasks") -> list[str]:
    """The scans of the relations whose name starts with ``relation``."""
    out: list[str] = []
    if str(node.get("Relation Name", "")).startswith(relation):
        out.append(f"{node['Node Type']} {node.get('Index Name', '')}")
    for child in node.get("Plans", []) or []:
        out += _scans(child, relation)
    return out

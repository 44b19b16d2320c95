"""A node on etcd keeps dispatching through PostgreSQL restarts (issue 42).

Real processes throughout (``tests/support/outage.py``): one ``tickwheel serve`` with
etcd membership and Redis, one ``tickwheel worker``, on a PostgreSQL server of the
test's own. While tasks fall due, PostgreSQL is killed -9 (the whole process group),
started again after a pause, then restarted gracefully (fast shutdown): the crash, the
crash recovery and the graceful restart of the issue's reproduction. Before the fix a
node whose store call failed at the wrong moment lost its dispatch loop for good while
keeping its etcd lease and its shards (178 of 1,500 tasks completed).

Every task must end COMPLETED exactly once (the ledger), every handler must have run
once (a completion that could not be written during the outage is held, not run
again), and every accepted dispatch must come from its shard's owner. How late the
tasks went out is printed here; ``benchmarks/test_store_outage.py`` runs ten rounds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import cluster
from tests.support.outage import connected, store_restarts
from tests.support.processes import ServeProcess, process_group
from tests.support.regions import _database
from tests.support.servers import EtcdServer, PostgresServer, RedisServer, start_server

TASKS = 1500


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, stopped and removed at the end."""
    pg = start_server(lambda: PostgresServer(None))
    try:
        yield pg
    finally:
        pg.cleanup()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_clustered_node_dispatches_through_a_crash_and_a_graceful_restart(
    own_postgres: PostgresServer,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    dsn = await asyncio.to_thread(_database, own_postgres)
    with process_group(tmp_path / "procs") as group:
        figures = await store_restarts(
            group,
            own_postgres,
            dsn,
            etcd_server,
            redis_server,
            tmp_path / "records.jsonl",
            tasks=TASKS,
            rounds=1,
            outage_s=4.0,
        )
        assert figures.completed == TASKS, figures.line()
        assert figures.ran == TASKS, figures.line()
        assert figures.ran_twice == 0, figures.line()
        async with connected(dsn) as db:
            nodes = [p for p in group.procs if isinstance(p, ServeProcess)]
            tenant = await db.fetchval("SELECT tenant_id FROM tasks LIMIT 1")
            check = cluster.Cluster(nodes=nodes, tenant_id=tenant, api_key="", db=db)
            await cluster.check_exactly_once(check, TASKS, timeout_s=30)
    print("\n" + figures.line())

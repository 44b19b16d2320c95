"""A node on etcd keeps dispatching through PostgreSQL restarts (issue 42).

Real processes throughout: one ``tickwheel serve`` with etcd membership and Redis, one
``tickwheel worker``, on a PostgreSQL server of the test's own (the session's cannot be
restarted under the other tests). While tasks fall due, PostgreSQL is killed -9 (the
whole process group), started again after a pause, then restarted gracefully (fast
shutdown): the crash, the crash recovery and the graceful restart of the issue's
reproduction. Before the fix, a node whose store call failed at the wrong moment lost
its dispatch loop for good while keeping its etcd lease and its shards.

Every task must end COMPLETED exactly once, every handler must have run once (a
completion that could not be written during the outage must not be run again), and
every accepted dispatch must come from its shard's owner. How late the tasks went out
is printed here; the drill in ``benchmarks/test_store_outage.py`` measures it at size.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from tests.support import cluster
from tests.support.processes import process_group
from tests.support.regions import _database
from tests.support.servers import EtcdServer, PostgresServer, RedisServer, start_server

TASKS = 1500
SPREAD_S = 24.0


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, stopped and removed at the end."""
    pg = start_server(lambda: PostgresServer(None))
    try:
        yield pg
    finally:
        pg.cleanup()


@contextlib.asynccontextmanager
async def connected(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    db = await asyncpg.connect(dsn)
    try:
        yield db
    finally:
        await db.close()


def starts(records: Path) -> collections.Counter[str]:
    """How many times each task's handler started, from the handlers' records."""
    counts: collections.Counter[str] = collections.Counter()
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == "start":
            counts[rec["task_id"]] += 1
    return counts


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_clustered_node_dispatches_through_a_crash_and_a_graceful_restart(
    own_postgres: PostgresServer,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    pg = own_postgres
    dsn = await asyncio.to_thread(_database, pg)
    records = tmp_path / "records.jsonl"
    with process_group(tmp_path / "procs") as group:
        async with connected(dsn) as db:
            running = await cluster.start_cluster(
                group,
                db,
                dsn,
                etcd_server,
                redis_server,
                ["n1"],
                etcd_ttl_s=3,
                worker_slots=200,
                worker_env={"TW_RECORD_FILE": str(records)},
            )
            start = datetime.now(UTC) + timedelta(seconds=2)
            await cluster.submit_due(running, cluster.spread(start, SPREAD_S, TASKS))
        await asyncio.sleep(4)
        await asyncio.to_thread(pg.kill9)  # a crash: no shutdown of any kind
        await asyncio.sleep(4)
        await asyncio.to_thread(pg.start_again)  # crash recovery
        await asyncio.sleep(5)
        await asyncio.to_thread(pg.stop)  # a graceful (fast) shutdown
        await asyncio.to_thread(pg.start_again)
        async with connected(dsn) as db:
            after = cluster.Cluster(
                nodes=running.nodes, tenant_id=running.tenant_id, api_key=running.api_key, db=db
            )
            await cluster.check_exactly_once(after, TASKS, timeout_s=90)
            late = await cluster.latest_first_dispatch_s(after)
            ran = starts(records)
            twice = {t: n for t, n in ran.items() if n > 1}
            assert len(ran) == TASKS
            assert not twice, f"{len(twice)} tasks ran more than once"
        print(f"\nPostgreSQL crash + graceful restart: {TASKS} tasks, latest dispatch {late:.2f} s")

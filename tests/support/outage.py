"""PostgreSQL restarts under load, for the acceptance test and the drill (issue 42).

One ``tickwheel serve`` on etcd and Redis and one ``tickwheel worker`` on a PostgreSQL
server of the caller's own (the session's cannot be restarted under other tests);
tasks due evenly over a span. Each round kills PostgreSQL with -9 (the whole process
group), starts it again after ``outage_s`` (crash recovery), then, ``settle_s`` later,
restarts it gracefully (fast shutdown). The figures say whether every task completed,
how many handlers ran more than once, and how late the tasks first went out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

from tests.support import cluster
from tests.support.processes import ProcessGroup
from tests.support.servers import EtcdServer, PostgresServer, RedisServer


@contextlib.asynccontextmanager
async def connected(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to ``dsn``, closed on the way out."""
    db = await asyncpg.connect(dsn)
    try:
        yield db
    finally:
        await db.close()


def starts(records: Path) -> collections.Counter[str]:
    """How many times each task's handler started, from the handlers' records."""
    counts: collections.Counter[str] = collections.Counter()
    if not records.exists():
        return counts
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == "start":
            counts[rec["task_id"]] += 1
    return counts


@dataclasses.dataclass(frozen=True)
class OutageFigures:
    """What a run of store restarts left behind."""

    tasks: int
    rounds: int
    outage_s: float
    completed: int
    ran: int
    """Tasks whose handler started at least once."""
    ran_twice: int
    latest_dispatch_s: float
    """The largest delay from a task's due time to its first dispatch."""
    longest_down_s: float
    """The longest a round's PostgreSQL answered no query: from the kill until a new
    connection's first query (the pause plus its crash recovery)."""

    def line(self) -> str:
        """One line for the report."""
        return (
            f"{self.rounds} x (kill -9 for {self.outage_s:.0f} s + graceful restart), "
            f"{self.tasks} tasks: completed {self.completed}, stuck "
            f"{self.tasks - self.completed}, ran twice {self.ran_twice}, latest first "
            f"dispatch {self.latest_dispatch_s:.2f} s after due; PostgreSQL down at most "
            f"{self.longest_down_s:.2f} s a round"
        )


async def node_with_tasks(
    group: ProcessGroup,
    dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    records: Path,
    *,
    tasks: int,
    span_s: float,
    serve_defaults: bool = False,
) -> cluster.Cluster:
    """One ``serve`` (etcd, Redis) and one worker recording into ``records``; ``tasks``
    strict tasks due evenly over ``span_s`` from 2 s on. The returned cluster's ``db``
    is closed: the store is about to go away. ``serve_defaults``: ``serve``'s own etcd
    TTL (5 s), task lease (30 s) and pre-load interval (1 s) instead of the harness's
    shorter ones (3 s, 3 s, 0.2 s)."""
    timing = (
        {"etcd_ttl_s": 5.0, "task_lease_s": 30.0, "preload_interval_s": 1.0}
        if serve_defaults
        else {"etcd_ttl_s": 3.0}
    )
    async with connected(dsn) as db:
        running = await cluster.start_cluster(
            group,
            db,
            dsn,
            etcd,
            redis,
            ["n1"],
            **timing,
            worker_slots=200,
            worker_env={"TW_RECORD_FILE": str(records)},
        )
        start = datetime.now(UTC) + timedelta(seconds=2)
        await cluster.submit_due(running, cluster.spread(start, span_s, tasks))
    return running


async def store_restarts(
    group: ProcessGroup,
    pg: PostgresServer,
    dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    records: Path,
    *,
    tasks: int,
    rounds: int,
    outage_s: float,
    settle_s: float = 3.0,
    lead_s: float = 3.0,
    finish_timeout_s: float = 120.0,
    serve_defaults: bool = False,
) -> OutageFigures:
    """Run the rounds while ``tasks`` fall due over their length; wait until every task
    completed (or ``finish_timeout_s`` passed) and return the figures."""
    span_s = rounds * (outage_s + 2 * settle_s) + lead_s
    running = await node_with_tasks(
        group, dsn, etcd, redis, records, tasks=tasks, span_s=span_s, serve_defaults=serve_defaults
    )
    await asyncio.sleep(lead_s)
    longest_down = 0.0
    for _ in range(rounds):
        killed = time.monotonic()
        await asyncio.to_thread(pg.kill9)  # a crash: no shutdown of any kind
        await asyncio.sleep(outage_s)
        await asyncio.to_thread(pg.start_again)  # crash recovery
        await answering(dsn)
        longest_down = max(longest_down, time.monotonic() - killed)
        await asyncio.sleep(settle_s)
        await asyncio.to_thread(pg.stop)  # a graceful (fast) shutdown
        await asyncio.to_thread(pg.start_again)
        await asyncio.sleep(settle_s)
    async with connected(dsn) as db:
        after = cluster.Cluster(
            nodes=running.nodes, tenant_id=running.tenant_id, api_key=running.api_key, db=db
        )
        deadline = time.monotonic() + finish_timeout_s
        done = await cluster.completed(after)
        while done < tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            done = await cluster.completed(after)
        late = await cluster.latest_first_dispatch_s(after)
    ran = starts(records)
    return OutageFigures(
        tasks=tasks,
        rounds=rounds,
        outage_s=outage_s,
        completed=done,
        ran=len(ran),
        ran_twice=sum(1 for n in ran.values() if n > 1),
        latest_dispatch_s=late,
        longest_down_s=longest_down,
    )


async def answering(dsn: str, timeout_s: float = 60.0) -> None:
    """Return once a new connection to ``dsn`` answers a query (crash recovery over)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            async with connected(dsn) as db:
                await db.fetchval("SELECT 1")
            return
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)

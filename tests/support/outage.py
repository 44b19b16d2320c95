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
class Down:
    """One stretch of time PostgreSQL answered nothing: from the kill (or the start of
    the graceful shutdown) to the first new connection that answered a query, probed
    on its own connection every 20 ms from the fault on."""

    kind: str
    """``kill`` (kill -9, then crash recovery) or ``restart`` (a fast shutdown)."""
    at: datetime
    up: datetime

    @property
    def seconds(self) -> float:
        return (self.up - self.at).total_seconds()


@dataclasses.dataclass(frozen=True)
class RoundFigures:
    """One round: its outages and how late the tasks due in it first went out."""

    index: int
    kill: Down
    restart: Down
    tasks: int
    """Tasks due from this round's kill to the next round's."""
    late_s: float
    """p100 of first dispatch minus due, over those tasks."""
    added_s: float
    """p100 of what the node added: first dispatch minus the later of the due time
    and the end of the outage the task fell due in (PostgreSQL answering again)."""
    resumed_s: float
    """From PostgreSQL's answering again after the kill to the node's first dispatch."""
    worst: str = ""
    """The task behind ``added_s``: when it fell due, became dispatchable and went out,
    in seconds from the kill."""

    def row(self) -> str:
        bound = self.kill.seconds + 2.0
        return (
            f"| {self.index} | {self.kill.seconds:.2f} | {self.restart.seconds:.2f} | "
            f"{self.tasks} | {self.late_s:.2f} | {bound:.2f} | {self.resumed_s:.2f} | "
            f"{self.added_s:.2f} | {'met' if self.late_s <= bound else 'MISSED'} |"
        )


ROUND_HEADER = (
    "| round | kill -9 → answering (s) | graceful restart → answering (s) | tasks due | "
    "p100 first dispatch after due (s) | bound: outage + 2 (s) | answering → first "
    "dispatch (s) | node's own p100 after PostgreSQL answered (s) | |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


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
    per_round: tuple[RoundFigures, ...] = ()

    def line(self) -> str:
        """One line for the report."""
        return (
            f"{self.rounds} x (kill -9 for {self.outage_s:.0f} s + graceful restart), "
            f"{self.tasks} tasks: completed {self.completed}, stuck "
            f"{self.tasks - self.completed}, ran twice {self.ran_twice}, latest first "
            f"dispatch {self.latest_dispatch_s:.2f} s after due; PostgreSQL down at most "
            f"{self.longest_down_s:.2f} s a round"
        )

    def table(self) -> str:
        """The per-round table (markdown), then each round's worst task."""
        return "\n".join(
            [
                ROUND_HEADER,
                *(r.row() for r in self.per_round),
                *(f"round {r.index}: node's own worst: {r.worst}" for r in self.per_round),
            ]
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
    recovery_allowance_s: float = 5.0,
) -> OutageFigures:
    """Run the rounds while ``tasks`` fall due over their length; wait until every task
    completed (or ``finish_timeout_s`` passed) and return the figures.

    Round ``i`` kills PostgreSQL at ``lead_s + i * period`` after the first due time,
    the period being the round's own waits plus ``recovery_allowance_s`` for crash
    recovery and the restarts (a round that runs over starts the next at once), and
    the tasks fall due until the last round's period ends: every round has tasks."""
    period_s = outage_s + 2 * settle_s + recovery_allowance_s
    span_s = rounds * period_s + lead_s
    running = await node_with_tasks(
        group, dsn, etcd, redis, records, tasks=tasks, span_s=span_s, serve_defaults=serve_defaults
    )
    first_due = time.monotonic() + 2.0  # node_with_tasks: from 2 s on
    downs: list[tuple[Down, Down]] = []
    for i in range(rounds):
        await asyncio.sleep(max(0.0, first_due + lead_s + i * period_s - time.monotonic()))
        killed_at = datetime.now(UTC)
        await asyncio.to_thread(pg.kill9)  # a crash: no shutdown of any kind
        probe = asyncio.create_task(first_answer(dsn), name="test-outage-probe")
        await asyncio.sleep(outage_s)
        await asyncio.to_thread(pg.start_again)  # crash recovery
        kill = Down("kill", killed_at, await probe)
        await asyncio.sleep(settle_s)
        stopped_at = datetime.now(UTC)
        await asyncio.to_thread(pg.stop)  # a graceful (fast) shutdown
        probe = asyncio.create_task(first_answer(dsn), name="test-outage-probe")
        await asyncio.to_thread(pg.start_again)
        downs.append((kill, Down("restart", stopped_at, await probe)))
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
        firsts = await first_dispatches(db, running.tenant_id)
    ran = starts(records)
    return OutageFigures(
        tasks=tasks,
        rounds=rounds,
        outage_s=outage_s,
        completed=done,
        ran=len(ran),
        ran_twice=sum(1 for n in ran.values() if n > 1),
        latest_dispatch_s=late,
        longest_down_s=max((k.seconds for k, _ in downs), default=0.0),
        per_round=per_round(downs, firsts),
    )


async def first_dispatches(
    db: asyncpg.Connection, tenant_id: object
) -> list[tuple[datetime, datetime]]:
    """(due, first DISPATCHED) of every dispatched task of the tenant."""
    rows = await db.fetch(
        """
        SELECT t.due_at, first.at
        FROM tasks t
        JOIN LATERAL (
            SELECT min(at) AS at FROM task_transitions x
            WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED'
        ) first ON true
        WHERE t.tenant_id = $1 AND first.at IS NOT NULL
        """,
        tenant_id,
    )
    return [(r[0], r[1]) for r in rows]


def per_round(
    downs: list[tuple[Down, Down]], firsts: list[tuple[datetime, datetime]]
) -> tuple[RoundFigures, ...]:
    """Each round's outages, and the lateness of the tasks due from its kill to the
    next round's: in all, and beyond PostgreSQL's answering again."""
    out = []
    for i, (kill, restart) in enumerate(downs):
        end = downs[i + 1][0].at if i + 1 < len(downs) else datetime.max.replace(tzinfo=UTC)
        late, added, n = 0.0, 0.0, 0
        after = [at for _, at in firsts if at >= kill.up]
        resumed = (min(after) - kill.up).total_seconds() if after else float("nan")
        worst = ""
        for due, at in firsts:
            if not kill.at <= due < end:
                continue
            n += 1
            ready, why = due, "due"
            for down in (kill, restart):
                if down.at <= due < down.up:
                    # Nobody could dispatch it before PostgreSQL answered.
                    ready, why = down.up, f"{down.kind} over"
            late = max(late, (at - due).total_seconds())
            if (at - ready).total_seconds() > added:
                added = (at - ready).total_seconds()
                t = kill.at
                worst = (
                    f"due +{(due - t).total_seconds():.2f}, {why} +"
                    f"{(ready - t).total_seconds():.2f}, out +{(at - t).total_seconds():.2f} "
                    f"(restart +{(restart.at - t).total_seconds():.2f}.."
                    f"+{(restart.up - t).total_seconds():.2f})"
                )
        out.append(RoundFigures(i + 1, kill, restart, n, late, added, resumed, worst))
    return tuple(out)


async def first_answer(dsn: str, timeout_s: float = 120.0) -> datetime:
    """When a new connection to ``dsn`` first answered a query, trying every 20 ms."""
    await answering(dsn, timeout_s)
    return datetime.now(UTC)


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

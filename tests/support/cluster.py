"""Real multi-node Tickwheel clusters for the acceptance tests and the benchmarks.

``tickwheel serve --etcd ...`` processes share shards through a real etcd, quotas and
the fallback time index through a real Redis, and one PostgreSQL database; each node
gets one ``tickwheel worker``. Two scenarios are shared by the acceptance suite (which
asserts that nothing is lost or doubled) and ``make bench`` (which reports how fast):

- :func:`failover`: kill -9 one node, SIGSTOP another past its etcd lease, FLUSHALL
  Redis and restart etcd while tasks fall due; returns the timings it saw;
- :func:`throughput`: a burst of tasks due at one instant on 1..N nodes; returns how
  fast the cluster dispatched and completed it;
- :func:`steady`: tasks due evenly over a span on N nodes with no fault; returns how
  late they first went out and the CPU each node and worker spent;
- :func:`due_now`: tasks due at once submitted through one node; how soon those on its
  own shards and those on other nodes' shards first went out.

Both check the history: every accepted dispatch came from the one owner of its shard's
epoch, and every task completed exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import psutil
import redis.asyncio as aioredis

from scheduler.client import AdminClient, Client, TaskSpec
from tests.support.processes import ADMIN_TOKEN, ProcessGroup, ServeProcess, WorkerProcess
from tests.support.servers import EtcdServer, RedisServer
from tests.support.waiting import eventually

SHARDS = 256
HANDLERS = "tests.acceptance.handlers"


@dataclass(frozen=True)
class Cluster:
    """Running nodes, the tenant's key, and a connection to the shared database."""

    nodes: list[ServeProcess]
    tenant_id: uuid.UUID
    api_key: str
    db: asyncpg.Connection


async def owners(db: asyncpg.Connection) -> dict[int, str]:
    """shard -> owning node, as recorded in ``shard_epochs``."""
    rows = await db.fetch("SELECT shard_id, owner FROM shard_epochs")
    return {r[0]: r[1] for r in rows}


async def start_cluster(
    group: ProcessGroup,
    db: asyncpg.Connection,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    names: Sequence[str],
    *,
    etcd_ttl_s: float,
    task_lease_s: float = 3.0,
    worker_slots: int = 500,
    preload_interval_s: float = 0.2,
    workers: bool = True,
    worker_args: Sequence[str] = (),
    worker_env: Mapping[str, str] | None = None,
    node_dsns: Mapping[str, str] | None = None,
) -> Cluster:
    """Start one node and one worker per name; return once every shard is spread.
    ``node_dsns``: a node's own DSN for the shared database (through a proxy, say)."""
    nodes: list[ServeProcess] = []
    cluster_name = f"c{uuid.uuid4().hex[:10]}"  # its own etcd and Redis keys
    for name in names:
        proc = ServeProcess(
            group.dir / name,
            (node_dsns or {}).get(name, pg_dsn),
            name=name,
            lease_ttl_s=task_lease_s,
            extra_args=(
                "--etcd",
                etcd.endpoint,
                "--cluster-name",
                cluster_name,
                "--node-id",
                name,
                "--redis-url",
                redis.url,
                "--node-share",
                f"{min(1.0, 1 / len(names) + 0.01):.2f}",
                "--etcd-lease-ttl-s",
                str(etcd_ttl_s),
                "--preload-interval-s",
                str(preload_interval_s),
                "--canary-interval-s",
                "0",
            ),
        )
        group.procs.append(proc)
        await asyncio.to_thread(proc.start)
        nodes.append(proc)
    await eventually(
        lambda: owners(db),
        until=lambda o: len(o) == SHARDS and set(o.values()) == set(names),
        timeout_s=60,
        what=f"{SHARDS} shards spread over {len(names)} nodes",
    )
    async with await AdminClient.connect(nodes[0].target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant(
            "scale", rate_limit_rps=100_000, max_concurrent_workers=100_000
        )
        key = (await admin.create_api_key(tenant.id, "scale")).secret
    for i, node in enumerate(nodes if workers else ()):
        await asyncio.to_thread(
            group.worker,
            node.target,
            key,
            {"work": f"{HANDLERS}:work"},
            name=f"w{i + 1}",
            slots=worker_slots,
            extra_args=tuple(worker_args),
            env=worker_env,
        )
    return Cluster(nodes=nodes, tenant_id=tenant.id, api_key=key, db=db)


async def submit_due(cluster: Cluster, dues: Sequence[datetime]) -> None:
    """Submit one strict-timing ``work`` task per due time, in batches."""
    async with await Client.connect(cluster.nodes[0].target, api_key=cluster.api_key) as client:
        specs = [TaskSpec(type="work", scheduled_at=d, strict_timing=True) for d in dues]
        submitted = await client.submit_many(specs)
    assert len({t.id for t in submitted}) == len(dues)


def spread(start: datetime, span_s: float, n: int) -> list[datetime]:
    """``n`` due times evenly over ``span_s`` from ``start``."""
    return [start + timedelta(seconds=span_s * i / n) for i in range(n)]


@contextlib.asynccontextmanager
async def running(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    nodes: int,
    *,
    etcd_ttl_s: float,
    worker_slots: int = 500,
    preload_interval_s: float = 0.2,
    workers: bool = True,
    worker_args: Sequence[str] = (),
    worker_env: Mapping[str, str] | None = None,
    task_lease_s: float = 3.0,
) -> AsyncIterator[Cluster]:
    """Nodes n1..n``nodes`` (see :func:`start_cluster`; ``workers=False``: no worker
    process) and the database connection :attr:`Cluster.db`, closed on the way out."""
    db = await asyncpg.connect(pg_dsn)
    try:
        yield await start_cluster(
            group,
            db,
            pg_dsn,
            etcd,
            redis,
            [f"n{i + 1}" for i in range(nodes)],
            etcd_ttl_s=etcd_ttl_s,
            worker_slots=worker_slots,
            preload_interval_s=preload_interval_s,
            workers=workers,
            worker_args=worker_args,
            worker_env=worker_env,
            task_lease_s=task_lease_s,
        )
    finally:
        await db.close()


async def completed(cluster: Cluster) -> int:
    """How many of the tenant's tasks are COMPLETED."""
    return int(
        await cluster.db.fetchval(
            "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND status = 'COMPLETED'",
            cluster.tenant_id,
        )
    )


DISPATCHES = "x.from_status = 'PRELOADED' AND x.to_status IN ('DISPATCHED', 'RUNNING')"
"""SQL over ``task_transitions x``: its dispatches (to RUNNING for a worker that starts
on delivery, to DISPATCHED otherwise)."""


async def check_exactly_once(cluster: Cluster, n: int, *, timeout_s: float) -> None:
    """Every one of the ``n`` tasks ends COMPLETED, with exactly one completion each, and
    every accepted dispatch (:data:`DISPATCHES`) came from the one owner of its shard's
    epoch."""
    await eventually(
        lambda: completed(cluster), until=lambda c: c == n, timeout_s=timeout_s, what="all done"
    )
    ledger = await cluster.db.fetchrow(
        "SELECT count(*), count(DISTINCT task_id) FROM task_completions WHERE tenant_id = $1",
        cluster.tenant_id,
    )
    assert (ledger[0], ledger[1]) == (n, n)
    rows = await cluster.db.fetch(
        f"""
        SELECT t.shard_id, x.epoch, array_agg(DISTINCT x.actor) AS actors, c.owner
        FROM task_transitions x
        JOIN tasks t ON t.id = x.task_id AND t.scheduled_at = x.scheduled_at
        LEFT JOIN shard_claims c ON c.shard_id = t.shard_id AND c.epoch = x.epoch
        WHERE {DISPATCHES} AND t.tenant_id = $1
        GROUP BY t.shard_id, x.epoch, c.owner
        """,
        cluster.tenant_id,
    )
    assert rows
    for r in rows:
        assert r["epoch"] is not None, "a clustered dispatch without an epoch"
        assert list(r["actors"]) == [r["owner"]], dict(r)


async def latest_first_dispatch_s(cluster: Cluster) -> float:
    """The largest delay, over all tasks, from due time to first DISPATCHED."""
    late = await cluster.db.fetchval(
        """
        SELECT max(extract(epoch FROM first.at - t.due_at))
        FROM tasks t
        JOIN LATERAL (
            SELECT min(at) AS at FROM task_transitions x
            WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED'
        ) first ON true
        WHERE t.tenant_id = $1
        """,
        cluster.tenant_id,
    )
    return float(late)


async def worst_dispatches(cluster: Cluster, limit: int = 5) -> list[dict[str, Any]]:
    """The latest first dispatches (due, at, actor, shard, epoch), to explain a figure."""
    worst = await cluster.db.fetch(
        """
        SELECT t.shard_id, t.due_at, first.at, first.actor, first.epoch
        FROM tasks t
        JOIN LATERAL (
            SELECT x.at, x.actor, x.epoch FROM task_transitions x
            WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED'
            ORDER BY x.at LIMIT 1
        ) first ON true
        WHERE t.tenant_id = $1
        ORDER BY first.at - t.due_at DESC LIMIT $2
        """,
        cluster.tenant_id,
        limit,
    )
    return [dict(w) for w in worst]


def _since(start: datetime) -> float:
    return (datetime.now(UTC) - start).total_seconds()


@dataclass(frozen=True)
class FailoverFigures:
    """What :func:`failover` measured (seconds)."""

    tasks: int
    spread_s: float
    killed_reowned_s: float
    frozen_reowned_s: float
    etcd_restart_settled_s: float
    latest_first_dispatch_s: float
    #: when each fault began, in seconds after the first task fell due
    events: dict[str, float]
    #: the latest first dispatches: (due, dispatched) in seconds after the first due
    #: time, and the node that dispatched
    worst: list[tuple[float, float, str, int, int]]
    #: the claims of the latest task's shard: (epoch, owner, seconds after first due)
    claims: list[tuple[int, str, float]]

    def line(self) -> str:
        events = ", ".join(f"{k} at {v:.1f}s" for k, v in self.events.items())
        worst = ", ".join(
            f"due {d:.1f}s sent {s:.1f}s by {a} (shard {sh} epoch {e})"
            for d, s, a, sh, e in self.worst
        )
        return (
            f"failover: {self.tasks} tasks over {self.spread_s:.0f}s; killed node re-owned in "
            f"{self.killed_reowned_s:.2f}s, frozen node in {self.frozen_reowned_s:.2f}s, "
            f"etcd restart settled in {self.etcd_restart_settled_s:.2f}s; latest first "
            f"dispatch {self.latest_first_dispatch_s:.2f}s after due\n"
            f"  faults: {events}\n  latest: {worst}\n"
            f"  its shard's claims: "
            + ", ".join(f"epoch {e} by {o} at {t:.1f}s" for e, o, t in self.claims)
        )


async def failover(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    *,
    tasks: int,
    spread_s: float,
    etcd_ttl_s: float = 5.0,
    worker_slots: int = 500,
    task_lease_s: float = 3.0,
    preload_interval_s: float = 0.2,
) -> FailoverFigures:
    """Three nodes; ``tasks`` due evenly over ``spread_s``. Mid-run: kill -9 n3, FLUSHALL
    Redis, SIGSTOP n2 until n1 owns every shard, SIGCONT it, then restart etcd. Asserts
    exactly-once and the epoch history; returns the timings (asserting none of them:
    this machine is shared, so timings are benchmark figures, not test verdicts)."""
    async with running(
        group,
        pg_dsn,
        etcd,
        redis,
        3,
        etcd_ttl_s=etcd_ttl_s,
        worker_slots=worker_slots,
        task_lease_s=task_lease_s,
        preload_interval_s=preload_interval_s,
    ) as cluster:
        db = cluster.db
        _, n2, n3 = cluster.nodes
        start = datetime.now(UTC) + timedelta(seconds=3)
        await submit_due(cluster, spread(start, spread_s, tasks))
        # The reowning waits allow far more than the TTL: a slow machine makes them slow,
        # not wrong. The figures say how long they took.
        reown_timeout_s = etcd_ttl_s + 30

        await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
        await asyncio.sleep(spread_s / 4)
        events = {"kill -9 n3": _since(start)}
        killed_at = time.monotonic()
        n3.kill9()
        await eventually(
            lambda: owners(db),
            until=lambda o: "n3" not in o.values(),
            timeout_s=reown_timeout_s,
            what="n3's shards re-owned",
        )
        killed_reowned_s = time.monotonic() - killed_at

        flusher = aioredis.from_url(redis.url)
        try:
            events["FLUSHALL"] = _since(start)
            await flusher.flushall()
        finally:
            await flusher.aclose()

        await asyncio.sleep(spread_s / 8)
        events["SIGSTOP n2"] = _since(start)
        os.killpg(n2.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            await eventually(
                lambda: owners(db),
                until=lambda o: set(o.values()) == {"n1"},
                timeout_s=reown_timeout_s,
                what="n2's shards re-owned by n1",
            )
            frozen_reowned_s = time.monotonic() - frozen_at
            await asyncio.sleep(1.0)
        finally:
            os.killpg(n2.pid, signal.SIGCONT)

        # n2 comes back and takes its share again; then etcd itself restarts.
        await eventually(
            lambda: owners(db),
            until=lambda o: set(o.values()) == {"n1", "n2"},
            timeout_s=reown_timeout_s,
            what="n2 back in the cluster",
        )
        events["etcd restart"] = _since(start)
        restarted_at = time.monotonic()
        await asyncio.to_thread(etcd.restart)
        await eventually(
            lambda: owners(db),
            until=lambda o: len(o) == SHARDS and set(o.values()) == {"n1", "n2"},
            timeout_s=reown_timeout_s,
            what="every shard owned by n1 and n2 after the etcd restart",
        )
        etcd_restart_settled_s = time.monotonic() - restarted_at

        await check_exactly_once(cluster, tasks, timeout_s=240)
        worst = await worst_dispatches(cluster, 3)
        claims = await db.fetch(
            "SELECT epoch, owner, claimed_at FROM shard_claims WHERE shard_id = $1 ORDER BY epoch",
            worst[0]["shard_id"],
        )
        return FailoverFigures(
            tasks=tasks,
            spread_s=spread_s,
            killed_reowned_s=killed_reowned_s,
            frozen_reowned_s=frozen_reowned_s,
            etcd_restart_settled_s=etcd_restart_settled_s,
            latest_first_dispatch_s=await latest_first_dispatch_s(cluster),
            events=events,
            worst=[
                (
                    (w["due_at"] - start).total_seconds(),
                    (w["at"] - start).total_seconds(),
                    str(w["actor"]),
                    int(w["shard_id"]),
                    int(w["epoch"]),
                )
                for w in worst
            ],
            claims=[
                (int(c["epoch"]), str(c["owner"]), (c["claimed_at"] - start).total_seconds())
                for c in claims
            ],
        )


@dataclass(frozen=True)
class ThroughputFigures:
    """What :func:`throughput` measured."""

    nodes: int
    tasks: int
    dispatch_per_s: float
    complete_per_s: float
    latest_first_dispatch_s: float


async def throughput(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    *,
    nodes: int,
    tasks: int,
    etcd_ttl_s: float = 5.0,
) -> ThroughputFigures:
    """``tasks`` due at one instant on ``nodes`` nodes (each with one worker): dispatch
    rate = tasks / (last first-dispatch - due), completion rate likewise."""
    async with running(
        group, pg_dsn, etcd, redis, nodes, etcd_ttl_s=etcd_ttl_s, worker_slots=1000
    ) as cluster:
        db = cluster.db
        # Far enough ahead that submission ends before the burst falls due.
        due = datetime.now(UTC) + timedelta(seconds=5 + tasks / 10_000)
        await submit_due(cluster, [due] * tasks)
        await check_exactly_once(cluster, tasks, timeout_s=600)
        spans = await db.fetchrow(
            """
            SELECT max(d.at) AS dispatched, max(c.at) AS completed
            FROM tasks t
            JOIN LATERAL (SELECT min(at) AS at FROM task_transitions x
                          WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED') d ON true
            JOIN LATERAL (SELECT max(at) AS at FROM task_transitions x
                          WHERE x.task_id = t.id AND x.to_status = 'COMPLETED') c ON true
            WHERE t.tenant_id = $1
            """,
            cluster.tenant_id,
        )
        dispatch_s = (spans["dispatched"] - due).total_seconds()
        complete_s = (spans["completed"] - due).total_seconds()
        return ThroughputFigures(
            nodes=nodes,
            tasks=tasks,
            dispatch_per_s=tasks / dispatch_s,
            complete_per_s=tasks / complete_s,
            latest_first_dispatch_s=dispatch_s,
        )


@dataclass(frozen=True)
class SteadyFigures:
    """What :func:`steady` measured: first-dispatch lateness (s) and CPU (s)."""

    nodes: int
    tasks: int
    spread_s: float
    p50_s: float
    p99_s: float
    max_s: float
    node_cpu_s: list[float]
    worker_cpu_s: list[float]
    #: wall seconds over which the CPU was counted (first due time to last completion)
    wall_s: float
    #: PostgreSQL transactions committed per task, first due time to last completion
    commits_per_task: float
    #: tasks per store write that moved them to DISPATCHED, RUNNING, COMPLETED
    per_write: dict[str, float]
    #: (seconds after the first due time, p50, max) per tenth of the span
    by_due: list[tuple[float, float, float]]


def _cpu_s(pid: int) -> float:
    """User + system CPU of a process (its threads included)."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def steady(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    *,
    nodes: int,
    tasks: int,
    spread_s: float,
    etcd_ttl_s: float = 5.0,
    worker_slots: int = 500,
) -> SteadyFigures:
    """``tasks`` due evenly over ``spread_s`` on ``nodes`` nodes, no fault: how late each
    task first went out (p50 / p99 / max of dispatch - due) and the CPU each node and
    worker process spent from the first due time to the last completion."""
    async with running(
        group, pg_dsn, etcd, redis, nodes, etcd_ttl_s=etcd_ttl_s, worker_slots=worker_slots
    ) as cluster:
        db = cluster.db
        workers = [p for p in group.procs if p not in cluster.nodes]
        start = datetime.now(UTC) + timedelta(seconds=3)
        await submit_due(cluster, spread(start, spread_s, tasks))
        await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
        node_cpu = [_cpu_s(n.pid) for n in cluster.nodes]
        worker_cpu = [_cpu_s(w.pid) for w in workers]
        t0 = time.monotonic()
        commits_sql = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        commits = await db.fetchval(commits_sql)
        await check_exactly_once(cluster, tasks, timeout_s=240)
        wall_s = time.monotonic() - t0
        await db.execute("SELECT pg_stat_clear_snapshot()")
        commits = await db.fetchval(commits_sql) - commits
        node_cpu = [_cpu_s(n.pid) - c for n, c in zip(cluster.nodes, node_cpu, strict=True)]
        worker_cpu = [_cpu_s(w.pid) - c for w, c in zip(workers, worker_cpu, strict=True)]
        late = await db.fetchrow(
            """
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) AS p50,
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY s) AS p99,
                   max(s) AS max
            FROM (
                SELECT extract(epoch FROM min(x.at) - t.due_at)::float8 AS s
                FROM tasks t JOIN task_transitions x ON x.task_id = t.id
                WHERE t.tenant_id = $1 AND x.to_status = 'DISPATCHED'
                GROUP BY t.id, t.due_at
            ) d
            """,
            cluster.tenant_id,
        )
        writes = await db.fetch(
            """
            SELECT x.to_status, count(*)::float8 / count(DISTINCT (x.at, x.actor)) AS per
            FROM task_transitions x JOIN tasks t ON t.id = x.task_id
            WHERE t.tenant_id = $1 AND x.to_status IN ('DISPATCHED', 'RUNNING', 'COMPLETED')
            GROUP BY x.to_status
            """,
            cluster.tenant_id,
        )
        width = spread_s / 10
        buckets = await db.fetch(
            """
            SELECT floor(extract(epoch FROM d.due_at - $2::timestamptz) / $3) AS b,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY s) AS p50, max(s) AS max
            FROM (
                SELECT t.due_at, extract(epoch FROM min(x.at) - t.due_at)::float8 AS s
                FROM tasks t JOIN task_transitions x ON x.task_id = t.id
                WHERE t.tenant_id = $1 AND x.to_status = 'DISPATCHED'
                GROUP BY t.id, t.due_at
            ) d GROUP BY b ORDER BY b
            """,
            cluster.tenant_id,
            start,
            width,
        )
        return SteadyFigures(
            commits_per_task=commits / tasks,
            per_write={w["to_status"]: float(w["per"]) for w in writes},
            by_due=[(float(b["b"]) * width, float(b["p50"]), float(b["max"])) for b in buckets],
            nodes=nodes,
            tasks=tasks,
            spread_s=spread_s,
            p50_s=float(late["p50"]),
            p99_s=float(late["p99"]),
            max_s=float(late["max"]),
            node_cpu_s=node_cpu,
            worker_cpu_s=worker_cpu,
            wall_s=wall_s,
        )


@dataclass(frozen=True)
class DueNowFigures:
    """What :func:`due_now` measured: submit-to-first-dispatch (ms) by where the shard
    lives, as (p50, p99, max)."""

    tasks: int
    own_shards_ms: tuple[float, float, float]
    other_shards_ms: tuple[float, float, float]


async def due_now(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    *,
    tasks: int,
    batch: int = 10,
    etcd_ttl_s: float = 5.0,
) -> DueNowFigures:
    """Three nodes at the ``tickwheel serve`` default pre-load interval (1 s); ``tasks``
    due now, submitted through n1 in calls of ``batch`` every 50 ms. Two thirds land on
    shards n1 does not own: their owners must learn of them."""
    async with running(
        group, pg_dsn, etcd, redis, 3, etcd_ttl_s=etcd_ttl_s, preload_interval_s=1.0
    ) as cluster:
        db = cluster.db
        calls = max(1, tasks // batch)
        async with await Client.connect(cluster.nodes[0].target, api_key=cluster.api_key) as c:
            for _ in range(calls):
                await c.submit_many([TaskSpec(type="work", strict_timing=True)] * batch)
                await asyncio.sleep(0.05)
        await check_exactly_once(cluster, calls * batch, timeout_s=120)
        rows = await db.fetch(
            """
            SELECT se.owner = 'n1' AS own,
                   extract(epoch FROM min(x.at) - t.created_at)::float8 * 1000 AS ms
            FROM tasks t
            JOIN task_transitions x ON x.task_id = t.id AND x.to_status = 'DISPATCHED'
            JOIN shard_epochs se ON se.shard_id = t.shard_id
            WHERE t.tenant_id = $1
            GROUP BY t.id, t.created_at, se.owner
            """,
            cluster.tenant_id,
        )

        def stats(values: list[float]) -> tuple[float, float, float]:
            values = sorted(values)
            return (
                values[len(values) // 2],
                values[min(len(values) - 1, int(len(values) * 0.99))],
                values[-1],
            )

        return DueNowFigures(
            tasks=len(rows),
            own_shards_ms=stats([r["ms"] for r in rows if r["own"]]),
            other_shards_ms=stats([r["ms"] for r in rows if not r["own"]]),
        )


@dataclass(frozen=True)
class IdleFigures:
    """What :func:`idle` measured: CPU per second of wall time, per process kind."""

    nodes: int
    seconds: float
    node_cpu_per_s: list[float]
    worker_cpu_per_s: list[float]
    etcd_cpu_per_s: float
    redis_cpu_per_s: float
    postgres_cpu_per_s: float


def _tree_cpu_s(pid: int) -> float:
    """CPU of a process and all its children (PostgreSQL's backends)."""
    root = psutil.Process(pid)
    total = 0.0
    for p in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


async def idle(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    postgres_pid: int,
    *,
    nodes: int,
    seconds: float,
    etcd_ttl_s: float = 5.0,
) -> IdleFigures:
    """``nodes`` nodes with a worker each and no task: what keeping the cluster alive
    costs (etcd rounds and keep-alives, preload and reconcile passes, the index mirror,
    heartbeats), as CPU seconds per wall second of each process over ``seconds``, after
    the shards settled."""
    async with running(group, pg_dsn, etcd, redis, nodes, etcd_ttl_s=etcd_ttl_s) as cluster:
        workers = [p for p in group.procs if p not in cluster.nodes]
        await asyncio.sleep(2.0)  # the claims' index seeding and first passes
        assert etcd.proc is not None
        assert redis.proc is not None
        pids = [n.pid for n in cluster.nodes] + [w.pid for w in workers]
        extra = [etcd.proc.pid, redis.proc.pid]
        before = [_cpu_s(p) for p in pids + extra] + [_tree_cpu_s(postgres_pid)]
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        after = [_cpu_s(p) for p in pids + extra] + [_tree_cpu_s(postgres_pid)]
        wall = time.monotonic() - t0
        per_s = [(a - b) / wall for a, b in zip(after, before, strict=True)]
        return IdleFigures(
            nodes=nodes,
            seconds=wall,
            node_cpu_per_s=per_s[:nodes],
            worker_cpu_per_s=per_s[nodes : len(pids)],
            etcd_cpu_per_s=per_s[len(pids)],
            redis_cpu_per_s=per_s[len(pids) + 1],
            postgres_cpu_per_s=per_s[-1],
        )


@dataclass(frozen=True)
class FrozenWorkerFigures:
    """What :func:`frozen_worker` measured with one of three workers SIGSTOPped."""

    tasks: int
    all_nodes: bool
    completed_while_frozen: int
    """Tasks completed within the window while the worker stayed frozen."""
    all_done_s: float
    """Submit to the last completion while frozen (the window if some never did)."""

    @property
    def stranded(self) -> int:
        """Tasks that waited for the frozen worker past the window."""
        return self.tasks - self.completed_while_frozen


async def frozen_worker(
    group: ProcessGroup,
    pg_dsn: str,
    etcd: EtcdServer,
    redis: RedisServer,
    *,
    tasks: int,
    all_nodes: bool,
    window_s: float = 15.0,
    etcd_ttl_s: float = 5.0,
) -> FrozenWorkerFigures:
    """Three nodes and three workers (one seeded with each node; ``all_nodes``: as
    started by default, each streaming to every node; otherwise with ``--one-node``).
    w1 is SIGSTOPped, ``tasks`` fall due at once, and the tasks completed within
    ``window_s`` while it stays frozen are counted; then it thaws and every task must
    complete exactly once."""
    args = () if all_nodes else ("--one-node",)
    async with running(
        group, pg_dsn, etcd, redis, 3, etcd_ttl_s=etcd_ttl_s, worker_slots=50, worker_args=args
    ) as c:
        workers = [p for p in group.procs if isinstance(p, WorkerProcess)]
        if all_nodes:
            for w in workers:
                await eventually(
                    lambda w=w: _true(all(f"server {n.target})" in w.log() for n in c.nodes)),
                    timeout_s=30,
                    what=f"{w.name} streams to every node",
                )
        frozen = workers[0]
        os.killpg(frozen.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            await submit_due(c, [datetime.now(UTC)] * tasks)
            done = 0
            while time.monotonic() - start < window_s:
                done = await completed(c)
                if done == tasks:
                    break
                await asyncio.sleep(0.1)  # a measurement's sampling, not a test wait
            elapsed = time.monotonic() - start
        finally:
            os.killpg(frozen.pid, signal.SIGCONT)
        await check_exactly_once(c, tasks, timeout_s=120)
    return FrozenWorkerFigures(
        tasks=tasks,
        all_nodes=all_nodes,
        completed_while_frozen=done,
        all_done_s=elapsed,
    )


async def _true(value: bool) -> bool:
    return value

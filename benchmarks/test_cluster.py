"""Scale-out, measured (issue 7): real ``tickwheel serve`` nodes on etcd, Redis, PostgreSQL.

- ``failover``: the acceptance scenario (``tests/support/cluster.py``) at the issue's
  full size, 50,000 tasks due over 60 s on three nodes: kill -9 one node, FLUSHALL
  Redis, SIGSTOP another past its etcd lease (TTL 5 s), restart etcd. Figures: how long
  each shard move took and how late the latest task first went out, against the
  issue's bounds (TTL + 1 s and TTL + 2 s). Exactly-once is asserted as in the test.
- ``steady``: the failover's load with no fault: first-dispatch lateness by due time,
  CPU per node and worker, PostgreSQL commits per task and tasks per write.
- ``due_now``: tasks due now submitted through one of three nodes: how soon those on
  other nodes' shards go out (work notices) against those on its own.
- ``idle``: three nodes and their workers with no task: CPU per second of every
  process (nodes, workers, etcd, Redis, PostgreSQL), what a cluster costs at rest.
- ``frozen_worker``: issue 17, tasks stranded behind a SIGSTOPped worker with one
  stream per worker (``--one-node``) and with a stream to every node (the default).
- ``throughput``: 20,000 tasks due at one instant on 1, 2 and 3 nodes (one worker
  each): dispatch rate (tasks / time from due to the last first dispatch) and completion
  rate. All nodes, workers, PostgreSQL (fsync on), Redis and etcd share 2 cores, so
  more nodes add coordination, not CPU: the ratio shows what sharding costs here, not
  what it buys on real hardware.

Run: ``.venv/bin/pytest benchmarks/test_cluster.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.support import cluster
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, PostgresServer, RedisServer

T = TypeVar("T")

ETCD_TTL_S = 5.0
FAILOVER_TASKS = int(os.environ.get("TW_BENCH_FAILOVER_TASKS", "50000"))
FAILOVER_SPREAD_S = float(os.environ.get("TW_BENCH_FAILOVER_SPREAD_S", "60"))
STEADY_TASKS = int(os.environ.get("TW_BENCH_STEADY_TASKS", str(FAILOVER_TASKS)))
DUE_NOW_TASKS = int(os.environ.get("TW_BENCH_DUE_NOW_TASKS", "1000"))
IDLE_S = float(os.environ.get("TW_BENCH_IDLE_S", "20"))
BURST_TASKS = int(os.environ.get("TW_BENCH_BURST_TASKS", "20000"))

#: benchmark -> figures, printed as one table at the end of the module.
CLUSTER: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def cluster_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not CLUSTER:
        return
    w = tr.write_line
    w("")
    w("scale-out (2 cores: every node, worker, PostgreSQL, Redis and etcd)")
    for name, figures in CLUSTER.items():
        w(f"  {name:<22} " + ", ".join(f"{k}={v:,.2f}" for k, v in figures.items()))
    one = CLUSTER.get("throughput_1_nodes")
    for n in (2, 3):
        other = CLUSTER.get(f"throughput_{n}_nodes")
        if one and other:
            dispatch = other["dispatch_per_s"] / one["dispatch_per_s"]
            complete = other["complete_per_s"] / one["complete_per_s"]
            w(f"  {n} nodes / 1 node: dispatch {dispatch:.2f}x, completion {complete:.2f}x")


def _record(benchmark: Any, name: str, **figures: float) -> None:
    CLUSTER[name] = figures
    benchmark.extra_info.update(figures)


def _scenario(
    benchmark: Any,
    tmp_path: Path,
    scenario: Callable[..., Coroutine[Any, Any, T]],
    *args: Any,
    **kw: Any,
) -> T:
    """One timed round of a real-process scenario of ``tests/support/cluster.py``, in a
    process group of its own (every node and worker stopped after it)."""

    def go() -> T:
        with process_group(tmp_path / "procs") as group:
            return asyncio.run(scenario(group, *args, **kw))

    result: T = benchmark.pedantic(go, rounds=1, iterations=1)
    return result


SERVE_DEFAULTS = {"etcd_ttl_s": 5.0, "task_lease_s": 30.0, "preload_interval_s": 1.0}
"""``tickwheel serve``'s own defaults (etcd lease TTL, task lease, pre-load interval):
the figures a user following the README gets."""


@pytest.mark.parametrize("settings", ["harness", "defaults"])
def test_failover(
    benchmark: Any,
    settings: str,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    kw: dict[str, float] = {"etcd_ttl_s": ETCD_TTL_S} if settings == "harness" else SERVE_DEFAULTS
    ttl = kw["etcd_ttl_s"]
    f = _scenario(
        benchmark,
        tmp_path,
        cluster.failover,
        slice_dsn,
        etcd_server,
        redis_server,
        tasks=FAILOVER_TASKS,
        spread_s=FAILOVER_SPREAD_S,
        **kw,
    )
    print(f"\n{settings}: " + f.line())
    _record(
        benchmark,
        f"failover_{settings}",
        tasks=f.tasks,
        killed_reowned_s=f.killed_reowned_s,
        frozen_reowned_s=f.frozen_reowned_s,
        reown_bound_s=ttl + 1,
        etcd_restart_settled_s=f.etcd_restart_settled_s,
        latest_first_dispatch_s=f.latest_first_dispatch_s,
        lateness_bound_s=ttl + 2,
    )


@pytest.mark.parametrize("nodes", [1, 3])
def test_steady(
    benchmark: Any,
    nodes: int,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    """The failover's load with no fault: the lateness and CPU it costs by itself, on one
    node and on three (issue 17: three nodes must keep up with what one keeps up with)."""

    f = _scenario(
        benchmark,
        tmp_path,
        cluster.steady,
        slice_dsn,
        etcd_server,
        redis_server,
        nodes=nodes,
        tasks=STEADY_TASKS,
        spread_s=FAILOVER_SPREAD_S,
        etcd_ttl_s=ETCD_TTL_S,
    )
    print(
        "\nsteady: first-dispatch lateness by due time (s after first due: p50 / max): "
        + ", ".join(f"{at:.0f}s: {p50:.2f} / {mx:.2f}" for at, p50, mx in f.by_due)
    )
    _record(
        benchmark,
        f"steady_{nodes}_nodes",
        tasks=f.tasks,
        tasks_per_s=f.tasks / FAILOVER_SPREAD_S,
        first_dispatch_p50_s=f.p50_s,
        first_dispatch_p99_s=f.p99_s,
        first_dispatch_max_s=f.max_s,
        node_cpu_s=sum(f.node_cpu_s),
        worker_cpu_s=sum(f.worker_cpu_s),
        node_cpu_ms_per_task=1000 * sum(f.node_cpu_s) / f.tasks,
        cpu_per_s_per_node=sum(f.node_cpu_s) / nodes / f.wall_s,
        worker_cpu_ms_per_task=1000 * sum(f.worker_cpu_s) / f.tasks,
        pg_commits_per_task=f.commits_per_task,
        **{f"tasks_per_{k.lower()}_write": v for k, v in f.per_write.items()},
    )


def test_idle(
    benchmark: Any,
    slice_postgres: PostgresServer,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    """Three nodes with a worker each and no task: what keeping a cluster alive costs,
    as CPU seconds per second (1.0 = one core) of every process, over
    ``TW_BENCH_IDLE_S`` seconds (default 20)."""
    assert slice_postgres.proc is not None
    f = _scenario(
        benchmark,
        tmp_path,
        cluster.idle,
        slice_dsn,
        etcd_server,
        redis_server,
        slice_postgres.proc.pid,
        nodes=3,
        seconds=IDLE_S,
        etcd_ttl_s=ETCD_TTL_S,
    )
    _record(
        benchmark,
        "idle_3_nodes",
        seconds=f.seconds,
        **{f"node{i + 1}_cpu_per_s": c for i, c in enumerate(f.node_cpu_per_s)},
        **{f"worker{i + 1}_cpu_per_s": c for i, c in enumerate(f.worker_cpu_per_s)},
        etcd_cpu_per_s=f.etcd_cpu_per_s,
        redis_cpu_per_s=f.redis_cpu_per_s,
        postgres_cpu_per_s=f.postgres_cpu_per_s,
        total_cpu_per_s=sum(f.node_cpu_per_s)
        + sum(f.worker_cpu_per_s)
        + f.etcd_cpu_per_s
        + f.redis_cpu_per_s
        + f.postgres_cpu_per_s,
    )


def test_due_now(
    benchmark: Any,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    """Tasks due now, submitted through one of three nodes: how soon those on other
    nodes' shards go out, against those on its own (the same run's baseline)."""

    f = _scenario(
        benchmark,
        tmp_path,
        cluster.due_now,
        slice_dsn,
        etcd_server,
        redis_server,
        tasks=DUE_NOW_TASKS,
        etcd_ttl_s=ETCD_TTL_S,
    )
    own, other = f.own_shards_ms, f.other_shards_ms
    _record(
        benchmark,
        "due_now_3_nodes",
        tasks=f.tasks,
        own_shards_p50_ms=own[0],
        own_shards_p99_ms=own[1],
        own_shards_max_ms=own[2],
        other_shards_p50_ms=other[0],
        other_shards_p99_ms=other[1],
        other_shards_max_ms=other[2],
    )


@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_throughput(
    benchmark: Any,
    nodes: int,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    f = _scenario(
        benchmark,
        tmp_path,
        cluster.throughput,
        slice_dsn,
        etcd_server,
        redis_server,
        nodes=nodes,
        tasks=BURST_TASKS,
        etcd_ttl_s=ETCD_TTL_S,
    )
    _record(
        benchmark,
        f"throughput_{nodes}_nodes",
        tasks=f.tasks,
        dispatch_per_s=f.dispatch_per_s,
        complete_per_s=f.complete_per_s,
        last_dispatch_after_due_s=f.latest_first_dispatch_s,
    )


FROZEN_TASKS = int(os.environ.get("TW_BENCH_FROZEN_TASKS", "600"))


@pytest.mark.parametrize("all_nodes", [False, True], ids=["one_node_each", "all_nodes"])
def test_frozen_worker(
    benchmark: Any,
    slice_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
    all_nodes: bool,
) -> None:
    """Issue 17: tasks stranded behind a frozen worker, before (each worker streams to
    one node, ``--one-node``) and after (the default, issue 42): three nodes, three
    workers of 50 slots, w1 SIGSTOPped, FROZEN_TASKS due at once, counted over 15 s."""
    f = _scenario(
        benchmark,
        tmp_path,
        cluster.frozen_worker,
        slice_dsn,
        etcd_server,
        redis_server,
        tasks=FROZEN_TASKS,
        all_nodes=all_nodes,
        etcd_ttl_s=ETCD_TTL_S,
    )
    name = "frozen_worker_" + ("all_nodes" if all_nodes else "one_node_each")
    print(f"\n{name}: {f.stranded} of {f.tasks} stranded; {f.all_done_s:.2f} s")
    _record(
        benchmark,
        name,
        tasks=f.tasks,
        completed_while_frozen=f.completed_while_frozen,
        stranded=f.stranded,
        all_done_s=f.all_done_s,
    )

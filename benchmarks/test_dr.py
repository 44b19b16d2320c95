"""Disaster recovery figures (issue 16), real processes on a real streaming standby.

- ``test_failover``: tasks submitted continuously to region A (a node on the primary),
  due over ``SPAN_S``; A's primary and node are SIGKILLed at mid-span; ``tickwheel dr
  promote`` on the standby; region A's DR node in B (``serve --standby``) serves and a
  worker completes the rest. Figures: promote and fence seconds, promote -> B serving,
  promote -> first completion in B, how late the timers due during the outage fired
  (after the promote), tasks acknowledged but lost (asynchronous) against the lag in
  bytes measured just before the kill, and completions counted twice (the ledger).
- ``test_failover_paced``: the same at ``PACED_RATE`` tasks/s (a load A keeps up with)
  and ``PACED_OUTAGE_S`` of outage between the kill and the promote.
- ``test_sync_commit_cost``: the durable lifecycle (submit, dispatch, complete) in
  tasks/s with the standby asynchronous and synchronous (``synchronous_standby_names``,
  ``synchronous_commit = on``), alternating in one run on one machine, and the
  standby's replay lag (bytes and seconds, sampled every 50 ms) under that load.
- ``test_sync_promote_cycles``: ``CYCLES`` synchronous-mode failovers (a fresh primary
  and standby each, four submitters, the primary SIGKILLed mid-flight, ``dr promote``):
  acknowledged submissions lost over all of them (target 0).

Run: ``PYTHONPATH=src:. .venv/bin/pytest benchmarks/test_dr.py --benchmark-only -s``
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from grpc_health.v1 import health_pb2
from tests.acceptance.regions.test_dr import NODE_ARGS, _health, _lag_bytes
from tests.support.dr import (
    DATABASE,
    Pair,
    StandbyServeProcess,
    replicated_pair,
    synchronous_loss,
    tickwheel_json,
)
from tests.support.processes import ADMIN_TOKEN, WorkerProcess, process_group
from tests.support.waiting import eventually

from scheduler.client import AdminClient, Client, TaskSpec

HANDLER = {"work": "tests.acceptance.handlers:fast"}
SPAN_S = 60.0
SUBMIT_BATCH = 20


async def _failover(
    pair: Pair, base: Path, rate: float | None = None, outage_s: float = 0.0
) -> dict[str, float]:
    """``rate``: tasks submitted a second (None: as fast as A takes them); ``outage_s``:
    how long after the kill the promote starts (the timers due meanwhile fire late)."""
    with process_group(base / "procs") as group:
        node_a = await asyncio.to_thread(
            group.serve, pair.primary_dsn, name="node-a", extra_args=NODE_ARGS
        )
        node_b = StandbyServeProcess(
            group.dir / "node-b",
            pair.standby_dsn,
            name="node-b",
            extra_args=(*NODE_ARGS, "--standby"),
        )
        group.procs.append(node_b)
        await asyncio.to_thread(node_b.start)
        async with await AdminClient.connect(node_a.target, admin_token=ADMIN_TOKEN) as admin:
            tenant = await admin.create_tenant("dr")
            key = (await admin.create_api_key(tenant.id, "dr")).secret
        await asyncio.to_thread(group.worker, node_a.target, key, HANDLER, name="worker-a")
        start = datetime.now(UTC) + timedelta(seconds=2)
        acked: list[tuple[uuid.UUID, float]] = []
        kill_at = time.monotonic() + 2 + SPAN_S / 2
        async with await Client.connect(node_a.target, api_key=key) as client:
            paced = time.monotonic()
            while time.monotonic() < kill_at:
                if rate is not None:
                    paced += SUBMIT_BATCH / rate
                    await asyncio.sleep(max(0.0, paced - time.monotonic()))
                specs = [
                    TaskSpec(
                        type="work",
                        scheduled_at=start + timedelta(seconds=random.uniform(0, SPAN_S)),
                        strict_timing=True,
                    )
                    for _ in range(SUBMIT_BATCH)
                ]
                for t in await client.submit_many(specs):
                    acked.append((t.id, t.scheduled_at.timestamp()))
        lag_at_kill = await _lag_bytes(pair)
        group.procs[-1].kill9()  # worker-a
        node_a.kill9()
        pair.kill_primary()
        worker_b = WorkerProcess(
            group.dir / "worker-b", node_b.target, key, HANDLER, name="worker-b"
        )
        group.procs.append(worker_b)
        worker_b.prepare()
        worker_b._spawn()
        await asyncio.sleep(outage_s)  # the region is down: nobody promotes yet
        t0 = time.time()
        report = await asyncio.to_thread(
            tickwheel_json, "dr", "promote", "--standby-dsn", pair.standby_admin_dsn
        )
        await eventually(
            lambda: _health(node_b.target),
            until=lambda s: s == health_pb2.HealthCheckResponse.SERVING,
            timeout_s=60,
            interval_s=0.05,
            what="B serving",
        )
        serving_s = time.time() - t0
        db = await asyncpg.connect(pair.standby_admin_dsn)
        try:
            first = await eventually(
                lambda: db.fetchval(
                    "SELECT min(completed_at) FROM task_completions WHERE completed_at > $1",
                    datetime.fromtimestamp(t0, UTC),
                ),
                until=lambda v: v is not None,
                timeout_s=60,
                what="a completion in B",
            )
            ids = [i for i, _ in acked]
            present = await db.fetchval("SELECT count(*) FROM tasks WHERE id = ANY($1)", ids)
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) FROM tasks WHERE id = ANY($1) AND status <> 'COMPLETED'",
                    ids,
                ),
                until=lambda n: n == 0,
                timeout_s=SPAN_S + 60,
                what="every task completed",
            )
            rows = await db.fetch(
                "SELECT task_id, count(*) AS n, min(completed_at) AS at FROM task_completions"
                " WHERE task_id = ANY($1) GROUP BY task_id",
                ids,
            )
        finally:
            await db.close()
        due = dict(acked)
        outage = [
            r["at"].timestamp() - t0
            for r in rows
            if due[r["task_id"]] < t0 and r["at"].timestamp() > t0
        ]
        return {
            "acknowledged": float(len(acked)),
            "lost": float(len(acked) - present),
            "lag_bytes_at_kill": float(lag_at_kill),
            "doubled": float(sum(1 for r in rows if r["n"] > 1)),
            "promote_s": float(report["promote_s"]),
            "fence_s": float(report["fence_s"]),
            "tasks_fenced": float(report["tasks_fenced"]),
            "promote_to_serving_s": serving_s,
            "promote_to_first_completion_s": first.timestamp() - t0,
            "outage_timers": float(len(outage)),
            "outage_timer_max_after_promote_s": max(outage, default=0.0),
        }


PACED_RATE = 300.0
"""Tasks a second in the paced failover: a load this machine sustains with room (the
anchor of issue 17: 333 tasks/s)."""
PACED_OUTAGE_S = 10.0


def test_failover_paced(benchmark: Any, tmp_path: Path) -> None:
    """The failover at a load A keeps up with, and a 10 s outage before the promote:
    the timers due during the outage are what fires late."""

    def run() -> dict[str, float]:
        with replicated_pair("tickwheel_dr_paced") as pair:
            return asyncio.run(_failover(pair, tmp_path, PACED_RATE, PACED_OUTAGE_S))

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)
    assert figures["doubled"] == 0


def test_failover(benchmark: Any, tmp_path: Path) -> None:
    def run() -> dict[str, float]:
        with replicated_pair("tickwheel_dr_bench") as pair:
            return asyncio.run(_failover(pair, tmp_path))

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)
    assert figures["doubled"] == 0


async def _lifecycle(pair: Pair, base: Path, modes: list[str], n: int) -> dict[str, float]:
    out: dict[str, list[float]] = {m: [] for m in modes}
    lag: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    with process_group(base / "procs") as group:
        node = await asyncio.to_thread(group.serve, pair.primary_dsn, extra_args=NODE_ARGS)
        async with await AdminClient.connect(node.target, admin_token=ADMIN_TOKEN) as admin:
            tenant = await admin.create_tenant("sync")
            key = (await admin.create_api_key(tenant.id, "sync")).secret
        await asyncio.to_thread(group.worker, node.target, key, HANDLER, name="w", slots=500)
        db = await asyncpg.connect(pair.primary.dsn())
        app = await asyncpg.connect(pair.primary_dsn)
        try:
            async with await Client.connect(node.target, api_key=key) as client:
                for mode in modes:
                    # '*': any standby (pg_basebackup -R names none); one is enough here.
                    names = "'*'" if mode == "sync" else "''"
                    await db.execute(f"ALTER SYSTEM SET synchronous_standby_names = {names}")
                    await db.execute("SELECT pg_reload_conf()")
                    await eventually(
                        lambda: db.fetchval(
                            "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"
                        ),
                        until=lambda c, m=mode: (c == 1) == (m == "sync"),
                        what=f"{mode} mode",
                    )
                    samples: list[tuple[float, float]] = []
                    sampler = asyncio.create_task(_sample_lag(pair, samples), name="lag")
                    t0 = time.monotonic()
                    ids: list[uuid.UUID] = []
                    for _ in range(0, n, 500):
                        done = await client.submit_many(
                            [TaskSpec(type="work", strict_timing=True) for _ in range(500)]
                        )
                        ids += [t.id for t in done]
                    await eventually(
                        lambda ids=ids: app.fetchval(  # type: ignore[misc]
                            "SELECT count(*) FROM task_completions WHERE task_id = ANY($1)", ids
                        ),
                        until=lambda c, ids=ids: c == len(ids),  # type: ignore[misc]
                        timeout_s=300,
                        interval_s=0.05,
                        what="completions",
                    )
                    out[mode].append(len(ids) / (time.monotonic() - t0))
                    sampler.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sampler
                    lag[mode].extend(samples)
        finally:
            await db.close()
            await app.close()
    figures = {f"{m}_tasks_per_s": sum(v) / len(v) for m, v in out.items()}
    for m, got in lag.items():
        by_bytes = sorted(b for b, _ in got)
        figures[f"{m}_lag_bytes_p50"] = by_bytes[len(by_bytes) // 2] if by_bytes else 0.0
        figures[f"{m}_lag_bytes_max"] = max(by_bytes, default=0.0)
        figures[f"{m}_lag_s_max"] = max((sec for _, sec in got), default=0.0)
    return figures


async def _sample_lag(pair: Pair, into: list[tuple[float, float]]) -> None:
    """The standby's replay lag (bytes, seconds) every 50 ms, read on the primary."""
    conn = await asyncpg.connect(pair.primary.dsn())
    try:
        while True:
            row = await conn.fetchrow(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::float8 AS b,"
                " coalesce(extract(epoch FROM replay_lag), 0)::float8 AS s"
                " FROM pg_stat_replication"
            )
            if row is not None:
                into.append((float(row["b"] or 0.0), float(row["s"])))
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


def test_sync_commit_cost(benchmark: Any, tmp_path: Path) -> None:
    def run() -> dict[str, float]:
        with replicated_pair("tickwheel_dr_sync") as pair:
            return asyncio.run(_lifecycle(pair, tmp_path, ["async", "sync", "sync", "async"], 5000))

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    figures["sync_over_async"] = figures["sync_tasks_per_s"] / figures["async_tasks_per_s"]
    benchmark.extra_info.update(figures)
    print(figures)


CYCLES = 20


def test_sync_promote_cycles(benchmark: Any) -> None:
    def run() -> dict[str, float]:
        acked_total = lost_total = 0
        for i in range(CYCLES):
            with replicated_pair(f"tickwheel_dr_cycle{i}") as pair:
                acked, present = asyncio.run(synchronous_loss(pair))
            acked_total += acked
            lost_total += acked - present
        return {"cycles": CYCLES, "acknowledged": acked_total, "lost": lost_total}

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)
    assert figures["lost"] == 0


RELOAD_TASKS = 100_000
"""Tasks replicated to B before the kill (the issue: a reload of 100,000 in-flight tasks)."""


async def _reload(pair: Pair) -> dict[str, float]:
    """RELOAD_TASKS PRELOADED tasks (a tenth of them dispatched and leased when A died,
    on every shard) replicated to B; A's primary SIGKILLed; promote; a node opens on
    the promoted database: how long until it serves and until every task is back in its
    wheel (the fenced in-flight ones come back through the lease reaper)."""
    from scheduler.engine import EngineConfig
    from scheduler.ids import uuid7
    from scheduler.node import Node, NodeConfig
    from scheduler.server import ServerConfig
    from scheduler.states import TaskState
    from scheduler.store import StoreConfig, open_store
    from scheduler.types import DispatchRequest, NewTask, Tenant

    store = await open_store(pair.primary_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        tenant = await store.create_tenant(Tenant(id=uuid.uuid4(), name="reload"))
        now = datetime.now(UTC)
        due = now + timedelta(minutes=20)
        for start in range(0, RELOAD_TASKS, 5000):
            await store.insert_tasks(
                [
                    NewTask(
                        id=uuid7(),
                        tenant_id=tenant.id,
                        type="work",
                        payload={},
                        scheduled_at=due,
                        due_at=due,
                        shard_id=(start + i) % 256,
                        idempotency_key=f"r-{start + i}",
                        initial_state=TaskState.PRELOADED,
                    )
                    for i in range(5000)
                ],
                now,
            )
        conn = await asyncpg.connect(pair.primary.dsn(DATABASE))
        try:
            rows = await conn.fetch(
                "SELECT id, scheduled_at FROM tasks LIMIT $1", RELOAD_TASKS // 10
            )
        finally:
            await conn.close()
        lease = now + timedelta(minutes=5)
        for start in range(0, len(rows), 1000):
            await store.mark_dispatched(
                [
                    DispatchRequest(key=_key(r), worker_id="zombie", lease_expires_at=lease)
                    for r in rows[start : start + 1000]
                ],
                now,
            )
    finally:
        await store.close()
    await eventually(lambda: _lag_bytes(pair), until=lambda lag: lag == 0, what="replay")
    pair.kill_primary()
    t0 = time.monotonic()
    report = tickwheel_json("dr", "promote", "--standby-dsn", pair.standby_admin_dsn)
    promoted = time.monotonic() - t0
    config = NodeConfig(
        store_url=pair.standby_dsn,
        engine=EngineConfig(),
        server=ServerConfig(listen="127.0.0.1:0"),
    )
    t1 = time.monotonic()
    async with Node(config) as node:
        serving = time.monotonic() - t1
        await eventually(
            lambda: _timers(node),
            until=lambda n: n >= RELOAD_TASKS,
            timeout_s=300,
            interval_s=0.05,
            what="every task back in the wheel",
        )
        loaded = time.monotonic() - t1
    return {
        "tasks": float(RELOAD_TASKS),
        "fenced_in_flight": float(report.get("tasks_fenced", 0)),
        "promote_s": promoted,
        "node_start_to_serving_s": serving,
        "node_start_to_all_in_wheel_s": loaded,
    }


def _key(row: Any) -> Any:
    from scheduler.types import TaskKey

    return TaskKey(row["id"], row["scheduled_at"])


async def _timers(node: Any) -> int:
    return int(node.engine.timers)


def test_reload_in_b(benchmark: Any) -> None:
    def run() -> dict[str, float]:
        with replicated_pair("tickwheel_dr_reload") as pair:
            return asyncio.run(_reload(pair))

    figures = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(figures)

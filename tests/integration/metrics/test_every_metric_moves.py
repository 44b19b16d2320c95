"""Every metric in docs/observability.md is exported and moves when its thing happens.

One real node on PostgreSQL (``/metrics`` on a free port), two in-process workers of
two tenants (one throttled), a silent in-process session whose lease lapses and a
watchdog, all scraped over HTTP. The metric list comes from the doc's table, so a
metric documented without being exported (or that never moves) fails here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from scheduler._errors import StaleFencingToken
from scheduler.client import AdminClient, Client, TaskState
from scheduler.engine import EngineConfig, WorkerHello
from scheduler.metrics import MetricsConfig, MetricsEndpoint, watchdog_endpoint, worker_endpoint
from scheduler.node import Node, NodeConfig
from scheduler.server import ServerConfig
from scheduler.store import StoreUnavailable
from scheduler.watchdog import Watchdog, WatchdogConfig
from scheduler.worker import ReconnectConfig, TaskContext, Worker
from tests.support.metrics import documented, scrape, total
from tests.support.waiting import eventually

ADMIN = "metrics-test-admin-token"
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]

#: Moved by test_replication_lag.py, against a real standby of a primary of its own.
#: The session's primary here has none, so they must be exported and equal what
#: PostgreSQL says (0 standbys, no lag).
NO_STANDBY = {
    "tickwheel_replication_lag_seconds",
    "tickwheel_replication_lag_bytes",
    "tickwheel_replication_standbys",
}

#: Moved by tests/integration/engine/test_index_rebuild.py, which flushes a real Redis
#: under a node's index; this node runs without Redis, so it stays 0 here.
NO_REDIS_INDEX = {"tickwheel_index_rebuilds_total"}


class Handlers:
    def __init__(self) -> None:
        self.release_slow = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.flaky_seen: set[uuid.UUID] = set()

    async def ok(self, ctx: TaskContext) -> dict[str, Any]:
        return {"ok": True}

    async def flaky(self, ctx: TaskContext) -> dict[str, Any]:
        if ctx.task_id not in self.flaky_seen:
            self.flaky_seen.add(ctx.task_id)
            raise RuntimeError("first attempt fails")
        return {"ok": True}

    async def bad(self, ctx: TaskContext) -> None:
        raise ValueError("always fails")

    async def slow(self, ctx: TaskContext) -> dict[str, Any]:
        self.slow_started.set()
        await self.release_slow.wait()
        return {"ok": True}


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    run = asyncio.create_task(worker.run(), name=f"test-{worker.worker_id}")
    try:
        yield worker
    finally:
        await worker.shutdown(grace_s=0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(run, 15)


async def test_every_documented_metric_is_exported_and_moves(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = documented()
    assert len(table) >= 30, "the table of docs/observability.md was not found"
    node = Node(
        NodeConfig(
            store_url=pg_dsn,
            engine=EngineConfig(
                lease_ttl_s=1.0,
                heartbeat_interval_s=0.25,
                preload_interval_s=0.2,
                retry_base_s=0.05,
                retry_max_s=0.1,
                canary_interval_s=1.0,
            ),
            server=ServerConfig(listen="127.0.0.1:0", admin_token=ADMIN),
            metrics=MetricsConfig(port=0, depth_interval_s=0.2),
        )
    )
    snapshots: dict[str, list[Samples]] = {"node": [], "worker": [], "watchdog": []}
    await node.start()
    stopped = False
    try:
        assert node.metrics is not None
        assert node.metrics_url is not None
        node_url = node.metrics_url

        async def snap(proc: str, url: str) -> Samples:
            s = await scrape(url)
            snapshots[proc].append(s)
            return s

        await snap("node", node_url)
        async with await AdminClient.connect(node.target, admin_token=ADMIN) as admin:
            big = 1_000_000
            a = await admin.create_tenant("a", rate_limit_rps=big, max_concurrent_workers=big)
            b = await admin.create_tenant("b", rate_limit_rps=1, max_concurrent_workers=big)
            key_a = (await admin.create_api_key(a.id, "a")).secret
            key_b = (await admin.create_api_key(b.id, "b")).secret
        h = Handlers()
        worker_a = Worker(
            node.target,
            api_key=key_a,
            handlers={"ok": h.ok, "flaky": h.flaky, "bad": h.bad, "slow": h.slow},
            slots=4,
            reconnect=ReconnectConfig(initial_backoff_s=0.05, max_backoff_s=0.2),
        )
        worker_b = Worker(node.target, api_key=key_b, handlers={"ok": h.ok}, slots=4)
        wend = worker_endpoint(worker_a, MetricsConfig(port=0))
        await wend.start()
        async with (
            running(worker_a),
            running(worker_b),
            await Client.connect(node.target, api_key=key_a) as ca,
            await Client.connect(node.target, api_key=key_b) as cb,
        ):
            await snap("worker", wend.url)
            now = datetime.now(UTC)
            ok = await ca.submit("ok", strict_timing=True)
            flaky = await ca.submit("flaky", strict_timing=True, max_retries=2)
            bad = await ca.submit("bad", strict_timing=True, max_retries=0)
            await ca.submit("nobody-runs-this", strict_timing=True)
            for delay in (timedelta(seconds=30), timedelta(minutes=30), timedelta(days=2)):
                await ca.submit("ok", scheduled_at=now + delay, strict_timing=True)
            doomed = await ca.submit("ok", scheduled_at=now + timedelta(days=3))
            assert (await ca.cancel(doomed.id)).state is TaskState.CANCELLED
            for i in range(5):
                await cb.submit("ok", {"i": i}, strict_timing=True)
            for t in (ok, flaky):
                await eventually(
                    functools.partial(ca.get, t.id),
                    until=lambda x: x.state is TaskState.COMPLETED,
                    what=f"{t.type} to complete",
                )
            await eventually(
                lambda: ca.get(bad.id),
                until=lambda x: x.state is TaskState.DEAD_LETTER,
                what="bad to dead-letter",
            )
            # A zombie's write: the completed task with a wrong fencing token.
            with pytest.raises(StaleFencingToken):
                await node.engine.complete(a.id, ok.id, 999, None)
            # A session that takes a task (committed RUNNING) and then goes silent.
            ghost = await node.engine.open_session(
                WorkerHello(
                    worker_id="ghost",
                    tenant_id=a.id,
                    task_types=frozenset({"lost"}),
                    slots=1,
                    start_on_delivery=True,
                )
            )
            lost = await ca.submit("lost", strict_timing=True, max_retries=0)
            # A task that runs while we look: slots used on both sides.
            slow = await ca.submit("slow", strict_timing=True)
            await asyncio.wait_for(h.slow_started.wait(), 20)
            heartbeats = (("kind", "heartbeat"),)
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: (
                    s["tickwheel_store_commit_seconds_count"][heartbeats] > 0
                    and total(s, "tickwheel_pool_slots_used", "gauge") > 0
                ),
                what="the slow task's heartbeat while it holds its slot",
            )
            await snap("worker", wend.url)
            h.release_slow.set()
            await eventually(
                lambda: ca.get(lost.id),
                until=lambda x: x.state is TaskState.DEAD_LETTER,
                what="the silent session's task to dead-letter on lease expiry",
            )
            await eventually(
                lambda: ca.get(slow.id),
                until=lambda x: x.state is TaskState.COMPLETED,
                what="slow to complete",
            )
            await ghost.close()
            # Flow rules (issue 43): a paused type's task is held, then goes out.
            await ca.pause_dispatch("ok")
            held = await ca.submit("ok", strict_timing=True)
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: (
                    total(s, "tickwheel_ready_queue_held", "gauge") > 0
                    and total(s, "tickwheel_dispatch_held_total", "counter") > 0
                ),
                what="the paused task held",
            )
            await ca.resume_dispatch("ok")
            await eventually(
                lambda: ca.get(held.id),
                until=lambda x: x.state is TaskState.COMPLETED,
                what="the held task to complete once resumed",
            )
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: total(s, "tickwheel_dispatch_held_seconds", "histogram") > 0,
                what="the held task's hold counted",
            )
            # Let the depth poller and the canary come round, then look again.
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: (
                    total(s, "tickwheel_canary_lag_seconds", "gauge") != 0
                    and total(s, "tickwheel_oldest_due_age_seconds", "gauge") > 0
                    and total(s, "tickwheel_quota_throttled_total", "counter") > 0
                ),
                what="the canary, the depth poll and the throttle",
            )
            # A stalled loop's gauge: the stall itself (a store that never answers) is
            # tests/integration/engine/test_store_hangs.py; here, its export.
            node.engine.health.preloader.failed(StoreUnavailable("metrics test"))
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: total(s, "tickwheel_engine_loop_stalled_seconds", "gauge") > 0,
                what="a stalled loop's gauge",
            )
            # ... and past stall_after_s (5 s) the stall is counted, for its loop. The
            # verdict is drawn as of 10 s on (the real pre-loader's next round would end
            # the failure first); the health loop's next check ends the stall.
            node.engine.health.preloader.failed(StoreUnavailable("metrics test"))
            await node.engine.health.check(time.monotonic() + 10)
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: total(s, "tickwheel_engine_loop_stalls_total", "counter") > 0,
                timeout_s=30,
                what="the stall counted",
            )
            node.engine.health.preloader.ok()
            # A supervised loop that dies: the backlog loop's round raises once; the
            # supervisor logs it, counts it and starts the loop again.
            backlog = node.engine.backlog
            real_round = backlog.report_once

            def dies_once() -> int:
                monkeypatch.setattr(backlog, "report_once", real_round)
                raise RuntimeError("metrics test: the backlog loop dies once")

            monkeypatch.setattr(backlog, "report_once", dies_once)
            await eventually(
                lambda: snap("node", node_url),
                until=lambda s: total(s, "tickwheel_engine_loop_restarts_total", "counter") > 0,
                what="a loop's restart counted",
            )
            dog = Watchdog(WatchdogConfig(database_url=pg_dsn, canary_max_lag_s=1e-6))
            dend: MetricsEndpoint = watchdog_endpoint(dog, MetricsConfig(port=0))
            await dend.start()
            try:
                await snap("watchdog", dend.url)
                assert await dog.check_once(), "the watchdog saw the canary's lag"
                await snap("watchdog", dend.url)
            finally:
                await dend.stop()
                await dog.source.close()
            # The stream breaks when the node goes: the worker reconnects.
            await node.stop()
            stopped = True
            await eventually(
                lambda: snap("worker", wend.url),
                until=lambda s: total(s, "tickwheel_worker_stream_reconnects_total", "counter") > 0,
                what="the worker to count a reconnect",
            )
        await wend.stop()
        replication = await _pg_standbys(pg_dsn)
    finally:
        if not stopped:
            await node.stop()

    missing, still = [], []
    for name, (kind, labels) in table.items():
        proc = _process_of(name)
        seen = snapshots[proc]
        assert seen, f"no scrape of the {proc}"
        key = f"{name}_count" if kind == "histogram" else name
        if not any(key in s for s in seen):
            missing.append(name)
            continue
        for s in seen:
            for label_set in s.get(key, {}):
                got = tuple(k for k, _ in label_set if k != "le")
                assert set(got) == set(labels), f"{name}: labels {got}, documented {labels}"
        values = [total(s, name, kind) for s in seen]
        if name in NO_STANDBY:
            assert all(v == replication for v in values), (name, values, replication)
            continue
        if name in NO_REDIS_INDEX:
            assert all(v == 0 for v in values), (name, values)
            continue
        # Moved: from the zero before the process did anything to a value seen here (a
        # counter never goes back).
        if kind == "counter":
            assert values == sorted(values), f"{name} went down: {values}"
        if not any(v != 0 for v in values):
            still.append(f"{name} {values}")
    assert not missing, f"documented but not exported: {missing}"
    assert not still, f"documented but never moved: {still}"


def _process_of(name: str) -> str:
    from scheduler.metrics import CATALOG

    return {m.name: m.process for m in CATALOG}[name]


async def _pg_standbys(dsn: str) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        return float(await conn.fetchval("SELECT count(*) FROM pg_stat_replication"))
    finally:
        await conn.close()

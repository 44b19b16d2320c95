"""Critical start lateness on a worker flooded with long bulk tasks (issue 43).

A real ``tickwheel serve`` on PostgreSQL (fsync on) and, in this process, one SDK
``Worker`` of 20 slots running every pool. 100 bulk tasks of 2 s (``asyncio.sleep``:
the work) fall due at once; meanwhile ``CRITICAL`` critical tasks fall due one every
300 ms (strict timing). The critical handler records how late it started: its own wall
clock minus the task's due time (dispatch, delivery and the ack included).

Three variants in the same run, each on a fresh database:

- ``none``: ``serve --reserve none``: no per-worker reserve (``critical_reserved_slots``
  500 keeps slots from bulk only while a critical task already waits): the behaviour
  before issue 43;
- ``default``: serve's defaults (10% of each worker's slots kept for critical while
  critical work is in sight), the critical tasks submitted before the bulk flood, so the
  node knows of them when the flood arrives (any deployment that schedules critical
  work ahead, or ran some in the last ``reserve_linger_s``);
- ``default-cold``: serve's defaults, the bulk flood submitted first, on a node that has
  never seen a critical task: the first wave of bulk takes every slot before the
  critical tasks exist, so those due during that wave wait for it (the reserve holds
  from then on).

Figures: critical start lateness p50/p99/max (ms) and bulk throughput (tasks/s from
the first bulk start to the last bulk end), and the on/off ratio of the latter: the
price of the idle slots. Target (issue 43): critical p99 <= 50 ms.

Run: ``.venv/bin/pytest benchmarks/test_reserve.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.support.processes import ADMIN_TOKEN, ProcessGroup

from scheduler.client import AdminClient, Client, Pool, TaskSpec
from scheduler.worker import TaskContext, Worker

SLOTS = 20
BULK = 100
BULK_S = 2.0
CRITICAL = 36
CRITICAL_EVERY_S = 0.3
CRITICAL_FROM_S = 1.0

FIGURES: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def reserve_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not FIGURES:
        return
    tr.write_line("")
    tr.write_line(
        f"critical start lateness, {SLOTS}-slot worker, {BULK} bulk tasks of {BULK_S:.0f} s, "
        f"{CRITICAL} critical tasks one every {CRITICAL_EVERY_S * 1000:.0f} ms"
    )
    for name, figures in FIGURES.items():
        cells = ", ".join(f"{k}={v:,.2f}" for k, v in figures.items())
        tr.write_line(f"  reserve {name:<4} {cells}")
    if {"none", "default"} <= FIGURES.keys():
        ratio = FIGURES["default"]["bulk_tasks_per_s"] / FIGURES["none"]["bulk_tasks_per_s"]
        tr.write_line(f"  bulk throughput default/none: {ratio:.3f}")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _key(target: str) -> str:
    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant(
            "bench", rate_limit_rps=1_000_000, max_concurrent_workers=1_000_000
        )
        return (await admin.create_api_key(tenant.id, "bench")).secret


async def _scenario(target: str, critical_first: bool) -> dict[str, float]:
    key = await _key(target)
    late_ms: list[float] = []
    starts: list[float] = []
    ends: list[float] = []
    all_done = asyncio.Event()

    async def bulk(ctx: TaskContext) -> None:
        starts.append(time.monotonic())
        await asyncio.sleep(BULK_S)
        ends.append(time.monotonic())
        if len(ends) == BULK and len(late_ms) == CRITICAL:
            all_done.set()

    async def critical(ctx: TaskContext) -> None:
        late_ms.append((datetime.now(UTC) - ctx.due_at).total_seconds() * 1000.0)
        if len(ends) == BULK and len(late_ms) == CRITICAL:
            all_done.set()

    worker = Worker(target, api_key=key, handlers={"bulk": bulk, "critical": critical}, slots=SLOTS)
    run = asyncio.create_task(worker.run(), name="bench-worker")
    client = await Client.connect(target, api_key=key)
    try:
        t0 = datetime.now(UTC)
        floods = [
            [TaskSpec(type="bulk", pool=Pool.BULK, strict_timing=True) for _ in range(BULK)],
            [
                TaskSpec(
                    type="critical",
                    pool=Pool.CRITICAL,
                    strict_timing=True,
                    scheduled_at=t0 + timedelta(seconds=CRITICAL_FROM_S + i * CRITICAL_EVERY_S),
                )
                for i in range(CRITICAL)
            ],
        ]
        for specs in reversed(floods) if critical_first else floods:
            await client.submit_many(specs)
        await asyncio.wait_for(all_done.wait(), 120)
    finally:
        await client.close()
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(run, 30)
    return {
        "critical_p50_ms": _pct(late_ms, 0.5),
        "critical_p99_ms": _pct(late_ms, 0.99),
        "critical_max_ms": max(late_ms),
        "bulk_tasks_per_s": BULK / (max(ends) - min(starts)),
    }


@pytest.mark.parametrize("reserve", ["none", "default", "default-cold"])
def test_critical_lateness_under_a_bulk_flood(
    benchmark: Any, slice_dsn: str, tmp_path: Path, reserve: str
) -> None:
    group = ProcessGroup(tmp_path / "procs")
    extra = ["--canary-interval-s", "0"]
    if reserve == "none":
        extra += ["--reserve", "none"]
    try:
        server = group.serve(slice_dsn, lease_ttl_s=30.0, extra_args=extra)
        figures: dict[str, float] = benchmark.pedantic(
            lambda: asyncio.run(_scenario(server.target, critical_first=reserve == "default")),
            rounds=1,
            iterations=1,
        )
    finally:
        group.stop_all()
    benchmark.extra_info.update(figures)
    FIGURES[reserve] = figures

"""What routing home costs: a tenant's unary call made in its home region against the
same call made in another region and forwarded (issue 16).

Two regions on loopback (``tests/support/regions.py``: a PostgreSQL server and one
``tickwheel serve`` each); an EU tenant's ``GetTask`` of an existing task, sequential,
alternating direct (EU) and forwarded (through US) calls so both see the same machine.
``extra_info``: median and p99 milliseconds of each, and the added median.

Run: ``PYTHONPATH=src:. .venv/bin/pytest benchmarks/test_regions.py --benchmark-only -s``
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from tests.support.processes import ADMIN_TOKEN
from tests.support.regions import Regions, start_regions

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import AdminClient, Client

CALLS = 500
"""Calls of each kind."""


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    with start_regions(tmp_path_factory.mktemp("regions")) as started:
        yield started


async def _measure(regions: Regions) -> dict[str, float]:
    us, eu = regions["us"].target, regions["eu"].target
    async with await AdminClient.connect(eu, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant("bench")
        key = (await admin.create_api_key(tenant.id, "k")).secret
    async with await Client.connect(eu, api_key=key) as client:
        task = await client.submit("bench", {})
    request = pb.GetTaskRequest(task_id=str(task.id))
    metadata = (("x-api-key", key),)
    times: dict[str, list[float]] = {"direct": [], "forwarded": []}
    async with grpc.aio.insecure_channel(eu) as home, grpc.aio.insecure_channel(us) as away:
        stubs = {
            "direct": pbg.SchedulerServiceStub(home),  # type: ignore[no-untyped-call]
            "forwarded": pbg.SchedulerServiceStub(away),  # type: ignore[no-untyped-call]
        }
        for _ in range(20):  # warm the channels, caches and the forward's channel
            for stub in stubs.values():
                await stub.GetTask(request, metadata=metadata, timeout=10)
        for _ in range(CALLS):
            for name, stub in stubs.items():
                started = time.perf_counter()
                await stub.GetTask(request, metadata=metadata, timeout=10)
                times[name].append(time.perf_counter() - started)
    out: dict[str, float] = {}
    for name, samples in times.items():
        samples.sort()
        out[f"{name}_median_ms"] = round(statistics.median(samples) * 1000, 3)
        out[f"{name}_p99_ms"] = round(samples[int(len(samples) * 0.99) - 1] * 1000, 3)
    out["added_median_ms"] = round(out["forwarded_median_ms"] - out["direct_median_ms"], 3)
    return out


def test_forward_cost(benchmark: Any, regions: Regions, tmp_path: Path) -> None:
    figures = benchmark.pedantic(lambda: asyncio.run(_measure(regions)), rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(f"\nGetTask, {CALLS} calls each: {figures}")
    assert figures["forwarded_median_ms"] > 0

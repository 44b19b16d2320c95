"""Reserved critical capacity through the worker SDK (issue 43): a 20-slot worker
flooded with long bulk tasks starts a critical task while every bulk task still runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.client import Pool, TaskSpec, TaskState
from scheduler.engine import EngineConfig, SlotReserve
from scheduler.worker import ClusterWorker, TaskContext, Worker
from tests.integration.worker_lifecycle.conftest import Stack, _stack
from tests.support.waiting import eventually


@pytest.fixture
async def reserved(tmp_path: Path) -> AsyncIterator[Stack]:
    config = EngineConfig(
        preload_interval_s=0.2,
        reserves=(SlotReserve(pool=Pool.CRITICAL, share=0.1),),
        reserve_linger_s=None,  # held before any critical task exists
    )
    async for s in _stack(tmp_path, config, None):
        yield s


@pytest.mark.parametrize("kind", [Worker, ClusterWorker])
async def test_a_critical_task_starts_while_the_bulk_flood_still_runs(
    reserved: Stack, kind: type[Worker] | type[ClusterWorker]
) -> None:
    """With ``Worker`` and with ``ClusterWorker`` (what ``tickwheel worker`` runs by
    default), whose credit is shared by its streams."""
    release = asyncio.Event()
    running = {"bulk": 0, "bulk_done": 0}

    async def bulk(ctx: TaskContext) -> None:
        running["bulk"] += 1
        try:
            await release.wait()  # a long bulk task: runs until the test lets it end
        finally:
            running["bulk"] -= 1
            running["bulk_done"] += 1

    async def critical(ctx: TaskContext) -> dict[str, Any]:
        return {"bulk_running": running["bulk"], "bulk_done": running["bulk_done"]}

    worker = kind(
        reserved.target,
        api_key=reserved.key,
        handlers={"bulk": bulk, "critical": critical},
        slots=20,
    )
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        specs = [TaskSpec(type="bulk", pool=Pool.BULK, strict_timing=True) for _ in range(100)]
        await reserved.client.submit_many(specs)
        # Bulk takes 18 of the 20 slots; two stay free for critical work.
        await eventually(_count(running), until=lambda n: n == 18, what="18 bulk running")
        task = await reserved.client.submit("critical", {}, pool=Pool.CRITICAL, strict_timing=True)
        done = await reserved.client.wait(task.id, timeout_s=60)
        assert done.state is TaskState.COMPLETED
        # It started and ended while all 18 bulk tasks ran; none had ended.
        assert done.result == {"bulk_running": 18, "bulk_done": 0}
        assert worker.running_tasks == 18
    finally:
        release.set()
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(run, 15)


def _count(running: dict[str, int]) -> Any:
    async def probe() -> int:
        return running["bulk"]

    return probe

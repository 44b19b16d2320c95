"""The engine's start/stop contract, stress-tested as River tests its services.

``stop`` is safe before ``start`` and twice; ``start`` twice is one start; concurrent
starts and stops never leave a loop running or a session open; and an engine that was
stopped starts again and works.
"""

from __future__ import annotations

import asyncio
import random

from scheduler.engine import AssignmentBatch, Engine, SubmitSpec, WorkerHello
from scheduler.store import Store
from tests.support.engine import engine_config

CONFIG = engine_config()


def _loops() -> set[str]:
    return {
        t.get_name()
        for t in asyncio.all_tasks()
        if t.get_name().startswith("tickwheel-") and not t.done()
    }


async def test_stop_before_start_and_twice(store: Store) -> None:
    engine = Engine(store, CONFIG)
    await engine.stop()
    await engine.start()
    await engine.start()
    await engine.stop()
    await engine.stop()
    assert _loops() == set()


async def test_concurrent_starts_and_stops_leave_nothing_running(store: Store) -> None:
    engine = Engine(store, CONFIG)
    rng = random.Random(7)
    for _ in range(5):
        calls = [engine.start() if rng.random() < 0.5 else engine.stop() for _ in range(8)]
        await asyncio.gather(*calls)
    await engine.stop()
    assert _loops() == set()
    assert engine.watch.workers(None) == []
    # And it still works after all that.
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        session = await engine.open_session(
            WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"t"}), slots=1)
        )
        await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True)])
        event = await asyncio.wait_for(session.next_event(), 10)
        assert isinstance(event, AssignmentBatch)
    finally:
        await engine.stop()
    assert _loops() == set()

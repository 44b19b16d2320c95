"""The outlets part, built alone with in-memory outlets (no broker, no engine).

Named ``test_outlets_part`` because ``test_outlets`` is the engine-level suite in
tests/integration/engine. At most one outlet per pool; a publish runs in the background,
``drain`` waits for those in flight, and a failed publish is logged, never raised (the
leases lapse and the reaper puts the tasks back).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.engine._outlets import Outlets
from scheduler.types import Assignment, Pool, TaskKey

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class GatedOutlet:
    """Collects what it is given once ``gate`` opens; raises when told to fail."""

    def __init__(self, name: str, pool: Pool, *, fail: bool = False) -> None:
        self.name = name
        self.pool = pool
        self.capacity = 10
        self.fail = fail
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.published: list[Assignment] = []

    async def publish(self, assignments: Sequence[Assignment]) -> None:
        self.started.set()
        await self.gate.wait()
        if self.fail:
            raise ConnectionError("broker down")
        self.published.extend(assignments)


def assignment(pool: Pool = Pool.BULK) -> Assignment:
    return Assignment(
        key=TaskKey(uuid.uuid4(), T0),
        tenant_id=uuid.UUID(int=7),
        type="t",
        payload={},
        fencing_token=1,
        attempt=1,
        max_retries=3,
        due_at=T0,
        lease_expires_at=T0 + timedelta(seconds=30),
        checkpoint=None,
        trace_context=None,
        pool=pool,
        worker_id="outlet:x",
        timeout_s=0.0,
    )


def test_two_outlets_for_one_pool_are_refused() -> None:
    with pytest.raises(ValueError, match="one outlet per pool"):
        Outlets([GatedOutlet("a", Pool.BULK), GatedOutlet("b", Pool.BULK)])


def test_pools_are_the_pools_the_outlets_carry() -> None:
    bulk, critical = GatedOutlet("bulk", Pool.BULK), GatedOutlet("crit", Pool.CRITICAL)
    outlets = Outlets([bulk, critical])
    assert outlets.pools == frozenset({Pool.BULK, Pool.CRITICAL})
    assert outlets.outlets == (bulk, critical)
    assert Outlets([]).pools == frozenset()


async def test_publish_runs_in_the_background_and_drain_waits_for_it() -> None:
    outlet = GatedOutlet("bulk", Pool.BULK)
    outlet.gate.clear()
    outlets = Outlets([outlet])
    batch = (assignment(), assignment())
    outlets.publish(outlet, batch)  # returns at once: the caller is the dispatch loop
    assert not outlet.started.is_set()
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == "tickwheel-publish-bulk"]
    await outlet.started.wait()
    draining = asyncio.create_task(outlets.drain(), name="test-drain")
    await asyncio.sleep(0)
    assert not draining.done()  # the publish is still in flight
    assert outlet.published == []
    outlet.gate.set()
    await asyncio.wait_for(draining, 5)
    assert task.done()
    assert outlet.published == list(batch)


async def test_drain_with_nothing_in_flight_returns_at_once() -> None:
    outlet = GatedOutlet("bulk", Pool.BULK)
    outlets = Outlets([outlet])
    await outlets.drain()
    outlets.publish(outlet, (assignment(),))
    await outlets.drain()
    await outlets.drain()  # what finished is forgotten
    assert len(outlet.published) == 1


async def test_a_publish_that_raises_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = GatedOutlet("bulk", Pool.BULK, fail=True)
    healthy = GatedOutlet("crit", Pool.CRITICAL)
    outlets = Outlets([broken, healthy])
    with caplog.at_level(logging.ERROR, logger="tickwheel.engine"):
        outlets.publish(broken, (assignment(), assignment(), assignment()))
        outlets.publish(healthy, (assignment(Pool.CRITICAL),))
        await outlets.drain()
    [logged] = [r for r in caplog.records if r.name == "tickwheel.engine"]
    assert logged.getMessage() == "outlet bulk: publish of 3 assignments failed"
    assert logged.exc_info is not None
    assert isinstance(logged.exc_info[1], ConnectionError)
    # One outlet's failure is not another's.
    assert broken.published == []
    assert len(healthy.published) == 1

"""Broker outlets (Kafka mode) at the engine level, with an in-process outlet.

The Kafka outlet itself is tested against a real broker in tests/integration/kafka;
here the outlet is a list, to pin the engine's side of the contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from scheduler.engine import Engine, SubmitSpec, WorkerHello
from scheduler.states import TaskState
from scheduler.store import Store, open_store
from scheduler.types import Assignment, Completion, FencedWrite, Pool
from tests.support.clock import FakeClock
from tests.support.engine import engine_config
from tests.support.waiting import eventually

CONFIG = engine_config(lease_ttl_s=10, heartbeat_interval_s=3)


class ListOutlet:
    """Collects what the engine publishes; can be told to fail."""

    def __init__(self, pool: Pool, capacity: int) -> None:
        self.name = f"test.{pool.value}"
        self.pool = pool
        self.capacity = capacity
        self.published: list[Assignment] = []
        self.fail = False

    async def publish(self, assignments: Sequence[Assignment]) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.published.extend(assignments)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path}/outlets.db")
    try:
        yield s
    finally:
        await s.close()


async def test_outlet_pool_goes_to_the_broker_and_commits_stay_fenced(store: Store) -> None:
    clock = FakeClock()
    outlet = ListOutlet(Pool.BULK, capacity=3)
    engine = Engine(store, CONFIG, clock=clock, outlets=[outlet])
    await engine.start()
    try:
        platform = await engine.tenancy.create_tenant(name="platform", tier="SYSTEM")
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        stream = await engine.open_session(
            WorkerHello(worker_id="s", tenant_id=tenant, task_types=frozenset({"t"}), slots=10)
        )
        bulk = await engine.submit(
            tenant, [SubmitSpec(type="t", pool=Pool.BULK, strict_timing=True) for _ in range(5)]
        )
        std = await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True)])
        # Standard work reaches the stream worker; bulk goes only to the broker, and
        # no more than the outlet's capacity is outstanding.
        ev = await asyncio.wait_for(stream.next_event(), 10)
        assert [a.key.id for a in ev.assignments] == [std[0].task.id]  # type: ignore[union-attr]
        await eventually(lambda: _n(outlet), until=lambda n: n == 3, what="3 published")
        assert {a.key.id for a in outlet.published} <= {r.task.id for r in bulk}
        # A broker consumer (SYSTEM key) acks and completes over its own session.
        consumer = await engine.open_session(
            WorkerHello(worker_id="k", tenant_id=platform.id, task_types=frozenset({"t"}), slots=0)
        )
        first = outlet.published[0]
        w = FencedWrite(key=first.key, token=first.fencing_token)
        assert await consumer.ack([w]) == ["ok"]
        done = Completion(key=first.key, token=first.fencing_token, result={})
        assert await consumer.complete([done]) == ["ok"]
        # Capacity came back: the fourth bulk task is published.
        await eventually(lambda: _n(outlet), until=lambda n: n == 4, what="4th published")
        # A duplicate delivery (at-least-once) is rejected by the fencing rule.
        assert await consumer.complete([done]) == ["stale"]
        assert (await engine.store.get_task(tenant, first.key.id)).status is TaskState.COMPLETED
        # A failed publish costs a lease expiry, then the task goes out again, token + 1.
        outlet.fail = True
        lost = outlet.published[1]
        clock.advance(CONFIG.lease_ttl_s + 1)
        engine.wake()
        await eventually(
            lambda: engine.store.get_task(tenant, lost.key.id),
            until=lambda t: t.fencing_token > lost.fencing_token or t.status is TaskState.PRELOADED,
            what="requeue after lease expiry",
        )
        # It may have been dispatched again while the broker was still down (another
        # lost publish); once the broker is back, the next lease expiry brings it out.
        outlet.fail = False
        clock.advance(CONFIG.lease_ttl_s + 1)
        engine.wake()
        await eventually(
            lambda: _tokens(outlet, lost),
            until=lambda tokens: max(tokens) > lost.fencing_token,
            what="republished with a higher token",
        )
        await stream.close()
        await consumer.close()
    finally:
        await engine.stop()


async def _n(outlet: ListOutlet) -> int:
    return len(outlet.published)


async def _tokens(outlet: ListOutlet, a: Assignment) -> list[int]:
    return [x.fencing_token for x in outlet.published if x.key.id == a.key.id]

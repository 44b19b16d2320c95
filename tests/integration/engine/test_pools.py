"""Priority pools over a real store: reservation, bulk cap, work stealing, fair share."""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scheduler.engine import (
    AssignmentBatch,
    Engine,
    EngineConfig,
    SlotReserve,
    SubmitSpec,
    WorkerHello,
    WorkerSession,
)
from scheduler.store import Store, open_store
from scheduler.types import Assignment, Completion, FencedWrite, Pool

CONFIG = EngineConfig(
    preload_interval_s=0.05, critical_reserved_slots=4, bulk_max_slots=3, lease_ttl_s=60
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path}/pools.db")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def engine(store: Store) -> AsyncIterator[Engine]:
    e = Engine(store, CONFIG)
    await e.start()
    try:
        yield e
    finally:
        await e.stop()


def spec(pool: Pool, type_: str = "std") -> SubmitSpec:
    return SubmitSpec(type=type_, pool=pool, strict_timing=True)


async def drain(
    session: WorkerSession, expect: int | None = None, quiet_s: float = 0.3
) -> list[Assignment]:
    """Assignments pushed to ``session``: at least ``expect`` of them (waiting up to 20 s
    for them on a loaded machine), then whatever else arrives before the stream has
    been quiet for ``quiet_s`` — so a test that asserts an exact count still sees any
    extra that should not have been sent."""
    got: list[Assignment] = []
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        waiting_for_more = expect is not None and len(got) < expect
        timeout = deadline - asyncio.get_running_loop().time() if waiting_for_more else quiet_s
        try:
            ev = await asyncio.wait_for(session.next_event(), max(timeout, 0.01))
        except TimeoutError:
            return got
        assert isinstance(ev, AssignmentBatch)
        got.extend(ev.assignments)


async def finish(session: WorkerSession, tasks: list[Assignment], *, regrant: bool = True) -> None:
    writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in tasks]
    assert set(await session.ack(writes)) <= {"ok"}
    done = [Completion(key=a.key, token=a.fencing_token, result={}) for a in tasks]
    assert set(await session.complete(done)) <= {"ok"}
    if regrant:
        session.grant(len(tasks))


async def test_bulk_cap_and_work_stealing_then_critical_first(engine: Engine) -> None:
    tenant = (await engine.tenancy.create_tenant(name="t")).id
    s = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"std"}), slots=10)
    )
    await engine.submit(tenant, [spec(Pool.BULK) for _ in range(50)])
    first = await drain(s, CONFIG.bulk_max_slots)
    # Bulk never holds more than bulk_max_slots, however many slots are free.
    assert [a.pool for a in first] == [Pool.BULK] * CONFIG.bulk_max_slots
    # No critical work waits: standard may use the reserved slots too (stealing).
    await engine.submit(tenant, [spec(Pool.STANDARD) for _ in range(20)])
    second = await drain(s, 7)
    assert [a.pool for a in second] == [Pool.STANDARD] * 7
    assert engine.pool_metrics()[Pool.BULK].slots_used == 3
    # Critical arrives while every slot is busy: it takes the next freed slot, ahead
    # of 13 standard and 47 bulk tasks that were waiting longer.
    await engine.submit(tenant, [spec(Pool.CRITICAL)])
    await finish(s, second[:1])
    third = await drain(s, 1)
    assert [a.pool for a in third] == [Pool.CRITICAL]
    metrics = engine.pool_metrics()
    assert metrics[Pool.CRITICAL].slots_used == 1
    assert metrics[Pool.STANDARD].depth == 13
    assert metrics[Pool.BULK].depth == 47
    await s.close()


async def test_reserved_slots_stay_free_while_critical_waits(engine: Engine) -> None:
    tenant = (await engine.tenancy.create_tenant(name="t")).id
    s = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"std"}), slots=10)
    )
    await engine.submit(tenant, [spec(Pool.STANDARD) for _ in range(30)])
    running = await drain(s, 10)
    assert len(running) == 10
    # A critical task waits (no worker runs its type yet): freed slots must not go
    # to standard work beyond capacity - reserved = 10 - 4 = 6.
    await engine.submit(tenant, [spec(Pool.CRITICAL, type_="urgent")])
    await finish(s, running[:6])
    refill = await drain(s, 2)
    assert len(refill) == 2  # 4 still running + 2 = 6 non-critical in flight
    assert engine.pool_metrics()[Pool.STANDARD].slots_used == 6
    # A worker for the critical type connects: the critical task goes at once.
    crit = await engine.open_session(
        WorkerHello(worker_id="c", tenant_id=tenant, task_types=frozenset({"urgent"}), slots=1)
    )
    (c,) = await drain(crit, 1)
    assert c.pool is Pool.CRITICAL
    # Nothing critical waits any more: standard may fill the node-wide reserve again,
    # all but the one slot of ten the worker keeps for critical work while it is in
    # sight (EngineConfig's default reserve, held for reserve_linger_s after it was due).
    await finish(s, refill)
    assert len(await drain(s, 5)) == 5
    assert s.credits == 1
    await s.close()
    await crit.close()


async def test_shared_worker_shares_tenants_by_weight(engine: Engine) -> None:
    ops = await engine.tenancy.create_tenant(name="platform", tier="SYSTEM")
    big = (await engine.tenancy.create_tenant(name="big", tier="ENTERPRISE")).id
    small = (await engine.tenancy.create_tenant(name="small", tier="STANDARD")).id
    await engine.submit(big, [spec(Pool.STANDARD) for _ in range(2000)])
    await engine.submit(small, [spec(Pool.STANDARD) for _ in range(2000)])
    s = await engine.open_session(
        WorkerHello(worker_id="shared", tenant_id=ops.id, task_types=frozenset({"std"}), slots=0)
    )
    served: collections.Counter[uuid.UUID] = collections.Counter()
    window = 1000
    while sum(served.values()) < window:
        s.grant(50)
        batch = await drain(s, 50, quiet_s=0.2)
        served.update(a.tenant_id for a in batch)
        await finish(s, batch, regrant=False)
    # ENTERPRISE weighs 4, STANDARD 1: 80% / 20% of the window, within 10%.
    total = sum(served.values())
    assert abs(served[big] / total - 0.8) <= 0.08
    assert abs(served[small] / total - 0.2) <= 0.02
    await s.close()


async def test_quota_throttles_without_dropping(store: Store) -> None:
    from tests.support.clock import FakeClock

    clock = FakeClock()
    engine = Engine(store, CONFIG, clock=clock)
    await engine.start()
    try:
        tenant = (
            await engine.tenancy.create_tenant(name="q", rate_limit_rps=5, max_concurrent_workers=3)
        ).id
        s = await engine.open_session(
            WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"std"}), slots=100)
        )
        results = await engine.submit(tenant, [spec(Pool.STANDARD) for _ in range(10)])
        first = await drain(s, 3)
        assert len(first) == 3  # the in-flight cap
        assert engine.quota.throttled()[tenant] > 0
        await finish(s, first)
        second = await drain(s, 2)
        assert len(second) == 2  # the burst of 5 tokens is spent: 3 + 2
        await finish(s, second)
        assert await drain(s) == []  # no token left until the clock moves
        clock.advance(1.0)  # +5 tokens, cap 3
        engine.wake()
        third = await drain(s, 3)
        assert len(third) == 3
        await finish(s, third)
        clock.advance(1.0)
        engine.wake()
        fourth = await drain(s, 10 - 8)
        await finish(s, fourth)
        seen = {a.key.id for a in first + second + third + fourth}
        assert seen == {r.task.id for r in results}  # nothing dropped, nothing doubled
        await s.close()
    finally:
        await engine.stop()


async def test_a_flooded_worker_starts_a_critical_task_while_its_bulk_tasks_run(
    store: Store,
) -> None:
    """Issue 43: 20 slots, 10% kept for critical. 100 bulk tasks take 18 slots and no
    more, though no critical task exists yet; a critical task that comes due is
    pushed at once, while all 18 bulk tasks still run (none has finished)."""
    config = EngineConfig(
        preload_interval_s=0.05,
        lease_ttl_s=60,
        bulk_max_slots=150,
        reserves=(SlotReserve(pool=Pool.CRITICAL, share=0.1),),
        reserve_linger_s=None,  # held at all times, critical work in sight or not
    )
    engine = Engine(store, config)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        s = await engine.open_session(
            WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"std"}), slots=20)
        )
        await engine.submit(tenant, [spec(Pool.BULK) for _ in range(100)])
        bulk = await drain(s, 18)
        assert [a.pool for a in bulk] == [Pool.BULK] * 18  # and nothing more
        writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in bulk]
        assert set(await s.ack(writes)) <= {"ok"}
        (crit,) = await engine.submit(tenant, [spec(Pool.CRITICAL)])
        (c,) = await drain(s, 1)
        assert c.key.id == crit.task.id
        assert engine.pool_metrics()[Pool.BULK].slots_used == 18  # every bulk task runs
        # It ends; the kept slot is free again and bulk still does not take it.
        await finish(s, [c], regrant=True)
        assert await drain(s) == []
        done = [Completion(key=a.key, token=a.fencing_token, result={}) for a in bulk[:3]]
        assert set(await s.complete(done)) <= {"ok"}
        s.grant(3)
        assert [a.pool for a in await drain(s, 3)] == [Pool.BULK] * 3
        await s.close()
    finally:
        await engine.stop()

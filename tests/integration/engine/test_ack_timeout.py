"""A frozen ack-first worker holds a due task for ``ack_timeout_s``, not a whole lease
(issue 42): the task goes back and another stream runs it; the frozen worker's late ack
is refused, so it never runs it; its stream gets nothing more until it shows life."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scheduler.engine import (
    AssignmentBatch,
    Engine,
    EngineConfig,
    SubmitSpec,
    WorkerHello,
    WorkerSession,
)
from scheduler.states import TaskState
from scheduler.store import Store, open_store
from scheduler.types import Assignment, Completion, FencedWrite, Outcome

CONFIG = EngineConfig(preload_interval_s=0.05, lease_ttl_s=60, ack_timeout_s=0.5)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path}/acks.db")
    try:
        yield s
    finally:
        await s.close()


async def _next(session: WorkerSession, timeout_s: float = 20.0) -> list[Assignment]:
    ev = await asyncio.wait_for(session.next_event(), timeout_s)
    assert isinstance(ev, AssignmentBatch)
    return list(ev.assignments)


def _hello(worker_id: str, tenant: object, *, start_on_delivery: bool = False) -> WorkerHello:
    return WorkerHello(
        worker_id=worker_id,
        tenant_id=tenant,  # type: ignore[arg-type]
        task_types=frozenset({"t"}),
        slots=1,
        start_on_delivery=start_on_delivery,
    )


async def test_an_unacked_task_goes_to_another_worker_and_the_late_ack_is_refused(
    store: Store,
) -> None:
    engine = Engine(store, CONFIG)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        frozen = await engine.open_session(_hello("frozen", tenant))
        (sub,) = await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True)])
        (a,) = await _next(frozen)
        assert a.key.id == sub.task.id
        # A second worker connects; the first never acks (SIGSTOPped, say).
        other = await engine.open_session(_hello("other", tenant))
        (b,) = await _next(other)  # after the 0.5 s ack timeout, not the 60 s lease
        assert b.key.id == a.key.id
        assert b.fencing_token > a.fencing_token
        assert frozen.stalled
        # The frozen worker thaws and acks: refused, so an ack-first worker never runs it.
        (late,) = await frozen.ack([FencedWrite(key=a.key, token=a.fencing_token)])
        assert late is not Outcome.OK
        assert not frozen.stalled  # it showed life
        assert set(await other.ack([FencedWrite(key=b.key, token=b.fencing_token)])) == {Outcome.OK}
        done = [Completion(key=b.key, token=b.fencing_token, result={"by": "other"})]
        assert set(await other.complete(done)) == {Outcome.OK}
        task = await engine.store.get_task(tenant, a.key.id)
        assert task.status is TaskState.COMPLETED
        assert task.worker_id == "other"
        assert engine.stats.lease_expiries["ack_timeout"] == 1
    finally:
        await engine.stop()


async def test_an_acked_task_and_a_start_on_delivery_stream_keep_their_tasks(
    store: Store,
) -> None:
    engine = Engine(store, CONFIG)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        acking = await engine.open_session(_hello("acking", tenant))
        eager = await engine.open_session(_hello("eager", tenant, start_on_delivery=True))
        await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True) for _ in range(2)])
        (a,) = await _next(acking)
        (e,) = await _next(eager)
        assert set(await acking.ack([FencedWrite(key=a.key, token=a.fencing_token)])) == {
            Outcome.OK
        }
        await asyncio.sleep(CONFIG.ack_timeout_s * 4)  # several reaper rounds
        assert not acking.stalled
        assert not eager.stalled
        assert engine.stats.lease_expiries["ack_timeout"] == 0
        for session, x in ((acking, a), (eager, e)):
            done = [Completion(key=x.key, token=x.fencing_token, result={})]
            assert set(await session.complete(done)) == {Outcome.OK}
    finally:
        await engine.stop()

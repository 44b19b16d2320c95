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
        # Taken back once, when its ack was overdue: by the session's push timer or by
        # the dispatch lease, which ends ack_timeout_s after the due time, whichever
        # the reaper came to first (the push follows the commit by a few ms).
        assert engine.stats.lease_expiries["ack_timeout"] + engine.stats.reclaimed == 1
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


async def test_a_dispatch_to_an_ack_first_stream_leases_it_until_the_ack_is_overdue(
    store: Store,
) -> None:
    """The store's lease of a task pushed to an ack-first stream ends ``ack_timeout_s``
    after its due time, so the node that takes the shard of a node that died with it
    unacked takes it back then, not a whole lease later; the ack extends it to the
    whole lease. A stream that starts on delivery gets the whole lease at once."""
    engine = Engine(store, CONFIG)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        acking = await engine.open_session(_hello("acking", tenant))
        (_sub,) = await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True)])
        (a,) = await _next(acking)
        task = await engine.store.get_task(tenant, a.key.id)
        assert task.lease_expires_at is not None
        # From its due time, or the commit if that came later.
        short = (task.lease_expires_at - task.due_at).total_seconds()
        assert CONFIG.dispatch_lease_s == CONFIG.ack_timeout_s <= short < CONFIG.lease_ttl_s / 2
        assert a.lease_expires_at == task.lease_expires_at  # what the worker is told
        assert set(await acking.ack([FencedWrite(key=a.key, token=a.fencing_token)])) == {
            Outcome.OK
        }
        acked = await engine.store.get_task(tenant, a.key.id)
        assert acked.lease_expires_at is not None
        assert (acked.lease_expires_at - task.lease_expires_at).total_seconds() > 30
        eager = await engine.open_session(_hello("eager", tenant, start_on_delivery=True))
        await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True)])
        (e,) = await _next(eager)
        running = await engine.store.get_task(tenant, e.key.id)
        assert running.lease_expires_at is not None
        assert (running.lease_expires_at - running.due_at).total_seconds() >= CONFIG.lease_ttl_s
    finally:
        await engine.stop()


ORPHANS = EngineConfig(preload_interval_s=0.05, lease_ttl_s=60, orphan_grace_s=0.3)


async def test_a_broken_streams_running_task_goes_to_another_worker_after_the_grace(
    store: Store,
) -> None:
    """A stream broken on the worker's side (vanished, frozen past the keepalive) and
    not taken up again: its RUNNING task's lease ends after the orphan grace (0.3 s),
    not the 60 s lease; the reaper counts an attempt and another worker runs it. The
    first worker's completion is then refused."""
    engine = Engine(store, ORPHANS)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        gone = await engine.open_session(_hello("gone", tenant))
        (_sub,) = await engine.submit(
            tenant, [SubmitSpec(type="t", strict_timing=True, max_retries=3)]
        )
        (a,) = await _next(gone)
        assert set(await gone.ack([FencedWrite(key=a.key, token=a.fencing_token)])) == {Outcome.OK}
        await gone.close(orphaned=True)
        other = await engine.open_session(_hello("other", tenant))
        (b,) = await _next(other)  # after the grace and the first retry's backoff
        assert b.key.id == a.key.id
        assert b.fencing_token > a.fencing_token
        assert b.attempt == 2
        late = [Completion(key=a.key, token=a.fencing_token, result={"by": "gone"})]
        assert set(await other.complete(late)) == {Outcome.STALE}
        assert set(await other.ack([FencedWrite(key=b.key, token=b.fencing_token)])) == {Outcome.OK}
        done = [Completion(key=b.key, token=b.fencing_token, result={"by": "other"})]
        assert set(await other.complete(done)) == {Outcome.OK}
        assert (await engine.store.get_task(tenant, a.key.id)).worker_id == "other"
    finally:
        await engine.stop()


async def test_a_worker_that_reconnects_within_the_grace_keeps_its_running_task(
    store: Store,
) -> None:
    engine = Engine(store, ORPHANS)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        first = await engine.open_session(_hello("w", tenant))
        await engine.submit(tenant, [SubmitSpec(type="t", strict_timing=True)])
        (a,) = await _next(first)
        write = FencedWrite(key=a.key, token=a.fencing_token)
        assert set(await first.ack([write])) == {Outcome.OK}
        await first.close(orphaned=True)
        again = await engine.open_session(_hello("w", tenant))
        assert set(await again.heartbeat([write])) == {Outcome.OK}  # taken up again
        await asyncio.sleep(ORPHANS.orphan_grace_s * 5)  # several reaper rounds
        done = [Completion(key=a.key, token=a.fencing_token, result={})]
        assert set(await again.complete(done)) == {Outcome.OK}
    finally:
        await engine.stop()

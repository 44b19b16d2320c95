"""A worker's write counts only from the session that holds the task (issue #15, case 1).

A task belongs to the worker it was dispatched to (the store records its ``worker_id``).
A reconnecting worker adopts its RUNNING tasks as RUNNING; a stream of another worker
of the same tenant is refused; and a stream's close gives back only what that stream
was given and never acked, so a flaky network never runs a task twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import pytest

from scheduler.engine import AssignmentBatch, Engine, SubmitSpec
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import Assignment, Completion, FencedWrite
from tests.integration.engine.conftest import hello


async def running(engine: Engine, tenant: uuid.UUID) -> Assignment:
    """One task acked (RUNNING) on a stream of worker "w" that then broke."""
    session = await engine.open_session(hello(tenant))
    await engine.submit(tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)])
    event = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    assert await session.ack([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    await session.close()
    return a


async def test_a_reconnect_that_heartbeats_keeps_the_task_running(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """Stream 1 acks and breaks; stream 2 of the same worker heartbeats and breaks; the
    worker's completion on stream 3 is accepted: the task never went back."""
    a = await running(engine, tenant)
    write = FencedWrite(key=a.key, token=a.fencing_token)
    second = await engine.open_session(hello(tenant, slots=0))
    assert await second.heartbeat([write]) == ["ok"]
    await second.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.fencing_token) == (TaskState.RUNNING, a.fencing_token)
    third = await engine.open_session(hello(tenant, slots=0))
    done = Completion(key=a.key, token=a.fencing_token, result={"ok": True})
    assert await third.complete([done]) == ["ok"]
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.fencing_token) == (TaskState.COMPLETED, a.fencing_token)
    assert task.retry_count == 0
    await third.close()


async def test_another_worker_of_the_tenant_cannot_touch_the_task(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """A stream of another worker id, never given the task, is refused on every write,
    and its close changes nothing."""
    a = await running(engine, tenant)
    write = FencedWrite(key=a.key, token=a.fencing_token)
    other = await engine.open_session(hello(tenant, worker_id="intruder", slots=0))
    assert await other.heartbeat([write]) == ["stale"]
    assert await other.ack([write]) == ["stale"]
    done = Completion(key=a.key, token=a.fencing_token, result={"by": "intruder"})
    assert await other.complete([done]) == ["stale"]
    await other.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.fencing_token) == (TaskState.RUNNING, a.fencing_token)
    assert task.result_payload is None
    # The worker that holds it still completes it.
    owner = await engine.open_session(hello(tenant, slots=0))
    assert await owner.complete([dataclasses.replace(done, result={"by": "w"})]) == ["ok"]
    assert (await engine.store.get_task(tenant, a.key.id)).result_payload == {"by": "w"}
    await owner.close()


async def test_a_stream_whose_task_was_adopted_does_not_release_it(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """Stream 1 is given a task and has not acked it when the worker reconnects; its
    ack arrives on stream 2 (RUNNING). When stream 1 is finally closed, the task is no
    longer stream 1's to give back."""
    first = await engine.open_session(hello(tenant))
    await engine.submit(tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)])
    event = await asyncio.wait_for(first.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    write = FencedWrite(key=a.key, token=a.fencing_token)
    second = await engine.open_session(hello(tenant, slots=0))
    assert await second.ack([write]) == ["ok"]
    await first.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.fencing_token) == (TaskState.RUNNING, a.fencing_token)
    done = Completion(key=a.key, token=a.fencing_token, result=None)
    assert await second.complete([done]) == ["ok"]
    await second.close()


async def test_a_reconnected_worker_still_gives_back_what_it_never_acked(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """The adoption of a DISPATCHED task (a heartbeat before the ack) does not make it
    RUNNING: if the new stream closes without acking, the task goes back at once."""
    first = await engine.open_session(hello(tenant))
    await engine.submit(tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)])
    event = await asyncio.wait_for(first.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    # The first stream is gone without a close (a dead connection); a second stream of
    # the same worker heartbeats the task it never acked, then breaks too.
    assert (await engine.store.get_task(tenant, a.key.id)).status is TaskState.DISPATCHED
    second = await engine.open_session(hello(tenant, slots=0))
    assert await second.heartbeat([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    await second.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert task.status is TaskState.PRELOADED
    await first.close()


async def test_a_close_never_releases_a_task_acked_elsewhere(
    engine: Engine, store: Store, tenant: uuid.UUID
) -> None:
    """Two nodes: stream 1 here was given a task; the worker reconnected to another node
    and acked it there (RUNNING, same token; written straight to the store, as that node
    would). Stream 1's close must not give the RUNNING task back."""
    first = await engine.open_session(hello(tenant))
    await engine.submit(tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)])
    event = await asyncio.wait_for(first.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    lease = a.lease_expires_at
    assert await store.ack([FencedWrite(key=a.key, token=a.fencing_token)], lease, lease) == ["ok"]
    await first.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.fencing_token) == (TaskState.RUNNING, a.fencing_token)


async def test_a_task_committed_to_a_stream_that_closed_meanwhile_goes_back(
    engine: Engine, store: Store, tenant: uuid.UUID, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream closes while the dispatch of its task is committing (a second hello,
    a broken connection): the commit lands DISPATCHED to a session that is gone and will
    never push it. The task goes back at once and another worker gets it, instead of
    waiting out a lease no worker knows of (found by the stream fuzzer: a reconnect of
    the same worker id could then adopt a task it was never shown)."""
    real = store.mark_dispatched
    committing, go_on = asyncio.Event(), asyncio.Event()

    async def gated(*args: Any, **kwargs: Any) -> Any:
        committing.set()
        await go_on.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, "mark_dispatched", gated)
    first = await engine.open_session(hello(tenant))
    (made,) = await engine.submit(
        tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)]
    )
    await asyncio.wait_for(committing.wait(), 10)
    await first.close()
    monkeypatch.setattr(store, "mark_dispatched", real)
    go_on.set()
    other = await engine.open_session(hello(tenant, worker_id="other"))
    event = await asyncio.wait_for(other.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    assert a.key.id == made.task.id
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.worker_id) == (TaskState.DISPATCHED, "other")
    await other.close()

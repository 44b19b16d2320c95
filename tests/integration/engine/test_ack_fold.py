"""Acks answered before their write and folded into the completion (issue #20), on a
real store (both backends).

With ``ack_linger_ms`` on, a session answers the ack of a task it was given, under the
token it was given, at once; the write waits in the ack queue. A completion that comes
meanwhile takes the ack with it: one store write, DISPATCHED -> RUNNING -> COMPLETED,
both audit rows. The fencing rule is the same as for each write alone: the store's
token and status guard, and only the session that holds the task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.engine import AssignmentBatch, Engine, SubmitSpec
from scheduler.engine._engine import Engine as _Engine
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import Assignment, Completion, FencedWrite, Outcome
from tests.integration.engine.conftest import CONFIG, hello
from tests.support.clock import FakeClock

S = TaskState


@pytest.fixture
async def engine(store: Store, clock: FakeClock) -> AsyncIterator[Engine]:
    # A linger far longer than any test step: an ack is written only by its
    # completion, by a write that must not overtake it, or at stop.
    e = Engine(store, dataclasses.replace(CONFIG, ack_linger_ms=1000), clock=clock)
    await e.start()
    try:
        yield e
    finally:
        await e.stop()


async def pushed(engine: Engine, tenant: uuid.UUID, worker_id: str = "w") -> tuple[Any, Assignment]:
    session = await engine.open_session(hello(tenant, worker_id=worker_id))
    await engine.submit(tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)])
    event = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    return session, a


def acks_folded(engine: Engine) -> int:
    assert isinstance(engine, _Engine)
    return engine._completer.acks.folded


async def test_an_ack_is_answered_at_once_and_written_by_the_completion(
    engine: Engine, tenant: uuid.UUID
) -> None:
    session, a = await pushed(engine, tenant)
    write = FencedWrite(key=a.key, token=a.fencing_token)
    assert await session.ack([write]) == [Outcome.OK]
    # Answered, not written yet: the task is still DISPATCHED in the store.
    assert (await engine.store.get_task(tenant, a.key.id)).status is S.DISPATCHED
    done = Completion(key=a.key, token=a.fencing_token, result={"ok": 1})
    assert await session.complete([done]) == [Outcome.OK]
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.result_payload) == (S.COMPLETED, {"ok": 1})
    steps = [
        (t.from_state, t.to_state, t.fencing_token, t.actor, t.reason)
        for t in await engine.store.transitions_of(a.key.id)
    ]
    assert steps[-3:] == [
        (S.PRELOADED, S.DISPATCHED, a.fencing_token, steps[-3][3], "dispatched"),
        (S.DISPATCHED, S.RUNNING, a.fencing_token, "w", "acked"),
        (S.RUNNING, S.COMPLETED, a.fencing_token, "w", "completed"),
    ]
    assert acks_folded(engine) == 1
    await session.close()


async def test_a_folded_ack_is_refused_from_another_session(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """Another worker's stream, never given the task, acks and completes it with the
    current token: both refused, nothing written; the holder's ack and completion then
    land as one write."""
    owner, a = await pushed(engine, tenant)
    write = FencedWrite(key=a.key, token=a.fencing_token)
    assert await owner.ack([write]) == [Outcome.OK]
    other = await engine.open_session(hello(tenant, worker_id="intruder", slots=0))
    assert await other.ack([write]) == [Outcome.STALE]
    done = Completion(key=a.key, token=a.fencing_token, result={"by": "intruder"})
    assert await other.complete([done]) == [Outcome.STALE]
    await other.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert task.status in (S.DISPATCHED, S.RUNNING)  # the owner's ack, maybe written
    assert task.result_payload is None
    assert await owner.complete([dataclasses.replace(done, result={"by": "w"})]) == [Outcome.OK]
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.result_payload) == (S.COMPLETED, {"by": "w"})
    steps = [(t.from_state, t.to_state) for t in await engine.store.transitions_of(a.key.id)]
    assert steps.count((S.DISPATCHED, S.RUNNING)) == 1
    assert steps.count((S.RUNNING, S.COMPLETED)) == 1
    refused = await engine.store.refused_writes_of(a.key)
    assert {(r.actor, r.write) for r in refused} >= {("intruder", "ack"), ("intruder", "complete")}
    await owner.close()


async def test_a_folded_ack_is_refused_with_a_stale_token(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """A completion under an older token does not take the queued ack and is refused;
    the completion under the current one then writes both."""
    session, a = await pushed(engine, tenant)
    assert await session.ack([FencedWrite(key=a.key, token=a.fencing_token)]) == [Outcome.OK]
    old = Completion(key=a.key, token=a.fencing_token - 1, result={"zombie": True})
    assert await session.complete([old]) == [Outcome.STALE]
    assert (await engine.store.get_task(tenant, a.key.id)).result_payload is None
    assert acks_folded(engine) == 0
    done = Completion(key=a.key, token=a.fencing_token)
    assert await session.complete([done]) == [Outcome.OK]
    assert (await engine.store.get_task(tenant, a.key.id)).status is S.COMPLETED
    await session.close()


async def test_a_folded_ack_is_refused_when_the_store_moved_the_task(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    """The session still holds the task, but the store no longer has it DISPATCHED
    under that token (an operator put it back): the completion carrying the ack is
    refused, the ack too, and both refusals are in the task's history."""
    session, a = await pushed(engine, tenant)
    assert await session.ack([FencedWrite(key=a.key, token=a.fencing_token)]) == [Outcome.OK]
    await engine.store.transition(a.key, S.PRELOADED, clock())
    done = Completion(key=a.key, token=a.fencing_token, result={"late": True})
    assert await session.complete([done]) == [Outcome.STALE]
    task = await engine.store.get_task(tenant, a.key.id)
    assert task.status is not S.COMPLETED
    assert task.result_payload is None
    for _ in range(100):  # the ack's refusal is recorded by a background task
        refused = {r.write for r in await engine.store.refused_writes_of(a.key)}
        if {"ack", "complete"} <= refused:
            break
        await asyncio.sleep(0.01)
    assert {"ack", "complete"} <= refused
    assert acks_folded(engine) == 0
    await session.close()


async def test_a_reconnect_sees_the_ack_it_was_answered(engine: Engine, tenant: uuid.UUID) -> None:
    """A stream answered an ack and broke before it was written: the worker's next
    stream finds its task RUNNING (the queued ack is written first), and the first
    stream's close does not give it back."""
    first, a = await pushed(engine, tenant)
    write = FencedWrite(key=a.key, token=a.fencing_token)
    assert await first.ack([write]) == [Outcome.OK]
    await first.close()
    second = await engine.open_session(hello(tenant, slots=0))
    assert await second.heartbeat([write]) == [Outcome.OK]
    assert (await engine.store.get_task(tenant, a.key.id)).status is S.RUNNING
    await second.close()
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.fencing_token) == (S.RUNNING, a.fencing_token)


async def test_a_completion_writes_an_ack_that_was_answered_but_lost(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """The node that answered the ack lost it before writing it (it went down; here the
    queued ack is taken away): the worker's completion on its next stream, under the
    current token, writes the ack with it. Another worker's completion still is not."""
    first, a = await pushed(engine, tenant)
    write = FencedWrite(key=a.key, token=a.fencing_token)
    assert await first.ack([write]) == [Outcome.OK]
    assert isinstance(engine, _Engine)
    assert engine._completer.acks.take(a.key.id, a.fencing_token) is not None  # lost
    await first.close()
    assert (await engine.store.get_task(tenant, a.key.id)).status is S.DISPATCHED
    intruder = await engine.open_session(hello(tenant, worker_id="intruder", slots=0))
    done = Completion(key=a.key, token=a.fencing_token)
    assert await intruder.complete([done]) == [Outcome.STALE]
    await intruder.close()
    second = await engine.open_session(hello(tenant, slots=0))
    assert await second.complete([done]) == [Outcome.OK]
    assert (await engine.store.get_task(tenant, a.key.id)).status is S.COMPLETED
    steps = [(t.from_state, t.to_state) for t in await engine.store.transitions_of(a.key.id)]
    assert steps[-2:] == [(S.DISPATCHED, S.RUNNING), (S.RUNNING, S.COMPLETED)]
    await second.close()

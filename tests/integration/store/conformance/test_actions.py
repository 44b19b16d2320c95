"""The operator-action protocol (``protocol/actions.py``): cancel, redrive, transition."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from scheduler._errors import (
    InvalidTransition,
    NotFound,
)
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Failure,
    TaskKey,
    Tenant,
)
from tests.support.stores import (
    NOW,
    force_status,
    new_task,
    running,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


async def test_cancel(store: Store, tenant: Tenant) -> None:
    [r] = await store.insert_tasks([new_task(tenant)], NOW)
    c = await store.cancel(tenant.id, r.task.id, NOW)
    assert (c.task.status, c.notify_worker) == (S.CANCELLED, None)
    with pytest.raises(InvalidTransition):
        await store.cancel(tenant.id, r.task.id, NOW)
    key, _ = await running(store, tenant)
    with pytest.raises(NotFound):
        await store.cancel(uuid.uuid4(), key.id, NOW)
    c2 = await store.cancel(tenant.id, key.id, NOW)
    assert (c2.task.status, c2.task.cancel_requested, c2.notify_worker) == (S.RUNNING, True, "w1")
    again = await store.cancel(None, key.id, NOW)  # requested already: the same answer
    assert (again.task.cancel_requested, again.notify_worker) == (True, "w1")


async def test_redrive_brings_a_dead_letter_back_scheduled(store: Store, tenant: Tenant) -> None:
    key, token = await running(store, tenant, max_retries=0)
    [f] = await store.fail([Failure(key=key, token=token, error="x")], NOW)
    assert f.new_state is S.DEAD_LETTER
    with pytest.raises(NotFound):
        await store.redrive(uuid.uuid4(), key.id, NOW, NOW)
    due = NOW + timedelta(minutes=5)
    red = await store.redrive(tenant.id, key.id, NOW, due)
    assert (red.status, red.retry_count, red.due_at) == (S.SCHEDULED, 0, due)
    last = (await store.transitions_of(key.id))[-1]
    assert (last.from_state, last.to_state) == (S.DEAD_LETTER, S.SCHEDULED)
    with pytest.raises(InvalidTransition):
        await store.redrive(tenant.id, key.id, NOW, NOW)


ALL_PAIRS = [(f, t) for f in S for t in S]


async def test_state_machine_every_pair(store: Store, tenant: Tenant) -> None:
    """Legal moves succeed; illegal ones raise InvalidTransition and change nothing."""
    tasks = [new_task(tenant) for _ in ALL_PAIRS]
    await store.insert_tasks(tasks, NOW)
    later = NOW + timedelta(seconds=1)
    for task, (f, t) in zip(tasks, ALL_PAIRS, strict=True):
        key = TaskKey(task.id, task.scheduled_at)
        await force_status(store, key, f)
        before = await store.get_task(None, task.id)
        if (f, t) in __import__("scheduler.states").states.TRANSITIONS:
            moved = await store.transition(key, t, later)
            assert moved.status is t, (f, t)
            assert (await store.transitions_of(task.id))[-1].to_state is t
        else:
            with pytest.raises(InvalidTransition):
                await store.transition(key, t, later)
            assert await store.get_task(None, task.id) == before, (f, t)
            assert await store.transitions_of(task.id) == []


async def test_sql_guards_alone_refuse_illegal_moves(store: Store, tenant: Tenant) -> None:
    """The SQL guard (generated from the state machine) without the check in code."""
    from scheduler.states import is_legal

    tasks = [new_task(tenant) for _ in ALL_PAIRS]
    await store.insert_tasks(tasks, NOW)
    for task, (f, t) in zip(tasks, ALL_PAIRS, strict=True):
        key = TaskKey(task.id, task.scheduled_at)
        await force_status(store, key, f)
        ok = await store._guarded_set_status_unchecked(key, t, NOW)  # type: ignore[attr-defined]
        assert ok == is_legal(f, t), (f, t)
        assert (await store.get_task(None, task.id)).status is (t if ok else f)

"""The work-notice protocol (``protocol/notices.py``): ``listen_work``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scheduler.ids import uuid7
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.store.postgres import PostgresStore
from scheduler.types import (
    Debounce,
    FlowOptions,
    NewTask,
    Tenant,
)
from tests.support.stores import (
    NOW,
    new_task,
)
from tests.support.waiting import eventually

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


async def test_listen_work_hears_an_insert_or_has_no_channel(store: Store, tenant: Tenant) -> None:
    heard: list[tuple[frozenset[int], bool]] = []
    notices = await store.listen_work(lambda shards, reconcile: heard.append((shards, reconcile)))
    if not isinstance(store, PostgresStore):
        assert notices is None  # SQLite: one process owns every shard, no channel
        return
    assert notices is not None
    try:
        await store.insert_tasks([new_task(tenant, shard_id=7)], NOW)
        await eventually(lambda: _heard(heard), what="a work notice")
        assert heard[0] == (frozenset({7}), False)
    finally:
        await notices.close()
    await notices.wait_closed()


async def _heard(heard: list[object]) -> bool:
    return bool(heard)


async def test_a_debounced_push_of_a_preloaded_task_is_heard_as_a_move(
    store: Store, tenant: Tenant
) -> None:
    moves: list[tuple[int, uuid.UUID, int]] = []
    notices = await store.listen_work(
        lambda shards, reconcile: None, lambda shard, task, due: moves.append((shard, task, due))
    )
    if not isinstance(store, PostgresStore):
        assert notices is None
        return
    assert notices is not None

    def burst(at: datetime) -> NewTask:
        task_id = uuid7()
        return new_task(
            tenant,
            at,
            id=task_id,
            idempotency_key=str(task_id),
            shard_id=5,
            due_at=at + timedelta(seconds=1),
            initial_state=TaskState.PRELOADED,
            flow=FlowOptions(debounce=Debounce(key="moved", period_s=1)),
        )

    try:
        [first] = await store.insert_tasks([burst(NOW)], NOW)
        later = NOW + timedelta(seconds=0.5)
        [pushed] = await store.insert_tasks([burst(later)], later)
        assert pushed.debounced
        await eventually(lambda: _heard(moves), what="a move notice")
        due_us = (later + timedelta(seconds=1) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
            microseconds=1
        )
        assert moves == [(5, first.task.id, due_us)]
    finally:
        await notices.close()

"""The work-notice protocol (``protocol/notices.py``): ``listen_work``."""

from __future__ import annotations

from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.store.postgres import PostgresStore
from scheduler.types import (
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


async def _heard(heard: list[tuple[frozenset[int], bool]]) -> bool:
    return bool(heard)

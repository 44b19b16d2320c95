"""The :class:`Store` protocol's own method (``protocol/store.py``): ``close``."""

from __future__ import annotations

from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from tests.support.stores import (
    NOW,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


async def test_close_twice(store: Store) -> None:
    await store.close()
    await store.close()

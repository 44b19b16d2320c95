"""The partition protocol (``protocol/partitions.py``): ``maintain``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler._errors import (
    InvalidArgument,
)
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.store.postgres import PostgresStore
from tests.support.stores import (
    NOW,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


async def test_maintain_keeps_partitions_ahead_or_has_nothing_to_do(store: Store) -> None:
    now = datetime.now(UTC)
    first = await store.maintain(now)
    again = await store.maintain(now)
    assert again.created == ()  # the days ahead exist already
    assert again.detached == ()
    if isinstance(store, PostgresStore):
        made = await store.partitions()
        assert f"tasks_p{now:%Y%m%d}" in made
        assert set(first.created) <= set(made)
    else:
        assert first.created == ()
        assert first.detached == ()
    with pytest.raises(InvalidArgument):
        await store.maintain(datetime(2026, 1, 1))  # naive

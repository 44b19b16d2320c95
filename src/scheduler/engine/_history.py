"""What the audit says: a task's full history and the recent activity of a tenant.

Owns :class:`History` (no state): ``full_history`` (transitions and refused writes of
one task, NotFound for another tenant's), ``activity`` (GetActivity's buckets: the
window rounded up to whole buckets, the last ending now) and ``expectation_facts`` (the
watchdog's facts behind ListExpectations' status). Calls the store only; reached as
``Engine.history``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from scheduler._errors import InvalidArgument
from scheduler.store import Store
from scheduler.store._facts import JobFacts
from scheduler.types import ActivityBucket, RefusedWrite, Transition


class History:
    """Reads of the audit and the watchdog facts."""

    def __init__(self, store: Store, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now

    async def full_history(
        self, tenant_id: uuid.UUID, task_id: uuid.UUID
    ) -> tuple[list[Transition], list[RefusedWrite]]:
        """A task's state changes and the worker writes refused on it, oldest first
        (NotFound for another tenant's task)."""
        task = await self._store.get_task(tenant_id, task_id)
        transitions = await self._store.transitions_of(task_id)
        return transitions, await self._store.refused_writes_of(task.key)

    async def activity(
        self, tenant_id: uuid.UUID | None, window_s: int, bucket_s: int
    ) -> list[ActivityBucket]:
        """Throughput and lateness over the last ``window_s`` in buckets of
        ``bucket_s`` (rounded up to whole buckets; the last ends now) for a tenant
        (None: every tenant)."""
        if not 1 <= bucket_s <= window_s:
            raise InvalidArgument("bucket_s", "must be 1..window_s")
        end = self._now()
        n = -(-window_s // bucket_s)
        start = end - timedelta(seconds=n * bucket_s)
        return await self._store.activity(tenant_id, start, end, bucket_s)

    async def expectation_facts(self, tenant_id: uuid.UUID | None) -> list[JobFacts]:
        """What the watchdog reads about a tenant's expectations (None: all)."""
        return await self._store.expectation_facts(tenant_id)

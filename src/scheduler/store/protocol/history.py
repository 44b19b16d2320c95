"""The history protocol: a task's audit trail and refused writes, and recent activity.

Owns :class:`HistoryStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.history`` and
``scheduler.store.sqlite.history``; called by the engine's history (GetTaskHistory,
GetActivity) and its completer (refused writes).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.types import (
    ActivityBucket,
    RefusedWrite,
    TaskKey,
    Transition,
)


class HistoryStore(Protocol):
    """A task's history and recent activity, from the audit."""

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task, oldest first."""
        ...

    async def record_refused(self, writes: Sequence[RefusedWrite]) -> None:
        """Record worker writes that were refused (stale token, another session's
        task): called only on a refusal. The store adds the task's tenant and current
        token; a task that no longer exists gets no row."""
        ...

    async def refused_writes_of(self, key: TaskKey) -> list[RefusedWrite]:
        """A task's refused writes, oldest first (the last 1,000)."""
        ...

    async def activity(
        self, tenant_id: uuid.UUID | None, start: datetime, end: datetime, bucket_s: int
    ) -> list[ActivityBucket]:
        """From the audit: per bucket of ``bucket_s`` from ``start`` (every bucket up to
        ``end``, empty ones included), dispatches, completions, failed attempts and
        dispatch lateness p50/p99 of a tenant (None: every tenant)."""
        ...

"""The task protocol: submission and the reads of tasks (one task, a page, counts, the
forecast).

Owns :class:`TaskStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.tasks`` and
``scheduler.store.sqlite.tasks``; called by the engine's admission and history, the
server's reads. The conventions every task protocol keeps (batches, keys, time as an
argument, fencing) are in :mod:`scheduler.store.protocol`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.types import (
    Forecast,
    InsertResult,
    NewTask,
    OverdueGroup,
    Page,
    Pool,
    TaskCounts,
    TaskFilter,
    TaskRecord,
)


class TaskStore(Protocol):
    """Tasks: submission and the reads of tasks."""

    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many; a result per item, in order. Idempotent per (tenant, key)."""
        ...

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id (scheduled_at found through the id index); NotFound for other tenants."""
        ...

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """A page of the tenant's tasks matching ``flt``, keyset-paginated in its order.
        With ``flt.idempotency_key``: the one task with that key (through the key
        index), when it passes the rest of the filter."""
        ...

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        """The tasks matching ``flt`` (its order and idempotency key ignored), grouped by
        state, type and pool, and by tenant when ``tenant_id`` is None (every tenant):
        at most MAX_COUNT_GROUPS groups, the total exact over all of them."""
        ...

    async def forecast(
        self,
        tenant_id: uuid.UUID | None,
        start: datetime,
        bucket_s: int,
        buckets: int,
        pools: Sequence[Pool],
    ) -> Forecast:
        """SCHEDULED, PRELOADED and RETRYING tasks (of ``tenant_id``, None: every
        tenant; of ``pools``, empty: any) per bucket ``i`` of ``[start + i * bucket_s,
        start + (i + 1) * bucket_s)``: by ``due_at`` (firing, jitter applied) and by
        ``scheduled_at`` (nominal); and per pool those with ``due_at`` before ``start``
        (overdue). ``bucket_s`` 1 or 60, ``buckets`` 1-3600 (InvalidArgument else)."""
        ...

    async def overdue(self, tenant_id: uuid.UUID | None, now: datetime) -> list[OverdueGroup]:
        """SCHEDULED, PRELOADED and RETRYING tasks (of ``tenant_id``, None: every
        tenant) with ``due_at`` before ``now`` (the forecast's overdue ones), grouped by
        tenant, type and pool: at most MAX_OVERDUE_GROUPS groups, the oldest first."""
        ...

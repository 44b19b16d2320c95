"""The :class:`Store` protocol: the composition of one protocol per concern.

Owns :class:`Store` only: the lifecycle (``close``) and upkeep (``maintain``) methods and
the inheritance of :class:`~scheduler.store.protocol.tasks.TaskStore`,
:class:`~scheduler.store.protocol.tenants.TenantStore`,
:class:`~scheduler.store.protocol.shards.ShardStore`,
:class:`~scheduler.store.protocol.workflows.WorkflowStore`,
:class:`~scheduler.store.protocol.schedules.ScheduleStore`,
:class:`~scheduler.store.protocol.notices.NoticeStore` and
:class:`~scheduler.store.protocol.metrics.MetricsStore`. Imports those modules and the
value types; ``PostgresStore`` and ``SqliteStore`` satisfy it; the engine, the server and
the CLI hold a ``Store``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from scheduler.store.protocol.metrics import MetricsStore
from scheduler.store.protocol.notices import NoticeStore
from scheduler.store.protocol.schedules import ScheduleStore
from scheduler.store.protocol.shards import ShardStore
from scheduler.store.protocol.tasks import TaskStore
from scheduler.store.protocol.tenants import TenantStore
from scheduler.store.protocol.workflows import WorkflowStore
from scheduler.types import MaintenanceResult


class Store(
    TaskStore,
    TenantStore,
    ShardStore,
    WorkflowStore,
    ScheduleStore,
    NoticeStore,
    MetricsStore,
    Protocol,
):
    """The durable record. Every method is a coroutine and safe to call concurrently.

    Two implementations satisfy it (PostgreSQL for production, SQLite for the embedded
    default) and one conformance suite runs against both.
    """

    async def close(self) -> None:
        """Release connections; safe to call twice."""
        ...

    def on_fence(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(generation)`` when the store finds the fencing generation
        raised under it (its PostgreSQL promoted by Patroni or ``dr promote``): shard
        epochs claimed before are refused from then on (never on SQLite)."""
        ...

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Create partitions ahead, detach expired ones (PostgreSQL); no-op for SQLite."""
        ...

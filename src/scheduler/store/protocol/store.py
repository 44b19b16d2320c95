"""The :class:`Store` protocol: the composition of one protocol per concern.

Owns :class:`Store` only: the lifecycle methods (``close``, ``on_fence``) and the
inheritance of one protocol per concern: :class:`~.tasks.TaskStore`,
:class:`~.dispatch.DispatchStore`, :class:`~.writes.WriteStore`,
:class:`~.actions.ActionStore`, :class:`~.history.HistoryStore`,
:class:`~.tenants.TenantStore`, :class:`~.shards.ShardStore`,
:class:`~.workflows.WorkflowStore`, :class:`~.schedules.ScheduleStore`,
:class:`~.notices.NoticeStore`, :class:`~.metrics.MetricsStore`,
:class:`~.partitions.PartitionStore`, :class:`~.concurrency.ConcurrencyStore` and
:class:`~.flow.FlowStore`. Each backend has one part per protocol file, of the same name
(``postgres/tasks.py`` implements ``protocol/tasks.py``), and its ``PostgresStore`` /
``SqliteStore`` inherits them all. Imports those modules; the engine, the server and the
CLI hold a ``Store``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from scheduler.store.protocol.actions import ActionStore
from scheduler.store.protocol.concurrency import ConcurrencyStore
from scheduler.store.protocol.dispatch import DispatchStore
from scheduler.store.protocol.flow import FlowStore
from scheduler.store.protocol.history import HistoryStore
from scheduler.store.protocol.metrics import MetricsStore
from scheduler.store.protocol.notices import NoticeStore
from scheduler.store.protocol.partitions import PartitionStore
from scheduler.store.protocol.schedules import ScheduleStore
from scheduler.store.protocol.shards import ShardStore
from scheduler.store.protocol.tasks import TaskStore
from scheduler.store.protocol.tenants import TenantStore
from scheduler.store.protocol.workflows import WorkflowStore
from scheduler.store.protocol.writes import WriteStore


class Store(
    TaskStore,
    DispatchStore,
    WriteStore,
    ActionStore,
    HistoryStore,
    TenantStore,
    ShardStore,
    WorkflowStore,
    ScheduleStore,
    NoticeStore,
    MetricsStore,
    PartitionStore,
    ConcurrencyStore,
    FlowStore,
    Protocol,
):
    """The durable record. Every method is a coroutine and safe to call concurrently.

    Two implementations satisfy it (PostgreSQL for production, SQLite for the embedded
    default) and one conformance suite, a file per protocol, runs against both.
    """

    async def close(self) -> None:
        """Release connections; safe to call twice."""
        ...

    def on_fence(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(generation)`` when the store finds the fencing generation
        raised under it (its PostgreSQL promoted by Patroni or ``dr promote``): shard
        epochs claimed before are refused from then on (never on SQLite)."""
        ...

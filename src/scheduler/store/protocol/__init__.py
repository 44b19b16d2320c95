"""What the engine needs from the durable record: one Protocol per concern.

Re-exports only. :class:`Store` (``store.py``) composes :class:`TaskStore` (``tasks.py``:
submission and reads), :class:`DispatchStore` (``dispatch.py``: pre-load, dispatch,
lease expiry), :class:`WriteStore` (``writes.py``: fenced worker writes),
:class:`ActionStore` (``actions.py``: cancel, redrive, transition),
:class:`HistoryStore` (``history.py``: audit trail, refused writes, activity),
:class:`TenantStore` (``tenants.py``), :class:`ShardStore` (``shards.py``),
:class:`WorkflowStore` (``workflows.py``), :class:`ScheduleStore` (``schedules.py``:
schedules, expectations, canaries), :class:`NoticeStore` (``notices.py``),
:class:`MetricsStore` (``metrics.py``: queue depth, replication lag) and
:class:`PartitionStore` (``partitions.py``: ``maintain``). These modules import only
value types; each backend implements each of them in a part of the same file name, and
``scheduler.store`` re-exports ``Store``, ``WorkCallback`` and ``WorkNotices``.

Conventions of the task protocols (tasks, dispatch, writes, actions, history):
- Every hot-path call is batched: it takes a sequence and makes one statement (or a
  handful) for the whole batch, never a round trip per task.
- Tasks are addressed by ``TaskKey`` = (id, scheduled_at); ``scheduled_at`` is the
  partition key, so every statement names it and PostgreSQL prunes to one partition.
- Time comes in as an argument (``now``), never from the database clock, so tests and
  the engine move time without sleeping.
- Worker writes (ack, heartbeat, checkpoint, complete, fail, release) carry the fencing
  token and succeed only when it is current and the status is legal. Batched calls
  return an ``Outcome`` per item instead of raising, so one zombie does not fail the
  batch.
"""

from __future__ import annotations

from scheduler.store.protocol.actions import ActionStore
from scheduler.store.protocol.concurrency import ConcurrencyStore
from scheduler.store.protocol.dispatch import DispatchStore
from scheduler.store.protocol.flow import FlowStore
from scheduler.store.protocol.history import HistoryStore
from scheduler.store.protocol.metrics import HORIZONS, DepthRow, MetricsStore, ReplicationLag
from scheduler.store.protocol.notices import MoveCallback, NoticeStore, WorkCallback, WorkNotices
from scheduler.store.protocol.partitions import PartitionStore
from scheduler.store.protocol.schedules import ScheduleStore
from scheduler.store.protocol.shards import ShardStore
from scheduler.store.protocol.store import Store
from scheduler.store.protocol.tasks import TaskStore
from scheduler.store.protocol.tenants import TenantStore
from scheduler.store.protocol.workflows import WorkflowStore
from scheduler.store.protocol.writes import WriteStore

PROTOCOLS: tuple[type, ...] = (
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
)
"""Every protocol :class:`Store` composes, in its order (tests walk them)."""

__all__ = [
    "HORIZONS",
    "PROTOCOLS",
    "ActionStore",
    "ConcurrencyStore",
    "DepthRow",
    "DispatchStore",
    "FlowStore",
    "HistoryStore",
    "MetricsStore",
    "MoveCallback",
    "NoticeStore",
    "PartitionStore",
    "ReplicationLag",
    "ScheduleStore",
    "ShardStore",
    "Store",
    "TaskStore",
    "TenantStore",
    "WorkCallback",
    "WorkNotices",
    "WorkflowStore",
    "WriteStore",
]

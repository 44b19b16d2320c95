"""What the engine needs from the durable record: one Protocol per concern.

Re-exports only. :class:`Store` (``store.py``) composes :class:`TaskStore` (``tasks.py``),
:class:`TenantStore` (``tenants.py``), :class:`ShardStore` (``shards.py``),
:class:`WorkflowStore` (``workflows.py``), :class:`ScheduleStore` (``schedules.py``:
schedules, expectations, canaries), :class:`NoticeStore` (``notices.py``) and
:class:`MetricsStore` (``metrics.py``: queue depth, replication lag). These
modules import only value types; the backends implement them and ``scheduler.store``
re-exports ``Store``, ``WorkCallback`` and ``WorkNotices``.
"""

from __future__ import annotations

from scheduler.store.protocol.metrics import HORIZONS, DepthRow, MetricsStore, ReplicationLag
from scheduler.store.protocol.notices import NoticeStore, WorkCallback, WorkNotices
from scheduler.store.protocol.schedules import ScheduleStore
from scheduler.store.protocol.shards import ShardStore
from scheduler.store.protocol.store import Store
from scheduler.store.protocol.tasks import TaskStore
from scheduler.store.protocol.tenants import TenantStore
from scheduler.store.protocol.workflows import WorkflowStore

__all__ = [
    "HORIZONS",
    "DepthRow",
    "MetricsStore",
    "NoticeStore",
    "ReplicationLag",
    "ScheduleStore",
    "ShardStore",
    "Store",
    "TaskStore",
    "TenantStore",
    "WorkCallback",
    "WorkNotices",
    "WorkflowStore",
]

"""The client's view of connected workers: ``ListWorkers`` (what the dashboard's
workers table shows), for scripts and ``tickwheel workers``."""

from __future__ import annotations

import builtins
import dataclasses
from datetime import datetime
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client._base import _Base
from scheduler.types import Pool
from scheduler.wire import POOL_FROM_PROTO


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerInfo:
    """One worker stream connected to the node that answered.

    ``slots_used`` counts the tasks the node holds for it (pushed, running, or finished
    with the outcome not yet written); ``waiting`` the due tasks on that node it could
    take, ``paused`` those a dispatch pause holds. Empty ``task_types`` or ``pools``:
    any."""

    worker_id: str
    tenant_id: str
    task_types: tuple[str, ...]
    pools: tuple[Pool, ...]
    slots: int
    slots_used: int
    slots_free: int
    start_on_delivery: bool
    connected_at: datetime
    last_seen: datetime
    node_id: str
    waiting: int
    paused: int


def _worker(m: pb.WorkerInfo) -> WorkerInfo:
    return WorkerInfo(
        worker_id=m.worker_id,
        tenant_id=m.tenant_id,
        task_types=tuple(m.task_types),
        pools=tuple(POOL_FROM_PROTO[p] for p in m.pools if p in POOL_FROM_PROTO),
        slots=m.slots,
        slots_used=m.slots_used,
        slots_free=m.slots_free,
        start_on_delivery=m.start_on_delivery,
        connected_at=m.connected_at.ToDatetime().astimezone(),
        last_seen=m.last_seen.ToDatetime().astimezone(),
        node_id=m.node_id,
        waiting=m.waiting,
        paused=m.paused,
    )


class WorkerCalls(_Base):
    """SchedulerService's ListWorkers."""

    _sched: Any

    async def list_workers(self) -> builtins.list[WorkerInfo]:
        """The worker streams connected to the node this client reached (each node
        knows its own: in a cluster, ask each node), by worker id; an API key sees its
        tenant's workers only."""
        resp = await self._rpc(self._sched.ListWorkers, pb.ListWorkersRequest())
        return [_worker(m) for m in resp.workers]

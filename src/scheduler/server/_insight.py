"""SchedulerService RPCs that watch the scheduler run (issue 18): CountTasks,
GetForecast, ListWorkers.

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`, like ``_history.py``.
An API key answers for its own tenant (scope ``read``); the platform admin token answers
for the tenant named in ``x-tenant-id``, or for every tenant without it
(:meth:`~scheduler.server._auth.Gatekeeper.reader_scope`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import grpc

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.engine._ready import POOL_ORDER
from scheduler.engine._sessions import WorkerSession
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper
from scheduler.server._status import unary
from scheduler.types import Forecast, Pool, Scope, TaskCount

Context = grpc.aio.ServicerContext[Any, Any]

BUCKET_WIDTHS = (1, 60)
"""The bucket widths a forecast accepts, in seconds."""
DEFAULT_BUCKET_S = 60
MAX_BUCKETS = 3600
DEFAULT_BUCKETS = 60


def count_to_proto(c: TaskCount) -> pb.TaskCount:
    """One group of a count on the wire (``tenant_id`` only for an every-tenant count)."""
    return pb.TaskCount(
        tenant_id=str(c.tenant_id) if c.tenant_id is not None else "",
        state=conv.state_to_proto(c.state),
        type=c.type,
        pool=conv.pool_to_proto(c.pool),
        count=c.count,
    )


def forecast_to_proto(
    found: Forecast, start: datetime, bucket_s: int, buckets: int, pools: tuple[Pool, ...]
) -> pb.GetForecastResponse:
    """Every (bucket, pool) pair, zeros included, buckets in time order."""
    out = pb.GetForecastResponse(bucket_s=bucket_s)
    out.start.CopyFrom(conv.from_datetime(start))
    base = out.start.seconds
    nanos = out.start.nanos
    proto_pools = [conv.pool_to_proto(p) for p in pools]
    add = out.buckets.add
    for i in range(buckets):
        seconds = base + i * bucket_s
        for pool, wire_pool in zip(pools, proto_pools, strict=True):
            b = add(
                pool=wire_pool,
                nominal=found.nominal.get((i, pool), 0),
                firing=found.firing.get((i, pool), 0),
            )
            b.start.seconds = seconds
            b.start.nanos = nanos
    for pool, wire_pool in zip(pools, proto_pools, strict=True):
        o = out.overdue.add(pool=wire_pool, firing=found.overdue.get(pool, 0))
        o.start.CopyFrom(out.start)
    return out


def worker_to_proto(
    s: WorkerSession, node_id: str, backlog: tuple[int, int] = (0, 0)
) -> pb.WorkerInfo:
    """One worker stream on the wire; ``backlog``: the tasks waiting here it could take
    (not paused, paused)."""
    used = s.held
    out = pb.WorkerInfo(
        worker_id=s.worker_id,
        tenant_id=str(s.tenant_id),
        task_types=sorted(s.task_types or ()),
        pools=[conv.pool_to_proto(p) for p in POOL_ORDER if p in s.pools],
        slots=max(0, s.slots),
        slots_used=used,
        slots_free=max(0, s.credits),
        start_on_delivery=s.start_on_delivery,
        node_id=node_id,
        waiting=backlog[0],
        paused=backlog[1],
    )
    out.connected_at.CopyFrom(conv.from_datetime(s.connected_at))
    out.last_seen.CopyFrom(conv.from_datetime(s.last_seen))
    return out


class InsightRpcs:
    """CountTasks, GetForecast and ListWorkers."""

    _engine: Engine
    _gate: Gatekeeper

    @unary
    async def CountTasks(
        self, request: pb.CountTasksRequest, context: Context
    ) -> pb.CountTasksResponse:
        """The caller's tasks matching a filter (the admin token: every tenant's, or
        ``x-tenant-id``'s), grouped by state, type and pool; from the engine's count
        cache (``as_of`` says when the count was taken)."""
        tenant = await self._gate.reader_scope(context, Scope.READ)
        flt = conv.task_filter_from_proto(request.filter, "filter.")
        counted = await self._engine.watch.count_tasks(tenant, flt)
        found = counted.counts
        out = pb.CountTasksResponse(
            counts=[count_to_proto(c) for c in found.groups],
            total=found.total,
            truncated=found.truncated,
        )
        out.as_of.CopyFrom(conv.from_datetime(counted.as_of))
        return out

    @unary
    async def GetForecast(
        self, request: pb.GetForecastRequest, context: Context
    ) -> pb.GetForecastResponse:
        """How many tasks fire in each bucket of the window, per pool, firing (jitter
        applied) and nominal, and how many are overdue."""
        tenant = await self._gate.reader_scope(context, Scope.READ)
        bucket_s = request.bucket_s or DEFAULT_BUCKET_S
        if bucket_s not in BUCKET_WIDTHS:
            raise InvalidArgument("bucket_s", "must be 1 or 60 (0 means 60)")
        buckets = request.buckets or DEFAULT_BUCKETS
        if buckets > MAX_BUCKETS:
            raise InvalidArgument("buckets", f"must be 1-{MAX_BUCKETS} (0 means {DEFAULT_BUCKETS})")
        pools = tuple(
            dict.fromkeys(conv.filter_pool(p, f"pools[{i}]") for i, p in enumerate(request.pools))
        )
        start = (
            conv.to_datetime(request.start, "start")
            if request.HasField("start")
            else self._engine.now()
        )
        shown = tuple(p for p in POOL_ORDER if not pools or p in pools)
        found = await self._engine.watch.forecast(tenant, start, bucket_s, buckets, pools)
        answer = forecast_to_proto(found, start, bucket_s, buckets, shown)
        held = self._engine.flow.held_for(tenant, shown)
        answer.held_rate_limited = held["rate_limited"]
        answer.held_paused = held["paused"]
        return answer

    @unary
    async def ListWorkers(
        self, request: pb.ListWorkersRequest, context: Context
    ) -> pb.ListWorkersResponse:
        """The worker streams connected to this node (a key: its tenant's only), and
        the overdue tasks none of this node's streams takes."""
        tenant = await self._gate.reader_scope(context, Scope.READ)
        node = self._engine.node_id
        out = pb.ListWorkersResponse(
            workers=[
                worker_to_proto(s, node, self._engine.backlog.figures(s))
                for s in self._engine.watch.workers(tenant)
            ],
            node_id=node,
        )
        for g in await self._engine.watch.unserved(tenant):
            u = out.unserved.add(
                tenant_id=str(g.tenant_id),
                type=g.type,
                pool=conv.pool_to_proto(g.pool),
                count=g.count,
            )
            u.oldest_due_at.CopyFrom(conv.from_datetime(g.oldest_due_at))
        return out

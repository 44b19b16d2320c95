"""SchedulerService's audit RPCs, over the engine's audit door ``engine.history``:
GetTaskHistory (a task's transitions and refused writes) and GetActivity (the
audit's throughput and lateness per bucket).

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`. Scoped to the
caller's tenant: another tenant's task answers NOT_FOUND exactly as one that does not
exist.
"""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._status import unary
from scheduler.types import ActivityBucket, RefusedWrite, Scope, Transition

Context = grpc.aio.ServicerContext[Any, Any]


def transition_to_proto(t: Transition) -> pb.TaskTransition:
    """One audit row on the wire (an unrecorded epoch is 0)."""
    out = pb.TaskTransition(
        from_state=conv.state_to_proto(t.from_state),
        to_state=conv.state_to_proto(t.to_state),
        fencing_token=max(0, t.fencing_token),
        shard_epoch=max(0, t.epoch or 0),
        actor=t.actor,
        reason=t.reason,
    )
    out.at.CopyFrom(conv.from_datetime(t.at))
    if t.due_at is not None:
        out.due_at.CopyFrom(conv.from_datetime(t.due_at))
    return out


def refused_to_proto(r: RefusedWrite) -> pb.RefusedWrite:
    """One refused worker write on the wire."""
    out = pb.RefusedWrite(
        fencing_token=max(0, r.token),
        current_token=max(0, r.current_token),
        actor=r.actor,
        write=r.write,
        reason=r.reason,
    )
    out.at.CopyFrom(conv.from_datetime(r.at))
    return out


def activity_to_proto(b: ActivityBucket) -> pb.ActivityBucket:
    """One GetActivity bucket on the wire."""
    out = pb.ActivityBucket(
        dispatched=b.dispatched,
        completed=b.completed,
        failed=b.failed,
        lateness_p50_s=b.lateness_p50_s,
        lateness_p99_s=b.lateness_p99_s,
    )
    out.start.CopyFrom(conv.from_datetime(b.start))
    return out


DEFAULT_WINDOW_S = 900
"""GetActivity without a window: the last 15 minutes."""
MAX_WINDOW_S = 86_400
DEFAULT_BUCKET_S = 60
MAX_BUCKET_S = 3_600


def activity_args(request: pb.GetActivityRequest) -> tuple[int, int]:
    """(window_s, bucket_s) of a GetActivity request, defaults applied and checked."""
    window = request.window_s or DEFAULT_WINDOW_S
    if not 60 <= window <= MAX_WINDOW_S:
        raise InvalidArgument("window_s", f"must be 60..{MAX_WINDOW_S} (0: {DEFAULT_WINDOW_S})")
    bucket = request.bucket_s or DEFAULT_BUCKET_S
    if not 1 <= bucket <= min(MAX_BUCKET_S, window):
        raise InvalidArgument(
            "bucket_s", f"must be 1..{MAX_BUCKET_S} and at most window_s (0: {DEFAULT_BUCKET_S})"
        )
    if -(-window // bucket) > MAX_BUCKETS:
        raise InvalidArgument("bucket_s", f"too small: at most {MAX_BUCKETS} buckets per window")
    return window, bucket


MAX_BUCKETS = 3_600
"""At most this many buckets in one answer (1 s buckets over an hour)."""


class HistoryRpcs:
    """GetTaskHistory and GetActivity over ``engine.history``."""

    _engine: Engine
    _gate: Gatekeeper

    @unary
    async def GetTaskHistory(
        self, request: pb.GetTaskHistoryRequest, context: Context
    ) -> pb.GetTaskHistoryResponse:
        """Every state change of one of the caller's tasks, oldest first."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        task_id = conv.parse_uuid(request.task_id, "task_id")
        found, refused = await self._engine.history.full_history(tenant, task_id)
        return pb.GetTaskHistoryResponse(
            transitions=[transition_to_proto(t) for t in found],
            refused_writes=[refused_to_proto(r) for r in refused],
        )

    @unary
    async def GetActivity(
        self, request: pb.GetActivityRequest, context: Context
    ) -> pb.GetActivityResponse:
        """Throughput and dispatch lateness per bucket of the last window (the audit)."""
        # An API key: its tenant; the admin token: the tenant in x-tenant-id, or every
        # tenant (None) without it.
        tenant = await self._gate.reader_scope(context, Scope.READ)
        window, bucket = activity_args(request)
        found = await self._engine.history.activity(tenant, window, bucket)
        return pb.GetActivityResponse(
            buckets=[activity_to_proto(b) for b in found], bucket_s=bucket
        )

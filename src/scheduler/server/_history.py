"""SchedulerService RPCs of issue 19's missing commands: a task's history.

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`, like
``_orchestration.py``. Scoped to the caller's tenant: another tenant's task answers
NOT_FOUND exactly as one that does not exist.
"""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.server import _convert as conv
from scheduler.server._auth import tenant_of
from scheduler.server._status import unary
from scheduler.types import Transition

Context = grpc.aio.ServicerContext[Any, Any]


def transition_to_proto(t: Transition) -> pb.TaskTransition:
    """One audit row on the wire (an unrecorded epoch is 0)."""
    out = pb.TaskTransition(
        from_state=conv.state_to_proto(t.from_state),
        to_state=conv.state_to_proto(t.to_state),
        fencing_token=max(0, t.fencing_token),
        shard_epoch=max(0, t.epoch or 0),
        actor=t.actor,
    )
    out.at.CopyFrom(conv.from_datetime(t.at))
    return out


class HistoryRpcs:
    """GetTaskHistory over ``engine.task_history``."""

    _engine: Engine

    @unary
    async def GetTaskHistory(
        self, request: pb.GetTaskHistoryRequest, context: Context
    ) -> pb.GetTaskHistoryResponse:
        """Every state change of one of the caller's tasks, oldest first."""
        tenant = await tenant_of(self._engine, context)
        task_id = conv.parse_uuid(request.task_id, "task_id")
        found = await self._engine.task_history(tenant, task_id)
        return pb.GetTaskHistoryResponse(transitions=[transition_to_proto(t) for t in found])

"""The scheduling engine: pre-loader, timing-wheel dispatcher, leases, retries.

It imports no gRPC: the transport layer (``scheduler.server``) drives it through
:class:`Engine` and :class:`WorkerSession`.
"""

from scheduler.engine._config import EngineConfig, SlotReserve
from scheduler.engine._engine import Engine
from scheduler.engine._schedules import ExpectationSpec, ScheduleSpec
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._types import (
    AssignmentBatch,
    BacklogNotice,
    CancelNotice,
    FailureReport,
    Outlet,
    SessionEvent,
    SubmitSpec,
    WorkerHello,
)
from scheduler.engine._waiters import MAX_WAIT_S, SETTLED
from scheduler.engine._workflows import WorkflowNode, WorkflowResult, WorkflowSpec

__all__ = [
    "MAX_WAIT_S",
    "SETTLED",
    "AssignmentBatch",
    "BacklogNotice",
    "CancelNotice",
    "Engine",
    "EngineConfig",
    "ExpectationSpec",
    "FailureReport",
    "Outlet",
    "ScheduleSpec",
    "SessionEvent",
    "SlotReserve",
    "SubmitSpec",
    "WorkerHello",
    "WorkerSession",
    "WorkflowNode",
    "WorkflowResult",
    "WorkflowSpec",
]

"""SchedulerService RPCs of issue 19's missing commands: a task's history (with its
refused writes, issue 18), workflows list and cancel, expectations delete; and
GetActivity (issue 18: the audit's throughput and lateness).

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`, like
``_orchestration.py``. Scoped to the caller's tenant: another tenant's task answers
NOT_FOUND exactly as one that does not exist.
"""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.engine._schedules import MAX_JOB_ID_LEN
from scheduler.server import _convert as conv
from scheduler.server import _convert_orchestration as oconv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._status import unary
from scheduler.types import ActivityBucket, RefusedWrite, Scope, Transition

Context = grpc.aio.ServicerContext[Any, Any]

DEFAULT_LIST = 100
"""ListWorkflows without a limit."""


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
    """GetTaskHistory, ListWorkflows, CancelWorkflow and DeleteExpectation."""

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

    @unary
    async def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: Context
    ) -> pb.ListWorkflowsResponse:
        """The caller's workflows, newest first."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        found = await self._engine.list_workflows(tenant, request.limit or DEFAULT_LIST)
        return pb.ListWorkflowsResponse(workflows=[oconv.workflow_to_proto(w) for w in found])

    @unary
    async def CancelWorkflow(
        self, request: pb.CancelWorkflowRequest, context: Context
    ) -> pb.CancelWorkflowResponse:
        """Cancel every unfinished node of one of the caller's workflows."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        workflow_id = conv.parse_uuid(request.workflow_id, "workflow_id")
        view, stopped = await self._engine.cancel_workflow(tenant, workflow_id)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.CancelWorkflowResponse(
            workflow=oconv.view_to_proto(view, json_bytes=json_bytes), cancelled=stopped
        )

    @unary
    async def DeleteExpectation(
        self, request: pb.DeleteExpectationRequest, context: Context
    ) -> pb.DeleteExpectationResponse:
        """Delete the caller's expectation for a job id."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        if not request.job_id:
            raise InvalidArgument("job_id", "required")
        if len(request.job_id) > MAX_JOB_ID_LEN:
            raise InvalidArgument("job_id", f"longer than {MAX_JOB_ID_LEN} characters")
        await self._engine.delete_expectation(tenant, request.job_id)
        return pb.DeleteExpectationResponse()

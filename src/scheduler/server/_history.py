"""SchedulerService RPCs of issue 19's missing commands: a task's history, workflows
list and cancel, expectations delete.

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
from scheduler.types import Scope, Transition

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
    )
    out.at.CopyFrom(conv.from_datetime(t.at))
    return out


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
        found = await self._engine.task_history(tenant, task_id)
        return pb.GetTaskHistoryResponse(transitions=[transition_to_proto(t) for t in found])

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
        return pb.CancelWorkflowResponse(workflow=oconv.view_to_proto(view), cancelled=stopped)

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

"""SchedulerService's workflow RPCs: SubmitWorkflow, GetWorkflow, ListWorkflows and
CancelWorkflow, over the engine's workflow door ``engine.workflows``.

A mixin of :class:`~scheduler.server._scheduler.SchedulerService` (one service, one
API key, one tenant). Every call is scoped to the caller's tenant: another tenant's
workflow answers NOT_FOUND exactly as one that does not exist.
"""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.server import _convert as conv
from scheduler.server import _convert_orchestration as oconv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._config import ServerConfig
from scheduler.server._status import unary
from scheduler.types import Scope

Context = grpc.aio.ServicerContext[Any, Any]

DEFAULT_LIST = 100
"""ListWorkflows without a limit."""


class WorkflowRpcs:
    """Workflow handlers over ``engine.workflows``."""

    _engine: Engine
    _config: ServerConfig
    _gate: Gatekeeper

    @unary
    async def SubmitWorkflow(
        self, request: pb.SubmitWorkflowRequest, context: Context
    ) -> pb.SubmitWorkflowResponse:
        """Validate the DAG and insert it in one batch."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        cfg = self._engine.config
        spec = oconv.workflow_spec_from_proto(
            request,
            max_payload_bytes=self._config.max_payload_bytes,
            max_nodes=cfg.max_workflow_nodes,
            max_edges=cfg.max_workflow_edges,
            default_trace=conv.trace_from_metadata(context.invocation_metadata()),
        )
        result = await self._engine.workflows.submit(tenant, spec)
        return pb.SubmitWorkflowResponse(
            workflow=oconv.workflow_to_proto(result.workflow),
            created=result.created,
            nodes=oconv.nodes_to_proto(
                result.tasks,
                [n.node_id for n in spec.nodes],
                json_bytes=conv.wants_json_bytes(context.invocation_metadata()),
            ),
        )

    @unary
    async def GetWorkflow(
        self, request: pb.GetWorkflowRequest, context: Context
    ) -> pb.GetWorkflowResponse:
        """A workflow with every node's task and the edges."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        workflow_id = conv.parse_uuid(request.workflow_id, "workflow_id")
        view = await self._engine.workflows.get(tenant, workflow_id)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return oconv.view_to_proto(view, json_bytes=json_bytes)

    @unary
    async def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: Context
    ) -> pb.ListWorkflowsResponse:
        """The caller's workflows, newest first."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        found = await self._engine.workflows.list(tenant, request.limit or DEFAULT_LIST)
        return pb.ListWorkflowsResponse(workflows=[oconv.workflow_to_proto(w) for w in found])

    @unary
    async def CancelWorkflow(
        self, request: pb.CancelWorkflowRequest, context: Context
    ) -> pb.CancelWorkflowResponse:
        """Cancel every unfinished node of one of the caller's workflows."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        workflow_id = conv.parse_uuid(request.workflow_id, "workflow_id")
        view, stopped = await self._engine.workflows.cancel(tenant, workflow_id)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.CancelWorkflowResponse(
            workflow=oconv.view_to_proto(view, json_bytes=json_bytes), cancelled=stopped
        )

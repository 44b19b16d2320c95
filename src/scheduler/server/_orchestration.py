"""SchedulerService RPCs for DAG workflows, schedules and expectations (issue 8).

A mixin of :class:`~scheduler.server._scheduler.SchedulerService` (one service, one
API key, one tenant), kept apart so the task RPCs stay readable. Every call is scoped
to the caller's tenant: another tenant's workflow, schedule or expectation answers
NOT_FOUND exactly as one that does not exist.
"""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.server import _convert as conv
from scheduler.server import _convert_orchestration as oconv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._config import ServerConfig
from scheduler.server._status import unary
from scheduler.types import Scope

Context = grpc.aio.ServicerContext[Any, Any]


class OrchestrationRpcs:
    """Workflow, schedule and expectation handlers over ``engine.workflows`` and
    ``engine.schedules``."""

    _engine: Engine
    _config: ServerConfig
    _gate: Gatekeeper

    # -- workflows ---------------------------------------------------------------------
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

    # -- schedules ---------------------------------------------------------------------
    @unary
    async def CreateSchedule(
        self, request: pb.CreateScheduleRequest, context: Context
    ) -> pb.CreateScheduleResponse:
        """Create a cron or interval schedule."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        if not request.HasField("schedule"):
            raise InvalidArgument("schedule", "required")
        spec = oconv.schedule_spec_from_proto(
            request.schedule, "schedule", max_payload_bytes=self._config.max_payload_bytes
        )
        created = await self._engine.schedules.create(tenant, spec)
        return pb.CreateScheduleResponse(schedule=oconv.schedule_to_proto(created))

    @unary
    async def GetSchedule(
        self, request: pb.GetScheduleRequest, context: Context
    ) -> pb.GetScheduleResponse:
        """One schedule."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        schedule_id = conv.parse_uuid(request.schedule_id, "schedule_id")
        s = await self._engine.schedules.get(tenant, schedule_id)
        return pb.GetScheduleResponse(schedule=oconv.schedule_to_proto(s))

    @unary
    async def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: Context
    ) -> pb.ListSchedulesResponse:
        """The tenant's schedules."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        schedules = await self._engine.schedules.list(tenant)
        return pb.ListSchedulesResponse(schedules=[oconv.schedule_to_proto(s) for s in schedules])

    @unary
    async def PauseSchedule(
        self, request: pb.PauseScheduleRequest, context: Context
    ) -> pb.PauseScheduleResponse:
        """Pause a schedule."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        schedule_id = conv.parse_uuid(request.schedule_id, "schedule_id")
        s = await self._engine.schedules.pause(tenant, schedule_id)
        return pb.PauseScheduleResponse(schedule=oconv.schedule_to_proto(s))

    @unary
    async def ResumeSchedule(
        self, request: pb.ResumeScheduleRequest, context: Context
    ) -> pb.ResumeScheduleResponse:
        """Resume a schedule from the first occurrence after now."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        schedule_id = conv.parse_uuid(request.schedule_id, "schedule_id")
        s = await self._engine.schedules.resume(tenant, schedule_id)
        return pb.ResumeScheduleResponse(schedule=oconv.schedule_to_proto(s))

    @unary
    async def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: Context
    ) -> pb.DeleteScheduleResponse:
        """Delete a schedule (its tasks stay)."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        schedule_id = conv.parse_uuid(request.schedule_id, "schedule_id")
        await self._engine.schedules.delete(tenant, schedule_id)
        return pb.DeleteScheduleResponse()

    # -- expectations ------------------------------------------------------------------
    @unary
    async def RegisterExpectation(
        self, request: pb.RegisterExpectationRequest, context: Context
    ) -> pb.RegisterExpectationResponse:
        """Register or replace a dead man's switch expectation."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        spec = oconv.expectation_spec_from_proto(request)
        e = await self._engine.schedules.register_expectation(tenant, spec)
        return pb.RegisterExpectationResponse(expectation=oconv.expectation_to_proto(e))

    @unary
    async def ListExpectations(
        self, request: pb.ListExpectationsRequest, context: Context
    ) -> pb.ListExpectationsResponse:
        """The tenant's expectations."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        found = await self._engine.schedules.list_expectations(tenant)
        facts = {
            (f.tenant_id, f.job_id): f for f in await self._engine.history.expectation_facts(tenant)
        }
        now = self._engine.now()
        return pb.ListExpectationsResponse(
            expectations=[
                oconv.expectation_to_proto(e, facts.get((e.tenant_id, e.job_id)), now)
                for e in found
            ]
        )

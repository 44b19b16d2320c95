"""SchedulerService's schedule RPCs: Create, Get, List, Pause, Resume and
DeleteSchedule, over the engine's schedule door ``engine.schedules``.

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`. Every call is scoped
to the caller's tenant: another tenant's schedule answers NOT_FOUND exactly as one that
does not exist.
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


class ScheduleRpcs:
    """Schedule handlers over ``engine.schedules``."""

    _engine: Engine
    _config: ServerConfig
    _gate: Gatekeeper

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

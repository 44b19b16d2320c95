"""SchedulerService's expectation RPCs (the watchdog's dead man's switches):
RegisterExpectation, ListExpectations and DeleteExpectation, over
``engine.schedules`` (the expectations) and ``engine.history`` (their facts).

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`, scoped to the
caller's tenant.
"""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.engine._schedules import MAX_JOB_ID_LEN
from scheduler.server import _convert_orchestration as oconv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._status import unary
from scheduler.types import Scope

Context = grpc.aio.ServicerContext[Any, Any]


class ExpectationRpcs:
    """Expectation handlers over ``engine.schedules`` and ``engine.history``."""

    _engine: Engine
    _gate: Gatekeeper

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
        await self._engine.schedules.delete_expectation(tenant, request.job_id)
        return pb.DeleteExpectationResponse()

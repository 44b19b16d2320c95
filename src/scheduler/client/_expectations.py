"""The client's expectation calls (the watchdog's dead man's switches): register,
list and delete."""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.client._base import _Base
from scheduler.client._types import ExpectationInfo


class ExpectationCalls(_Base):
    """SchedulerService's expectation RPCs."""

    _sched: Any
    """The SchedulerService stub (set by :class:`~scheduler.client._client.Client`)."""

    async def register_expectation(
        self,
        job_id: str | None = None,
        *,
        schedule_id: uuid.UUID | str | None = None,
        interval_s: int,
        tolerance_s: int,
        max_runtime_s: int | None = None,
    ) -> ExpectationInfo:
        """Expect ``job_id`` (a task type or schedule name) or the schedule
        ``schedule_id`` to complete every ``interval_s``, give or take ``tolerance_s``;
        ``tickwheel watchdog`` alerts otherwise. Registering a job id again replaces it.
        """
        req = pb.RegisterExpectationRequest(
            job_id=job_id or "",
            schedule_id=str(schedule_id) if schedule_id is not None else "",
            interval_s=interval_s,
            tolerance_s=tolerance_s,
            max_runtime_s=max_runtime_s or 0,
        )
        resp = await self._rpc(self._sched.RegisterExpectation, req)
        return conv.expectation_from_proto(resp.expectation)

    async def list_expectations(self) -> builtins.list[ExpectationInfo]:
        """Every expectation of the tenant, by job id."""
        resp = await self._rpc(self._sched.ListExpectations, pb.ListExpectationsRequest())
        return [conv.expectation_from_proto(e) for e in resp.expectations]

    async def delete_expectation(self, job_id: str) -> None:
        """Delete the tenant's expectation for ``job_id`` (NotFound when none)."""
        await self._rpc(self._sched.DeleteExpectation, pb.DeleteExpectationRequest(job_id=job_id))

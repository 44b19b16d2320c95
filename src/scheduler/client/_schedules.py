"""The client's schedule calls: create, read, list, pause, resume and delete."""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import dict_to_struct
from scheduler.client import _convert as conv
from scheduler.client._base import _Base
from scheduler.client._types import JSON, ScheduleInfo
from scheduler.types import OverlapPolicy, Pool


class ScheduleCalls(_Base):
    """SchedulerService's schedule RPCs."""

    _sched: Any
    """The SchedulerService stub (set by :class:`~scheduler.client._client.Client`)."""

    async def create_schedule(
        self,
        name: str,
        task_type: str,
        payload: JSON | None = None,
        *,
        cron: str | None = None,
        interval_s: float | None = None,
        timezone: str = "UTC",
        pool: Pool = Pool.STANDARD,
        max_retries: int | None = None,
        timeout_s: float = 0.0,
        overlap_policy: OverlapPolicy = OverlapPolicy.SKIP,
        catchup_window_s: float | None = None,
        jitter_s: float | None = None,
        paused: bool = False,
    ) -> ScheduleInfo:
        """Create a schedule: exactly one of ``cron`` (5 fields, or 6 with seconds
        first, in the IANA ``timezone``) and ``interval_s``. Each occurrence becomes a
        task of ``task_type``. ``max_retries`` None means 3; ``catchup_window_s`` None
        means 60 s; ``jitter_s`` is late-only, None means a tenth of the period (at most the
        server's jitter window, 120 s). AlreadyExists for a name the tenant uses.
        """
        spec = pb.ScheduleSpec(
            name=name,
            task_type=task_type,
            payload=dict_to_struct(payload),
            cron=cron or "",
            interval_s=interval_s or 0.0,
            timezone=timezone,
            pool=conv.pool_to_proto(pool),
            timeout_s=timeout_s,
            overlap_policy=conv.overlap_to_proto(overlap_policy),
            paused=paused,
        )
        if jitter_s is not None:
            spec.jitter_s = jitter_s
        if max_retries == 0:
            spec.no_retries = True
        elif max_retries is not None:
            spec.max_retries = max_retries
        if catchup_window_s is not None:
            spec.catchup_window_s = catchup_window_s
        resp = await self._rpc(self._sched.CreateSchedule, pb.CreateScheduleRequest(schedule=spec))
        return conv.schedule_from_proto(resp.schedule)

    async def get_schedule(self, schedule_id: uuid.UUID | str) -> ScheduleInfo:
        """Read one schedule."""
        resp = await self._rpc(
            self._sched.GetSchedule, pb.GetScheduleRequest(schedule_id=str(schedule_id))
        )
        return conv.schedule_from_proto(resp.schedule)

    async def list_schedules(self) -> builtins.list[ScheduleInfo]:
        """Every schedule of the tenant, by name."""
        resp = await self._rpc(self._sched.ListSchedules, pb.ListSchedulesRequest())
        return [conv.schedule_from_proto(s) for s in resp.schedules]

    async def pause_schedule(self, schedule_id: uuid.UUID | str) -> ScheduleInfo:
        """Stop creating occurrences."""
        resp = await self._rpc(
            self._sched.PauseSchedule, pb.PauseScheduleRequest(schedule_id=str(schedule_id))
        )
        return conv.schedule_from_proto(resp.schedule)

    async def resume_schedule(self, schedule_id: uuid.UUID | str) -> ScheduleInfo:
        """Create occurrences again, from the first one after now."""
        resp = await self._rpc(
            self._sched.ResumeSchedule, pb.ResumeScheduleRequest(schedule_id=str(schedule_id))
        )
        return conv.schedule_from_proto(resp.schedule)

    async def delete_schedule(self, schedule_id: uuid.UUID | str) -> None:
        """Delete a schedule; the tasks it created stay."""
        await self._rpc(
            self._sched.DeleteSchedule, pb.DeleteScheduleRequest(schedule_id=str(schedule_id))
        )

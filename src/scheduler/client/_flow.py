"""The client's flow control calls (issue 43): rate limits by key, dispatch pauses."""

from __future__ import annotations

import builtins
import dataclasses
import uuid
from datetime import datetime
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client._base import _Base
from scheduler.types import Pool
from scheduler.wire import POOL_FROM_PROTO, POOL_TO_PROTO


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitInfo:
    """A rate limit key's bucket: ``rate`` tasks a second, bursts of ``burst``."""

    key: str
    rate: float
    burst: int
    updated_at: datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PauseInfo:
    """A dispatch pause: ``tenant_id`` None for every tenant, ``task_type`` None for
    every type, ``pool`` None for every pool."""

    tenant_id: uuid.UUID | None
    task_type: str | None
    pool: Pool | None
    paused_at: datetime


def _limit(m: pb.RateLimit) -> RateLimitInfo:
    return RateLimitInfo(
        key=m.key, rate=m.rate, burst=m.burst, updated_at=m.updated_at.ToDatetime().astimezone()
    )


def _pause(m: pb.DispatchPause) -> PauseInfo:
    return PauseInfo(
        tenant_id=uuid.UUID(m.tenant_id) if m.tenant_id else None,
        task_type=m.task_type or None,
        pool=POOL_FROM_PROTO.get(m.pool),
        paused_at=m.paused_at.ToDatetime().astimezone(),
    )


def _pool(pool: Pool | None) -> Any:
    return POOL_TO_PROTO[pool] if pool is not None else pb.POOL_UNSPECIFIED


class FlowCalls(_Base):
    """SchedulerService's flow control RPCs."""

    _sched: Any

    async def set_rate_limit(self, key: str, rate: float, burst: int = 0) -> RateLimitInfo:
        """Limit the tasks naming ``rate_limit_key=key`` to ``rate`` starts a second,
        across every node, with bursts of up to ``burst`` (0: ``max(1, ceil(rate))``)."""
        resp = await self._rpc(
            self._sched.SetRateLimit,
            pb.SetRateLimitRequest(limit=pb.RateLimit(key=key, rate=rate, burst=burst)),
        )
        return _limit(resp.limit)

    async def list_rate_limits(self) -> builtins.list[RateLimitInfo]:
        """The tenant's rate limits, by key."""
        resp = await self._rpc(self._sched.ListRateLimits, pb.ListRateLimitsRequest())
        return [_limit(m) for m in resp.limits]

    async def delete_rate_limit(self, key: str) -> None:
        """Remove a key's limit (NotFound if it had none)."""
        await self._rpc(self._sched.DeleteRateLimit, pb.DeleteRateLimitRequest(key=key))

    async def pause_dispatch(
        self, task_type: str | None = None, pool: Pool | None = None, *, all_tenants: bool = False
    ) -> PauseInfo:
        """Hold the tenant's tasks of ``task_type`` and/or ``pool`` (both None: all of
        them) PRELOADED until :meth:`resume_dispatch`. ``all_tenants``: the admin token
        only, for every tenant."""
        resp = await self._rpc(
            self._sched.PauseDispatch,
            pb.PauseDispatchRequest(
                task_type=task_type or "", pool=_pool(pool), all_tenants=all_tenants
            ),
        )
        return _pause(resp.pause)

    async def resume_dispatch(
        self, task_type: str | None = None, pool: Pool | None = None, *, all_tenants: bool = False
    ) -> None:
        """Remove the pause of exactly these fields; its tasks go out in due order."""
        await self._rpc(
            self._sched.ResumeDispatch,
            pb.ResumeDispatchRequest(
                task_type=task_type or "", pool=_pool(pool), all_tenants=all_tenants
            ),
        )

    async def list_dispatch_pauses(self) -> builtins.list[PauseInfo]:
        """The pauses that apply to the tenant (its own and every all-tenants one)."""
        resp = await self._rpc(self._sched.ListDispatchPauses, pb.ListDispatchPausesRequest())
        return [_pause(m) for m in resp.pauses]

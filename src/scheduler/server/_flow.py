"""SchedulerService's flow control RPCs (issue 43): SetRateLimit, ListRateLimits,
DeleteRateLimit, PauseDispatch, ResumeDispatch and ListDispatchPauses, over the engine's
flow rules ``engine.flow``.

A mixin of :class:`~scheduler.server._scheduler.SchedulerService`. Every call is scoped
to the caller's tenant; with the admin token and no ``x-tenant-id`` a pause may name
every tenant (``all_tenants``) and the list shows every pause.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc

from scheduler._errors import InvalidArgument, PermissionDenied
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.limits import MAX_TYPE_CHARS
from scheduler.server import _convert as conv
from scheduler.server._auth import TENANT_ID_HEADER, Gatekeeper, tenant_of
from scheduler.server._status import unary
from scheduler.types import ALL_TENANTS, DispatchPause, Pool, RateLimitRule, Scope
from scheduler.wire import POOL_FROM_PROTO, POOL_TO_PROTO

Context = grpc.aio.ServicerContext[Any, Any]


def rate_limit_to_proto(r: RateLimitRule) -> pb.RateLimit:
    """A stored rate limit as the API shows it."""
    return pb.RateLimit(
        key=r.key, rate=r.rate, burst=r.burst, updated_at=conv.from_datetime(r.updated_at)
    )


def pause_to_proto(p: DispatchPause) -> pb.DispatchPause:
    """A stored pause as the API shows it."""
    return pb.DispatchPause(
        tenant_id="" if p.tenant_id == ALL_TENANTS else str(p.tenant_id),
        task_type=p.task_type,
        pool=POOL_TO_PROTO[p.pool] if p.pool is not None else pb.POOL_UNSPECIFIED,
        paused_at=conv.from_datetime(p.paused_at),
    )


def check_type(task_type: str) -> None:
    """A paused type: empty (every type) or up to a task type's length."""
    if len(task_type) > MAX_TYPE_CHARS:
        raise InvalidArgument("task_type", f"longer than {MAX_TYPE_CHARS} characters")


def _pool(value: int) -> Pool | None:
    if value == pb.POOL_UNSPECIFIED:
        return None
    try:
        return POOL_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument("pool", f"unknown pool {value}") from None


class FlowRpcs:
    """Rate limit and pause handlers over ``engine.flow``."""

    _engine: Engine
    _gate: Gatekeeper

    @unary
    async def SetRateLimit(
        self, request: pb.SetRateLimitRequest, context: Context
    ) -> pb.SetRateLimitResponse:
        """Create or replace a rate limit key's bucket."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        if not request.HasField("limit"):
            raise InvalidArgument("limit", "required")
        lim = request.limit
        rule = await self._engine.flow.set_rate_limit(tenant, lim.key, lim.rate, lim.burst)
        return pb.SetRateLimitResponse(limit=rate_limit_to_proto(rule))

    @unary
    async def ListRateLimits(
        self, request: pb.ListRateLimitsRequest, context: Context
    ) -> pb.ListRateLimitsResponse:
        """The caller's rate limits."""
        tenant = await tenant_of(self._gate, context, Scope.READ)
        rules = await self._engine.flow.list_rate_limits(tenant)
        return pb.ListRateLimitsResponse(limits=[rate_limit_to_proto(r) for r in rules])

    @unary
    async def DeleteRateLimit(
        self, request: pb.DeleteRateLimitRequest, context: Context
    ) -> pb.DeleteRateLimitResponse:
        """Remove a key's limit."""
        tenant = await tenant_of(self._gate, context, Scope.SUBMIT)
        await self._engine.flow.delete_rate_limit(tenant, request.key)
        return pb.DeleteRateLimitResponse()

    async def _pause_args(
        self, context: Context, request: pb.PauseDispatchRequest | pb.ResumeDispatchRequest
    ) -> tuple[uuid.UUID, Pool | None]:
        """The tenant (or ``ALL_TENANTS``) and pool a pause call names, the caller
        checked first, then the fields."""
        tenant = await self._gate.reader_scope(context, Scope.SUBMIT)
        pool = _pool(request.pool)
        check_type(request.task_type)
        return self._pause_tenant(tenant, request.all_tenants), pool

    @staticmethod
    def _pause_tenant(tenant: uuid.UUID | None, all_tenants: bool) -> uuid.UUID:
        if all_tenants:
            if tenant is not None:
                raise PermissionDenied(
                    f"all_tenants: only the admin token, without {TENANT_ID_HEADER}"
                )
            return ALL_TENANTS
        if tenant is None:
            raise InvalidArgument(TENANT_ID_HEADER, "required with the admin token")
        return tenant

    @unary
    async def PauseDispatch(
        self, request: pb.PauseDispatchRequest, context: Context
    ) -> pb.PauseDispatchResponse:
        """Pause a type and/or pool of the caller (or of every tenant)."""
        tenant, pool = await self._pause_args(context, request)
        p = await self._engine.flow.pause(tenant, request.task_type, pool)
        return pb.PauseDispatchResponse(pause=pause_to_proto(p))

    @unary
    async def ResumeDispatch(
        self, request: pb.ResumeDispatchRequest, context: Context
    ) -> pb.ResumeDispatchResponse:
        """Remove a pause."""
        tenant, pool = await self._pause_args(context, request)
        await self._engine.flow.resume(tenant, request.task_type, pool)
        return pb.ResumeDispatchResponse()

    @unary
    async def ListDispatchPauses(
        self, request: pb.ListDispatchPausesRequest, context: Context
    ) -> pb.ListDispatchPausesResponse:
        """The pauses that apply to the caller (the admin token: every pause)."""
        tenant = await self._gate.reader_scope(context, Scope.READ)
        pauses = await self._engine.flow.list_pauses(tenant)
        return pb.ListDispatchPausesResponse(pauses=[pause_to_proto(p) for p in pauses])

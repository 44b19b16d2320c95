"""Caller identity from call metadata: API keys and their scopes, the admin token (and
the tenant it acts for), and the limits that protect the server from one caller
(docs/keys.md).

Owns :class:`Gatekeeper` (one per server: authentication with the per-source throttle,
scope checks, in-flight unary calls per key, open streams per tenant, the re-check of
an open stream's key) and :data:`RPC_SCOPES`, the scope each RPC needs. Calls the
engine's tenancy (``Engine.tenancy.authenticate``); used by every service.
"""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import grpc

from scheduler._errors import (
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    TickwheelError,
    Unauthenticated,
)
from scheduler._throttle import FailureThrottle
from scheduler.engine import Engine
from scheduler.server._config import ServerConfig
from scheduler.server._convert import parse_uuid
from scheduler.types import ApiKey, Scope

API_KEY_HEADER = "x-api-key"
ADMIN_TOKEN_HEADER = "x-admin-token"
TENANT_ID_HEADER = "x-tenant-id"
"""With the admin token on a SchedulerService call: the tenant it acts for."""
DASHBOARD_SECRET_HEADER = "x-tickwheel-dashboard"
"""The dashboard's shared secret (``ServerConfig.dashboard_secret``)."""
CLIENT_ADDRESS_HEADER = "x-tickwheel-client-address"
"""With that secret: the address of the browser the dashboard calls for."""
MAX_CLIENT_ADDRESS_CHARS = 64
ADMIN_CALLER = uuid.UUID(int=0)
"""The in-flight count of calls made with the platform admin token is kept under this id."""
ACTS_FOR_TENANT = frozenset({Scope.READ, Scope.SUBMIT})
"""Scopes the admin token holds when it acts for a tenant (the SchedulerService's);
worker calls (``work``) always need a tenant's API key."""

WRITE_SCOPES = frozenset({Scope.SUBMIT, Scope.WORK})
"""Scopes of the calls that write a tenant's rows (refused outside its home region)."""

Context = grpc.aio.ServicerContext[Any, Any]

RPC_SCOPES: Mapping[str, Scope] = {
    # SchedulerService: writes need submit, reads need read.
    "SubmitTask": Scope.SUBMIT,
    "SubmitTasks": Scope.SUBMIT,
    "CancelTask": Scope.SUBMIT,
    "RedriveTask": Scope.SUBMIT,
    "SubmitWorkflow": Scope.SUBMIT,
    "CreateSchedule": Scope.SUBMIT,
    "PauseSchedule": Scope.SUBMIT,
    "ResumeSchedule": Scope.SUBMIT,
    "DeleteSchedule": Scope.SUBMIT,
    "RegisterExpectation": Scope.SUBMIT,
    "GetTask": Scope.READ,
    "ListTasks": Scope.READ,
    "GetWorkflow": Scope.READ,
    "GetSchedule": Scope.READ,
    "ListSchedules": Scope.READ,
    "ListExpectations": Scope.READ,
    "GetTaskHistory": Scope.READ,
    "WaitTask": Scope.READ,
    "ListWorkflows": Scope.READ,
    "CancelWorkflow": Scope.SUBMIT,
    "DeleteExpectation": Scope.SUBMIT,
    # Watching it run (docs/observability.md); bulk actions change tasks.
    "CountTasks": Scope.READ,
    "GetForecast": Scope.READ,
    "ListWorkers": Scope.READ,
    "GetActivity": Scope.READ,
    "PlanBulkAction": Scope.SUBMIT,
    "RunBulkAction": Scope.SUBMIT,
    # Flow control (issue 43).
    "SetRateLimit": Scope.SUBMIT,
    "ListRateLimits": Scope.READ,
    "DeleteRateLimit": Scope.SUBMIT,
    "PauseDispatch": Scope.SUBMIT,
    "ResumeDispatch": Scope.SUBMIT,
    "ListDispatchPauses": Scope.READ,
    # WorkerService.
    "Connect": Scope.WORK,
    "CompleteTask": Scope.WORK,
    "FailTask": Scope.WORK,
    "Members": Scope.WORK,
    # AdminService with a tenant's key (the admin token may call all of it).
    "GetTenant": Scope.ADMIN,
    "CreateApiKey": Scope.ADMIN,
    "ListApiKeys": Scope.ADMIN,
    "RevokeApiKey": Scope.ADMIN,
    "RotateApiKey": Scope.ADMIN,
    "SetConcurrencyLimit": Scope.ADMIN,
    "ListConcurrencyLimits": Scope.ADMIN,
}
"""The scope each RPC needs from an API key (docs/keys.md prints this table; a test
checks every RPC of the proto against it)."""

PLATFORM_ONLY_RPCS = frozenset({"CreateTenant", "UpdateTenant", "ListTenants"})
"""AdminService RPCs only the platform admin token may call."""


def metadata_value(metadata: Iterable[tuple[str, str | bytes]] | None, key: str) -> str | None:
    """The first text value of ``key`` in call metadata."""
    for k, v in metadata or ():
        if k == key and isinstance(v, str):
            return v
    return None


def source_of(context: Context, dashboard_secret: str | None = None) -> str:
    """The caller's address without its port (``ipv4:1.2.3.4:5`` -> ``1.2.3.4``); for a
    call of the dashboard that carries ``dashboard_secret``, the browser's address it
    names (a caller without the secret cannot choose the address it is throttled as)."""
    if dashboard_secret:
        metadata = context.invocation_metadata()
        given = metadata_value(metadata, DASHBOARD_SECRET_HEADER)
        client = metadata_value(metadata, CLIENT_ADDRESS_HEADER)
        if given and client and hmac.compare_digest(given.encode(), dashboard_secret.encode()):
            return f"{client[:MAX_CLIENT_ADDRESS_CHARS]} (via the dashboard)"
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]") or rest
    return kind or "unknown"


def require_scope(key: ApiKey, scope: Scope) -> None:
    """PermissionDenied naming ``scope`` unless ``key`` has it."""
    if scope not in key.scopes:
        have = ", ".join(sorted(s.value for s in key.scopes)) or "none"
        raise PermissionDenied(
            f"this call needs the API key scope '{scope.value}' (key {key.id} has: {have})"
        )


class AuthThrottle(FailureThrottle):
    """Failed authentications per source address: after ``limit`` failures within
    ``window_s``, the source is refused for ``block_s`` without a store look-up."""

    MAX_SOURCES = 100_000
    """Sources remembered at most (old windows are dropped first)."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        block_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(limit, window_s, block_s, max_callers=self.MAX_SOURCES, clock=clock)

    def check(self, source: str) -> None:
        """ResourceExhausted (``auth_failures_per_source``) while ``source`` is throttled."""
        left = self.retry_after(source)
        if left is not None:
            raise ResourceExhausted(
                "auth_failures_per_source",
                f"{self.limit} failed authentications from {source} within "
                f"{self.window_s:g} s; retry in {max(1, round(left))} s",
            )


class Gatekeeper:
    """Who is calling, what they may do, and how much of the server they hold."""

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self._engine = engine
        self._admin_token = config.admin_token
        self._max_inflight = config.max_inflight_calls_per_key
        self._max_streams = config.max_streams_per_tenant
        self._recheck_s = config.stream_key_recheck_s
        self._dashboard_secret = config.dashboard_secret
        self.throttle = AuthThrottle(
            config.auth_failures_per_source, config.auth_failure_window_s, config.auth_throttle_s
        )
        self._inflight: dict[uuid.UUID, int] = {}
        self._streams: dict[uuid.UUID, int] = {}

    # -- API keys ------------------------------------------------------------------------
    async def key(self, context: Context) -> ApiKey:
        """The caller's API key (``x-api-key``), throttled per source address."""
        secret = metadata_value(context.invocation_metadata(), API_KEY_HEADER)
        if not secret:
            raise Unauthenticated(f"missing API key ({API_KEY_HEADER} metadata)")
        source = source_of(context, self._dashboard_secret)
        if not self._engine.tenancy.knows(secret):
            self.throttle.check(source)
        try:
            key = await self._engine.tenancy.authenticate(secret)
        except Unauthenticated:
            self.throttle.failed(source)
            raise
        # A tenant whose home is moving is paused here: UNAVAILABLE, and the SDKs retry.
        self._engine.tenancy.check_served(key.tenant_id)
        return key

    async def tenant(self, context: Context, scope: Scope) -> uuid.UUID:
        """The caller's tenant for a unary call that needs ``scope``; counts the call
        against ``max_inflight_calls_per_key`` until it ends.

        With the platform admin token instead of an API key (no ``x-api-key``; ``read``
        and ``submit`` calls only): the tenant named in ``x-tenant-id``, with every scope;
        InvalidArgument ``x-tenant-id: required with the admin token`` without one."""
        if scope in ACTS_FOR_TENANT and _admin_call(context):
            tenant_id = await self._acting_for(context)
            if tenant_id is None:
                raise InvalidArgument(TENANT_ID_HEADER, "required with the admin token")
        else:
            key = await self.key(context)
            require_scope(key, scope)
            self._hold(context, key.id, f"API key {key.id}")
            tenant_id = key.tenant_id
        if scope in WRITE_SCOPES:
            # Under the router, which sends a call home first: a region never writes
            # another region's tenant's rows (a cached look-up).
            await self._engine.tenancy.check_home(tenant_id)
        return tenant_id

    async def reader_scope(self, context: Context, scope: Scope) -> uuid.UUID | None:
        """The tenant a read that may span tenants answers for: an API key's tenant (it
        must have ``scope``); with the admin token, the tenant in ``x-tenant-id``, or
        None (every tenant) without that header. Counted like :meth:`tenant`.

        For the RPCs that answer for every tenant to the admin token (CountTasks,
        GetForecast, ListWorkers, GetActivity); the engine and store take None as
        every tenant."""
        if scope in ACTS_FOR_TENANT and _admin_call(context):
            return await self._acting_for(context)
        return await self.tenant(context, scope)

    async def _acting_for(self, context: Context) -> uuid.UUID | None:
        """Check the admin token; the tenant of ``x-tenant-id`` (NotFound when there is
        no such tenant, InvalidArgument when it is no UUID), None without it."""
        self.platform_admin(context)
        raw = metadata_value(context.invocation_metadata(), TENANT_ID_HEADER)
        tenant_id: uuid.UUID | None = None
        if raw is not None:
            try:
                tenant_id = uuid.UUID(raw.strip())
            except ValueError:
                raise InvalidArgument(TENANT_ID_HEADER, "is not a tenant id (a UUID)") from None
            await self._engine.tenancy.get_tenant(tenant_id)
        self._hold(context, ADMIN_CALLER, "the admin token")
        return tenant_id

    def _hold(self, context: Context, caller: uuid.UUID, who: str) -> None:
        """Count one in-flight call of ``caller`` until the call ends."""
        held = self._inflight.get(caller, 0)
        if held >= self._max_inflight:
            raise ResourceExhausted(
                "max_inflight_calls_per_key",
                f"{self._max_inflight} calls with {who} are already in flight on this server",
            )
        self._inflight[caller] = held + 1
        context.add_done_callback(_done(self._inflight, caller))

    async def stream(self, context: Context) -> uuid.UUID:
        """The tenant of a worker stream (scope ``work``); counts the stream against
        ``max_streams_per_tenant`` until it ends."""
        key = await self.key(context)
        require_scope(key, Scope.WORK)
        held = self._streams.get(key.tenant_id, 0)
        if held >= self._max_streams:
            raise ResourceExhausted(
                "max_streams_per_tenant",
                f"{self._max_streams} worker streams of tenant {key.tenant_id} are already "
                "open on this server",
            )
        self._streams[key.tenant_id] = held + 1
        context.add_done_callback(_done(self._streams, key.tenant_id))
        return key.tenant_id

    async def lapsed(self, context: Context) -> TickwheelError:
        """Wait until the stream's key stops working (revoked, expired, or gone), re-
        checking it every ``stream_key_recheck_s``; returns the error to end it with.

        A revocation on this node is seen at the next re-check; on another node, within
        the re-check plus the auth cache (``auth_cache_s``). A store that cannot answer
        does not end the stream."""
        secret = metadata_value(context.invocation_metadata(), API_KEY_HEADER) or ""
        while True:
            await asyncio.sleep(self._recheck_s)
            try:
                await self._engine.tenancy.authenticate(secret)
            except Unauthenticated as exc:
                return Unauthenticated(f"{exc.message}: the worker stream is closed")
            except StoreError:
                continue

    def in_flight(self, key_id: uuid.UUID) -> int:
        """Unary calls of ``key_id`` being served now."""
        return self._inflight.get(key_id, 0)

    def open_streams(self, tenant_id: uuid.UUID) -> int:
        """Worker streams of ``tenant_id`` open now."""
        return self._streams.get(tenant_id, 0)

    # -- the admin API ---------------------------------------------------------------------
    def platform_admin(self, context: Context) -> None:
        """Raise unless the call carries the platform admin token."""
        if self._admin_token is None:
            raise PermissionDenied("the admin API is disabled on this server (no admin token)")
        given = metadata_value(context.invocation_metadata(), ADMIN_TOKEN_HEADER)
        if not given:
            raise Unauthenticated(f"missing admin token ({ADMIN_TOKEN_HEADER} metadata)")
        source = source_of(context, self._dashboard_secret)
        self.throttle.check(source)
        if not hmac.compare_digest(given.encode(), self._admin_token.encode()):
            self.throttle.failed(source)
            raise Unauthenticated("invalid admin token")

    async def tenant_admin(self, context: Context) -> uuid.UUID | None:
        """Who administers: None for the platform admin token (every tenant), else the
        tenant of an API key with the ``admin`` scope (that tenant only)."""
        metadata = context.invocation_metadata()
        if metadata_value(metadata, ADMIN_TOKEN_HEADER) or not metadata_value(
            metadata, API_KEY_HEADER
        ):
            self.platform_admin(context)
            return None
        key = await self.key(context)
        require_scope(key, Scope.ADMIN)
        return key.tenant_id

    async def admin_for(self, context: Context, raw_tenant_id: str) -> uuid.UUID:
        """The tenant an AdminService call names in ``tenant_id``, once the caller may
        administer it: the platform admin token (any tenant) or an ``admin`` key of that
        tenant (PermissionDenied for another one). The caller is checked before the id
        is parsed, so an unauthenticated call learns nothing from a malformed id."""
        admin_of = await self.tenant_admin(context)
        tenant_id = parse_uuid(raw_tenant_id, "tenant_id")
        self.same_tenant(admin_of, tenant_id)
        return tenant_id

    @staticmethod
    def same_tenant(admin_of: uuid.UUID | None, tenant_id: uuid.UUID) -> None:
        """PermissionDenied when a tenant's admin key names another tenant."""
        if admin_of is not None and admin_of != tenant_id:
            raise PermissionDenied(
                f"this API key administers tenant {admin_of} only, not {tenant_id}"
            )


def _admin_call(context: Context) -> bool:
    """Whether a SchedulerService call is made with the admin token instead of an API
    key (a call that carries a key is the key's, whatever else it carries)."""
    metadata = context.invocation_metadata()
    return bool(metadata_value(metadata, ADMIN_TOKEN_HEADER)) and not metadata_value(
        metadata, API_KEY_HEADER
    )


def _done(counts: dict[uuid.UUID, int], key: uuid.UUID) -> Any:
    """A done-callback that gives back one count of ``key`` when the call ends."""

    def release(_call: object) -> None:
        left = counts.get(key, 0) - 1
        if left > 0:
            counts[key] = left
        else:
            counts.pop(key, None)

    return release


async def tenant_of(gate: Gatekeeper, context: Context, scope: Scope) -> uuid.UUID:
    """The caller's tenant, from the API key in ``x-api-key``, for a unary call that
    needs ``scope``: Unauthenticated, PermissionDenied (naming the scope) or
    ResourceExhausted (a limit) otherwise."""
    return await gate.tenant(context, scope)


def check_admin(configured: str | None, context: Context) -> None:
    """Raise unless the call carries the configured admin token (constant-time compare).

    Unthrottled; the services use :meth:`Gatekeeper.platform_admin`."""
    if configured is None:
        raise PermissionDenied("the admin API is disabled on this server (no admin token)")
    given = metadata_value(context.invocation_metadata(), ADMIN_TOKEN_HEADER)
    if not given:
        raise Unauthenticated(f"missing admin token ({ADMIN_TOKEN_HEADER} metadata)")
    if not hmac.compare_digest(given.encode(), configured.encode()):
        raise Unauthenticated("invalid admin token")

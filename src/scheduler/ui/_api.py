"""The dashboard's only way to the scheduler: the public gRPC API over one channel.

Owns :class:`Credentials` (what a browser session acts with), :class:`Api` (the
generated stubs on a ``grpc.aio`` channel, the call metadata of a session and the
tenant it looks at) and the errors a page turns into "not available", a 404 or a
message. Calls only the client SDK's channel set-up and the generated protos; never
the engine or the store.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import TLSConfig
from scheduler.client._channel import open_channel

T = TypeVar("T")

API_KEY_HEADER = "x-api-key"
ADMIN_TOKEN_HEADER = "x-admin-token"
TENANT_HEADER = "x-tenant-id"
DASHBOARD_SECRET_HEADER = "x-tickwheel-dashboard"
CLIENT_ADDRESS_HEADER = "x-tickwheel-client-address"
"""With the dashboard secret, the browser's address: the server throttles failed
authentications per browser, not per dashboard (``ServerConfig.dashboard_secret``)."""
RPC_TIMEOUT_S = 10.0
ALL_TENANTS = "all"
"""The tenant picker's value for "every tenant" (admin token without ``x-tenant-id``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    """An API key (one tenant), the platform admin token (every tenant), or both."""

    api_key: str | None = None
    admin_token: str | None = None

    @property
    def empty(self) -> bool:
        return not self.api_key and not self.admin_token

    @property
    def is_admin(self) -> bool:
        return bool(self.admin_token)


def parse_tenant(value: str | None) -> str | None:
    """The ``?tenant=`` value: None (the default view), ``all``, or a canonical UUID.
    Raises ValueError for anything else."""
    if not value:
        return None
    if value == ALL_TENANTS:
        return ALL_TENANTS
    return str(uuid.UUID(value))


def call_metadata(creds: Credentials, tenant: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata a call carries for a session looking at ``tenant``.

    The admin token with a tenant chosen acts for that tenant (``x-tenant-id``); else an
    API key acts for its own tenant; else the admin token alone sees every tenant.
    """
    if creds.admin_token and tenant and tenant != ALL_TENANTS:
        return ((ADMIN_TOKEN_HEADER, creds.admin_token), (TENANT_HEADER, tenant))
    if creds.api_key and tenant != ALL_TENANTS:
        return ((API_KEY_HEADER, creds.api_key),)
    if creds.admin_token:
        return ((ADMIN_TOKEN_HEADER, creds.admin_token),)
    if creds.api_key:
        return ((API_KEY_HEADER, creds.api_key),)
    return ()


class ApiError(Exception):
    """An RPC answered an error status; ``code`` is its gRPC status code name."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details

    @property
    def unavailable(self) -> bool:
        """The server does not implement the RPC (an older server): "not available"."""
        return self.code is grpc.StatusCode.UNIMPLEMENTED

    @property
    def not_found(self) -> bool:
        return self.code is grpc.StatusCode.NOT_FOUND

    @property
    def unauthenticated(self) -> bool:
        return self.code is grpc.StatusCode.UNAUTHENTICATED


@dataclasses.dataclass(slots=True)
class Section:
    """One part of a page: the RPC's answer, or why there is none."""

    value: Any = None
    error: str | None = None
    unavailable: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.unavailable


@dataclasses.dataclass(frozen=True, slots=True)
class LoginRefusal:
    """Why a login did not succeed, and the HTTP status that says so."""

    status: int
    message: str

    @property
    def wrong_credentials(self) -> bool:
        """The scheduler refused the credentials (counts against the login throttle)."""
        return self.status == 401


class Api:
    """The stubs on one channel; each call takes the caller's metadata."""

    def __init__(
        self, target: str, tls: TLSConfig | None = None, *, dashboard_secret: str | None = None
    ) -> None:
        self.target = target
        self._dashboard_secret = dashboard_secret
        self._channel = open_channel(target, tls)
        self.scheduler = pbg.SchedulerServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self.admin = pbg.AdminServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def on_behalf_of(self, client: str) -> tuple[tuple[str, str], ...]:
        """The metadata naming the browser a call is made for (nothing without the
        dashboard secret: the server would not believe it)."""
        if not self._dashboard_secret:
            return ()
        return ((DASHBOARD_SECRET_HEADER, self._dashboard_secret), (CLIENT_ADDRESS_HEADER, client))

    async def close(self) -> None:
        await self._channel.close(None)

    async def call(
        self,
        method: Callable[..., Awaitable[T]],
        request: Any,
        metadata: tuple[tuple[str, str], ...],
    ) -> T:
        """One unary call; an error status becomes :class:`ApiError`."""
        try:
            return await method(request, metadata=metadata, timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise ApiError(exc.code(), exc.details() or exc.code().name) from None

    async def section(
        self,
        method: Callable[..., Awaitable[T]],
        request: Any,
        metadata: tuple[tuple[str, str], ...],
    ) -> Section:
        """One call for a page section: its answer, "not available" or the error."""
        try:
            return Section(await self.call(method, request, metadata))
        except ApiError as exc:
            if exc.unavailable:
                return Section(unavailable=True)
            return Section(error=str(exc))

    async def check_credentials(self, creds: Credentials, client: str) -> LoginRefusal | None:
        """None when ``creds`` authenticate, else why not: wrong credentials (401), the
        scheduler throttling this browser (429), or the scheduler out of reach or
        answering another error (503, 502). Only an answer that authenticated is a
        success."""
        behalf = self.on_behalf_of(client)
        try:
            if creds.admin_token:
                await self.call(
                    self.admin.ListTenants,
                    pb.ListTenantsRequest(page_size=1),
                    ((ADMIN_TOKEN_HEADER, creds.admin_token), *behalf),
                )
            if creds.api_key:
                await self.call(
                    self.scheduler.ListTasks,
                    pb.ListTasksRequest(page_size=1),
                    ((API_KEY_HEADER, creds.api_key), *behalf),
                )
        except ApiError as exc:
            if exc.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return LoginRefusal(401, exc.details)
            if exc.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
                return LoginRefusal(429, f"the scheduler refuses logins for now: {exc.details}")
            if exc.code is grpc.StatusCode.UNAVAILABLE:
                return LoginRefusal(503, f"cannot reach Tickwheel at {self.target}: {exc.details}")
            return LoginRefusal(502, f"the scheduler answered an error: {exc}")
        return None

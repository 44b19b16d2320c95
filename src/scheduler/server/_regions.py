"""Routing a call home: every region accepts any tenant's call and gets it to the
tenant's home region without a global look-up (docs/regions.md).

Runs in the request passthrough (``_decode.add_service``), before the request is
decoded. The call's home is:

- with an API key (``x-api-key``): the region its prefix names (``tw_<region>.…``,
  :func:`~scheduler.regions.key_region`); for a key of this region (or an old key that
  names none, or a call the key's region forwarded here) the key's tenant's home
  (``engine.tenancy.home_region``, cached), so a tenant whose home moved is followed without a
  new key;
- with the admin token: ``CreateTenant``'s ``tenant.home_region``, else the region in
  ``x-tickwheel-region``, else this one;
- with neither, this region.

A unary call whose home is another region is forwarded there as it came (the raw
request bytes, the caller's metadata and remaining deadline, plus
``x-tickwheel-forwarded-from``) to the home's endpoints in directory order (the next
one only when one is unreachable); the caller gets the home's answer unchanged. A call
that was forwarded already and would be forwarded again answers FAILED_PRECONDITION
(the regions disagree; never a loop). A worker stream is not proxied: it ends at once
with FAILED_PRECONDITION and the ``WRONG_REGION`` ErrorInfo naming the home and its
endpoints, which the SDKs follow. A key or header naming a region the directory does
not list answers INVALID_ARGUMENT with ``UNKNOWN_REGION``.

Without a directory (one region) nothing is forwarded and nothing is looked up: only a
key naming another region is refused.

Owns the forwarding channels (one per endpoint, opened on first use, closed with the
server). Calls the engine's ``home_region`` and the :class:`Gatekeeper`'s ``key``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import grpc

from scheduler._errors import FailedPrecondition, Unavailable, UnknownRegion, WrongRegion
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.regions import DEFAULT_REGION, RegionDirectory, check_region_name, key_region
from scheduler.server._auth import (
    ADMIN_TOKEN_HEADER,
    API_KEY_HEADER,
    Gatekeeper,
    metadata_value,
)
from scheduler.wire import STATUS_DETAILS_KEY

REGION_HEADER = "x-tickwheel-region"
"""With the admin token: the region the call is for (default: the one it reaches)."""
ADMIN_SERVICE = pb.DESCRIPTOR.services_by_name["AdminService"].full_name
"""Its calls go by the admin token when they carry one (as the service itself does)."""
FORWARDED_FROM_HEADER = "x-tickwheel-forwarded-from"
"""Set on a forwarded call: the region that forwarded it (the loop guard reads it)."""

_DROPPED = frozenset(
    {
        "connection",
        "content-type",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        FORWARDED_FROM_HEADER,
    }
)
"""Request headers a forward does not copy: hop-by-hop ones (and ``grpc-*`` and
pseudo-headers, which gRPC sets itself)."""

Metadata = Iterable[Any]
"""Call metadata: (key, value) pairs (grpc's own Metadata type among them)."""
Context = grpc.aio.ServicerContext[Any, Any]

_log = logging.getLogger("tickwheel.regions")


def _known(directory: RegionDirectory, here: str) -> str:
    return ", ".join(directory.names or (here,))


def _listed(region: str, field: str, directory: RegionDirectory, here: str) -> str:
    """``region`` when it is this one or the directory lists it; UnknownRegion else."""
    if region != here and region not in directory:
        raise UnknownRegion(field, region, _known(directory, here))
    return region


def static_home(
    method: str,
    metadata: Metadata | None,
    request: bytes,
    *,
    here: str,
    directory: RegionDirectory,
    admin_wins: bool = False,
) -> str | None:
    """The home region a call names on its own (the rules in the module docstring), or
    None when it is the API key's tenant's home (a key of this region, or one that
    names none): the caller looks that up.

    A call forwarded here by the region its key names is looked up here too: that
    region found the key's tenant lives elsewhere (a moved tenant keeps its keys), so
    only this region's own record of the tenant can say more (and the loop guard
    stops a disagreement). ``admin_wins``: the admin token decides over a key (an
    AdminService call carrying both is the token's).

    Raises UnknownRegion for a key, ``CreateTenant`` home or ``x-tickwheel-region``
    naming a region that is neither ``here`` nor in ``directory``, InvalidArgument for a
    header or home that is no region name."""
    secret = metadata_value(metadata, API_KEY_HEADER)
    admin = bool(metadata_value(metadata, ADMIN_TOKEN_HEADER))
    if secret and not (admin and admin_wins):
        region = key_region(secret)
        if region is None or region == here:
            return None
        if region == DEFAULT_REGION and region not in directory:
            # A key of a single-region set-up (``tw_local.…``) that took up regions:
            # it belongs to the region that holds it, as its tenant does.
            return None
        if region == metadata_value(metadata, FORWARDED_FROM_HEADER):
            return None
        return _listed(region, API_KEY_HEADER, directory, here)
    if not admin:
        return here
    if method == "CreateTenant":
        home = _create_tenant_home(request)
        if home:
            check_region_name(home, "tenant.home_region")
            return _listed(home, "tenant.home_region", directory, here)
    named = metadata_value(metadata, REGION_HEADER)
    if named:
        check_region_name(named.strip(), REGION_HEADER)
        return _listed(named.strip(), REGION_HEADER, directory, here)
    return here


def _create_tenant_home(request: bytes) -> str:
    """``tenant.home_region`` of a CreateTenant request ("" when the bytes are no such
    message: the handler answers for them)."""
    try:
        return str(pb.CreateTenantRequest.FromString(request).tenant.home_region)
    except Exception:  # undecodable bytes are the handler's to refuse
        return ""


def forward_metadata(metadata: Metadata | None, here: str) -> tuple[tuple[str, str | bytes], ...]:
    """The caller's metadata for a forward: without pseudo, ``grpc-*`` and hop-by-hop
    headers, plus ``x-tickwheel-forwarded-from: <here>``."""
    kept = tuple(
        (k, v) for k, v in metadata or () if not k.startswith((":", "grpc-")) and k not in _DROPPED
    )
    return (*kept, (FORWARDED_FROM_HEADER, here))


def relayed_trailers(metadata: Metadata | None) -> list[tuple[str, Any]]:
    """The home region's trailing metadata to pass on: all but what gRPC sets itself
    (the status details, ``grpc-status-details-bin``, stay)."""
    return [
        (k, v)
        for k, v in metadata or ()
        if k == STATUS_DETAILS_KEY or not k.startswith((":", "grpc-"))
    ]


class Router:
    """Where each call of one server goes (see the module docstring)."""

    def __init__(
        self, engine: Engine, gate: Gatekeeper, *, region: str, directory: RegionDirectory
    ) -> None:
        self._engine = engine
        self._gate = gate
        self.region = region
        self.directory = directory
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.fenced: str | None = None
        """Set while the node lost its region lease (docs/regions.md "Automatic
        failover"): every call of this region answers UNAVAILABLE with it, so clients
        move on to the region's next endpoints."""

    async def home(self, path: str, context: Context, request: bytes = b"") -> str:
        """The home region of the call to ``path`` (``/tickwheel.v1.Service/Method``)."""
        metadata = context.invocation_metadata()
        service, _, method = path.lstrip("/").partition("/")
        named = static_home(
            method,
            metadata,
            request,
            here=self.region,
            directory=self.directory,
            admin_wins=service == ADMIN_SERVICE,
        )
        if named is not None:
            secret = metadata_value(metadata, API_KEY_HEADER)
            if named != self.region and secret:
                # A key made in another region whose tenant's home moved here (or moved
                # on from here): this region knows better than the key's prefix.
                moved = await self._engine.tenancy.moved_key_home(secret)
                if moved is not None:
                    return moved
            return named
        if not len(self.directory):
            return self.region  # one region: every tenant here is at home
        # A key of this region: its tenant's home (the key is verified here, with the
        # handler's own throttle; its failure is the answer the handler would give).
        key = await self._gate.key(context)
        home = await self._engine.tenancy.home_region(key.tenant_id)
        if home != self.region and home not in self.directory:
            raise FailedPrecondition(
                "tenant",
                f"tenant {key.tenant_id} lives in region {home!r}, which this node's region "
                f"directory does not list (known: {_known(self.directory, self.region)})",
            )
        return home

    def _loop_guard(self, context: Context, home: str) -> None:
        came_from = metadata_value(context.invocation_metadata(), FORWARDED_FROM_HEADER)
        if came_from is not None:
            raise FailedPrecondition(
                FORWARDED_FROM_HEADER,
                f"region {came_from!r} forwarded this call to region {self.region!r}, which "
                f"would forward it again to region {home!r}: the regions disagree about "
                "its home (their directories or the tenant's home differ); not forwarded",
            )

    # -- unary calls ---------------------------------------------------------------------
    async def unary(self, path: str, request: bytes, context: Context) -> bytes | None:
        """The home region's response bytes when the call belongs elsewhere (its errors
        are relayed as they came, through ``context.abort``); None to serve it here."""
        home = await self.home(path, context, request)
        if home == self.region:
            if self.fenced is not None:
                raise Unavailable(self.fenced)
            return None
        self._loop_guard(context, home)
        return await self._forward(home, path, request, context)

    async def _forward(self, home: str, path: str, request: bytes, context: Context) -> bytes:
        endpoints = self.directory.endpoints(home)
        metadata = forward_metadata(context.invocation_metadata(), self.region)
        failures: list[str] = []
        for endpoint in endpoints:
            remaining = context.time_remaining()
            if remaining is not None and remaining <= 0:
                await context.abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"deadline exceeded forwarding to region {home!r}",
                )
            call = self._channel(endpoint).unary_unary(path, None, None)(
                request, metadata=metadata, timeout=remaining
            )
            try:
                response: bytes = await call
            except grpc.aio.AioRpcError as exc:
                if exc.code() is grpc.StatusCode.UNAVAILABLE and not _answered(exc):
                    # Unreachable (no Tickwheel answered): the next endpoint may be.
                    failures.append(f"{endpoint}: {exc.details()}")
                    continue
                await context.abort(
                    exc.code(),
                    exc.details() or "",
                    trailing_metadata=tuple(relayed_trailers(exc.trailing_metadata())),
                )
                raise AssertionError("unreachable: context.abort raises") from None
            context.set_trailing_metadata(tuple(relayed_trailers(await call.trailing_metadata())))
            return response
        _log.warning("region %s is unreachable: %s", home, "; ".join(failures))
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            f"region {home!r} (this call's home) is unreachable from region {self.region!r}: "
            + "; ".join(failures),
        )
        raise AssertionError("unreachable: context.abort raises")

    def _channel(self, endpoint: str) -> grpc.aio.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = grpc.aio.insecure_channel(
                endpoint,
                options=[
                    ("grpc.max_receive_message_length", -1),
                    ("grpc.max_send_message_length", -1),
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1_000),
                ],
            )
            self._channels[endpoint] = channel
        return channel

    # -- worker streams ------------------------------------------------------------------
    async def stream(self, path: str, context: Context) -> None:
        """WrongRegion (naming the home and its endpoints) when the stream belongs to
        another region; it is not proxied."""
        home = await self.home(path, context)
        if home != self.region:
            raise WrongRegion(home, ",".join(self.directory.endpoints(home)))
        if self.fenced is not None:
            raise Unavailable(self.fenced)

    async def close(self) -> None:
        """Close the forwarding channels."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close(None)


def _answered(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a Tickwheel server answered (its errors carry status details): such an
    UNAVAILABLE (a store that failed) is the home's answer, not an unreachable node,
    and is not retried elsewhere (the write may have happened)."""
    trailers: Metadata = exc.trailing_metadata() or ()
    return any(k == STATUS_DETAILS_KEY for k, _ in trailers)

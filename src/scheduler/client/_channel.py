"""Channel set-up shared by the client and the worker SDK: one endpoint, or a region's
endpoints in order with fail-over (:class:`FailoverChannel`, docs/regions.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, cast

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler._errors import Unavailable
from scheduler.client._tls import TLSConfig
from scheduler.regions import RegionDirectory, key_region
from scheduler.wire import STATUS_DETAILS_KEY, error_info, error_reason

MAX_MESSAGE_BYTES = 64 << 20

_OPTIONS: list[tuple[str, int | str]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # Without it grpcio 1.6x+ waits a minute for an unanswered ping, whatever the above.
    ("grpc.http2.ping_timeout_ms", 10_000),
    # gRPC's own reconnect backoff (1 s growing to 120 s by default) would keep a
    # channel failing fast long after the server is back: try at least every second.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


MOVE_RETRY_S = 15.0
"""How long a unary call answered TENANT_MOVING is made again (a tenant's home move
pauses its calls for at most a couple of seconds; docs/regions.md)."""
_MOVING = error_reason("TenantMoving")


def _tenant_moving(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a Tickwheel server refused the call because its tenant's home is moving
    (nothing was done: the call may be made again as it was)."""
    if exc.code() is not grpc.StatusCode.UNAVAILABLE:
        return False
    trailers: Any = exc.trailing_metadata() or ()
    for k, v in trailers:
        if k == STATUS_DETAILS_KEY and isinstance(v, bytes):
            info = error_info(v)
            return info is not None and info.reason == _MOVING
    return False


class _MoveRetry(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """Makes a unary call again while its tenant's home move pauses it (TENANT_MOVING),
    with a short growing back-off, for at most :data:`MOVE_RETRY_S` and never past the
    call's own deadline."""

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        started = time.monotonic()
        timeout = client_call_details.timeout
        delay = 0.05
        details = client_call_details
        while True:
            call = await continuation(details, request)
            try:
                await call
            except grpc.aio.AioRpcError as exc:
                waited = time.monotonic() - started
                left = None if timeout is None else timeout - waited - delay
                if (
                    not _tenant_moving(exc)
                    or waited + delay > MOVE_RETRY_S
                    or (left is not None and left <= 0)
                ):
                    return call
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.2)  # about the nodes' poll of the moves
                details = grpc.aio.ClientCallDetails(
                    client_call_details.method,
                    left,
                    client_call_details.metadata,
                    client_call_details.credentials,
                    client_call_details.wait_for_ready,
                )
                continue
            return call


def _interceptors() -> Any:
    return [cast(Any, _MoveRetry())]


def open_channel(target: str, tls: TLSConfig | None) -> grpc.aio.Channel:
    """An (unconnected) channel to ``target``; TLS when ``tls`` is given. Its unary
    calls are made again while a tenant's home move pauses them (TENANT_MOVING)."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=_OPTIONS, interceptors=_interceptors())
    creds = grpc.ssl_channel_credentials(
        root_certificates=tls.server_root_ca_cert,
        private_key=tls.client_private_key,
        certificate_chain=tls.client_cert,
    )
    options = list(_OPTIONS)
    if tls.domain:
        options.append(("grpc.ssl_target_name_override", tls.domain))
    return grpc.aio.secure_channel(target, creds, options=options, interceptors=_interceptors())


async def check_reachable(channel: grpc.aio.Channel, target: str, timeout_s: float) -> None:
    """One health check: fails fast (Unavailable) on a wrong address or TLS set-up."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise Unavailable(f"cannot reach Tickwheel at {target}: {exc.details()}") from exc
        if exc.code() is not grpc.StatusCode.UNIMPLEMENTED:
            raise Unavailable(f"health check failed at {target}: {exc.details()}") from exc


def region_targets(
    target: str | None, api_key: str | None, regions: RegionDirectory | None
) -> tuple[str, ...]:
    """Where to connect: with a region directory that lists the region ``api_key``
    names (``tw_<region>.…``), that region's endpoints in directory order (its primary
    nodes, then its disaster-recovery ones); else ``target``."""
    region = key_region(api_key) if api_key else None
    if regions is not None and region is not None and region in regions:
        return regions.endpoints(region)
    if not target:
        where = f"region {region!r} is not in the directory" if region else "no region"
        raise ValueError(f"a target is needed: the API key names {where}")
    return (target,)


def _unreachable(exc: grpc.aio.AioRpcError) -> bool:
    """An UNAVAILABLE no Tickwheel server answered (its errors carry status details):
    the node is down or unreachable, so the next endpoint may do."""
    if exc.code() is not grpc.StatusCode.UNAVAILABLE:
        return False
    trailers: Any = exc.trailing_metadata() or ()
    return not any(k == STATUS_DETAILS_KEY for k, _ in trailers)


class FailoverChannel:
    """A channel over several endpoints of one region, tried in order: a unary call
    that finds its endpoint unreachable is made again on the next one (and the one that
    answered is tried first next time). Streams use the current endpoint; their owner
    calls :meth:`advance` when it is unreachable, :meth:`retarget` to go elsewhere.

    Stands in for a ``grpc.aio.Channel`` for the generated stubs (``unary_unary``,
    ``stream_stream``) and for :func:`check_reachable`."""

    def __init__(self, targets: Sequence[str], tls: TLSConfig | None) -> None:
        if not targets:
            raise ValueError("FailoverChannel needs at least one endpoint")
        self._tls = tls
        self._targets = tuple(targets)
        self._channels = [open_channel(t, tls) for t in self._targets]
        self._current = 0

    @property
    def targets(self) -> tuple[str, ...]:
        """The endpoints, in the order they are tried."""
        return self._targets

    @property
    def target(self) -> str:
        """The endpoint tried first now."""
        return self._targets[self._current]

    @property
    def current(self) -> grpc.aio.Channel:
        """The channel of :attr:`target`."""
        return self._channels[self._current]

    def advance(self) -> str:
        """Try the next endpoint first from now on (after the last, the first); it."""
        self._current = (self._current + 1) % len(self._targets)
        return self.target

    async def retarget(self, targets: Sequence[str]) -> None:
        """Use ``targets`` instead (a WRONG_REGION named them); closes the old channels."""
        old = self._channels
        self._targets = tuple(targets)
        self._channels = [open_channel(t, self._tls) for t in self._targets]
        self._current = 0
        for channel in old:
            await channel.close(None)

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A multi-callable that fails over to the next endpoint on an unreachable one."""

        async def call(request: Any, **call_kwargs: Any) -> Any:
            tried = 0
            while True:
                index = self._current
                multi = self._channels[index].unary_unary(method, *args, **kwargs)
                try:
                    return await multi(request, **call_kwargs)
                except grpc.aio.AioRpcError as exc:
                    tried += 1
                    if not _unreachable(exc) or tried >= len(self._channels):
                        raise
                    if self._current == index:
                        self.advance()

        return call

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A stream multi-callable on the current endpoint (read at each call)."""
        return lambda *a, **kw: self.current.stream_stream(method, *args, **kwargs)(*a, **kw)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`stream_stream`."""
        return lambda *a, **kw: self.current.unary_stream(method, *args, **kwargs)(*a, **kw)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`stream_stream`."""
        return lambda *a, **kw: self.current.stream_unary(method, *args, **kwargs)(*a, **kw)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        """The current endpoint's connectivity."""
        return self.current.get_state(try_to_connect)

    async def channel_ready(self) -> None:
        """Until the current endpoint's channel is ready."""
        await self.current.channel_ready()

    async def close(self, grace: float | None = None) -> None:
        """Close every endpoint's channel."""
        for channel in self._channels:
            await channel.close(grace)


async def connect_failover(
    targets: Sequence[str], tls: TLSConfig | None, timeout_s: float
) -> FailoverChannel:
    """A :class:`FailoverChannel` whose first endpoint that answers a health check is
    tried first; Unavailable (naming each) when none does."""
    channel = FailoverChannel(targets, tls)
    problems: list[str] = []
    try:
        for _ in targets:
            try:
                await check_reachable(channel.current, channel.target, timeout_s)
                return channel
            except Unavailable as exc:
                problems.append(exc.message)
                channel.advance()
        raise Unavailable("; ".join(problems))
    except BaseException:
        await channel.close(None)
        raise

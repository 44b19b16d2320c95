"""Assemble the gRPC server: the three services, health checking and reflection."""

from __future__ import annotations

import asyncio
import errno
import socket
from pathlib import Path
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection, reflection_pb2

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import Engine
from scheduler.server._admin import AdminService
from scheduler.server._auth import Gatekeeper
from scheduler.server._config import ServerConfig
from scheduler.server._decode import add_service, service_handlers
from scheduler.server._regions import Router
from scheduler.server._scheduler import SchedulerService
from scheduler.server._worker import WorkerService

SERVICE_NAMES: tuple[str, ...] = tuple(
    pb.DESCRIPTOR.services_by_name[name].full_name
    for name in ("SchedulerService", "WorkerService", "AdminService")
)
"""Fully qualified names of the Tickwheel services (``tickwheel.v1.SchedulerService``...)."""

KEEPALIVE_TIME_MS = 1_000
"""How often the server pings each connection (HTTP/2 PING), with or without data."""
KEEPALIVE_TIMEOUT_MS = 2_000
"""A ping unanswered this long closes the connection and its worker streams."""

REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"
"""The stable name of server reflection; grpcio-reflection serves only v1alpha, whose
messages are the same on the wire, so one servicer answers both names."""


def _register_reflection_v1() -> None:
    """Put ``grpc/reflection/v1/reflection.proto`` in the default pool (a copy of the
    v1alpha file under the v1 package), so reflection can describe itself under v1."""
    pool = descriptor_pool.Default()
    try:
        pool.FindServiceByName(REFLECTION_V1)
        return
    except KeyError:
        pass
    fdp = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(fdp)
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    fdp.name = "grpc/reflection/v1/reflection.proto"
    fdp.package = "grpc.reflection.v1"
    for msg in fdp.message_type:
        for field in msg.field:
            if field.type_name.startswith(old):
                field.type_name = new + field.type_name[len(old) :]
    for service in fdp.service:
        for method in service.method:
            method.input_type = new + method.input_type[len(old) :]
            method.output_type = new + method.output_type[len(old) :]
    pool.Add(fdp)


def _enable_reflection(server: grpc.aio.Server, names: tuple[str, ...]) -> None:
    """Server reflection under ``grpc.reflection.v1`` and ``v1alpha``."""
    _register_reflection_v1()
    servicer = reflection.aio.ReflectionServicer(  # type: ignore[attr-defined]
        (*names, reflection.SERVICE_NAME, REFLECTION_V1)
    )
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    for name in (reflection.SERVICE_NAME, REFLECTION_V1):
        handlers = {"ServerReflectionInfo": handler}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
        server.add_registered_method_handlers(name, handlers)  # type: ignore[attr-defined]


def server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """TLS (and mutual TLS when a client CA is configured) credentials, or None."""
    if config.tls_cert_path is None or config.tls_key_path is None:
        return None
    cert = Path(config.tls_cert_path).read_bytes()
    key = Path(config.tls_key_path).read_bytes()
    client_ca = Path(config.tls_client_ca_path).read_bytes() if config.tls_client_ca_path else None
    return grpc.ssl_server_credentials(
        [(key, cert)],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


class ListenError(OSError):
    """The server cannot listen on its address (in use, or not an address of this host)."""


def _split_listen(listen: str) -> tuple[str, int] | None:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_listen(listen: str, *, reuse_port: bool = False) -> None:
    """Raise :class:`ListenError` when ``listen`` is in use right now.

    grpcio logs a core error line of its own when a bind fails; a plain socket says so
    quietly first (the bind through grpcio stays the authority).
    """
    parts = _split_listen(listen)
    if parts is None or parts[1] == 0:
        return
    host, port = parts
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ListenError(
            errno.EADDRNOTAVAIL, f"cannot listen on {listen}: {exc.strerror}"
        ) from None
    for family, kind, proto, _name, addr in infos[:1]:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port and hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
                raise ListenError(exc.errno, f"cannot listen on {listen}: {reason}") from None


_Assembled = tuple[grpc.aio.Server, int, HealthServicer, Router, WorkerService]


class HeldServer(Protocol):
    """A started gRPC server a :class:`Server` takes over instead of binding its own
    (:class:`~scheduler.server.NotPromotedServer`, a standby node's holder)."""

    port: int

    @property
    def server(self) -> grpc.aio.Server: ...

    @property
    def health(self) -> HealthServicer: ...

    def stage(self, service: Any, handlers: dict[str, Any]) -> None:
        """Keep ``service``'s handlers (by method name) for :meth:`hand_over`."""

    def hand_over(self) -> None:
        """Serve the staged handlers from now on; the server is the taker's to stop."""


def server_options(config: ServerConfig) -> list[tuple[str, int]]:
    """The grpcio options of a Tickwheel server (a standby node's holder's too: the
    promote hands the holder's server the real services, docs/regions.md)."""
    return [
        ("grpc.so_reuseport", 1 if config.reuse_port else 0),
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", config.max_message_bytes),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        # Ping every connection each second, with or without data: a frozen, vanished
        # or cut-off worker's stream closes within ~keepalive time + timeout (3 s), its
        # unacked tasks go back at once and its running ones after the orphan grace
        # (EngineConfig.orphan_grace_s). A peer answers pings in its transport, so a
        # busy worker (its event loop or GIL held) still does.
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # grpcio 1.6x+ times an unanswered ping out by this, not the keepalive timeout
        # alone (its default is a minute: a frozen worker's stream lived that long).
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def add_health_and_reflection(server: grpc.aio.Server) -> HealthServicer:
    """Serve the health service and reflection on ``server``; its health servicer."""
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    _enable_reflection(server, (*SERVICE_NAMES, health.SERVICE_NAME))
    return health_servicer


def bind_port(server: grpc.aio.Server, config: ServerConfig) -> int:
    """Bind ``server`` to ``config.listen`` (with TLS when configured); the port, or
    :class:`ListenError`."""
    creds = server_credentials(config)
    try:
        if creds is None:
            port = server.add_insecure_port(config.listen)
        else:
            port = server.add_secure_port(config.listen, creds)
    except RuntimeError:  # grpcio's "Failed to bind to address"
        port = 0
    if port == 0:
        raise ListenError(
            errno.EADDRINUSE, f"cannot listen on {config.listen}: address already in use"
        )
    return port


def _assemble(engine: Engine, config: ServerConfig, held: HeldServer | None = None) -> _Assembled:
    """The server's parts, bound. With ``held`` (a promoted standby node's holder) the
    services go to the holder's server, already bound and serving, to be switched on
    by :meth:`HeldServer.hand_over`: the port never changes hands."""
    if held is None:
        check_listen(config.listen, reuse_port=config.reuse_port)
    server = grpc.aio.server(options=server_options(config)) if held is None else held.server
    gate = Gatekeeper(engine, config)  # one per server: the limits count its calls
    workers = WorkerService(engine, config, gate)
    # Every call goes home first (docs/regions.md); then each service decodes its own
    # requests: undecodable bytes answer INVALID_ARGUMENT.
    router = Router(engine, gate, region=config.region, directory=config.regions)
    services = pb.DESCRIPTOR.services_by_name
    for name, servicer in (
        ("SchedulerService", SchedulerService(engine, config, gate)),
        ("WorkerService", workers),
        ("AdminService", AdminService(engine, config, gate)),
    ):
        if held is None:
            add_service(server, servicer, services[name], pb, router)
        else:
            held.stage(services[name], service_handlers(servicer, services[name], pb, router))
    if held is not None:
        return server, held.port, held.health, router, workers
    health_servicer = add_health_and_reflection(server)
    return server, bind_port(server, config), health_servicer, router, workers


def build_server(engine: Engine, config: ServerConfig) -> grpc.aio.Server:
    """A bound, not yet started gRPC server serving ``engine``.

    Prefer :class:`Server`, which also reports the bound port and flips the health
    status on start and stop.
    """
    return _assemble(engine, config)[0]


class Server:
    """The Tickwheel gRPC server with a River-style start/stop contract.

    ``stop()`` is safe before ``start()`` and when called twice. The engine's own
    lifecycle belongs to the caller. With ``held`` (a :class:`HeldServer`: a promoted
    standby node's holder, started) it serves on the holder's gRPC server:
    :meth:`bind` stages the services there and :meth:`start` switches them on, so the
    port is one socket from the standby's start on and no client meets a closing
    listener.
    """

    def __init__(
        self, engine: Engine, config: ServerConfig, *, held: HeldServer | None = None
    ) -> None:
        self._engine = engine
        self._config = config
        self._held = held
        self._server: grpc.aio.Server | None = None
        self._bound: _Assembled | None = None
        self._router: Router | None = None
        self._workers: WorkerService | None = None
        self._health: HealthServicer | None = None
        self._port = 0
        self._serving = True
        self._fenced: str | None = None
        self._lock = asyncio.Lock()

    @property
    def port(self) -> int:
        """The bound port (0 before start)."""
        return self._port

    @property
    def config(self) -> ServerConfig:
        """The configuration this server runs with."""
        return self._config

    def bind(self) -> int:
        """Take the listening port without serving yet; returns it.

        Raises :class:`ListenError` when the address is in use. A node binds first so
        that it claims nothing when it could not serve; :meth:`start` binds itself when
        this was not called.
        """
        if self._bound is None and self._server is None:
            self._bound = _assemble(self._engine, self._config, self._held)
            self._port = self._bound[1]
            self._bound[3].fenced = self._fenced
        return self._port

    async def start(self) -> int:
        """Bind (unless :meth:`bind` did), start serving and report SERVING (or
        NOT_SERVING when :meth:`set_serving` said so); returns the bound port."""
        async with self._lock:
            if self._server is not None:
                return self._port
            self.bind()
            assert self._bound is not None
            (server, port, health_servicer, router, workers), self._bound = self._bound, None
            if self._held is None:
                await server.start()
            else:
                self._held.hand_over()
            self._server, self._port, self._health = server, port, health_servicer
            self._router, self._workers = router, workers
            await self._report()
            return port

    async def set_serving(self, serving: bool) -> None:
        """Report SERVING or NOT_SERVING on the health service (e.g. while the node has
        lost its shards); remembered across :meth:`start`."""
        self._serving = serving
        if self._health is not None:
            await self._report()

    def set_fenced(self, message: str | None) -> None:
        """With a message: answer every call of this node's region UNAVAILABLE with it
        (the node lost its region lease, docs/regions.md "Automatic failover"); None:
        serve again. Remembered across :meth:`start`."""
        self._fenced = message
        for router in (self._router, self._bound[3] if self._bound else None):
            if router is not None:
                router.fenced = message

    async def _report(self) -> None:
        health_servicer = self._health
        if health_servicer is None:
            return
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if self._serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        await health_servicer.set("", status)
        for name in SERVICE_NAMES:
            await health_servicer.set(name, status)

    async def stop(self, grace_s: float | None = None) -> None:
        """Report NOT_SERVING, let in-flight calls finish for the grace, then stop."""
        async with self._lock:
            server, health_servicer = self._server, self._health
            self._server = self._health = None
            bound, self._bound = self._bound, None
            router, self._router = self._router, None
            workers, self._workers = self._workers, None
            if workers is not None:
                workers.stopping = True  # the streams it ends now are not orphans
            if server is None and bound is not None:
                await bound[0].stop(0)  # bound, never started: free the port
                await bound[3].close()
            if server is None:
                return
            if health_servicer is not None:
                await health_servicer.enter_graceful_shutdown()
            await server.stop(self._config.stop_grace_s if grace_s is None else grace_s)
            if router is not None:
                await router.close()  # after the calls it forwards have ended

    async def wait_for_termination(self) -> None:
        """Block until the server stops."""
        server = self._server
        if server is not None:
            await server.wait_for_termination()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

"""Assemble the gRPC server: the three services, health checking and reflection."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.engine import Engine
from scheduler.server._admin import AdminService
from scheduler.server._config import ServerConfig
from scheduler.server._scheduler import SchedulerService
from scheduler.server._worker import WorkerService

SERVICE_NAMES: tuple[str, ...] = tuple(
    pb.DESCRIPTOR.services_by_name[name].full_name
    for name in ("SchedulerService", "WorkerService", "AdminService")
)
"""Fully qualified names of the Tickwheel services (``tickwheel.v1.SchedulerService``...)."""


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


def _assemble(engine: Engine, config: ServerConfig) -> tuple[grpc.aio.Server, int, HealthServicer]:
    options = [
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", config.max_message_bytes),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        # Ping idle streams: a frozen or vanished worker's stream closes within
        # ~keepalive time + timeout, and its unacked tasks go back at once.
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
    ]
    server = grpc.aio.server(options=options)
    pbg.add_SchedulerServiceServicer_to_server(  # type: ignore[no-untyped-call]
        SchedulerService(engine, config), server
    )
    pbg.add_WorkerServiceServicer_to_server(  # type: ignore[no-untyped-call]
        WorkerService(engine, config), server
    )
    pbg.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
        AdminService(engine, config), server
    )
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    creds = server_credentials(config)
    if creds is None:
        port = server.add_insecure_port(config.listen)
    else:
        port = server.add_secure_port(config.listen, creds)
    if port == 0:
        raise OSError(f"could not bind {config.listen}")
    return server, port, health_servicer


def build_server(engine: Engine, config: ServerConfig) -> grpc.aio.Server:
    """A bound, not yet started gRPC server serving ``engine``.

    Prefer :class:`Server`, which also reports the bound port and flips the health
    status on start and stop.
    """
    return _assemble(engine, config)[0]


class Server:
    """The Tickwheel gRPC server with a River-style start/stop contract.

    ``stop()`` is safe before ``start()`` and when called twice. The engine's own
    lifecycle belongs to the caller.
    """

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self._engine = engine
        self._config = config
        self._server: grpc.aio.Server | None = None
        self._health: HealthServicer | None = None
        self._port = 0
        self._lock = asyncio.Lock()

    @property
    def port(self) -> int:
        """The bound port (0 before start)."""
        return self._port

    @property
    def config(self) -> ServerConfig:
        """The configuration this server runs with."""
        return self._config

    async def start(self) -> int:
        """Bind, start serving and report SERVING; returns the bound port."""
        async with self._lock:
            if self._server is not None:
                return self._port
            server, port, health_servicer = _assemble(self._engine, self._config)
            await server.start()
            self._server, self._port, self._health = server, port, health_servicer
            await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
            for name in SERVICE_NAMES:
                await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
            return port

    async def stop(self, grace_s: float | None = None) -> None:
        """Report NOT_SERVING, let in-flight calls finish for the grace, then stop."""
        async with self._lock:
            server, health_servicer = self._server, self._health
            self._server = self._health = None
            if server is None:
                return
            if health_servicer is not None:
                await health_servicer.enter_graceful_shutdown()
            await server.stop(self._config.stop_grace_s if grace_s is None else grace_s)

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

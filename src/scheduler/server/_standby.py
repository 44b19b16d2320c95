"""The server of a standby node (``tickwheel serve --standby``, issue 16): it holds the
node's port while the node's database is a standby that was not promoted, reports
NOT_SERVING on the health service and answers every Tickwheel RPC with UNAVAILABLE, so a
client listing the region's endpoints in order moves on to the next one."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.server._config import ServerConfig
from scheduler.server._server import (
    SERVICE_NAMES,
    add_health_and_reflection,
    bind_port,
    check_listen,
    server_options,
)


def _refuser(message: str, client_streaming: bool, server_streaming: bool) -> Any:
    async def refuse(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)

    async def refuse_stream(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)
        yield  # pragma: no cover - a generator, for the streaming handler kinds

    if client_streaming and server_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    if client_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if server_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse)


class _Switch(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """Every Tickwheel method: refused with ``message`` until :meth:`go_live` switches
    on the handlers :meth:`stage` was given."""

    def __init__(self, message: str) -> None:
        self._refusers: dict[str, Any] = {}
        for service in pb.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                self._refusers[f"/{service.full_name}/{method.name}"] = _refuser(
                    message, method.client_streaming, method.server_streaming
                )
        self._staged: dict[str, Any] = {}
        self._handlers = self._refusers

    def stage(self, service: ServiceDescriptor, handlers: dict[str, Any]) -> None:
        for name, handler in handlers.items():
            self._staged[f"/{service.full_name}/{name}"] = handler

    def go_live(self) -> None:
        self._handlers = {**self._refusers, **self._staged}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        return self._handlers.get(handler_call_details.method)


class NotPromotedServer:
    """Holds ``config.listen`` for a standby node until its database is promoted.

    :meth:`start` binds and serves (ListenError when the address is in use) with the
    options of a real :class:`~scheduler.server.Server`. At the promote the node's real
    server is built on this one (``Server(..., held=this)``): it stages its services
    here and :meth:`hand_over` switches them on. The listening socket is the same from
    the standby's start to the node's stop: no client is refused or reset across the
    promote (a second listener closing would reset the connections in its queue).
    """

    def __init__(self, config: ServerConfig, message: str) -> None:
        self._config = config
        self._switch = _Switch(message)
        self._server: grpc.aio.Server | None = None
        self._health: HealthServicer | None = None
        self.port = 0

    @property
    def server(self) -> grpc.aio.Server:
        """The gRPC server (after :meth:`start`, until :meth:`hand_over`)."""
        if self._server is None:
            raise RuntimeError("the standby server is not serving")
        return self._server

    @property
    def health(self) -> HealthServicer:
        """Its health servicer (after :meth:`start`, until :meth:`hand_over`)."""
        if self._health is None:
            raise RuntimeError("the standby server is not serving")
        return self._health

    async def start(self) -> int:
        """Bind, serve, report NOT_SERVING; the bound port."""
        check_listen(self._config.listen, reuse_port=self._config.reuse_port)
        server = grpc.aio.server(options=server_options(self._config))
        server.add_generic_rpc_handlers((self._switch,))
        health_servicer = add_health_and_reflection(server)
        port = bind_port(server, self._config)
        await server.start()
        for name in ("", *SERVICE_NAMES):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self._server, self._health, self.port = server, health_servicer, port
        return port

    def stage(self, service: ServiceDescriptor, handlers: dict[str, Any]) -> None:
        """Keep ``service``'s handlers (by method name) for :meth:`hand_over`."""
        self._switch.stage(service, handlers)

    def hand_over(self) -> None:
        """Serve the staged services from now on; the server is the real
        :class:`~scheduler.server.Server`'s to stop (:meth:`stop` no longer does)."""
        self._switch.go_live()
        self._server = self._health = None

    async def stop(self) -> None:
        """Stop at once (every call is refused anyway); safe twice."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)


__all__ = ["NotPromotedServer"]

"""The server of a standby node (``tickwheel serve --standby``, issue 16): it holds the
node's port while the node's database is a standby that was not promoted, reports
NOT_SERVING on the health service and answers every Tickwheel RPC with UNAVAILABLE, so a
client listing the region's endpoints in order moves on to the next one."""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.server._config import ServerConfig
from scheduler.server._server import SERVICE_NAMES, check_listen, server_credentials


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


class _Refuse(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(self, message: str) -> None:
        self._handlers: dict[str, Any] = {}
        for service in pb.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                self._handlers[f"/{service.full_name}/{method.name}"] = _refuser(
                    message, method.client_streaming, method.server_streaming
                )

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        return self._handlers.get(handler_call_details.method)


class NotPromotedServer:
    """Holds ``config.listen`` for a standby node until its database is promoted.

    :meth:`start` binds and serves (ListenError when the address is in use), with
    SO_REUSEPORT: the node's real :class:`~scheduler.server.Server` binds the same port
    (``reuse_port``) and starts before :meth:`stop` closes this one.
    """

    def __init__(self, config: ServerConfig, message: str) -> None:
        self._config = config
        self._message = message
        self._server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self) -> int:
        """Bind, serve, report NOT_SERVING; the bound port."""
        from scheduler.server._server import ListenError

        check_listen(self._config.listen, reuse_port=self._config.reuse_port)
        # SO_REUSEPORT always: at the promote the node's real server binds the same
        # port beside this one, starts, and only then is this one stopped, so the port
        # never stops listening (no "connection refused" across the promote).
        server = grpc.aio.server(options=[("grpc.so_reuseport", 1)])
        server.add_generic_rpc_handlers((_Refuse(self._message),))
        health_servicer = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        creds = server_credentials(self._config)
        try:
            port = (
                server.add_insecure_port(self._config.listen)
                if creds is None
                else server.add_secure_port(self._config.listen, creds)
            )
        except RuntimeError:
            port = 0
        if port == 0:
            raise ListenError(98, f"cannot listen on {self._config.listen}: address in use")
        await server.start()
        for name in ("", *SERVICE_NAMES):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self._server, self.port = server, port
        return port

    async def stop(self) -> None:
        """Stop at once (every call is refused anyway); safe twice."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)


__all__ = ["NotPromotedServer"]

"""Channel set-up shared by the client and the worker SDK."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler._errors import Unavailable
from scheduler.client._tls import TLSConfig

MAX_MESSAGE_BYTES = 64 << 20

_OPTIONS: list[tuple[str, int | str]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # gRPC's own reconnect backoff (1 s growing to 120 s by default) would keep a
    # channel failing fast long after the server is back: try at least every second.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


def open_channel(target: str, tls: TLSConfig | None) -> grpc.aio.Channel:
    """An (unconnected) channel to ``target``; TLS when ``tls`` is given."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=_OPTIONS)
    creds = grpc.ssl_channel_credentials(
        root_certificates=tls.server_root_ca_cert,
        private_key=tls.client_private_key,
        certificate_chain=tls.client_cert,
    )
    options = list(_OPTIONS)
    if tls.domain:
        options.append(("grpc.ssl_target_name_override", tls.domain))
    return grpc.aio.secure_channel(target, creds, options=options)


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

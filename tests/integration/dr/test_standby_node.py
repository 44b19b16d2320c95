"""A standby node (``NodeConfig.standby``) keeps listening across the promote (issue
38): the real server serves on the holder's gRPC server, one listening socket
throughout, so a client connecting in a loop is never refused or reset; and the port is
the node's alone (no SO_REUSEPORT unless asked)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler.node import Node, NodeConfig
from scheduler.server import ListenError, ServerConfig
from scheduler.server._server import check_listen
from scheduler.store.postgres import dr
from tests.support.dr import Pair, replicated_pair
from tests.support.servers import free_port, port_open
from tests.support.waiting import eventually


@pytest.fixture
def pair() -> Iterator[Pair]:
    with replicated_pair("tickwheel_dr_socket") as p:
        yield p


class _Prober:
    """Connects to ``port`` over TCP in a loop on a thread; counts what happened."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connected = 0
        self.refused = 0
        self.other: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                    self.connected += 1
            except ConnectionRefusedError:
                self.refused += 1
            except OSError as exc:
                self.other.append(repr(exc))

    def __enter__(self) -> _Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


async def _health(port: int) -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=2
            )
        except grpc.aio.AioRpcError:
            return -1
        return int(reply.status)


async def test_the_port_keeps_listening_across_the_promote(pair: Pair) -> None:
    port = free_port()
    node = Node(
        NodeConfig(
            store_url=pair.standby_dsn,
            standby=True,
            standby_poll_interval_s=0.05,
            server=ServerConfig(listen=f"127.0.0.1:{port}"),
        )
    )
    starting = asyncio.create_task(node.start())
    try:
        await eventually(
            lambda: asyncio.to_thread(port_open, "127.0.0.1", port), what="the holder to listen"
        )
        with _Prober(port) as probe:
            with pytest.raises(ListenError, match="address already in use"):
                check_listen(f"127.0.0.1:{port}", reuse_port=True)  # no one shares it
            before = await eventually(
                lambda: asyncio.to_thread(lambda: probe.connected),
                until=lambda n: n >= 20,
                what="connections to the holder",
            )
            report = await dr.promote(pair.standby_admin_dsn)
            assert report.fenced
            await asyncio.wait_for(starting, timeout=60)  # the engine opened; it serves
            at_start = probe.connected
            await eventually(
                lambda: asyncio.to_thread(lambda: probe.connected),
                until=lambda n: n >= at_start + 20,
                what="connections to the real server",
            )
        assert node.port == port
        assert probe.refused == 0, f"{probe.refused} refused of {probe.connected + probe.refused}"
        assert probe.other == []
        assert probe.connected > before
        assert await _health(port) == health_pb2.HealthCheckResponse.SERVING
    finally:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await node.stop(grace_s=0)

"""In-process worker lifecycle fixtures: a real server over SQLite, optionally on a
fake clock, and one session-wide in-memory span exporter."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scheduler.client import AdminClient, Client
from scheduler.engine import Engine, EngineConfig
from scheduler.node import Node, NodeConfig
from scheduler.server import ServerConfig
from tests.support.clock import FakeClock

ADMIN_TOKEN = "worker-lifecycle-admin-token"


@dataclasses.dataclass
class Stack:
    """A running server, one tenant and a client of it."""

    engine: Engine
    target: str
    key: str
    client: Client


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    """Spans of every process-wide tracer; tests filter by their own trace id.

    The global provider can be set only once per process, so it is set here once
    (or joined, when another fixture already installed an SDK provider).
    """
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


async def _stack(
    tmp_path: Path, config: EngineConfig, clock: Callable[[], datetime] | None
) -> AsyncIterator[Stack]:
    node = Node(
        NodeConfig(
            store_url="sqlite:///" + str(tmp_path / "t.db"),
            engine=config,
            server=ServerConfig(listen="127.0.0.1:0", admin_token=ADMIN_TOKEN),
        ),
        clock=clock,
    )
    try:
        await node.start()
        engine, target = node.engine, node.target
        async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
            tenant = await admin.create_tenant("lifecycle")
            key = (await admin.create_api_key(tenant.id, "k")).secret
        client = await Client.connect(target, api_key=key)
        try:
            yield Stack(engine, target, key, client)
        finally:
            await client.close()
    finally:
        await node.stop(0)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    """Real time, short leases: a lease outlives a task only through heartbeats."""
    config = EngineConfig(
        lease_ttl_s=1.5, heartbeat_interval_s=0.3, preload_interval_s=0.2, retry_base_s=0.2
    )
    async for s in _stack(tmp_path, config, None):
        yield s


@pytest.fixture
async def clock_stack(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Stack]:
    """A stack whose engine runs on ``clock``."""
    config = EngineConfig(preload_interval_s=0.2, retry_base_s=1.0)
    async for s in _stack(tmp_path, config, clock):
        yield s

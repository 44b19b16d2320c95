"""An in-process Tickwheel server over the real engine and a SQLite store."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scheduler.client import AdminClient, Client
from scheduler.engine import Engine, EngineConfig
from scheduler.node import Node, NodeConfig
from scheduler.server import Server, ServerConfig
from tests.support.waiting import eventually

__all__ = ["ADMIN_TOKEN", "Stack", "engine_config", "eventually", "running_stack"]

ADMIN_TOKEN = "test-admin-token-0123456789"


@dataclasses.dataclass
class Stack:
    """A running server and two tenants with a key each."""

    engine: Engine
    server: Server
    target: str
    admin: AdminClient
    key_a: str
    key_b: str
    tenant_a: str
    tenant_b: str

    async def client(self, key: str | None = None) -> Client:
        return await Client.connect(self.target, api_key=key or self.key_a)


def engine_config() -> EngineConfig:
    """Short leases so lease-related behaviour shows within a test; exact counts (no
    count cache) unless a test passes its own ``count_cache_ttl_s``."""
    return EngineConfig(
        lease_ttl_s=6.0,
        heartbeat_interval_s=1.0,
        preload_interval_s=0.2,
        retry_base_s=0.2,
        count_cache_ttl_s=0,
    )


@contextlib.asynccontextmanager
async def running_stack(url: str, engine: EngineConfig | None = None) -> AsyncIterator[Stack]:
    """A node (the composition root) on the store at ``url``, with two tenants."""
    node = Node(
        NodeConfig(
            store_url=url,
            engine=engine or engine_config(),
            server=ServerConfig(listen="127.0.0.1:0", admin_token=ADMIN_TOKEN),
        )
    )
    try:
        await node.start()
        engine, server, target = node.engine, node.server, node.target
        admin = await AdminClient.connect(target, admin_token=ADMIN_TOKEN)
        try:
            a = await admin.create_tenant("tenant-a")
            b = await admin.create_tenant("tenant-b")
            key_a = (await admin.create_api_key(a.id, "a")).secret
            key_b = (await admin.create_api_key(b.id, "b")).secret
            yield Stack(engine, server, target, admin, key_a, key_b, str(a.id), str(b.id))
        finally:
            await admin.close()
    finally:
        await node.stop(0)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with running_stack("sqlite:///" + str(tmp_path / "t.db")) as s:
        yield s


@pytest.fixture
async def pg_stack(pg_dsn: str) -> AsyncIterator[Stack]:
    """The same stack over a PostgreSQL database of this test's own."""
    async with running_stack(pg_dsn) as s:
        yield s


@pytest.fixture
async def client(stack: Stack) -> AsyncIterator[Client]:
    c = await stack.client()
    try:
        yield c
    finally:
        await c.close()

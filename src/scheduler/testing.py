"""A public testing API: start an embedded Tickwheel node with a tenant, a key and a client.

Like Temporal's ``WorkflowEnvironment.start_local``::

    async with start_local() as env:
        task = await env.client.submit("hello", {}, strict_timing=True)
        worker = Worker(env.target, api_key=env.api_key, handlers={"hello": handle})

:func:`start_local` runs a :class:`~scheduler.node.Node` (in-memory SQLite unless told
otherwise, a free loopback port, an admin token), creates one tenant and one API key
through the admin API, and yields a :class:`LocalEnvironment` with a connected
:class:`~scheduler.client.Client` and :class:`~scheduler.client.AdminClient`.
Everything is closed on exit, in reverse order.

Calls ``scheduler.node`` and the client SDK; called by tests (ours and users').
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any

from scheduler.client import AdminClient, Client
from scheduler.engine import Engine, EngineConfig
from scheduler.node import Node, NodeConfig
from scheduler.server import ServerConfig

MEMORY_STORE = "sqlite://:memory:"
"""The default store of :func:`start_local`: nothing on disk, nothing to clean up."""


@dataclasses.dataclass(frozen=True, slots=True)
class LocalEnvironment:
    """A running embedded node and what a test needs to talk to it."""

    node: Node
    """The node (its engine, server and store are public attributes)."""
    target: str
    """``host:port`` of the node's gRPC server."""
    admin_token: str
    """The token the node's AdminService accepts."""
    admin: AdminClient
    """A connected admin client."""
    tenant_id: uuid.UUID
    """The tenant created for the test."""
    api_key: str
    """The secret of that tenant's API key."""
    client: Client
    """A client connected with :attr:`api_key`."""

    @property
    def engine(self) -> Engine:
        """The node's engine (for probes such as ``engine.stats``)."""
        return self.node.engine


@contextlib.asynccontextmanager
async def start_local(
    *,
    store_url: str = MEMORY_STORE,
    engine: EngineConfig | None = None,
    tenant_name: str = "test",
    tier: str = "STANDARD",
    rate_limit_rps: int = 0,
    max_concurrent_workers: int = 0,
    admin_token: str | None = None,
    clock: Callable[[], datetime] | None = None,
    server_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[LocalEnvironment]:
    """Start an embedded node on a free port with one tenant; yield its environment.

    ``server_options``: further :class:`~scheduler.server.ServerConfig` fields (limits,
    ``dashboard_secret``)."""
    token = admin_token or secrets.token_urlsafe(24)
    engine = engine or EngineConfig()
    node = Node(
        NodeConfig(
            store_url=store_url,
            engine=engine,
            server=ServerConfig(
                listen="127.0.0.1:0",
                admin_token=token,
                region=engine.region,
                **(server_options or {}),
            ),
        ),
        clock=clock,
    )
    async with contextlib.AsyncExitStack() as stack:
        await node.start()
        stack.push_async_callback(node.stop, 0)
        target = node.target
        admin = await AdminClient.connect(target, admin_token=token)
        stack.push_async_callback(admin.close)
        tenant = await admin.create_tenant(
            tenant_name,
            tier=tier,
            rate_limit_rps=rate_limit_rps,
            max_concurrent_workers=max_concurrent_workers,
        )
        key = (await admin.create_api_key(tenant.id, tenant_name)).secret
        client = await Client.connect(target, api_key=key)
        stack.push_async_callback(client.close)
        yield LocalEnvironment(
            node=node,
            target=target,
            admin_token=token,
            admin=admin,
            tenant_id=uuid.UUID(str(tenant.id)),
            api_key=key,
            client=client,
        )

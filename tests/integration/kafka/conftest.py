"""An in-process Tickwheel stack in Kafka mode: SQLite store, engine with Kafka
outlets, gRPC server, a SYSTEM tenant (for Kafka workers) and an ordinary tenant.

Tansu (the test broker) cannot serve InitProducerId (see test_outlet.py), so the
outlets here run with ``idempotent=False``; everything else is as in production.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path

import pytest

from scheduler.client import AdminClient, Client
from scheduler.engine import Engine, EngineConfig
from scheduler.kafka import KafkaConfig, KafkaOutlet
from scheduler.node import Node, NodeConfig
from scheduler.server import ServerConfig
from scheduler.types import Pool
from scheduler.worker import KafkaSource, ReconnectConfig, Worker
from tests.support.servers import KafkaServer

ADMIN_TOKEN = "test-admin-token-0123456789"


@dataclasses.dataclass
class KafkaStack:
    engine: Engine
    target: str
    kafka: KafkaConfig
    outlets: list[KafkaOutlet]
    system_key: str
    tenant_key: str
    tenant_id: uuid.UUID

    async def client(self) -> Client:
        return await Client.connect(self.target, api_key=self.tenant_key)

    def source(self, **kw: object) -> KafkaSource:
        args: dict[str, object] = {
            "bootstrap_servers": self.kafka.bootstrap_servers,
            "pools": self.kafka.pools,
            "topic_prefix": self.kafka.topic_prefix,
            "group_id": f"{self.kafka.topic_prefix}-workers",
            "partitions": self.kafka.partitions,
            "session_timeout_s": 10.0,
            "heartbeat_interval_s": 0.5,
        }
        args.update(kw)
        return KafkaSource(**args)  # type: ignore[arg-type]

    def worker(self, handlers: dict[str, object], **kw: object) -> Worker:
        source = kw.pop("source", None) or self.source()
        return Worker(
            self.target,
            api_key=self.system_key,
            handlers=handlers,  # type: ignore[arg-type]
            kafka=source,  # type: ignore[arg-type]
            reconnect=ReconnectConfig(initial_backoff_s=0.05, max_backoff_s=0.5),
            **kw,  # type: ignore[arg-type]
        )


def kafka_config(server: KafkaServer, prefix: str) -> KafkaConfig:
    return KafkaConfig(
        bootstrap_servers=server.bootstrap,
        pools=frozenset({Pool.CRITICAL}),
        topic_prefix=prefix,
        capacity_per_pool=50,
        idempotent=False,  # Tansu: no InitProducerId (test_outlet.py)
        partitions=2,
        request_timeout_s=10.0,
    )


MakeStack = Callable[..., Awaitable[KafkaStack]]


@pytest.fixture
async def make_stack(
    tmp_path: Path, kafka_server: KafkaServer, kafka_prefix: str
) -> AsyncIterator[MakeStack]:
    """``await make_stack(config, clock=...)``: a running stack, torn down after the test."""
    cleanups: list[Callable[[], object]] = []

    async def make(
        config: EngineConfig | None = None, clock: Callable[[], datetime] | None = None
    ) -> KafkaStack:
        kafka = kafka_config(kafka_server, kafka_prefix)
        node = Node(
            NodeConfig(
                store_url="sqlite:///" + str(tmp_path / "k.db"),
                engine=config
                or EngineConfig(lease_ttl_s=10, heartbeat_interval_s=1, preload_interval_s=0.1),
                server=ServerConfig(listen="127.0.0.1:0", admin_token=ADMIN_TOKEN),
                kafka=kafka,
            ),
            clock=clock,
        )
        cleanups.append(lambda: node.stop(0))
        await node.start()
        engine, outlets, target = node.engine, node.outlets, node.target
        admin = await AdminClient.connect(target, admin_token=ADMIN_TOKEN)
        try:
            platform = await admin.create_tenant("platform", tier="SYSTEM")
            tenant = await admin.create_tenant("tenant")
            system_key = (await admin.create_api_key(platform.id, "kafka-workers")).secret
            tenant_key = (await admin.create_api_key(tenant.id, "app")).secret
        finally:
            await admin.close()
        return KafkaStack(
            engine, target, kafka, outlets, system_key, tenant_key, uuid.UUID(str(tenant.id))
        )

    try:
        yield make
    finally:
        for cleanup in reversed(cleanups):
            await cleanup()  # type: ignore[misc]

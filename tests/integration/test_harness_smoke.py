"""Smoke tests that prove each real-server fixture works end to end."""

from __future__ import annotations

import asyncio
import uuid

import aetcd
import asyncpg
import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.support.servers import EtcdServer, KafkaServer, PostgresServer, RedisServer


async def test_postgres_query(postgres_server: PostgresServer) -> None:
    conn = await asyncpg.connect(postgres_server.dsn(), timeout=10)
    try:
        assert await conn.fetchval("SELECT 6 * 7") == 42
        # fsync is left on: the durability numbers in benchmarks are honest.
        assert await conn.fetchval("SHOW fsync") == "on"
        assert postgres_server.port != 5432
    finally:
        await conn.close()


async def test_pg_dsn_is_isolated_and_migrated(
    pg_dsn: str, postgres_server: PostgresServer
) -> None:
    conn = await asyncpg.connect(pg_dsn, timeout=10)
    try:
        db = await conn.fetchval("SELECT current_database()")
        assert db.startswith("t_")
        assert await conn.fetchval("SELECT to_regclass('public.tasks') IS NOT NULL")
        await conn.execute("CREATE TABLE only_here (x int)")
    finally:
        await conn.close()
    other = await asyncpg.connect(postgres_server.dsn("tickwheel_template"), timeout=10)
    try:
        assert await other.fetchval("SELECT to_regclass('public.only_here')") is None
    finally:
        await other.close()


async def test_redis_round_trip(redis_server: RedisServer, redis_prefix: str) -> None:
    client = aioredis.from_url(redis_server.url, socket_timeout=5)
    try:
        key = f"{redis_prefix}:k"
        await client.set(key, b"v")
        assert await client.get(key) == b"v"
        assert redis_server.port != 6379
    finally:
        await client.aclose()


async def test_etcd_put_get_under_lease(etcd_server: EtcdServer, etcd_prefix: str) -> None:
    client = aetcd.Client(host=etcd_server.host, port=etcd_server.port, timeout=10)
    try:
        lease = await client.lease(ttl=5)
        key = f"{etcd_prefix}/owner".encode()
        await client.put(key, b"node-a", lease=lease)
        got = await client.get(key)
        assert got is not None
        assert got.value == b"node-a"
        assert got.lease == lease.id
        await lease.revoke()
        assert await client.get(key) is None
    finally:
        await client.close()


@pytest.mark.timeout(120)
async def test_kafka_produce_consume_keeps_headers(
    kafka_server: KafkaServer, kafka_prefix: str
) -> None:
    topic = f"{kafka_prefix}.smoke"
    producer = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap, request_timeout_ms=10000)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, b"payload", key=b"k", headers=[("traceparent", b"00-abc-01")]
        )
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_server.bootstrap,
        group_id=f"g-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), timeout=60)
        assert record.value == b"payload"
        assert record.key == b"k"
        assert ("traceparent", b"00-abc-01") in list(record.headers)
        await consumer.commit()
    finally:
        await consumer.stop()

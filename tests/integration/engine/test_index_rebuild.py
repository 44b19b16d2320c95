"""A node rebuilds its own shards' Redis index when it finds it lost (issue 17).

A FLUSHALL (or a Redis restart) empties the index of shards a node keeps owning. Until
now only the next owner rebuilt it, at a takeover (28 s in the chaos run); meanwhile a
node over its wheel cap could spill nothing, and a takeover found no index. Here a
running engine over a real Redis, with tasks waiting in the index (over the wheel's
cap) and due seconds later, has Redis flushed under it: the engine notices on its
index round, rebuilds the shards from the store, says so in the log and in
``EngineStats.index_rebuilds``, spills into the rebuilt index again, and every task
still runs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from scheduler.engine import AssignmentBatch, Engine, SubmitSpec, WorkerHello
from scheduler.index import RedisTimeIndex
from scheduler.metrics import MetricsConfig
from scheduler.metrics._collectors import EngineCollector
from scheduler.metrics._depth import DepthPoller
from scheduler.store import Store
from scheduler.types import Completion, FencedWrite
from tests.support.engine import engine_config
from tests.support.servers import RedisServer
from tests.support.waiting import eventually

CAP = 10
FIRST, SECOND = 40, 20


def _exported_rebuilds(engine: Engine) -> float | None:
    """``tickwheel_index_rebuilds_total`` as a scrape of this engine would show it."""
    registry = CollectorRegistry()
    registry.register(EngineCollector(engine, DepthPoller(engine.store, 60.0), MetricsConfig()))
    return registry.get_sample_value("tickwheel_index_rebuilds_total")


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_flushed_index_is_rebuilt_by_its_owner_and_serves_again(
    store: Store,
    redis_client: aioredis.Redis,
    redis_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tickwheel.engine")
    index = RedisTimeIndex(redis_client, key_prefix=redis_prefix)
    config = engine_config(wheel_max_timers=CAP, index_poll_ms=5)
    engine = Engine(store, config, index=index)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id

        async def rebuilding() -> int:
            return engine.shards_rebuilding

        await eventually(rebuilding, until=lambda n: n == 0, what="index seeded at start")
        rebuilt_at_start = engine.stats.index_rebuilds

        def specs(n: int, due_s: float) -> list[SubmitSpec]:
            now = engine.now()
            return [
                SubmitSpec(
                    type="t",
                    scheduled_at=now + timedelta(seconds=due_s + i / 100),
                    strict_timing=True,
                )
                for i in range(n)
            ]

        first = await engine.submit(tenant, specs(FIRST, 12.0))
        first_ids = {r.task.id for r in first}
        shards = sorted({r.task.shard_id for r in first})

        async def spilled() -> int:
            return engine.stats.spilled

        await eventually(spilled, until=lambda n: n >= FIRST - CAP, what="tasks spilled")

        await redis_client.flushall()

        async def indexed() -> set[uuid.UUID]:
            if await index.lost(shards):
                return set()
            return {p.key.id for s in shards for p in await index.load(s)}

        # The owner finds its shards lost and rebuilds them from the store: every task
        # of the first batch (none is due yet) is back in the index.
        await eventually(
            indexed, until=lambda ids: ids >= first_ids, timeout_s=8.0, what="index rebuilt"
        )
        assert engine.stats.index_rebuilds > rebuilt_at_start
        # ... and so does /metrics' counter (the collector a node's endpoint registers).
        assert _exported_rebuilds(engine) == engine.stats.index_rebuilds
        assert any(
            "lost" in r.getMessage() and "rebuil" in r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING
        ), [r.getMessage() for r in caplog.records]

        # Over the cap again: the new tasks wait in the rebuilt index, not the wheel.
        before = engine.stats.spilled
        second = await engine.submit(tenant, specs(SECOND, 1.0))
        await eventually(spilled, until=lambda n: n > before, what="spilled into the rebuilt index")

        # And every task still runs, each once.
        session = await engine.open_session(
            WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"t"}), slots=20)
        )
        done: set[uuid.UUID] = set()
        wanted = first_ids | {r.task.id for r in second}
        while done != wanted:
            event = await asyncio.wait_for(session.next_event(), 30)
            assert isinstance(event, AssignmentBatch), event
            writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in event.assignments]
            assert await session.ack(writes) == ["ok"] * len(writes)
            outcomes = await session.complete(
                [Completion(key=a.key, token=a.fencing_token) for a in event.assignments]
            )
            assert outcomes == ["ok"] * len(writes)
            fresh = {a.key.id for a in event.assignments}
            assert not fresh & done, "a task ran twice"
            done |= fresh
            session.grant(len(fresh))
        await session.close()
    finally:
        await engine.stop()

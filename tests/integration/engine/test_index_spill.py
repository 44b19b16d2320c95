"""Over the wheel's memory cap, tasks wait in the time index and still go out on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from scheduler.engine import AssignmentBatch, Engine, SubmitSpec, WorkerHello
from scheduler.index import MemoryTimeIndex, RedisTimeIndex, TimeIndex
from scheduler.store import Store, open_store
from scheduler.types import Completion, FencedWrite
from tests.support.engine import engine_config
from tests.support.servers import RedisServer
from tests.support.waiting import eventually

CAP = 10


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path}/spill.db")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture(params=["memory", "redis"])
async def index(request: pytest.FixtureRequest, redis_prefix: str) -> AsyncIterator[TimeIndex]:
    if request.param == "memory":
        idx: TimeIndex = MemoryTimeIndex()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        idx = RedisTimeIndex(
            aioredis.from_url(server.url), key_prefix=redis_prefix, owns_client=True
        )
    try:
        yield idx
    finally:
        await idx.close()


async def _seed(engine: Engine, index: TimeIndex) -> None:
    """The node seeds the index when it takes its shards (in the background); seed it
    here too, after that, so a rebuild that timed out on a loaded machine (it then falls
    back to the wheel, by design) does not change what a test checks."""

    async def rebuilding() -> int:
        return engine.shards_rebuilding

    await eventually(rebuilding, until=lambda n: n == 0, what="index rebuilt")
    for shard in range(engine.config.shard_count):
        await index.replace(shard, [])


async def test_tasks_over_the_wheel_cap_dispatch_from_the_index(
    store: Store, index: TimeIndex
) -> None:
    config = engine_config(wheel_max_timers=CAP, index_poll_ms=5)
    engine = Engine(store, config, index=index)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id

        await _seed(engine, index)
        now = engine.now()
        specs = [
            SubmitSpec(
                type="t", scheduled_at=now + timedelta(seconds=1 + i / 100), strict_timing=True
            )
            for i in range(60)
        ]
        results = await engine.submit(tenant, specs)

        async def spilled() -> int:
            return engine.stats.spilled

        await eventually(spilled, until=lambda n: n >= 60 - CAP, what="spilled to the index")
        assert engine.timers <= CAP
        s = await engine.open_session(
            WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"t"}), slots=100)
        )
        seen: set[object] = set()
        while len(seen) < 60:
            ev = await asyncio.wait_for(s.next_event(), 15)
            assert isinstance(ev, AssignmentBatch)
            for a in ev.assignments:
                assert a.key.id not in seen  # never twice
                seen.add(a.key.id)
            writes = [FencedWrite(key=a.key, token=a.fencing_token) for a in ev.assignments]
            assert set(await s.ack(writes)) == {"ok"}
            done = [Completion(key=a.key, token=a.fencing_token) for a in ev.assignments]
            assert set(await s.complete(done)) == {"ok"}
        assert seen == {r.task.id for r in results}
        # Every task went out within a few index polls of its due time.
        assert max(engine.stats.lateness_ms) < 1000
        await s.close()
    finally:
        await engine.stop()


async def test_the_index_mirror_forgets_dispatched_tasks(store: Store, index: TimeIndex) -> None:
    config = engine_config(index_flush_ms=20)
    engine = Engine(store, config, index=index)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id

        await _seed(engine, index)
        specs = [
            SubmitSpec(
                type="t", scheduled_at=engine.now() + timedelta(seconds=1), strict_timing=True
            )
            for _ in range(20)
        ]
        results = await engine.submit(tenant, specs)
        shards = {r.task.shard_id for r in results}

        async def mirrored() -> int:
            return sum([await index.count(s) for s in shards])

        await eventually(mirrored, until=lambda n: n == 20, what="mirrored into the index")
        s = await engine.open_session(
            WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"t"}), slots=100)
        )
        got = 0
        while got < 20:
            ev = await asyncio.wait_for(s.next_event(), 15)
            assert isinstance(ev, AssignmentBatch)
            got += len(ev.assignments)
        # Removals from many shards go out together, a flush interval later.
        await eventually(mirrored, until=lambda n: n == 0, what="dispatched tasks removed")
        await s.close()
    finally:
        await engine.stop()

"""Fixtures of the time index conformance suite: every test runs on memory and Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from scheduler.index import MemoryTimeIndex, RedisTimeIndex, TimeIndex


class Backend:
    """The index under test and a way to wipe its storage (FLUSHALL for Redis)."""

    def __init__(self, index: TimeIndex, flush: Callable[[], Awaitable[None]]) -> None:
        self.index = index
        self.flush = flush


@pytest.fixture(params=["memory", "redis"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param == "memory":
        mem = MemoryTimeIndex()

        async def flush_memory() -> None:
            mem.flush()

        yield Backend(mem, flush_memory)
        await mem.close()
        return
    server = request.getfixturevalue("redis_server")
    prefix = request.getfixturevalue("redis_prefix")
    client = aioredis.Redis.from_url(server.url)
    index = RedisTimeIndex(client, key_prefix=prefix)

    async def flush_redis() -> None:
        await client.flushall()

    try:
        yield Backend(index, flush_redis)
    finally:
        await index.close()
        await index.close()
        await client.aclose()

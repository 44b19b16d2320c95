"""What only the Redis index has: key layout, rebuild fencing, outages."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis

from scheduler.index import IndexLost, IndexUnavailable, RedisTimeIndex, _keys
from scheduler.types import Preloaded
from tests.integration.index.test_conformance import task
from tests.support.servers import RedisServer, free_port

pytestmark = pytest.mark.redis


async def test_keys_live_in_one_hash_slot_per_shard_and_score_is_due_ms(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    index = RedisTimeIndex(client, key_prefix=redis_prefix)
    try:
        t = task(42)
        await index.replace(7, [t])
        keys = sorted(await client.keys(f"*{redis_prefix}*"))
        assert keys == sorted(_keys.shard_keys(redis_prefix, 7))
        assert all(k.startswith(f"{{{redis_prefix}:idx:7}}") for k in keys)
        score = await client.zscore(_keys.due(redis_prefix, 7), t.key.id.hex)
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        assert score == (t.due_at - epoch).total_seconds() * 1000 // 1
        assert await index.load(7) == [t]  # decode_responses=True works too
    finally:
        await index.close()
        await client.aclose()


async def test_a_flushall_during_a_rebuild_fails_the_rebuild(
    redis_server: RedisServer, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = aioredis.Redis.from_url(redis_server.url)
    index = RedisTimeIndex(client, key_prefix=redis_prefix)
    original = index._write
    calls = 0

    async def flush_after_first_chunk(
        shard: int, keys: list[str], items: Sequence[Preloaded], expect: str, then: str
    ) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            await client.flushall()
        await original(shard, keys, items, expect, then)

    monkeypatch.setattr(index, "_write", flush_after_first_chunk)
    try:
        with pytest.raises(IndexLost):
            await index.replace(7, [task(i) for i in range(2500)])
        # The partial index is never taken for complete.
        with pytest.raises(IndexLost):
            await index.load(7)
    finally:
        await index.close()
        await client.aclose()


async def test_an_unreachable_redis_is_a_retryable_typed_error() -> None:
    index = RedisTimeIndex.from_url(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.3)
    try:
        with pytest.raises(IndexUnavailable) as info:
            await index.pop_due(1, 0, 10)
        assert info.value.retryable
        assert not isinstance(info.value, IndexLost)
        with pytest.raises(IndexUnavailable):
            await index.load(1)
        with pytest.raises(IndexUnavailable):
            await index.replace(1, [task(1, shard=1)])
    finally:
        await index.close()
        await index.close()


async def test_a_paused_redis_times_out_as_a_typed_error(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    index = RedisTimeIndex.from_url(redis_server.url, key_prefix=redis_prefix, timeout_s=0.2)
    try:
        await index.replace(3, [task(1, shard=3)])
        redis_server.pause()
        try:
            with pytest.raises(IndexUnavailable, match="timed out"):
                await index.pop_due(3, 2**62, 10)
        finally:
            redis_server.resume()
    finally:
        await index.close()

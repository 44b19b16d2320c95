"""The rate limit keys' buckets (issue 43) on both implementations: the same grants from
memory and from Redis, one bucket shared by two nodes through Redis, and the local
share while Redis is away."""

from __future__ import annotations

import uuid
from typing import Any

import redis.asyncio as aioredis

from scheduler.quota import QuotaConfig, QuotaGate, open_quota
from scheduler.quota._key_buckets import KeyLimit
from scheduler.quota._key_redis import RedisKeyBuckets

K = (uuid.UUID(int=1), "partner-api")
J = (uuid.UUID(int=2), "partner-api")  # another tenant's key of the same name
T0 = 1_700_000_000.0


async def test_grants_refills_and_refunds(gate: QuotaGate) -> None:
    keys: Any = gate.keys  # type: ignore[attr-defined]
    lim = {K: KeyLimit(100.0, 5), J: KeyLimit(0.5, 1)}
    assert await keys.reserve({K: 50, J: 3}, lim, T0) == {K: 5, J: 1}
    assert await keys.reserve({K: 50, J: 3}, lim, T0) == {K: 0, J: 0}
    assert await keys.reserve({K: 50}, lim, T0 + 0.0299) == {K: 2}  # 2.99 tokens
    assert await keys.reserve({K: 50}, lim, T0 + 0.030) == {K: 1}  # the 0.99 + 0.01
    await keys.refund({K: 3}, lim, T0 + 0.030)
    assert await keys.reserve({K: 50}, lim, T0 + 0.030) == {K: 3}
    assert await keys.reserve({J: 3}, lim, T0 + 1.999) == {J: 0}
    assert await keys.reserve({J: 3}, lim, T0 + 2.0) == {J: 1}
    assert await keys.reserve({K: 50}, lim, T0 + 60) == {K: 5}  # full: the burst, no more
    assert keys.next_token_s(K, lim[K], T0 + 60) == 0.01


async def test_two_nodes_draw_from_one_bucket(redis_server: Any, redis_prefix: str) -> None:
    config = QuotaConfig(redis_url=redis_server.url, key_prefix=redis_prefix)
    a, b = await open_quota(config), await open_quota(config)
    try:
        lim = {K: KeyLimit(10.0, 10)}
        ka: Any = a.keys  # type: ignore[attr-defined]
        kb: Any = b.keys  # type: ignore[attr-defined]
        assert await ka.reserve({K: 6}, lim, T0) == {K: 6}
        assert await kb.reserve({K: 6}, lim, T0) == {K: 4}
        assert await ka.reserve({K: 6}, lim, T0 + 0.5) == {K: 5}
        assert await kb.reserve({K: 6}, lim, T0 + 0.5) == {K: 0}
    finally:
        await a.close()
        await b.close()


async def test_redis_away_serves_a_local_share_that_starts_empty() -> None:
    client = aioredis.Redis(host="127.0.0.1", port=1, socket_timeout=0.2)
    keys = RedisKeyBuckets(client, key_prefix="t", node_share=0.5, retry_after_s=60)
    lim = {K: KeyLimit(100.0, 10)}
    assert await keys.reserve({K: 100}, lim, T0) == {K: 0}
    assert not keys.shared
    assert await keys.reserve({K: 100}, lim, T0 + 0.1) == {K: 5}  # 50/s, burst 5
    await client.aclose()

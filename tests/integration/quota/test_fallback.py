"""Redis goes away mid-run: grants continue within the local share, then shared state returns."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from scheduler.quota import QuotaConfig, RedisQuota, TenantLimits, _keys, open_quota
from tests.support.servers import RedisServer, start_server
from tests.support.waiting import eventually

pytestmark = pytest.mark.redis

T = uuid.UUID(int=1)
T0 = 1_700_000_000.0


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, to stop and restart."""
    server = start_server(RedisServer)
    try:
        yield server
    finally:
        server.cleanup()


async def test_fallback_stays_within_the_local_share_and_shared_state_returns(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = QuotaConfig(redis_url=own_redis.url, key_prefix="fb", node_share=0.5, retry_after_s=0.05)
    gate = await open_quota(cfg)
    assert isinstance(gate, RedisQuota)
    other = await open_quota(cfg)
    assert isinstance(other, RedisQuota)
    limits = {T: TenantLimits(rate_limit_rps=100, max_concurrent=40)}  # share: 50 rps, 20
    try:
        assert await gate.reserve({T: 10}, limits, T0) == {T: 10}
        assert gate.shared

        await asyncio.to_thread(own_redis.stop)
        # The shared burst may be spent: the local bucket starts empty.
        assert await gate.reserve({T: 100}, limits, T0) == {T: 0}
        assert not gate.shared
        # In-flight starts at what this node already has out (10 of its 20).
        assert await gate.reserve({T: 100}, limits, T0 + 1) == {T: 10}
        await gate.finished({T: 20})

        # Dispatch flat out for 5 s of dispatch clock: the local share binds.
        now, granted, peak = T0 + 1, 0, 0
        for _ in range(50):
            now += 0.1
            got = (await gate.reserve({T: 100}, limits, now))[T]
            granted += got
            peak = max(peak, gate.in_flight().get(T, 0))
            await gate.finished({T: got})
        assert granted <= 50 * 5 + 50  # share of rate * seconds + share of burst
        assert granted >= 50 * 5 * 0.9
        assert peak <= 20
        warnings = [r for r in caplog.records if "falls back" in r.getMessage()]
        assert len(warnings) == 1  # once per outage

        # Keep 5 out while Redis comes back (empty: it has no persistence).
        assert await gate.reserve({T: 5}, limits, now + 1) == {T: 5}
        await asyncio.to_thread(own_redis.restart)

        async def probe() -> bool:
            await gate.reserve({T: 1}, limits, now + 2)
            return gate.shared

        await eventually(probe, timeout_s=10, what="the gate to use Redis again")
        out = gate.in_flight()[T]
        client = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
        try:
            fields = await client.hgetall(_keys.in_flight("fb", T))
        finally:
            await client.aclose()
        assert fields == {gate.node_id: str(out)}
        # Another node sees this node's in-flight against the shared cap.
        got = await other.reserve({T: 100}, limits, now + 5)
        assert got == {T: 40 - out}
    finally:
        await gate.close()
        await other.close()

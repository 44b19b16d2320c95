"""Fixtures of the quota conformance suite: every test runs on LocalQuota and RedisQuota."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from scheduler.quota import QuotaConfig, QuotaGate, RedisQuota, open_quota


@pytest.fixture(params=["local", "redis"])
async def gate(request: pytest.FixtureRequest) -> AsyncIterator[QuotaGate]:
    """The gate under test, on each implementation (Redis: this test's own prefix)."""
    if request.param == "local":
        config = QuotaConfig(redis_url=None)
    else:
        server = request.getfixturevalue("redis_server")
        prefix = request.getfixturevalue("redis_prefix")
        config = QuotaConfig(redis_url=server.url, key_prefix=prefix)
    g = await open_quota(config)
    try:
        yield g
        if isinstance(g, RedisQuota):
            assert g.shared, "the Redis gate fell back during a conformance test"
    finally:
        await g.close()
        await g.close()

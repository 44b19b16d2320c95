"""Build the quota gate a configuration asks for."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from scheduler.quota._config import QuotaConfig
from scheduler.quota._local import LocalQuota
from scheduler.quota._protocol import QuotaGate
from scheduler.quota._redis import RedisQuota


async def open_quota(config: QuotaConfig) -> QuotaGate:
    """A :class:`RedisQuota` for ``config.redis_url``, else a :class:`LocalQuota`.

    Redis is not contacted here: a node that starts while Redis is down serves from its
    local share until Redis answers.
    """
    if config.redis_url is None:
        return LocalQuota()
    client = aioredis.Redis.from_url(
        config.redis_url,
        socket_timeout=config.redis_timeout_s,
        socket_connect_timeout=config.redis_timeout_s,
        # Fail fast: the fallback is the retry policy.
        retry=Retry(NoBackoff(), 0),
    )
    return RedisQuota(
        client,
        key_prefix=config.key_prefix,
        node_share=config.node_share,
        timeout_s=config.redis_timeout_s,
        retry_after_s=config.retry_after_s,
        node_lease_ttl_s=config.node_lease_ttl_s,
        owns_client=True,
    )

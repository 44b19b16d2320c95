"""Shard takeover: load one shard's 100,000 PRELOADED tasks from Redis vs PostgreSQL.

Three ways, same 100,000 tasks of one shard, same run:

- ``redis_load``: :meth:`RedisTimeIndex.load` (one MULTI: marker + HGETALL, decoded into
  :class:`Preloaded`, sorted by due time);
- ``redis_fetch``: the HVALS alone (the wire and redis-py's pure-Python reply parser);
- ``pg_store``: the store's :meth:`load_preloaded` for that shard, keyset-paginated in
  pages of 5,000 as the engine's recovery does;
- ``pg_select``: one raw ``SELECT`` of the same columns on a bare asyncpg connection (the
  floor for PostgreSQL, no Python objects built).

Run: ``.venv/bin/pytest benchmarks/test_index.py --benchmark-only -p no:cacheprovider``
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from tests.conftest import pg_dsn, pg_template, postgres_server
from tests.support.servers import RedisServer

from scheduler.ids import uuid7
from scheduler.index import RedisTimeIndex
from scheduler.states import TaskState
from scheduler.store import open_store
from scheduler.types import NewTask, Pool, Preloaded, TaskKey, Tenant

__all__ = ["pg_dsn", "pg_template", "postgres_server"]

N = 100_000
SHARD = 5
PAGE = 5000
NOW = datetime.now(UTC).replace(microsecond=0)
HORIZON = NOW + timedelta(hours=1)


class Env:
    def __init__(self, dsn: str, redis_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = self.run(open_store(dsn))
        self.raw: asyncpg.Connection = self.run(asyncpg.connect(dsn))
        self.client = aioredis.Redis.from_url(redis_url)
        self.index = RedisTimeIndex(
            self.client, key_prefix=f"bench-{uuid.uuid4().hex[:8]}", bulk_timeout_s=60
        )
        tenant = self.run(self.store.create_tenant(Tenant(id=uuid.uuid4(), name="bench")))
        self.run(self.seed(tenant.id))

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coro)

    async def seed(self, tenant: uuid.UUID) -> None:
        rows: list[Preloaded] = []
        for start in range(0, N, PAGE):
            batch = []
            for i in range(start, min(N, start + PAGE)):
                due = NOW + timedelta(milliseconds=i * 30)
                batch.append(
                    NewTask(
                        id=(tid := uuid7()),
                        tenant_id=tenant,
                        type="email.send",
                        payload={},
                        scheduled_at=due,
                        due_at=due,
                        idempotency_key=str(tid),
                        shard_id=SHARD,
                        initial_state=TaskState.PRELOADED,
                    )
                )
                rows.append(
                    Preloaded(
                        key=TaskKey(tid, due),
                        due_at=due,
                        tenant_id=tenant,
                        shard_id=SHARD,
                        pool=Pool.STANDARD,
                        type="email.send",
                    )
                )
            await self.store.insert_tasks(batch, NOW)
        await self.raw.execute("ANALYZE tasks")
        await self.index.replace(SHARD, rows)

    async def redis_load(self) -> int:
        return len(await self.index.load(SHARD))

    async def redis_fetch(self) -> int:
        """The Redis read alone (HVALS through redis-py's parser), no decoding."""
        return len(await self.client.hvals(f"{{{self.index._prefix}:idx:{SHARD}}}:meta"))

    async def pg_store(self) -> int:
        n, after = 0, None
        while True:
            page = await self.store.load_preloaded([SHARD], HORIZON, PAGE, after)
            n += len(page)
            if len(page) < PAGE:
                return n
            after = page[-1].key

    async def pg_select(self) -> int:
        rows = await self.raw.fetch(
            "SELECT id, scheduled_at, due_at, tenant_id, shard_id, pool, type FROM tasks"
            " WHERE status = 'PRELOADED' AND shard_id = $1 AND due_at <= $2",
            SHARD,
            HORIZON,
        )
        return len(rows)

    def close(self) -> None:
        self.run(self.index.close())
        self.run(self.client.aclose())
        self.run(self.raw.close())
        self.run(self.store.close())
        self.loop.close()


@pytest.fixture(scope="module")
def env(postgres_server: Any, pg_template: str, redis_server: RedisServer) -> Iterator[Env]:
    name = f"bench_index_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE DATABASE {name} TEMPLATE {pg_template}")
    e = Env(postgres_server.dsn(name), redis_server.url)
    try:
        yield e
    finally:
        e.close()
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("way", ["redis_load", "redis_fetch", "pg_store", "pg_select"])
def test_load_one_shard(benchmark: Any, env: Env, way: str) -> None:
    call = getattr(env, way)
    n = benchmark.pedantic(lambda: env.run(call()), rounds=5, iterations=1, warmup_rounds=1)
    assert n == N
    benchmark.extra_info["rows"] = N
    benchmark.extra_info["rows_per_s"] = N / benchmark.stats.stats.mean

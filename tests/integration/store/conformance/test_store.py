"""The :class:`Store` protocol's own methods (``protocol/store.py``): ``close`` and
``on_fence``."""

from __future__ import annotations

from scheduler.store import Store
from scheduler.store.postgres import PostgresStore
from tests.support.stores import NOW, system_conn


async def test_close_twice(store: Store) -> None:
    await store.close()
    await store.close()


async def test_on_fence_reports_a_generation_raised_under_the_store(store: Store) -> None:
    """PostgreSQL: a connection the pool opens after the fencing generation rose calls the
    callbacks with it. SQLite: never (one file has no failover)."""
    heard: list[int] = []
    store.on_fence(heard.append)
    await store.claim_shards([1], "n", NOW)
    assert heard == []  # nothing raised since the store opened
    if not isinstance(store, PostgresStore):
        return
    async with system_conn(store) as conn:
        raised = await conn.fetchval(
            "UPDATE fencing_generation SET generation = generation + 1 RETURNING generation"
        )
    await store._pool.expire_connections()  # the next call connects again
    await store.claim_shards([1], "n", NOW)
    assert heard == [raised]

"""A PostgreSQL that accepts connections and never answers (a partition, a frozen
server) holds no store call and no engine loop for ever (issue 42).

A TCP proxy between the store and a real PostgreSQL drops every byte both ways while
keeping connections open, and accepts new ones. Every store call then ends with
StoreUnavailable at its deadline, the engine's health reports the stalled loop, and
once the proxy heals the node serves again.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from scheduler._errors import NotFound
from scheduler.engine import Engine, EngineConfig
from scheduler.store import StoreUnavailable, open_store
from tests.integration.cluster._proxy import PartitionProxy
from tests.support.waiting import eventually


def through(dsn: str, port: int) -> str:
    """``dsn`` with its host and port replaced by the proxy's."""
    url = urlsplit(dsn)
    user = url.netloc.rpartition("@")[0]
    return urlunsplit(url._replace(netloc=f"{user}@127.0.0.1:{port}"))


@pytest.mark.timeout(120)
async def test_a_store_that_never_answers_fails_calls_and_stalls_the_node_until_healed(
    pg_dsn: str,
) -> None:
    url = urlsplit(pg_dsn)
    assert url.hostname is not None
    assert url.port is not None
    # The day partitions first, with the default deadlines: creating them on a loaded
    # machine can take longer than the 1 s this test gives every call.
    await (await open_store(pg_dsn)).close()
    proxy = PartitionProxy(url.hostname, url.port)
    await proxy.start()
    store = await open_store(through(pg_dsn, proxy.port), call_timeout_s=1.0, connect_timeout_s=1.0)
    engine = Engine(
        store,
        EngineConfig(stall_after_s=0.5, stall_yield_s=0, preload_interval_s=0.1),
        node_id="hang",
    )
    told: list[bool] = []

    async def on_serving(serving: bool) -> None:
        told.append(serving)

    engine.health.on_serving = on_serving
    await engine.start()
    try:
        with pytest.raises(NotFound):
            await store.get_tenant(uuid.uuid4())  # through the proxy, answered
        proxy.cut()
        with pytest.raises(StoreUnavailable):  # at its deadline, not never
            await store.get_tenant(uuid.uuid4())

        async def serving() -> bool:
            return engine.health.serving

        await eventually(serving, until=lambda s: not s, timeout_s=30, what="NOT_SERVING")
        assert told == [False]
        stalled = engine.health.stalled()
        assert stalled["preloader"] >= 0.5, stalled
        proxy.heal()
        await eventually(serving, timeout_s=30, what="serving again")
        assert told == [False, True]
        with pytest.raises(NotFound):
            await store.get_tenant(uuid.uuid4())
    finally:
        proxy.heal()
        await engine.stop()
        await store.close()
        await proxy.stop()

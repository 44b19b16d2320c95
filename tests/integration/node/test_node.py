"""The composition root (``scheduler.node``) and the public testing API
(``scheduler.testing``) on the real stores."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from scheduler.client import TaskState
from scheduler.cluster import LeasedMembership, LeaseHeld, LocalMembership
from scheduler.node import Node, NodeConfig
from scheduler.server import ListenError, ServerConfig
from scheduler.testing import start_local
from scheduler.worker import TaskContext, Worker
from tests.support.waiting import eventually

QUIET = {"listen": "127.0.0.1:0"}


def _config(url: str, **server: object) -> NodeConfig:
    return NodeConfig(store_url=url, server=ServerConfig(**{**QUIET, **server}))  # type: ignore[arg-type]


async def test_start_local_gives_a_client_and_key_that_run_a_task() -> None:
    async def hello(ctx: TaskContext) -> dict[str, str]:
        return {"hello": ctx.payload["name"]}

    async with start_local(tenant_name="env") as env:
        assert env.node.port > 0
        assert env.target == f"127.0.0.1:{env.node.port}"
        worker = Worker(env.target, api_key=env.api_key, handlers={"hello": hello})
        run = asyncio.create_task(worker.run(), name="test-start-local-worker")
        try:
            task = await env.client.submit("hello", {"name": "world"}, strict_timing=True)
            assert task.tenant_id == env.tenant_id
            done = await eventually(
                lambda: env.client.get(task.id),
                until=lambda t: t.state is TaskState.COMPLETED,
                what="the task to complete",
            )
            assert done.result == {"hello": "world"}
            assert (await env.node.store.get_tenant(env.tenant_id)).name == "env"
        finally:
            await worker.shutdown(grace_s=1)
            await asyncio.wait_for(run, 15)
    assert env.node.port == 0  # stopped on exit


async def test_stop_is_safe_before_start_and_twice_and_start_is_idempotent(
    tmp_path: Path,
) -> None:
    node = Node(_config(f"sqlite:///{tmp_path}/n.db"))
    await node.stop()
    with pytest.raises(RuntimeError, match="not started"):
        _ = node.engine
    await node.start()
    port = node.port
    await node.start()
    assert node.port == port
    assert isinstance(node.membership, LocalMembership)
    assert node.lease is not None  # the SQLite file's lock
    assert node.lease.held
    await node.stop()
    await node.stop()
    assert node.port == 0
    await node.start()  # a stopped node starts again (the lock was released)
    await node.stop()


async def test_concurrent_starts_and_stops_leave_the_node_consistent(tmp_path: Path) -> None:
    node = Node(_config(f"sqlite:///{tmp_path}/n.db"))
    for _ in range(3):
        await asyncio.gather(node.start(), node.stop(), node.start(), node.stop(), node.start())
        assert node.port > 0  # the last call wins: started
        await asyncio.gather(node.stop(), node.stop())
        assert node.port == 0


async def test_a_second_node_on_one_postgres_database_is_refused_and_claims_nothing(
    pg_dsn: str,
) -> None:
    async with Node(_config(pg_dsn)) as first:
        assert isinstance(first.membership, LeasedMembership)
        before = await first.store.shard_claims()
        second = Node(NodeConfig(store_url=pg_dsn, node_id="second", server=ServerConfig(**QUIET)))  # type: ignore[arg-type]
        with pytest.raises(LeaseHeld, match=rf"tickwheel node local 127\.0\.0\.1:{first.port}"):
            await second.start()
        assert second.port == 0  # it closed what it had opened
        await second.stop()
        assert await first.store.shard_claims() == before


async def test_a_node_on_a_busy_port_claims_nothing(pg_dsn: str, tmp_path: Path) -> None:
    async with Node(_config(f"sqlite:///{tmp_path}/a.db")) as first:
        busy = Node(_config(pg_dsn, listen=f"127.0.0.1:{first.port}"))
        with pytest.raises(ListenError, match="address already in use"):
            await busy.start()
        probe = Node(_config(pg_dsn))
        async with probe:
            claims = await probe.store.shard_claims()
        # Only the probe node claimed (once per shard): the busy one never did.
        assert {c.owner for c in claims} == {"local"}
        assert len(claims) == 256

"""The database lease of a node without etcd, on the real PostgreSQL and real files."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import asyncpg
import pytest

from scheduler.cluster import FileLease, LeasedMembership, LeaseHeld, PostgresLease
from tests.support.waiting import eventually


async def test_a_second_postgres_lease_is_refused_naming_the_holder(pg_dsn: str) -> None:
    first = PostgresLease(pg_dsn, "tickwheel node one 127.0.0.1:1 pid 1")
    second = PostgresLease(pg_dsn, "tickwheel node two 127.0.0.1:2 pid 2")
    await first.acquire()
    try:
        with pytest.raises(LeaseHeld) as refused:
            await second.acquire()
        assert refused.value.holder.startswith("tickwheel node one 127.0.0.1:1 pid 1")
        assert f"backend pid {first.backend_pid}" in refused.value.holder
        assert "--etcd" in str(refused.value)
        assert not second.held
    finally:
        await first.release()
    await second.acquire()  # released: the next node gets it
    assert second.held
    await second.release()
    await second.release()  # twice is fine


async def test_a_postgres_lease_notices_its_connection_is_killed(pg_dsn: str) -> None:
    lease = PostgresLease(pg_dsn, "tickwheel node killed", check_interval_s=0.2)
    await lease.acquire()
    watch = asyncio.create_task(lease.wait_lost(), name="test-lease-watch")
    db = await asyncpg.connect(pg_dsn)
    try:
        assert not watch.done()
        assert await db.fetchval("SELECT pg_terminate_backend($1, 5000)", lease.backend_pid)
        await asyncio.wait_for(watch, 10)
        assert not lease.held
        # The lock went with the connection: anyone can take it now.
        assert await db.fetchval("SELECT pg_try_advisory_lock($1)", 0x746B776C_00000001)
    finally:
        watch.cancel()
        await db.close()
        await lease.release()


async def test_a_second_file_lease_is_refused_naming_the_holder(tmp_path: Path) -> None:
    db = tmp_path / "dev.db"
    first = FileLease.beside(db, "tickwheel node local 127.0.0.1:1 pid 1")
    second = FileLease.beside(db, "tickwheel node other 127.0.0.1:2 pid 2")
    assert first.path == tmp_path / "dev.db.lock"
    await first.acquire()
    with pytest.raises(LeaseHeld) as refused:
        await second.acquire()
    assert "tickwheel node local 127.0.0.1:1 pid 1" in refused.value.holder
    await first.release()
    await second.acquire()
    assert second.held
    await second.release()
    await second.release()


class Recorder:
    """A shard listener and lease callback that records what it is told."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_gain(self, shards: Mapping[int, int]) -> None:
        self.events.append(f"gain {len(shards)}")

    async def on_loss(self, shards: frozenset[int]) -> None:
        self.events.append(f"loss {len(shards)}")

    async def on_change(self, serving: bool) -> None:
        self.events.append(f"serving {serving}")


async def test_a_leased_membership_gives_up_and_regains_its_shards(pg_dsn: str) -> None:
    lease = PostgresLease(pg_dsn, "tickwheel node m", check_interval_s=0.2)
    rec = Recorder()
    member = LeasedMembership(lease, 8, node_id="m", retry_interval_s=0.2)
    member.set_listener(rec)
    member.set_on_change(rec.on_change)
    await member.stop()  # before start: nothing happens
    member = LeasedMembership(lease, 8, node_id="m", retry_interval_s=0.2, on_change=rec.on_change)
    member.set_listener(rec)
    await member.start()
    assert member.owned() == frozenset(range(8))
    db = await asyncpg.connect(pg_dsn)
    try:
        assert await db.fetchval("SELECT pg_terminate_backend($1, 5000)", lease.backend_pid)
        await eventually(
            lambda: asyncio.sleep(0, member.regains), what="the lease to be taken back"
        )
        assert member.losses == 1
        assert member.owned() == frozenset(range(8))
        assert rec.events == ["gain 8", "loss 8", "serving False", "gain 8", "serving True"]
    finally:
        await db.close()
        await member.stop()
        await member.stop()
    assert member.owned() == frozenset()
    assert rec.events[-1] == "loss 8"
    assert not lease.held


async def test_a_leased_membership_refuses_to_start_while_another_holds(pg_dsn: str) -> None:
    other = PostgresLease(pg_dsn, "tickwheel node first")
    await other.acquire()
    rec = Recorder()
    member = LeasedMembership(PostgresLease(pg_dsn, "tickwheel node second"), 8)
    member.set_listener(rec)
    try:
        with pytest.raises(LeaseHeld, match="tickwheel node first"):
            await member.start()
        assert member.owned() == frozenset()
        assert rec.events == []  # nothing was claimed
    finally:
        await member.stop()
        await other.release()

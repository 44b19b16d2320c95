"""``tickwheel dr status`` and ``tickwheel dr promote`` on a real streaming standby
whose primary was killed with SIGKILL: the fence (migration 0011) refuses every write
with a token or shard epoch of the lost primary, in-flight leases expire at once, and a
second promote changes nothing."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from scheduler.states import TaskState
from scheduler.store import StoreConfig, open_store
from scheduler.store.postgres.dr import FENCE_REASON, NEW_TIMELINE_ACTOR, SALT_RANGE, TOKEN_SHIFT
from scheduler.types import Completion, DispatchRequest, FencedWrite, Outcome, Tenant
from tests.support.dr import (
    SYNCHRONOUS_SETTING,
    Pair,
    replicated_pair,
    synchronous_loss,
    tickwheel_json,
)
from tests.support.stores import new_task
from tests.support.waiting import eventually

SHARD = 3


@pytest.fixture
def pair() -> Iterator[Pair]:
    with replicated_pair() as p:
        yield p


async def _replayed(pair: Pair) -> int:
    doc = tickwheel_json(
        "dr", "status", "--standby-dsn", pair.standby_dsn, "--primary-dsn", pair.primary_dsn
    )
    return int(doc["lag_bytes"])


async def test_promote_fences_the_lost_primarys_tokens_and_epochs(pair: Pair) -> None:
    now = datetime.now(UTC)
    lease = now + timedelta(minutes=5)
    a_store = await open_store(pair.primary_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        tenant = await a_store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
        due = now - timedelta(seconds=1)
        [run, disp, later] = await a_store.insert_tasks(
            [new_task(tenant, due, shard_id=SHARD) for _ in range(3)], now
        )
        await a_store.claim_preload(None, now, 10, now)
        assert await a_store.claim_shards([SHARD], "node-a", now) == {SHARD: 1}
        [r, d] = await a_store.mark_dispatched(
            [
                DispatchRequest(key=run.task.key, worker_id="w", lease_expires_at=lease, epoch=1),
                DispatchRequest(key=disp.task.key, worker_id="w", lease_expires_at=lease, epoch=1),
            ],
            now,
        )
        assert r is not None
        assert d is not None
        assert r.fencing_token == 2  # generation 0: no change on PostgreSQL
        assert await a_store.ack([FencedWrite(key=r.key, token=2)], lease, now) == [Outcome.OK]
    finally:
        await a_store.close()

    # Replicated: lag 0 bytes, then the region is lost.
    await eventually(lambda: _replayed(pair), until=lambda lag: lag == 0, what="replay")
    before = tickwheel_json(
        "dr", "status", "--standby-dsn", pair.standby_dsn, "--primary-dsn", pair.primary_dsn
    )
    assert before["standby_in_recovery"] is True
    assert before["primary_reachable"] is True
    assert before["generation"] == 0
    pair.kill_primary()
    dead = tickwheel_json(
        "dr", "status", "--standby-dsn", pair.standby_dsn, "--primary-dsn", pair.primary_dsn
    )
    assert dead["primary_reachable"] is False
    assert dead["lag_bytes"] is None
    assert dead["standby_in_recovery"] is True

    report = tickwheel_json("dr", "promote", "--standby-dsn", pair.standby_admin_dsn)
    assert report["promoted"] is True
    assert report["fenced"] is True
    assert report["old_generation"] == 0
    g = report["generation"]
    assert 1 <= g <= SALT_RANGE
    assert report["tasks_fenced"] == 2
    assert report["shards"] == 1
    base = g << TOKEN_SHIFT
    again = tickwheel_json("dr", "promote", "--standby-dsn", pair.standby_admin_dsn)
    assert again["fenced"] is False
    assert again["generation"] == g

    b_store = await open_store(pair.standby_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        later_now = datetime.now(UTC)
        # A zombie of A (token 2) is refused before B re-dispatches anything.
        [stale] = await b_store.complete([Completion(key=r.key, token=2)], later_now)
        assert stale.outcome is Outcome.STALE
        assert await b_store.heartbeat([FencedWrite(key=d.key, token=2)], lease, later_now) == [
            Outcome.STALE
        ]
        fenced = await b_store.get_task(None, run.task.id)
        assert fenced.fencing_token == base + 1
        assert fenced.status is TaskState.RUNNING
        trail = await b_store.transitions_of(run.task.id)
        assert trail[-1].reason == FENCE_REASON
        # The DISPATCHED one may have started in A (its ack lost with A): the fence
        # makes it RUNNING, so its re-run in B counts an attempt (issue 38).
        fenced_d = await b_store.get_task(None, disp.task.id)
        assert fenced_d.status is TaskState.RUNNING
        trail_d = await b_store.transitions_of(disp.task.id)
        assert (trail_d[-1].from_state, trail_d[-1].to_state, trail_d[-1].reason) == (
            TaskState.DISPATCHED,
            TaskState.RUNNING,
            FENCE_REASON,
        )
        # The leases expired at the promote: B's reaper takes both at once, each with
        # its attempt counted.
        reclaimed = await b_store.reclaim_expired(None, later_now, 100)
        assert set(reclaimed.retrying) == {r.key, d.key}
        assert reclaimed.requeued == ()
        again = await b_store.claim_preload(None, later_now, 10, later_now)
        assert {p.key for p in again} >= {r.key, d.key}
        # A node of A with its old epoch cannot dispatch; B's first claim is above base.
        [refused] = await b_store.mark_dispatched(
            [DispatchRequest(key=d.key, worker_id="w", lease_expires_at=lease, epoch=1)],
            later_now,
        )
        assert refused is None
        epochs = await b_store.claim_shards([SHARD], "node-b", later_now)
        assert epochs[SHARD] > base
        [again_d] = await b_store.mark_dispatched(
            [
                DispatchRequest(
                    key=d.key, worker_id="w2", lease_expires_at=lease, epoch=epochs[SHARD]
                )
            ],
            later_now,
        )
        assert again_d is not None
        assert again_d.fencing_token > base + 1
        assert again_d.attempt == 2  # the attempt that may have run in A counted
        # B dispatched the task again: A's token is still refused, B's accepted.
        await b_store.ack([FencedWrite(key=d.key, token=again_d.fencing_token)], lease, later_now)
        [zombie] = await b_store.complete([Completion(key=d.key, token=2)], later_now)
        assert zombie.outcome is Outcome.STALE
        [ok] = await b_store.complete(
            [Completion(key=d.key, token=again_d.fencing_token)], later_now
        )
        assert ok.outcome is Outcome.OK
        # A task never dispatched in A gets a token above the base on its first dispatch.
        [first] = await b_store.mark_dispatched(
            [
                DispatchRequest(
                    key=later.task.key, worker_id="w2", lease_expires_at=lease, epoch=epochs[SHARD]
                )
            ],
            later_now,
        )
        assert first is not None
        assert first.fencing_token == base + 1
    finally:
        await b_store.close()

    conn = await asyncpg.connect(pair.standby_admin_dsn)
    try:
        row = await conn.fetchrow("SELECT generation, raised_by FROM fencing_generation")
    finally:
        await conn.close()
    assert row["generation"] == g
    assert "timeline 2" in row["raised_by"]


async def test_synchronous_standby_loses_no_acknowledged_submission(pair: Pair) -> None:
    """In synchronous mode every insert the store acknowledged survives a SIGKILL of the
    primary in mid-flight and the promote: 0 lost (20 cycles: benchmarks/test_dr.py)."""
    acked, present = await synchronous_loss(pair)
    assert acked >= 500
    assert present == acked


async def test_a_primary_promoted_by_something_else_is_fenced_by_the_first_node(
    pair: Pair,
) -> None:
    """A failover tickwheel did not run (Patroni, a managed service, ``pg_ctl promote``)
    starts a new timeline without raising the fence: the first store connection to the
    new primary raises it before it is used, once, so the lost primary's tokens and
    epochs are refused exactly as after ``dr promote`` (issue 42)."""
    now = datetime.now(UTC)
    lease = now + timedelta(minutes=5)
    a_store = await open_store(pair.primary_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        tenant = await a_store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
        [task] = await a_store.insert_tasks(
            [new_task(tenant, now - timedelta(seconds=1), shard_id=SHARD)], now
        )
        await a_store.claim_preload(None, now, 10, now)
        assert await a_store.claim_shards([SHARD], "node-a", now) == {SHARD: 1}
        [held] = await a_store.mark_dispatched(
            [DispatchRequest(key=task.task.key, worker_id="w", lease_expires_at=lease, epoch=1)],
            now,
        )
        assert held is not None
    finally:
        await a_store.close()
    await eventually(lambda: _replayed(pair), until=lambda lag: lag == 0, what="replay")
    pair.kill_primary()

    conn = await asyncpg.connect(pair.standby_admin_dsn)
    try:
        assert await conn.fetchval("SELECT pg_promote(wait => true)") is True
        assert await conn.fetchval("SELECT generation FROM fencing_generation") == 0
    finally:
        await conn.close()

    b_store = await open_store(pair.standby_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        later = datetime.now(UTC)
        [zombie] = await b_store.complete(
            [Completion(key=held.key, token=held.fencing_token)], later
        )
        assert zombie.outcome is Outcome.STALE
        fenced = await b_store.get_task(None, task.task.id)
        assert (await b_store.transitions_of(task.task.id))[-1].reason == FENCE_REASON
        [refused] = await b_store.mark_dispatched(
            [DispatchRequest(key=held.key, worker_id="w", lease_expires_at=lease, epoch=1)],
            later,
        )
        assert refused is None
    finally:
        await b_store.close()

    conn = await asyncpg.connect(pair.standby_admin_dsn)
    try:
        row = await conn.fetchrow("SELECT generation, raised_by FROM fencing_generation")
    finally:
        await conn.close()
    g = row["generation"]
    assert 1 <= g <= SALT_RANGE
    assert row["raised_by"] == f"{NEW_TIMELINE_ACTOR} (timeline 2)"
    assert fenced.fencing_token == (g << TOKEN_SHIFT) + 1
    # Raised once: another node's store, and a late `dr promote`, change nothing.
    again = await open_store(pair.standby_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    await again.close()
    report = tickwheel_json("dr", "promote", "--standby-dsn", pair.standby_admin_dsn)
    assert report["promoted"] is False
    assert report["fenced"] is False
    assert report["generation"] == g


def _docs_set_up() -> tuple[str, str]:
    """docs/regions.md's base backup command and synchronous_standby_names, as written."""
    text = (Path(__file__).parents[3] / "docs" / "regions.md").read_text()
    backup = re.search(r"`(pg_basebackup [^`]+)`", text)
    names = re.search(r"synchronous_standby_names = '([^']+)'", text)
    assert backup is not None
    assert names is not None
    return " ".join(backup.group(1).split()), names.group(1)


async def test_the_docs_synchronous_set_up_commits() -> None:
    """The set-up docs/regions.md gives (issue 38): a base backup with ``-d
    'application_name=region_b'`` and ``synchronous_standby_names = 'FIRST 1
    (region_b)'`` makes the standby synchronous, and a commit in A returns."""
    backup, names = _docs_set_up()
    assert names == SYNCHRONOUS_SETTING
    name = re.search(r"-d 'application_name=(\w+)'", backup)
    assert name is not None, backup
    assert re.search(r"\(([^)]+)\)", names).group(1) == name.group(1)  # type: ignore[union-attr]
    with replicated_pair("tickwheel_dr_docs", application_name=name.group(1)) as pair:
        pair.primary.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        pair.primary.psql("ALTER SYSTEM SET synchronous_commit = on")
        pair.primary.psql("SELECT pg_reload_conf()")

        async def replication() -> str:
            return pair.primary.psql(
                "SELECT application_name || ' ' || sync_state FROM pg_stat_replication"
            ).strip()

        await eventually(
            replication, until=lambda s: s == f"{name.group(1)} sync", what="a sync standby"
        )
        conn = await asyncpg.connect(pair.primary_dsn)
        try:
            # A commit that waited for a standby matching nothing would hang here.
            await conn.execute("CREATE TABLE sync_probe (x int)", timeout=30)
            await conn.execute("INSERT INTO sync_probe VALUES (1)", timeout=30)
        finally:
            await conn.close()
        standby = await asyncpg.connect(pair.standby_dsn)
        try:
            # on = flushed on the standby; its replay follows.
            await eventually(
                lambda: standby.fetchval(
                    "SELECT count(*) FROM pg_class WHERE relname = 'sync_probe'"
                ),
                until=lambda n: n == 1,
                what="the probe replayed",
            )
            await eventually(
                lambda: standby.fetchval("SELECT count(*) FROM sync_probe"),
                until=lambda n: n == 1,
                what="the probe's row replayed",
            )
        finally:
            await standby.close()

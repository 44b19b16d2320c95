"""Tickwheel follows a Patroni-managed primary with no human step (issue 42).

A real Patroni pair on loopback (``tests/support/patroni.py``: two PostgreSQL members,
etcd as Patroni's DCS, ``synchronous_mode`` on) under one ``tickwheel serve`` (etcd
membership, Redis) and one ``tickwheel worker``. The node's DSN names both members
with ``target_session_attrs=read-write``. While tasks fall due, the primary is lost in
one of two ways:

- its PostgreSQL crashes (kill -9 of the postmaster's process group) under a live
  Patroni, which fails over at once (``primary_start_timeout`` 0);
- the whole member (Patroni and its PostgreSQL) is killed -9, as a lost machine would
  be: Patroni promotes the synchronous standby once the leader key lapses (its ttl,
  20 s at least).

Either way the node finds the new primary through the DSN and, on its first connection
there, raises the fencing generation (``scheduler.store.postgres.dr.fence_new_timeline``): every
task completes exactly once, every accepted dispatch comes from its shard's owner, and
a token handed out before the failover is refused. The drill's figures (how long until
dispatch resumed, how late the tasks due meanwhile fired) are printed here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.store import StoreConfig, open_store
from scheduler.store.postgres.dr import NEW_TIMELINE_ACTOR, TOKEN_SHIFT
from scheduler.types import Completion, Outcome, TaskKey
from tests.support import cluster
from tests.support.outage import answering, connected, node_with_tasks, starts
from tests.support.patroni import PatroniMember, PatroniPair, app_database, patroni_pair
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, RedisServer

TASKS = 1200
SPAN_S = 45.0


@pytest.fixture
def pair(etcd_server: EtcdServer) -> Iterator[PatroniPair]:
    with patroni_pair(etcd_server.endpoint) as p:
        yield p


def _postgres_crash(member: PatroniMember) -> None:
    member.kill9_postgres()


def _member_lost(member: PatroniMember) -> None:
    member.kill9()


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("fault", [_postgres_crash, _member_lost], ids=["postgres", "member"])
async def test_the_node_follows_patronis_promotion_and_loses_nothing(
    fault: object,
    pair: PatroniPair,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    assert callable(fault)
    dsn = await asyncio.to_thread(app_database, pair)
    records = tmp_path / "records.jsonl"
    with process_group(tmp_path / "procs") as group:
        running = await node_with_tasks(
            group, dsn, etcd_server, redis_server, records, tasks=TASKS, span_s=SPAN_S
        )
        await asyncio.sleep(6)
        old = pair.primary()
        async with connected(dsn) as db:
            held = await db.fetch(
                "SELECT id, scheduled_at, fencing_token FROM tasks"
                " WHERE status IN ('DISPATCHED', 'RUNNING')"
            )
        killed, killed_at = time.monotonic(), datetime.now(UTC)
        await asyncio.to_thread(fault, old)
        await asyncio.to_thread(pair.new_primary, old, 90.0)
        promoted_s = time.monotonic() - killed
        await answering(dsn)
        async with connected(dsn) as db:
            after = cluster.Cluster(
                nodes=running.nodes, tenant_id=running.tenant_id, api_key=running.api_key, db=db
            )
            await cluster.check_exactly_once(after, TASKS, timeout_s=120)
            late = await cluster.latest_first_dispatch_s(after)
            fence = await db.fetchrow("SELECT generation, raised_by FROM fencing_generation")
            resumed = await db.fetchval(
                "SELECT min(at) FROM task_transitions"
                " WHERE to_status IN ('DISPATCHED', 'RUNNING') AND from_status = 'PRELOADED'"
                " AND at > $1",
                killed_at,
            )
        ran = starts(records)
        assert len(ran) == TASKS
        twice = sum(1 for n in ran.values() if n > 1)
    # The node that reconnected raised the fence once, on the new timeline.
    assert fence["generation"] >= 1
    assert fence["raised_by"].startswith(NEW_TIMELINE_ACTOR)
    # A worker still holding a pre-failover token is refused (0 zombie writes).
    base = fence["generation"] << TOKEN_SHIFT
    assert all(row["fencing_token"] < base for row in held)
    store = await open_store(dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        results = await store.complete(
            [
                Completion(key=TaskKey(r["id"], r["scheduled_at"]), token=r["fencing_token"])
                for r in held
            ],
            datetime.now(UTC),
        )
    finally:
        await store.close()
    assert [r.outcome for r in results] == [Outcome.STALE] * len(held)
    print(
        f"\nPatroni failover ({fault.__name__.strip('_')}): promoted {promoted_s:.1f} s after "
        f"the kill, dispatching {(resumed - killed_at).total_seconds():.1f} s after it; "
        f"{TASKS} tasks completed once each; {len(held)} pre-failover tokens "
        f"refused; handlers run twice: {twice}; latest first dispatch {late:.1f} s after due"
    )

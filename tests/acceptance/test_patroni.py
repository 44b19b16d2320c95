"""Tickwheel follows a Patroni-managed primary with no human step (issue 42).

A real Patroni pair on loopback (``tests/support/patroni.py``: two PostgreSQL members,
etcd as Patroni's DCS, ``synchronous_mode`` on) under one ``tickwheel serve`` (etcd
membership, Redis) and one ``tickwheel worker``. The node's DSN names both members
with ``target_session_attrs=read-write``. While tasks fall due, the primary's whole
process group (Patroni and its PostgreSQL) is killed -9; Patroni promotes the
synchronous standby once the leader key lapses (its ttl, 20 s at least), and the node
finds it through the DSN: every task completes exactly once and every accepted
dispatch comes from its shard's owner. The drill's figures (how long until dispatch
resumed, how late the tasks due meanwhile fired) are printed here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import cluster
from tests.support.outage import answering, connected, node_with_tasks, starts
from tests.support.patroni import PatroniPair, app_database, patroni_pair
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, RedisServer

TASKS = 1200
SPAN_S = 45.0


@pytest.fixture
def pair(etcd_server: EtcdServer) -> Iterator[PatroniPair]:
    with patroni_pair(etcd_server.endpoint) as p:
        yield p


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_node_follows_patronis_promotion_and_loses_nothing(
    pair: PatroniPair, etcd_server: EtcdServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    dsn = await asyncio.to_thread(app_database, pair)
    records = tmp_path / "records.jsonl"
    with process_group(tmp_path / "procs") as group:
        running = await node_with_tasks(
            group, dsn, etcd_server, redis_server, records, tasks=TASKS, span_s=SPAN_S
        )
        await asyncio.sleep(6)
        old = pair.primary()
        killed = time.monotonic()
        await asyncio.to_thread(old.kill9)
        try:
            await asyncio.to_thread(pair.wait, "primary", 90.0)
        except BaseException as exc:
            exc.add_note(pair.explain())
            raise
        promoted_s = time.monotonic() - killed
        await answering(dsn)
        async with connected(dsn) as db:
            after = cluster.Cluster(
                nodes=running.nodes, tenant_id=running.tenant_id, api_key=running.api_key, db=db
            )
            await cluster.check_exactly_once(after, TASKS, timeout_s=120)
            late = await cluster.latest_first_dispatch_s(after)
        ran = starts(records)
        assert len(ran) == TASKS
        twice = sum(1 for n in ran.values() if n > 1)
    print(
        f"\nPatroni failover: promoted {promoted_s:.1f} s after the kill; {TASKS} tasks "
        f"completed once each; handlers run twice: {twice}; latest first dispatch "
        f"{late:.1f} s after due"
    )

"""Tickwheel follows a Patroni-managed primary with no human step (issue 42).

A real Patroni pair on loopback (``tests/support/patroni.py``: two PostgreSQL members,
etcd as Patroni's DCS, ``synchronous_mode`` on) under one ``tickwheel serve`` (etcd
membership, Redis) and one ``tickwheel worker``. The node's DSN names both members
with ``target_session_attrs=read-write``. While tasks fall due, the primary is lost in
one of two ways (``tests/support/patroni_drill.py``):

- its PostgreSQL crashes (kill -9 of the postmaster's process group) under a live
  Patroni, which fails over at once (``primary_start_timeout`` 0);
- the whole member (Patroni and its PostgreSQL) is killed -9, as a lost machine would
  be: Patroni promotes the synchronous standby once the leader key lapses (its ttl,
  20 s at least).

Either way the node finds the new primary through the DSN and, on its first connection
there, raises the fencing generation (``scheduler.store.postgres.dr``): every task
completes exactly once, every accepted dispatch comes from its shard's owner, and a
token handed out before the failover is refused. One round of each here; the drill
(``benchmarks/test_patroni.py``) repeats them and reports the timings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.store.postgres.dr import NEW_TIMELINE_ACTOR
from tests.support.patroni import PatroniPair, patroni_pair
from tests.support.patroni_drill import FAULTS, failover_round
from tests.support.servers import EtcdServer, RedisServer

TASKS = 1200
SPAN_S = 45.0


@pytest.fixture
def pair(etcd_server: EtcdServer) -> Iterator[PatroniPair]:
    with patroni_pair(etcd_server.endpoint) as p:
        yield p


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_the_node_follows_patronis_promotion_and_loses_nothing(
    fault: str,
    pair: PatroniPair,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    f = await failover_round(
        fault, pair, etcd_server, redis_server, tmp_path, tasks=TASKS, span_s=SPAN_S
    )
    assert f.ran == TASKS  # every handler started (and every task completed once)
    # The node that reconnected raised the fence once, on the new timeline.
    assert f.generation >= 1
    assert f.raised_by.startswith(NEW_TIMELINE_ACTOR)
    # A worker still holding a pre-failover token is refused (0 zombie writes).
    assert f.refused == f.held
    print("\nPatroni failover, " + f.line())

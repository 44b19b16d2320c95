"""A clustered node whose PostgreSQL accepts connections and never answers gives its
shards up, and another node runs its tasks (issue 42, "no silent stall").

Real processes: two ``tickwheel serve`` nodes on etcd and Redis with ``serve``'s own
stall bounds (NOT_SERVING after ``stall_after_s``, 5 s; the etcd lease no longer renewed
after ``stall_yield_s``, 15 s), one ``tickwheel worker`` each, on a PostgreSQL server
of the test's own. n1 reaches PostgreSQL through a TCP proxy, n2 directly. While tasks
fall due on both nodes' shards the proxy stops forwarding (connections stay open, new
ones are accepted: a hung or partitioned server, not a refusing one). Then:

- n1 reports NOT_SERVING on the gRPC health service and logs which loop stalled;
- n1 stops renewing its etcd lease, so n2 owns every shard and dispatches n1's tasks:
  every task completes exactly once, each dispatch from its shard's epoch owner;
- once the proxy forwards again, n1 serves and takes part of the shards again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.cluster._proxy import PartitionProxy
from tests.support import cluster
from tests.support.outage import connected
from tests.support.processes import process_group
from tests.support.regions import _database
from tests.support.servers import EtcdServer, PostgresServer, RedisServer, start_server
from tests.support.waiting import eventually

TASKS = 1200
SPAN_S = 40.0
CUT_AT_S = 6.0
"""The proxy stops forwarding this long after the first task is due."""


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, stopped and removed at the end."""
    pg = start_server(lambda: PostgresServer(None))
    try:
        yield pg
    finally:
        pg.cleanup()


def through(dsn: str, port: int) -> str:
    """``dsn`` with its host and port replaced by the proxy's."""
    url = urlsplit(dsn)
    user = url.netloc.rpartition("@")[0]
    return urlunsplit(url._replace(netloc=f"{user}@127.0.0.1:{port}"))


async def health(target: str) -> int:
    """The node's gRPC health status (-1: no answer)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
        except grpc.aio.AioRpcError:
            return -1
        return int(reply.status)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_node_whose_store_hangs_reports_not_serving_and_hands_its_shards_over(
    own_postgres: PostgresServer,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    dsn = await asyncio.to_thread(_database, own_postgres)
    url = urlsplit(dsn)
    assert url.hostname is not None
    assert url.port is not None
    proxy = PartitionProxy(url.hostname, url.port)
    await proxy.start()
    try:
        with process_group(tmp_path / "procs") as group:
            async with connected(dsn) as db:
                running = await cluster.start_cluster(
                    group,
                    db,
                    dsn,
                    etcd_server,
                    redis_server,
                    ["n1", "n2"],
                    etcd_ttl_s=5.0,  # serve's defaults throughout
                    task_lease_s=30.0,
                    preload_interval_s=1.0,
                    worker_slots=100,
                    node_dsns={"n1": through(dsn, proxy.port)},
                )
                n1 = running.nodes[0]
                start = datetime.now(UTC) + timedelta(seconds=3)
                await cluster.submit_due(running, cluster.spread(start, SPAN_S, TASKS))
                before = await cluster.owners(db)
                assert {"n1", "n2"} == set(before.values())
                await asyncio.sleep((start - datetime.now(UTC)).total_seconds() + CUT_AT_S)
                assert await health(n1.target) == health_pb2.HealthCheckResponse.SERVING

                proxy.cut()
                cut = time.monotonic()
                await eventually(
                    lambda: health(n1.target),
                    until=lambda s: s == health_pb2.HealthCheckResponse.NOT_SERVING,
                    timeout_s=30,
                    interval_s=0.2,
                    what="n1 NOT_SERVING",
                )
                not_serving_s = time.monotonic() - cut
                await eventually(
                    lambda: cluster.owners(db),
                    until=lambda o: len(o) == cluster.SHARDS and set(o.values()) == {"n2"},
                    timeout_s=60,
                    interval_s=0.2,
                    what="n2 to own every shard",
                )
                handed_over_s = time.monotonic() - cut
                log = n1.log()
                assert "loop has made no progress" in log, log[-3000:]
                assert "stops renewing its lease" in log, log[-3000:]
                # n2 runs every task, n1's included, while n1's store still hangs.
                await eventually(
                    lambda: cluster.completed(running),
                    until=lambda c: c == TASKS,
                    timeout_s=120,
                    interval_s=0.5,
                    what="every task completed",
                )
                assert proxy.cut_off

                proxy.heal()
                await eventually(
                    lambda: health(n1.target),
                    until=lambda s: s == health_pb2.HealthCheckResponse.SERVING,
                    timeout_s=60,
                    interval_s=0.2,
                    what="n1 serving again",
                )
                await eventually(
                    lambda: cluster.owners(db),
                    until=lambda o: set(o.values()) == {"n1", "n2"},
                    timeout_s=60,
                    interval_s=0.2,
                    what="n1 to own shards again",
                )
                await cluster.check_exactly_once(running, TASKS, timeout_s=30)
                print(
                    f"\nstore hung: n1 NOT_SERVING after {not_serving_s:.1f} s (stall_after_s "
                    f"5 s), every shard on n2 after {handed_over_s:.1f} s (stall_yield_s 15 s "
                    "+ etcd TTL 5 s)"
                )
    finally:
        proxy.heal()
        await proxy.stop()

"""Issue 19, items 1 and 2: a second node never silently stops the first one.

Real ``tickwheel`` processes on the harness's PostgreSQL: a second ``serve`` on the same
database without etcd is refused with a message naming the first; a second ``serve`` on
a port in use is a one-line error and claims nothing; a second node on one SQLite file
is refused; a node whose lock connection is killed gives its shards up, says so, reports
NOT_SERVING and takes them back.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler.client import TaskState
from scheduler.store import open_store
from tests.acceptance.conftest import Cluster
from tests.support.processes import CommandProcess, process_group, run_cli_result
from tests.support.servers import free_port
from tests.support.waiting import eventually

LOCK_KEY = 0x746B776C_00000001  # scheduler.cluster._lease.LOCK_KEY, stated by the test


async def _epochs(dsn: str) -> dict[int, tuple[int, str]]:
    """shard -> (epoch, owner) of the latest claim of each shard, through the store."""
    store = await open_store(dsn)
    try:
        latest: dict[int, tuple[int, str]] = {}
        for c in await store.shard_claims():
            if c.shard_id not in latest or c.epoch > latest[c.shard_id][0]:
                latest[c.shard_id] = (c.epoch, c.owner)
        return latest
    finally:
        await store.close()


async def _completes(cluster: Cluster) -> None:
    task = await cluster.client.submit("work", {"n": 1}, strict_timing=True)
    await eventually(
        lambda: cluster.client.get(task.id),
        until=lambda t: t.state is TaskState.COMPLETED,
        timeout_s=30,
        what=f"task {task.id} to complete on the first node",
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error" in line.lower()]


async def test_a_second_serve_on_the_same_database_is_refused_and_the_first_dispatches(
    cluster: Cluster,
) -> None:
    await cluster.worker("worker-1")
    before = await _epochs(cluster.dsn)
    result = await asyncio.to_thread(
        run_cli_result,
        ["serve", "--postgres-dsn", cluster.dsn, "--listen", f"127.0.0.1:{free_port()}"],
        timeout_s=30,
    )
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = _error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert "another Tickwheel node holds this database" in line, line
    # It names the first node (its pid and address) and says how to run several.
    assert f"pid {cluster.server.pid}" in line, line
    assert f":{cluster.server.port}" in line, line
    assert "--etcd" in line, line
    assert await _epochs(cluster.dsn) == before
    await _completes(cluster)


async def test_a_second_serve_on_a_busy_port_fails_in_one_line_and_claims_nothing(
    cluster: Cluster,
) -> None:
    await cluster.worker("worker-1")
    before = await _epochs(cluster.dsn)
    assert len(before) == 256  # the first node claimed every shard
    listen = cluster.server.target
    result = await asyncio.to_thread(
        run_cli_result,
        ["serve", "--postgres-dsn", cluster.dsn, "--listen", listen],
        timeout_s=30,
    )
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"Error: cannot listen on {listen}: address already in use"], result.stderr
    assert await _epochs(cluster.dsn) == before
    await _completes(cluster)


async def test_a_second_node_on_the_same_sqlite_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "dev.db"
    port = free_port()
    with process_group(tmp_path / "procs") as group:
        dev = CommandProcess(
            group.dir / "dev",
            "dev",
            ["dev", "--db", str(db), "--listen", f"127.0.0.1:{port}"],
            ready_log=r"Tickwheel dev server",
        )
        group.procs.append(dev)
        await asyncio.to_thread(dev.start)
        for args in (
            ["serve", "--store", f"sqlite:///{db}", "--listen", f"127.0.0.1:{free_port()}"],
            ["dev", "--db", str(db), "--listen", f"127.0.0.1:{free_port()}"],
        ):
            result = await asyncio.to_thread(run_cli_result, args, timeout_s=30)
            assert result.returncode != 0, result.stderr
            assert "Traceback" not in result.stderr, result.stderr
            lines = _error_lines(result.stderr)
            assert len(lines) == 1, result.stderr
            assert "another Tickwheel node holds this database" in lines[0], lines
            assert f"pid {dev.pid}" in lines[0], lines
            assert "--etcd" in lines[0], lines
        assert dev.running()


async def _health(target: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        return int(reply.status)


async def _lock_backend(db: asyncpg.Connection) -> int:
    rows = await db.fetch(
        "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted"
        " AND a.application_name LIKE 'tickwheel node %'"
    )
    assert len(rows) == 1, f"expected one node lock connection, found {rows}"
    return int(rows[0]["pid"])


async def test_a_node_whose_lock_connection_dies_gives_its_shards_up_and_takes_them_back(
    cluster: Cluster,
) -> None:
    await cluster.worker("worker-1")
    before = await _epochs(cluster.dsn)
    assert await _health(cluster.server.target) == health_pb2.HealthCheckResponse.SERVING
    pid = await _lock_backend(cluster.db)
    # The test takes the lock as soon as the node's connection is gone and holds it, so
    # the node stays without shards (and says so) until the test lets go.
    name = f"tickwheel test holder {uuid.uuid4().hex[:6]}"
    holder = await asyncpg.connect(cluster.dsn, server_settings={"application_name": name})
    assert await cluster.db.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    await eventually(
        lambda: holder.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY),
        timeout_s=10,
        what="the test to take the released lock",
    )
    try:
        await eventually(
            lambda: asyncio.to_thread(cluster.server.log_has, r"WARNING .*lost the database lease"),
            what="the node to log the lost lease",
        )
        await eventually(
            lambda: _health(cluster.server.target),
            until=lambda s: s == health_pb2.HealthCheckResponse.NOT_SERVING,
            what="health NOT_SERVING",
        )
        await eventually(
            lambda: asyncio.to_thread(
                cluster.server.log_has, rf"cannot take the database lease back: {name}"
            ),
            what="the node to name the holder",
        )
        assert await _epochs(cluster.dsn) == before  # no claim without the lease
    finally:
        await holder.close()
    await eventually(
        lambda: _health(cluster.server.target),
        until=lambda s: s == health_pb2.HealthCheckResponse.SERVING,
        what="health SERVING again",
    )
    assert cluster.server.log_has(r"WARNING .*took the database lease back")
    after = await _epochs(cluster.dsn)
    assert after.keys() == before.keys()
    assert all(after[s][0] == before[s][0] + 1 for s in before), "every shard claimed again"
    assert await _lock_backend(cluster.db) != pid
    await _completes(cluster)

"""Automatic failover with a witness, with real processes (issue 38): a 3-member etcd
cluster (a member in A, one in B, one witness), region A's node holding the region
lease through a TCP proxy the test owns, B's standby node, and ``tickwheel dr watch`` in
B (tests/support/witness.py). Short lease (2 s), margin 0.5 s, detection 1 s; the long
drills, with figures, are ``benchmarks/test_dr_witness.py``.

- A lost (node, PostgreSQL, etcd member and worker killed -9) -> B promoted by itself,
  every acknowledged (synchronous) submission completes exactly once in B;
- A partitioned from the witness and B, alive -> A's last dispatch is before B's first;
- A slow (SIGSTOP shorter than the bound) -> no promotion, A goes on;
- the witness lost -> nobody promotes, A goes on; then A lost too -> still nobody (B
  alone has no quorum).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import AdminClient, Client
from tests.support.dr import DATABASE, StandbyServeProcess, tickwheel_json
from tests.support.processes import ADMIN_TOKEN
from tests.support.servers import StandbyServer, start_server
from tests.support.waiting import eventually
from tests.support.witness import NODE_ARGS, Sites, dispatch_times, generation, sites

pytestmark = pytest.mark.postgres


async def _health(target: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=2
            )
        except grpc.aio.AioRpcError:
            return -1
        return int(reply.status)


async def _tenant_key(s: Sites) -> str:
    async with await AdminClient.connect(s.node_a.target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant("witness")
        return (await admin.create_api_key(tenant.id, "witness")).secret


async def _submit(
    s: Sites, key: str, n: int, span_s: float, lead_s: float = 0.5
) -> list[uuid.UUID]:
    start = datetime.now(UTC) + timedelta(seconds=lead_s)
    async with await Client.connect(s.node_a.target, api_key=key) as client:
        return [
            (
                await client.submit(
                    "work",
                    {"i": i},
                    scheduled_at=start + timedelta(seconds=span_s * i / n),
                    strict_timing=True,
                )
            ).id
            for i in range(n)
        ]


def _starts(s: Sites) -> list[dict[str, object]]:
    if not s.records.exists():
        return []
    rows = [json.loads(x) for x in s.records.read_text().splitlines() if x]
    return [r for r in rows if r["event"] == "start"]


async def _started_by(s: Sites, worker: str, after: float = 0.0) -> int:
    return sum(1 for r in _starts(s) if r["worker"] == worker and float(r["at"]) > after)  # type: ignore[arg-type]


async def test_a_lost_b_is_promoted_by_itself(tmp_path: Path) -> None:
    async with sites(tmp_path, synchronous=True) as s:
        key = await _tenant_key(s)
        worker_a = await s.worker(s.node_a.target, key, "worker-a")
        ids = await _submit(s, key, 40, span_s=10.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 3, what="A runs")
        assert (await s.decisions()).get("promote", 0) == 0
        # Region A is lost: its node, worker, PostgreSQL and etcd member, kill -9.
        lost_at = time.time()
        worker_a.kill9()
        s.node_a.kill9()
        s.pair.kill_primary()
        s.etcd["a"].kill9()
        await eventually(
            lambda: _health(s.node_b.target),
            until=lambda st: st == health_pb2.HealthCheckResponse.SERVING,
            timeout_s=60,
            what="B's DR node to serve after the automatic promote",
        )
        serving_at = time.time()
        assert (await s.decisions()).get("promote", 0) == 1
        # `dr status --etcd` shows who holds the region: site b, with B's node.
        doc = await asyncio.to_thread(
            tickwheel_json,
            "dr",
            "status",
            "--standby-dsn",
            s.pair.standby_dsn,
            "--etcd",
            f"{s.etcd['b'].endpoint},{s.etcd['w'].endpoint}",
        )
        assert doc["standby_in_recovery"] is False
        assert doc["region"]["active"] == "b"
        assert list(doc["region"]["alive"]) == ["b"]
        await s.worker(s.node_b.target, key, "worker-b")
        db = await asyncpg.connect(s.pair.standby_admin_dsn)
        try:
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) FROM tasks WHERE id = ANY($1) AND status = 'COMPLETED'", ids
                ),
                until=lambda n: n == len(ids),
                timeout_s=60,
                what="every acknowledged task to complete in B",
            )
            ledger = await db.fetch(
                "SELECT task_id, count(*) AS n FROM task_completions"
                " WHERE task_id = ANY($1) GROUP BY task_id",
                ids,
            )
        finally:
            await db.close()
        # Synchronous mode: no acknowledged submission lost, none completed twice.
        assert {r["task_id"]: r["n"] for r in ledger} == {i: 1 for i in ids}
        print(f"A lost -> B serving {serving_at - lost_at:.2f} s (lease 2 s, detection 1 s)")


async def test_partitioned_a_stops_before_b_starts(tmp_path: Path) -> None:
    async with sites(tmp_path, peer_proxies=True) as s:
        key = await _tenant_key(s)
        await s.worker(s.node_a.target, key, "worker-a")
        await _submit(s, key, 150, span_s=15.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 3, what="A runs")
        # Site A is cut from the witness and from B (its etcd member's peer links); its
        # node, worker, PostgreSQL and etcd member all keep running.
        cut_at = datetime.now(UTC)
        s.partition_a()
        await eventually(
            lambda: asyncio.to_thread(s.node_a.log_has, "lost region"),
            timeout_s=30,
            what="A's node to fence itself",
        )
        # The fenced node refuses its region's calls (clients move to B's endpoints).
        async with grpc.aio.insecure_channel(s.node_a.target) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await pbg.SchedulerServiceStub(channel).GetTask(  # type: ignore[no-untyped-call]
                    pb.GetTaskRequest(task_id=str(uuid.uuid4())),
                    metadata=(("x-api-key", key),),
                    timeout=10,
                )
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "does not hold the region lease" in str(refused.value.details())
        await eventually(
            lambda: _health(s.node_a.target),
            until=lambda st: st == health_pb2.HealthCheckResponse.NOT_SERVING,
            what="A's node to report NOT_SERVING",
        )
        await eventually(
            lambda: _health(s.node_b.target),
            until=lambda st: st == health_pb2.HealthCheckResponse.SERVING,
            timeout_s=60,
            what="B's DR node to serve after the automatic promote",
        )
        await s.worker(s.node_b.target, key, "worker-b")
        g = await generation(s.pair.standby_admin_dsn)
        b_dispatches = await eventually(
            lambda: dispatch_times(s.pair.standby_admin_dsn, above_token=g << 40),
            until=lambda d: len(d) >= 5,
            timeout_s=30,
            what="B to dispatch",
        )
        a_dispatches = await dispatch_times(s.pair.primary_dsn)
        assert s.node_a.running()
        assert a_dispatches, "A dispatched nothing before the cut"
        last_a, first_b = a_dispatches[-1], b_dispatches[0]
        assert last_a < first_b
        seconds_a = {int(t.timestamp()) for t in a_dispatches}
        assert not seconds_a & {int(t.timestamp()) for t in b_dispatches}
        print(
            f"cut -> A's last dispatch {(last_a - cut_at).total_seconds():.2f} s, "
            f"-> B's first {(first_b - cut_at).total_seconds():.2f} s "
            f"(gap {(first_b - last_a).total_seconds():.2f} s)"
        )


async def test_slow_a_is_not_replaced(tmp_path: Path) -> None:
    async with sites(tmp_path) as s:
        key = await _tenant_key(s)
        await s.worker(s.node_a.target, key, "worker-a")
        await _submit(s, key, 100, span_s=15.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 3, what="A runs")
        # A's node frozen for 10 of the orchestrator's polls (~1 s, under the 2 s lease).
        polls = await s.polls()
        s.node_a.pause()
        try:
            await eventually(s.polls, until=lambda n: n >= polls + 10, what="polls")
        finally:
            s.node_a.resume()
        resumed = time.time()
        # Long past the bound (lease + detection = 3 s: 40 polls), A still serves.
        polls = await s.polls()
        await eventually(s.polls, until=lambda n: n >= polls + 40, timeout_s=30, what="polls")
        await eventually(
            lambda: _started_by(s, "worker-a", after=resumed),
            until=lambda n: n >= 3,
            what="A to run tasks after the freeze",
        )
        decisions = await s.decisions()
        assert decisions.get("promote", 0) == 0
        assert decisions.get("would-promote", 0) == 0
        assert await s.in_recovery()


async def test_witness_lost_nobody_promotes(tmp_path: Path) -> None:
    async with sites(tmp_path) as s:
        key = await _tenant_key(s)
        await s.worker(s.node_a.target, key, "worker-a")
        await _submit(s, key, 100, span_s=15.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 3, what="A runs")
        s.etcd["w"].kill9()
        lost = time.time()
        polls = await s.polls()
        await eventually(s.polls, until=lambda n: n >= polls + 40, timeout_s=30, what="polls")
        await eventually(
            lambda: _started_by(s, "worker-a", after=lost),
            until=lambda n: n >= 3,
            what="A to run tasks without the witness",
        )
        # A may drop its lease for a renewal while its etcd client moves off the dead
        # member (at this test's 2 s TTL and 0.5 s margin on a loaded machine: seen
        # once, retaken a second later); what must hold is that nobody promotes and A
        # keeps running tasks, checked above and here.
        assert (await s.decisions()).get("promote", 0) == 0
        assert await s.in_recovery()
        # Then A is lost too: B alone has no quorum, so it cannot take the region.
        s.node_a.kill9()
        s.etcd["a"].kill9()
        base = (await s.decisions()).get("no-quorum", 0)
        await eventually(
            s.decisions,
            until=lambda d: d.get("no-quorum", 0) >= base + 10,
            timeout_s=60,
            what="B to find no quorum",
        )
        assert (await s.decisions()).get("promote", 0) == 0
        assert await s.in_recovery()


async def test_failback_to_a(tmp_path: Path) -> None:
    """After an automatic failover to B: A's database rebuilt as B's standby (a fresh
    base backup, the docs' command), A's DR node on it, B's node stopped, then the
    planned switch back with the manual override (`dr promote --etcd --site a`): the
    tasks B held run in A, once."""
    async with sites(tmp_path) as s:
        key = await _tenant_key(s)
        worker_a = await s.worker(s.node_a.target, key, "worker-a")
        await _submit(s, key, 5, span_s=1.0)
        await eventually(lambda: _started_by(s, "worker-a"), until=lambda n: n >= 5, what="A runs")
        worker_a.kill9()
        s.node_a.kill9()
        s.pair.kill_primary()
        await eventually(
            lambda: _health(s.node_b.target),
            until=lambda st: st == health_pb2.HealthCheckResponse.SERVING,
            timeout_s=60,
            what="B to serve",
        )
        # B holds tasks no worker ran yet (no worker in B).
        async with await Client.connect(s.node_b.target, api_key=key) as client:
            held = [(await client.submit("work", {"b": i})).id for i in range(10)]
        b_server = s.pair.standby
        a_again = start_server(
            lambda: StandbyServer(b_server, "tw_failback", application_name="region_a")
        )
        try:
            await eventually(
                lambda: asyncio.to_thread(a_again.streaming), what="A's new standby to stream"
            )
            a_dsn, a_admin = a_again.app_dsn(DATABASE), a_again.dsn(DATABASE)
            node_a2 = StandbyServeProcess(
                s.group.dir / "node-a2",
                a_dsn,
                name="node-a2",
                extra_args=(
                    *NODE_ARGS,
                    "--standby",
                    "--witness-etcd",
                    s.proxy.endpoint,
                    "--witness-site",
                    "a",
                    "--witness-lease-ttl-s",
                    "2",
                    "--witness-margin-s",
                    "0.5",
                ),
            )
            s.group.procs.append(node_a2)
            await asyncio.to_thread(node_a2.start)
            # The planned switch back: B's orchestrator and node stopped, nothing to lose.
            await asyncio.to_thread(s.watch.stop)
            await asyncio.to_thread(s.node_b.stop)
            await eventually(
                lambda: asyncio.to_thread(
                    tickwheel_json,
                    "dr",
                    "status",
                    "--standby-dsn",
                    a_dsn,
                    "--primary-dsn",
                    s.pair.standby_dsn,
                ),
                until=lambda d: d["lag_bytes"] == 0,
                what="A's standby to replay everything",
            )
            members = f"{s.etcd['a'].endpoint},{s.etcd['w'].endpoint}"
            report = await asyncio.to_thread(
                tickwheel_json,
                "dr",
                "promote",
                "--standby-dsn",
                a_admin,
                "--etcd",
                members,
                "--site",
                "a",
            )
            assert report["fenced"] is True
            await eventually(
                lambda: _health(node_a2.target),
                until=lambda st: st == health_pb2.HealthCheckResponse.SERVING,
                timeout_s=60,
                what="A's DR node to serve after the switch back",
            )
            await s.worker(node_a2.target, key, "worker-a2")
            db = await asyncpg.connect(a_admin)
            try:
                await eventually(
                    lambda: db.fetchval(
                        "SELECT count(*) FROM tasks WHERE id = ANY($1) AND status = 'COMPLETED'",
                        held,
                    ),
                    until=lambda n: n == len(held),
                    timeout_s=60,
                    what="B's tasks to complete in A",
                )
                ledger = await db.fetch(
                    "SELECT task_id, count(*) AS n FROM task_completions"
                    " WHERE task_id = ANY($1) GROUP BY task_id",
                    held,
                )
            finally:
                await db.close()
            assert {r["task_id"]: r["n"] for r in ledger} == {i: 1 for i in held}
            doc = await asyncio.to_thread(
                tickwheel_json, "dr", "status", "--standby-dsn", a_dsn, "--etcd", members
            )
            assert doc["region"]["active"] == "a"
            assert list(doc["region"]["alive"]) == ["a"]
        finally:
            await asyncio.to_thread(s.group.stop_all)
            a_again.cleanup()

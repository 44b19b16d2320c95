"""WorkerService.Members on real ``tickwheel serve --etcd`` nodes (issue 17).

Three nodes share shards through a real etcd; every node answers the same three live
members with the address each advertised (``--advertise``, default ``--listen``), and
a worker stream's ``Welcome`` carries the same list. A node that stops leaves it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from tests.support import cluster
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, RedisServer
from tests.support.waiting import eventually


async def _members(target: str, api_key: str) -> dict[str, str]:
    async with grpc.aio.insecure_channel(target) as channel:
        reply = await pbg.WorkerServiceStub(channel).Members(
            pb.MembersRequest(), metadata=(("x-api-key", api_key),), timeout=5
        )
    assert reply.members.revision > 0
    return {m.node_id: m.address for m in reply.members.members}


async def _welcome(target: str, api_key: str) -> pb.Welcome:
    async with grpc.aio.insecure_channel(target) as channel:
        call = pbg.WorkerServiceStub(channel).Connect(metadata=(("x-api-key", api_key),))
        await call.write(
            pb.WorkerMessage(hello=pb.Hello(worker_id="probe", task_types=["work"], slots=1))
        )
        first = await call.read()
        call.cancel()
    assert first.WhichOneof("kind") == "welcome"
    return first.welcome


@pytest.mark.timeout(180)
async def test_every_node_answers_the_live_members_and_welcome_carries_them(
    pg_dsn: str, etcd_server: EtcdServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    with process_group(tmp_path / "procs") as group:
        async with cluster.running(
            group, pg_dsn, etcd_server, redis_server, 3, etcd_ttl_s=2, worker_slots=10
        ) as c:
            want = {f"n{i + 1}": node.target for i, node in enumerate(c.nodes)}
            for node in c.nodes:
                assert await _members(node.target, c.api_key) == want, group.explain()
            welcome = await _welcome(c.nodes[1].target, c.api_key)
            assert welcome.members.node_id == "n2"
            assert {m.node_id: m.address for m in welcome.members.members} == want
            # A node that stops leaves the list (its etcd key goes with its lease).
            await asyncio.to_thread(c.nodes[2].stop)
            del want["n3"]
            await eventually(
                lambda: _members(c.nodes[0].target, c.api_key),
                until=lambda got: got == want,
                timeout_s=30,
                what="n3 gone from the members",
            )

"""Paused work in the backlog (issue 43): ListWorkers shows, for each worker stream,
the due tasks it could take apart from those a dispatch pause holds, and the backlog a
worker is told leaves the paused ones out."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import Client, Pool, SyncClient, TaskSpec, WorkerInfo
from scheduler.states import TaskState
from scheduler.worker import TaskContext, Worker
from tests.integration.transport.conftest import Stack
from tests.integration.transport.test_sdk import running
from tests.support.processes import run_cli
from tests.support.waiting import eventually


async def _figures(client: Client) -> list[tuple[str, int, int]]:
    answer = await client._rpc(client._sched.ListWorkers, pb.ListWorkersRequest())
    return [(w.worker_id, w.waiting, w.paused) for w in answer.workers]


async def _report_handler(ctx: TaskContext) -> dict[str, Any]:
    return {"ran": ctx.payload.get("n")}


def _report_worker(stack: Stack, worker_id: str, **options: Any) -> Worker:
    """A 4-slot worker of tenant A for ``report.build``."""
    return Worker(
        stack.target,
        api_key=stack.key_a,
        handlers={"report.build": _report_handler},
        slots=4,
        worker_id=worker_id,
        **options,
    )


async def test_list_workers_shows_paused_tasks_apart(stack: Stack) -> None:
    async with running(_report_worker(stack, "w-paused")), await stack.client() as client:
        await eventually(lambda: _figures(client), lambda f: f == [("w-paused", 0, 0)])
        await client.pause_dispatch("report.build")
        specs = [TaskSpec(type="report.build", payload={"n": n}) for n in range(3)]
        tasks = await client.submit_many(specs)  # due now
        await eventually(
            lambda: _figures(client),
            lambda f: f == [("w-paused", 0, 3)],
            what="three due tasks counted as paused, none as waiting",
        )
        for t in tasks:
            assert (await client.get(t.id)).state is TaskState.PRELOADED
        await client.resume_dispatch("report.build")
        for t in tasks:
            done = await client.wait(t.id, timeout_s=30)
            assert done.state is TaskState.COMPLETED
        assert await _figures(client) == [("w-paused", 0, 0)]


async def test_list_workers_from_the_client_the_sync_client_and_the_cli(stack: Stack) -> None:
    """``Client.list_workers``, ``SyncClient.list_workers`` and ``tickwheel workers``
    show the same stream: its id, types, slots and waiting and paused figures; another
    tenant's key sees none of it."""
    worker = _report_worker(stack, "w-listed", pools=[Pool.STANDARD])
    async with running(worker), await stack.client() as client:
        await eventually(lambda: _figures(client), lambda f: f == [("w-listed", 0, 0)])
        await client.pause_dispatch("report.build")
        await client.submit_many([TaskSpec(type="report.build", payload={}) for _ in range(2)])
        await eventually(lambda: _figures(client), lambda f: f == [("w-listed", 0, 2)])
        (info,) = await client.list_workers()
        assert (info.worker_id, info.task_types, info.pools) == (
            "w-listed",
            ("report.build",),
            (Pool.STANDARD,),
        )
        assert (info.slots, info.slots_used, info.slots_free) == (4, 0, 4)
        assert (info.waiting, info.paused, info.start_on_delivery) == (0, 2, False)
        assert info.tenant_id == str(stack.tenant_a)
        assert info.last_seen >= info.connected_at

        def sync_list() -> list[WorkerInfo]:
            with SyncClient(stack.target, api_key=stack.key_a) as sync:
                return sync.list_workers()

        assert await asyncio.to_thread(sync_list) == [info]
        auth = ("--target", stack.target, "--api-key", stack.key_a)
        (doc,) = json.loads(await asyncio.to_thread(run_cli, ["workers", "--json", *auth]))
        assert (doc["worker_id"], doc["slots"], doc["paused"]) == ("w-listed", 4, 2)
        table = await asyncio.to_thread(run_cli, ["workers", *auth])
        head, row = [ln.split() for ln in table.splitlines() if ln.strip()]
        assert dict(zip(head[:8], row[:8], strict=True)) == {
            "worker": "w-listed",
            "types": "report.build",
            "pools": "standard",
            "slots": "4",
            "used": "0",
            "free": "4",
            "waiting": "0",
            "paused": "2",
        }
        other = ("--target", stack.target, "--api-key", stack.key_b)
        assert json.loads(await asyncio.to_thread(run_cli, ["workers", "--json", *other])) == []
        await client.resume_dispatch("report.build")

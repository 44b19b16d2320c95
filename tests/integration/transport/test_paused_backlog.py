"""Paused work in the backlog (issue 43): ListWorkers shows, for each worker stream,
the due tasks it could take apart from those a dispatch pause holds, and the backlog a
worker is told leaves the paused ones out."""

from __future__ import annotations

from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import Client, TaskSpec
from scheduler.states import TaskState
from scheduler.worker import TaskContext, Worker
from tests.integration.transport.conftest import Stack
from tests.integration.transport.test_sdk import running
from tests.support.waiting import eventually


async def _figures(client: Client) -> list[tuple[str, int, int]]:
    answer = await client._rpc(client._sched.ListWorkers, pb.ListWorkersRequest())
    return [(w.worker_id, w.waiting, w.paused) for w in answer.workers]


async def test_list_workers_shows_paused_tasks_apart(stack: Stack) -> None:
    async def handler(ctx: TaskContext) -> dict[str, Any]:
        return {"ran": ctx.payload["n"]}

    worker = Worker(
        stack.target,
        api_key=stack.key_a,
        handlers={"report.build": handler},
        slots=4,
        worker_id="w-paused",
    )
    async with running(worker), await stack.client() as client:
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

"""Fencing and lease expiry with real processes: a frozen worker and a killed one."""

from __future__ import annotations

import asyncio
import re
import uuid

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import Task, TaskState
from tests.acceptance.conftest import Cluster
from tests.support.processes import WorkerProcess
from tests.support.waiting import eventually


async def _state(cluster: Cluster, task_id: uuid.UUID, state: TaskState, **kw: float) -> Task:
    return await eventually(
        lambda: cluster.client.get(task_id),
        until=lambda t: t.state is state,
        what=f"task {task_id} to be {state.value}",
        **kw,
    )


async def _log_line(proc: WorkerProcess, pattern: str) -> None:
    async def probe() -> bool:
        return await asyncio.to_thread(proc.log_has, pattern)

    await eventually(probe, what=f"{proc.name} to log {pattern!r}")


# Both ways a worker may start a task: after its ack, or on delivery (RUNNING from the
# dispatch, no ack). Fencing and lease expiry must not care.
START = pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])


@START
async def test_zombie_worker_is_fenced_out_end_to_end(
    cluster: Cluster, start_on_delivery: bool
) -> None:
    """The seed's scenario: A acks, freezes past its lease; B gets token + 1 and
    completes; A thaws, its completion is rejected and it logs a zombie warning."""
    # One slot: while A holds the task it has no credit, so the re-dispatch can only go
    # to B (the spare-credit case is the next test).
    a = await cluster.worker(
        "worker-a", slots=1, env={"TW_HOLD_S": "2"}, start_on_delivery=start_on_delivery
    )
    task = await cluster.client.submit("work", {"n": 1}, strict_timing=True)
    running = await _state(cluster, task.id, TaskState.RUNNING)
    assert running.worker_id == "worker-a"
    a.pause()  # SIGSTOP: no heartbeat, no completion, the lease (3 s) runs out

    await cluster.worker("worker-b")
    done = await _state(cluster, task.id, TaskState.COMPLETED, timeout_s=30)
    assert done.fencing_token == running.fencing_token + 1
    assert done.result == {"worker": "worker-b", "token": done.fencing_token}
    assert done.worker_id == "worker-b"

    a.resume()  # SIGCONT: A finishes its handler and tries to commit with the old token
    token_a = running.fencing_token
    await _log_line(
        a,
        rf"zombie: completion of task {task.id} with fencing token {token_a} was rejected",
    )

    final = await cluster.client.get(task.id)
    assert final.state is TaskState.COMPLETED
    assert final.result == done.result
    assert final.fencing_token == done.fencing_token
    assert await cluster.ledger_count(task.id) == 1
    to_completed = [t for t in await cluster.transitions(task.id) if t[1] == "COMPLETED"]
    assert len(to_completed) == 1
    assert to_completed[0][2] == done.fencing_token
    # Both attempts ran the handler to the end; only B's outcome was committed.
    finished = {(r["worker"], r["token"]) for r in cluster.records("done")}
    assert finished == {("worker-a", token_a), ("worker-b", done.fencing_token)}
    # The zombie's refused completion is in the task's history, with both tokens
    # (issue 18), and the audit says why each change happened.
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        history = await pbg.SchedulerServiceStub(channel).GetTaskHistory(  # type: ignore[no-untyped-call]
            pb.GetTaskHistoryRequest(task_id=str(task.id)),
            metadata=(("x-api-key", cluster.api_key),),
            timeout=10,
        )
    refused = [(r.write, r.fencing_token, r.current_token, r.actor) for r in history.refused_writes]
    assert ("complete", token_a, done.fencing_token, "worker-a") in refused
    assert all(r.reason == "stale_fencing_token" for r in history.refused_writes)
    assert "lease expired" in [t.reason for t in history.transitions]
    assert all(t.reason for t in history.transitions)


@START
async def test_kill_9_worker_mid_task_redispatches_after_lease_expiry(
    cluster: Cluster, start_on_delivery: bool
) -> None:
    a = await cluster.worker(
        "worker-a", env={"TW_HOLD_S": "60"}, start_on_delivery=start_on_delivery
    )
    task = await cluster.client.submit("work", {"n": 2}, strict_timing=True)
    running = await _state(cluster, task.id, TaskState.RUNNING)
    assert running.worker_id == "worker-a"
    a.kill9()

    await cluster.worker("worker-b")
    done = await _state(cluster, task.id, TaskState.COMPLETED, timeout_s=30)
    assert done.result == {"worker": "worker-b", "token": done.fencing_token}
    assert done.fencing_token == running.fencing_token + 1
    assert done.retry_count == 1  # the lost attempt counts (brief §3)
    assert done.last_error is not None
    assert re.search("lease", done.last_error), done.last_error
    moves = [(f, t) for f, t, _token, _actor in await cluster.transitions(task.id)]
    assert ("RUNNING", "RETRYING") in moves, moves
    assert [r["worker"] for r in cluster.records("done")] == ["worker-b"]
    assert await cluster.ledger_count(task.id) == 1


@START
async def test_frozen_worker_with_spare_credit_does_not_black_hole_tasks(
    cluster: Cluster, start_on_delivery: bool
) -> None:
    a = await cluster.worker(
        "worker-a", slots=10, env={"TW_HOLD_S": "2"}, start_on_delivery=start_on_delivery
    )
    task = await cluster.client.submit("work", {"n": 3}, strict_timing=True)
    await _state(cluster, task.id, TaskState.RUNNING)
    a.pause()
    await cluster.worker("worker-b")
    # Lease 3 s, reaper every 0.2 s: a fixed engine completes this in about 4 s.
    done = await _state(cluster, task.id, TaskState.COMPLETED, timeout_s=12)
    assert done.worker_id == "worker-b"

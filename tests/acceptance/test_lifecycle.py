"""Retries, dead letters, redrive and cancel, end to end through real processes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler.client import InvalidTransition, Task, TaskState
from tests.acceptance.conftest import HANDLERS, Cluster
from tests.support.waiting import eventually

FLAKY = {"flaky": f"{HANDLERS}:flaky"}


async def _state(cluster: Cluster, task_id: uuid.UUID, state: TaskState, **kw: float) -> Task:
    return await eventually(
        lambda: cluster.client.get(task_id),
        until=lambda t: t.state is state,
        what=f"task {task_id} to be {state.value}",
        **kw,
    )


@pytest.mark.serve_args("--retry-base-s", "0.2")
async def test_retry_then_dead_letter_then_redrive(cluster: Cluster, tmp_path: Path) -> None:
    flag = tmp_path / "fail.flag"
    flag.touch()
    await cluster.worker("worker-f", FLAKY, env={"TW_FAIL_FLAG": str(flag)})
    task = await cluster.client.submit("flaky", {"n": 1}, strict_timing=True, max_retries=2)

    dead = await _state(cluster, task.id, TaskState.DEAD_LETTER, timeout_s=30)
    assert dead.retry_count == 3  # attempts 1, 2, 3: max_retries=2 means two retries
    assert dead.last_error is not None
    assert "flag" in dead.last_error
    # The client's Task carries what the worker sent with the failure (issue 36).
    assert dead.last_error_type == "ApplicationError"
    assert dead.last_traceback is not None
    assert "ApplicationError" in dead.last_traceback
    assert dead.workflow_id is None
    assert dead.schedule_id is None
    failed = cluster.records("failed")
    assert [r["attempt"] for r in failed] == [1, 2, 3]
    tokens = [r["token"] for r in failed]
    assert tokens == sorted(set(tokens)), tokens  # every attempt had a newer token
    moves = [(f, t) for f, t, _tok, _actor in await cluster.transitions(task.id)]
    assert moves.count(("RUNNING", "RETRYING")) == 3, moves
    assert moves.count(("RETRYING", "PRELOADED")) == 2, moves
    assert moves[-1] == ("RETRYING", "DEAD_LETTER"), moves

    flag.unlink()  # the downstream bug is fixed: the operator redrives
    redriven = await cluster.client.redrive(task.id)
    assert redriven.state in (TaskState.SCHEDULED, TaskState.PRELOADED, TaskState.DISPATCHED)
    done = await _state(cluster, task.id, TaskState.COMPLETED, timeout_s=30)
    assert done.result == {"worker": "worker-f", "token": done.fencing_token}
    assert done.fencing_token > max(tokens)
    assert [r["token"] for r in cluster.records("done")] == [done.fencing_token]
    trail = await cluster.transitions(task.id)
    assert ("DEAD_LETTER", "SCHEDULED") in [(f, t) for f, t, _tok, _a in trail]
    assert await cluster.ledger_count(task.id) == 1


async def _cancel_refused(cluster: Cluster, task_id: uuid.UUID, state: TaskState) -> None:
    with pytest.raises(InvalidTransition):
        await cluster.client.cancel(task_id)
    assert (await cluster.client.get(task_id)).state is state


# The pre-loader moves RETRYING rows due inside the look-ahead to PRELOADED at once, so
# a short look-ahead and a long backoff keep a failed task RETRYING for the test.
@pytest.mark.serve_args("--retry-base-s", "120", "--lookahead-s", "30")
async def test_cancel_in_every_state(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster.client
    now = datetime.now(UTC)

    # SCHEDULED (beyond the look-ahead) and PRELOADED (inside it): cancelled at once.
    far = await c.submit("work", scheduled_at=now + timedelta(days=3), strict_timing=True)
    assert far.state is TaskState.SCHEDULED
    assert (await c.cancel(far.id)).state is TaskState.CANCELLED
    soon = await c.submit("work", scheduled_at=now + timedelta(seconds=20), strict_timing=True)
    assert soon.state is TaskState.PRELOADED
    assert (await c.cancel(soon.id)).state is TaskState.CANCELLED

    # DISPATCHED: the only worker is frozen, so the assignment is never acked.
    frozen = await cluster.worker("worker-w", slots=1)
    frozen.pause()
    dis = await c.submit("work", {"wait_cancel": True}, strict_timing=True)
    await _state(cluster, dis.id, TaskState.DISPATCHED)
    requested = await c.cancel(dis.id)
    assert requested.cancel_requested
    assert requested.state in (TaskState.DISPATCHED, TaskState.CANCELLED)
    frozen.resume()  # it acks, sees the cancel notice and confirms (or the lease lapses)
    await _state(cluster, dis.id, TaskState.CANCELLED, timeout_s=30)

    # RUNNING: the handler waits for the cancel and the worker confirms it.
    run = await c.submit("work", {"wait_cancel": True}, strict_timing=True)
    await _state(cluster, run.id, TaskState.RUNNING)
    requested = await c.cancel(run.id)
    assert requested.state is TaskState.RUNNING
    assert requested.cancel_requested
    await _state(cluster, run.id, TaskState.CANCELLED)
    seen = [r for r in cluster.records("cancelled") if r["task_id"] == str(run.id)]
    assert [r["reason"] for r in seen] == ["cancelled"]

    # RETRYING (120 s backoff) and DEAD_LETTER (no retries left).
    flag = tmp_path / "fail.flag"
    flag.touch()
    await cluster.worker("worker-f", FLAKY, env={"TW_FAIL_FLAG": str(flag)})
    retrying = await c.submit("flaky", strict_timing=True, max_retries=3)
    await _state(cluster, retrying.id, TaskState.RETRYING)
    assert (await c.cancel(retrying.id)).state is TaskState.CANCELLED
    dead = await c.submit("flaky", strict_timing=True, max_retries=0)
    await _state(cluster, dead.id, TaskState.DEAD_LETTER)
    await _cancel_refused(cluster, dead.id, TaskState.DEAD_LETTER)

    # Terminal states refuse: COMPLETED, and CANCELLED a second time.
    done = await c.submit("work", strict_timing=True)
    await _state(cluster, done.id, TaskState.COMPLETED)
    await _cancel_refused(cluster, done.id, TaskState.COMPLETED)
    await _cancel_refused(cluster, far.id, TaskState.CANCELLED)

    # No cancelled task ever completed, and none of them is left anywhere live.
    counts = await cluster.status_counts()
    assert counts == {"CANCELLED": 5, "DEAD_LETTER": 1, "COMPLETED": 1}, counts

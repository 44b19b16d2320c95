"""The worker lifecycle with real processes: ``tickwheel serve`` on PostgreSQL and
``tickwheel worker`` children driven by real signals."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from scheduler.client import Task, TaskState
from tests.acceptance.worker_lifecycle.conftest import Lifecycle
from tests.support.waiting import eventually

pytestmark = pytest.mark.postgres


async def state_of(lc: Lifecycle, task: Task, *states: TaskState, timeout_s: float = 20) -> Task:
    return await eventually(
        lambda: lc.client.get(task.id),
        until=lambda t: t.state in states,
        timeout_s=timeout_s,
        what=f"{task.id} in {states}",
    )


async def exit_code(lc: Lifecycle, name: str, timeout_s: float = 20) -> int:
    (proc,) = [p for p in lc.procs if p.name == name]
    code = await eventually(
        lambda: _value(proc.returncode()),
        until=lambda c: c is not None,
        timeout_s=timeout_s,
        what=f"{name} exited",
    )
    assert code is not None
    return code


async def _value(value: Any) -> Any:
    return value


ROWS = {"rows": 900_000, "chunk": 10_000, "chunk_s": 0.1}
"""About 9 s of work: long enough to be caught mid-way, checkpointing every chunk."""


async def test_drain_lets_short_tasks_finish_on_their_first_attempt(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    a = await lc.worker("A", "short", grace_s=15, slots=4)
    # 4 s each: longer than the 3 s lease, so only heartbeats during the drain keep them.
    payload = {"log": lc.events_path, "sleep_s": 4.0}
    tasks = [await lc.client.submit("short", payload, strict_timing=True) for _ in range(3)]
    await eventually(lambda: _value(len(lc.events("start"))), until=lambda n: n == 3)
    a.signal(signal.SIGTERM)
    await eventually(lambda: _value("draining" in a.log()), what="A draining")
    late = await lc.client.submit("short", payload, strict_timing=True)
    assert await exit_code(lc, "A") == 0
    for task in tasks:
        done = await lc.client.get(task.id)
        assert done.state is TaskState.COMPLETED
        assert done.retry_count == 0
        # One dispatch (token + 1), attempt 1, on A: nothing was reassigned.
        assert done.result == {"attempt": 1, "token": task.fencing_token + 1, "worker": "A"}
    assert {e["cancel_reason"] for e in lc.events("done")} == {"drain"}
    # A stopped taking work at once: the late task never ran and is still waiting.
    assert late.id not in {e["task_id"] for e in lc.events("start")}
    waiting = await state_of(lc, late, TaskState.PRELOADED)
    assert waiting.retry_count == 0
    assert "3 completed" in a.log()


async def test_drain_releases_a_long_task_that_resumes_on_another_worker(
    lifecycle: Lifecycle,
) -> None:
    lc = lifecycle
    a = await lc.worker("A", "rows", grace_s=20)
    task = await lc.client.submit("rows", {"log": lc.events_path, **ROWS}, strict_timing=True)
    await eventually(
        lambda: lc.client.get(task.id),
        until=lambda t: (t.checkpoint or {}).get("processed_rows", 0) >= 100_000,
        what="progress on A",
    )
    await lc.worker("B", "rows")
    a.signal(signal.SIGTERM)
    assert await exit_code(lc, "A") == 0
    (stop,) = lc.events("interrupted")
    assert (stop["worker"], stop["reason"]) == ("A", "drain")
    done = await state_of(lc, task, TaskState.COMPLETED)
    assert done.result == {"processed_rows": 900_000, "worker": "B"}
    # Released, not failed: no attempt used, one more dispatch, resumed at the next row.
    assert done.retry_count == 0
    assert done.fencing_token == task.fencing_token + 2
    starts = lc.events("start")
    assert [(s["worker"], s["attempt"]) for s in starts] == [("A", 1), ("B", 1)]
    assert starts[1]["resume_row"] == stop["processed_rows"] + 1
    assert "1 released with a checkpoint" in a.log()


async def test_kill_9_after_a_checkpoint_resumes_from_it(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    a = await lc.worker("A", "rows")
    task = await lc.client.submit("rows", {"log": lc.events_path, **ROWS}, strict_timing=True)
    await eventually(
        lambda: lc.client.get(task.id),
        until=lambda t: (t.checkpoint or {}).get("processed_rows", 0) >= 100_000,
        what="progress on A",
    )
    a.signal(signal.SIGKILL)
    assert await exit_code(lc, "A") == -signal.SIGKILL
    # The lease lapses (3 s): RUNNING -> RETRYING, the attempt counts.
    failed = await eventually(
        lambda: lc.client.get(task.id), until=lambda t: t.retry_count == 1, what="lease expiry"
    )
    kept = failed.checkpoint["processed_rows"]
    await lc.worker("B", "rows")
    done = await state_of(lc, task, TaskState.COMPLETED)
    assert done.result == {"processed_rows": 900_000, "worker": "B"}
    resumed = [s for s in lc.events("start") if s["worker"] == "B"]
    assert [(s["attempt"], s["resume_row"]) for s in resumed] == [(2, kept + 1)]


async def test_cancel_from_another_process_stops_the_running_handler(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    a = await lc.worker("A", "waiter")
    task = await lc.client.submit("waiter", {"log": lc.events_path}, strict_timing=True)
    await eventually(lambda: _value(lc.events("start")), what="handler started")
    await state_of(lc, task, TaskState.RUNNING)
    cancel = await lc.cli(
        "cancel", str(task.id), "--target", lc.target, "--api-key", lc.api_key, "--json"
    )
    assert cancel.returncode() == 0, cancel.tail()
    await state_of(lc, task, TaskState.CANCELLED)
    (stopped,) = lc.events("stopped")
    assert (stopped["worker"], stopped["reason"]) == ("A", "cancelled")
    a.signal(signal.SIGTERM)
    assert await exit_code(lc, "A") == 0

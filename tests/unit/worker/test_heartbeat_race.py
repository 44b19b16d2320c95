"""Issue 20: a heartbeat answered while the attempt's completion is in flight.

The completion left the worker and the server committed it (the task is COMPLETED,
no longer RUNNING under this token); a heartbeat that named the task, because it was
still in the held table waiting for the completion's answer, is then refused for it.
That refusal is no lost lease: the attempt ran once with its first token and its
result was accepted. The worker must neither warn "lost its lease, its result will be
rejected" nor cancel the attempt. Deterministic: the fake stream holds the
completion's answer until the heartbeat's has been handled."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker import TaskContext
from scheduler.worker._answers import Answer as TaskAnswer
from scheduler.worker._outbox import Completed
from tests.unit.worker.fakes import FakeStream, all_ok
from tests.unit.worker.test_runner import _assignment, _runner


class InFlightStream(FakeStream):
    """The server side of one stream, in order: a completion commits at once (the task
    is done), its answer waits for ``answer_completion`` (the runner's row with it); a
    heartbeat answers stale for every task already done and OK for the others."""

    def __init__(self) -> None:
        super().__init__(all_ok)
        self.done: set[str] = set()
        self.completion_applied = asyncio.Event()
        self.answer_completion = asyncio.Event()
        self.answering: list[asyncio.Future[None]] = []

    async def request(
        self, msg: pb.WorkerMessage, timeout_s: float | None = None
    ) -> list[pb.TaskResult]:
        self.requested.append(msg)
        if msg.WhichOneof("kind") == "heartbeat":
            return [
                pb.TaskResult(task_id=r.task_id, ok=False, reason="stale_fencing_token")
                if r.task_id in self.done
                else pb.TaskResult(task_id=r.task_id, ok=True)
                for r in msg.heartbeat.tasks
            ]
        return self.answer(msg)

    def complete(
        self, completion: Completed, answered: Callable[[Any, TaskAnswer], None], arg: Any
    ) -> bool:
        msg = completion.message()
        self.committed.append(msg)
        self.done.add(msg.task.task_id)
        self.completion_applied.set()

        async def answer() -> None:
            await self.answer_completion.wait()
            answered(arg, pb.TaskResult(task_id=msg.task.task_id, ok=True))

        self.answering.append(asyncio.ensure_future(answer()))
        return True


async def test_a_heartbeat_refused_after_the_completion_committed_is_no_lost_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    contexts: list[TaskContext] = []

    async def handler(ctx: TaskContext) -> dict[str, int]:
        contexts.append(ctx)
        return {"n": 1}

    stream = InFlightStream()
    runner, table, drain = _runner(handler, stream)
    a = _assignment(token=1)
    runner.on_assignments([a])
    await asyncio.wait_for(stream.completion_applied.wait(), 5.0)
    assert uuid.UUID(a.task_id) in table.held  # waiting for the completion's answer
    with caplog.at_level(logging.INFO, logger="tickwheel.worker"):
        await runner.heartbeat()  # the heartbeat timer fires now
    stream.answer_completion.set()
    assert await table.wait_empty(5.0)  # the completion's answer took the row
    assert not [r for r in caplog.records if "lost its lease" in r.getMessage()]
    (ctx,) = contexts
    assert ctx.cancel_reason is None
    assert drain.tally == {"completed": 1}


async def test_a_heartbeat_refused_while_the_handler_runs_is_still_a_lost_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The fix must not hide a real loss: no outcome in flight, a refused heartbeat
    cancels the attempt with ``lease_lost`` and says so."""
    release = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        await release.wait()

    stream = InFlightStream()
    runner, table, _ = _runner(handler, stream)
    a = _assignment(token=1)
    runner.on_assignments([a])
    held = table.held[uuid.UUID(a.task_id)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert held.acked
    stream.done.add(a.task_id)  # another attempt owns it now
    with caplog.at_level(logging.INFO, logger="tickwheel.worker"):
        await runner.heartbeat()
    assert held.ctx.cancel_reason == "lease_lost"
    assert [r for r in caplog.records if "lost its lease" in r.getMessage()]
    stream.answer_completion.set()
    release.set()
    assert held.task is not None
    await asyncio.wait_for(held.task, 5.0)


async def test_the_heartbeat_timer_leaves_out_a_task_whose_outcome_is_in_flight() -> None:
    """Its outcome is ahead of any later heartbeat on the stream (the server applies a
    stream's messages in order), so naming it only buys a refusal, which costs the
    server a lookup. A reconnect's heartbeat still names it: the outcome is sent again
    on the new stream, and until then its lease must be kept."""
    release = asyncio.Event()

    async def handler(ctx: TaskContext) -> dict[str, int]:
        if ctx.fencing_token == 2:
            await release.wait()  # the other task's handler is still running
        return {"n": 1}

    stream = InFlightStream()
    runner, table, _ = _runner(handler, stream)
    done, running = _assignment(token=1), _assignment(token=2)
    runner.on_assignments([done, running])
    await asyncio.wait_for(stream.completion_applied.wait(), 5.0)
    assert table.held[uuid.UUID(done.task_id)].committing
    await runner.heartbeat()  # the heartbeat timer fires now
    (beat,) = [m for m in stream.requested if m.WhichOneof("kind") == "heartbeat"]
    assert [r.task_id for r in beat.heartbeat.tasks] == [running.task_id]
    runner.on_welcome(announced=table.free())  # a new stream: every held task, this one too
    (again,) = [m for m in stream.sent if m.WhichOneof("kind") == "heartbeat"]
    assert sorted(r.task_id for r in again.heartbeat.tasks) == sorted(
        [done.task_id, running.task_id]
    )
    stream.answer_completion.set()
    release.set()
    assert await table.wait_empty(5.0)

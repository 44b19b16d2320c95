"""Two-phase drain, checkpoints and cancels through the worker SDK (in process)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from scheduler.client import Task, TaskState
from scheduler.worker import Handler, Interrupted, TaskContext, Worker
from tests.integration.worker_lifecycle.conftest import Stack
from tests.support.waiting import eventually


@contextlib.asynccontextmanager
async def worker_running(
    stack: Stack, handlers: Mapping[str, Handler], **kw: Any
) -> AsyncIterator[tuple[Worker, asyncio.Task[None]]]:
    worker = Worker(stack.target, api_key=stack.key, handlers=handlers, **kw)
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        yield worker, run
    finally:
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(run, 15)


async def state_of(stack: Stack, task: Task, *states: TaskState) -> Task:
    return await eventually(
        lambda: stack.client.get(task.id), until=lambda t: t.state in states, what=str(states)
    )


async def test_short_task_finishes_in_grace_past_its_lease(stack: Stack) -> None:
    """Heartbeats go on while draining: a 2.5 s task outlives a 1.5 s lease, completes
    on attempt 1, and a task submitted during the drain is not taken."""
    started = asyncio.Event()

    async def short(ctx: TaskContext) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(2.5)  # ignores ctx.cancelled: it will finish in time
        return {"attempt": ctx.attempt, "token": ctx.fencing_token, "reason": ctx.cancel_reason}

    async with worker_running(stack, {"short": short}, slots=2) as (worker, run):
        task = await stack.client.submit("short", {}, strict_timing=True)
        await asyncio.wait_for(started.wait(), 15)
        await state_of(stack, task, TaskState.RUNNING)
        drain = asyncio.create_task(worker.shutdown(grace_s=10))
        await eventually(lambda: _value(worker.draining), what="drain started")
        late = await stack.client.submit("short", {}, strict_timing=True)
        report = await asyncio.wait_for(drain, 15)
        await asyncio.wait_for(run, 15)
    done = await stack.client.get(task.id)
    assert done.state is TaskState.COMPLETED
    # One dispatch only (token + 1), first attempt, no retry.
    first_token = task.fencing_token + 1
    assert done.result == {"attempt": 1, "token": first_token, "reason": "drain"}
    assert done.retry_count == 0
    assert done.fencing_token == first_token
    assert (report.completed, report.released_at_deadline, report.clean) == (1, 0, True)
    assert (await stack.client.get(late.id)).state is TaskState.PRELOADED


async def rows(ctx: TaskContext) -> dict[str, Any]:
    """Processes payload["rows"] rows in chunks, checkpointing; resumes; drains."""
    total, chunk = ctx.payload["rows"], ctx.payload["chunk"]
    start = int((ctx.checkpoint_data or {}).get("processed_rows", 0))
    row = start
    while row < total:
        if ctx.is_cancelled:
            await ctx.checkpoint({"processed_rows": row, "last_processed_id": f"usr_{row}"})
            raise Interrupted(ctx.cancel_reason)
        await asyncio.sleep(ctx.payload["chunk_s"])
        row += chunk
        await ctx.checkpoint({"processed_rows": row, "last_processed_id": f"usr_{row}"})
    return {"resumed_at_row": start + 1, "attempt": ctx.attempt, "rows": row}


async def test_long_task_checkpoints_releases_and_resumes_elsewhere(stack: Stack) -> None:
    payload = {"rows": 900_000, "chunk": 10_000, "chunk_s": 0.05}
    async with worker_running(stack, {"rows": rows}) as (first, run):
        task = await stack.client.submit("rows", payload, strict_timing=True)
        await eventually(
            lambda: stack.client.get(task.id),
            until=lambda t: (t.checkpoint or {}).get("processed_rows", 0) >= 100_000,
            what="progress",
        )
        report = await asyncio.wait_for(first.shutdown(grace_s=10), 15)
        await asyncio.wait_for(run, 15)
    assert (report.released, report.completed, report.clean) == (1, 0, True)
    released = await stack.client.get(task.id)
    assert released.state is TaskState.PRELOADED
    assert released.retry_count == 0
    at = released.checkpoint["processed_rows"]
    assert 100_000 <= at < 900_000
    async with worker_running(stack, {"rows": rows}):
        done = await state_of(stack, task, TaskState.COMPLETED)
    assert done.result == {"resumed_at_row": at + 1, "attempt": 1, "rows": 900_000}
    assert done.retry_count == 0
    assert done.fencing_token == task.fencing_token + 2


async def test_second_shutdown_releases_a_stubborn_sync_handler_at_once(stack: Stack) -> None:
    started = threading.Event()
    stop = threading.Event()

    def stubborn(ctx: TaskContext) -> None:
        ctx.checkpoint_sync({"step": 7})
        started.set()
        stop.wait(30)  # never looks at ctx.cancelled

    try:
        async with worker_running(stack, {"stubborn": stubborn}) as (worker, run):
            task = await stack.client.submit("stubborn", {}, strict_timing=True)
            await asyncio.to_thread(started.wait, 15)
            drain = asyncio.create_task(worker.shutdown(grace_s=60))
            await eventually(lambda: _value(worker.draining), what="drain started")
            t0 = time.monotonic()
            report = await asyncio.wait_for(worker.shutdown(grace_s=0), 10)
            assert time.monotonic() - t0 < 5
            assert report is await drain
            await asyncio.wait_for(run, 15)
        assert (report.released_at_deadline, report.clean) == (1, True)
        assert worker.busy_handler_threads == 1
        after = await stack.client.get(task.id)
        assert after.state is TaskState.PRELOADED
        assert after.checkpoint == {"step": 7}
        assert after.retry_count == 0
    finally:
        stop.set()


async def test_cancel_while_draining_ends_cancelled(stack: Stack) -> None:
    started = asyncio.Event()

    async def waits(ctx: TaskContext) -> None:
        started.set()
        await asyncio.sleep(1.0)  # the client cancel lands while the drain is on
        await ctx.cancelled.wait()
        raise Interrupted(ctx.cancel_reason)

    async with worker_running(stack, {"waits": waits}) as (worker, _run):
        task = await stack.client.submit("waits", {}, strict_timing=True)
        await asyncio.wait_for(started.wait(), 15)
        await state_of(stack, task, TaskState.RUNNING)
        drain = asyncio.create_task(worker.shutdown(grace_s=10))
        await stack.client.cancel(task.id)
        await asyncio.wait_for(drain, 15)
    assert (await stack.client.get(task.id)).state is TaskState.CANCELLED


async def test_interrupted_without_cancellation_is_a_failure(stack: Stack) -> None:
    async def odd(ctx: TaskContext) -> None:
        raise Interrupted()

    async with worker_running(stack, {"odd": odd}):
        task = await stack.client.submit("odd", {}, strict_timing=True, max_retries=0)
        dead = await state_of(stack, task, TaskState.DEAD_LETTER)
    assert "interrupted" in dead.last_error


async def _value(value: Any) -> Any:
    return value

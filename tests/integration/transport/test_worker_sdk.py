"""The worker SDK end to end over the real engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.client import Client, StaleFencingToken, Task, TaskState
from scheduler.worker import ApplicationError, TaskContext, Worker
from tests.integration.transport.conftest import Stack, eventually


@contextlib.asynccontextmanager
async def running(
    stack: Stack, handlers: Mapping[str, Callable[..., Any]], **kw: Any
) -> AsyncIterator[Worker]:
    worker = Worker(stack.target, api_key=stack.key_a, handlers=handlers, **kw)
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        yield worker
    finally:
        await worker.shutdown(grace_s=2)
        await asyncio.wait_for(run, 15)


async def _state(client: Client, task: Task, state: TaskState) -> Task:
    return await eventually(lambda: client.get(task.id), lambda t: t.state is state)


@pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])
async def test_async_handler_completes(
    stack: Stack, client: Client, start_on_delivery: bool
) -> None:
    seen: list[TaskContext] = []

    async def handler(ctx: TaskContext) -> dict[str, Any]:
        seen.append(ctx)
        return {"doubled": ctx.payload["n"] * 2}

    async with running(stack, {"double": handler}, slots=4, start_on_delivery=start_on_delivery):
        task = await client.submit("double", {"n": 21}, strict_timing=True)
        done = await _state(client, task, TaskState.COMPLETED)
    assert done.result == {"doubled": 42}
    (ctx,) = seen
    assert ctx.task_id == task.id
    assert ctx.attempt == 1
    assert ctx.fencing_token >= 1
    assert ctx.checkpoint_data is None
    # Acknowledged before it ran, or (starting on delivery) RUNNING from the dispatch.
    moves = [
        (t.from_state.value, t.to_state.value)
        for t in await stack.engine.store.transitions_of(task.id)
    ]
    assert moves[-2:] == (
        [("PRELOADED", "RUNNING"), ("RUNNING", "COMPLETED")]
        if start_on_delivery
        else [("DISPATCHED", "RUNNING"), ("RUNNING", "COMPLETED")]
    )


@pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])
async def test_sync_handler_runs_in_a_thread_and_failures_retry(
    stack: Stack, client: Client, start_on_delivery: bool
) -> None:
    threads: set[str] = set()
    attempts: list[int] = []

    def handler(ctx: TaskContext) -> int:
        threads.add(threading.current_thread().name)
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return 7

    async with running(stack, {"flaky": handler}, start_on_delivery=start_on_delivery):
        task = await client.submit("flaky", {}, strict_timing=True, max_retries=2)
        done = await _state(client, task, TaskState.COMPLETED)
    assert done.result == {"result": 7}
    assert attempts[:2] == [1, 2]
    assert all(name.startswith("tickwheel-handler") for name in threads)


async def test_non_retryable_error_dead_letters_then_redrive(stack: Stack, client: Client) -> None:
    calls = 0

    async def handler(ctx: TaskContext) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ApplicationError("bad input", non_retryable=True)

    async with running(stack, {"once": handler}):
        task = await client.submit("once", {}, strict_timing=True)
        dead = await _state(client, task, TaskState.DEAD_LETTER)
        assert dead.last_error == "bad input"
        redriven = await client.redrive(task.id)
        assert redriven.state in (TaskState.SCHEDULED, TaskState.PRELOADED, TaskState.DISPATCHED)
        await _state(client, task, TaskState.COMPLETED)


@pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])
async def test_stale_completion_is_rejected_and_zombie_logged(
    stack: Stack, client: Client, caplog: pytest.LogCaptureFixture, start_on_delivery: bool
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    tokens: list[int] = []

    async def handler(ctx: TaskContext) -> dict[str, str]:
        tokens.append(ctx.fencing_token)
        started.set()
        await release.wait()
        return {"by": "worker"}

    caplog.set_level(logging.WARNING, logger="tickwheel.worker")
    async with running(stack, {"slow": handler}, start_on_delivery=start_on_delivery):
        task = await client.submit("slow", {}, strict_timing=True)
        await asyncio.wait_for(started.wait(), 15)
        running_task = await _state(client, task, TaskState.RUNNING)
        token = tokens[0]
        assert running_task.fencing_token == token
        # A write with any other token is a zombie's: FAILED_PRECONDITION.
        with pytest.raises(StaleFencingToken):
            await client.complete(task.id, token + 1, {"by": "zombie"})
        # The current token wins; the worker's own later completion is then stale.
        done = await client.complete(task.id, token, {"by": "operator"})
        assert done.state is TaskState.COMPLETED
        release.set()
        await eventually(lambda: _async(caplog.text), lambda text: "zombie" in text, timeout_s=10)
    final = await client.get(task.id)
    assert final.result == {"by": "operator"}


async def _async(value: Any) -> Any:
    return value


@pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])
async def test_cancel_reaches_running_handler(
    stack: Stack, client: Client, start_on_delivery: bool
) -> None:
    started = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        started.set()
        await asyncio.wait_for(ctx.cancelled.wait(), 20)

    async with running(stack, {"long": handler}, start_on_delivery=start_on_delivery):
        task = await client.submit("long", {}, strict_timing=True)
        await asyncio.wait_for(started.wait(), 15)
        await _state(client, task, TaskState.RUNNING)
        after = await client.cancel(task.id)
        assert after.cancel_requested or after.state is TaskState.CANCELLED
        await _state(client, task, TaskState.CANCELLED)


@pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])
async def test_checkpoint_and_release_on_shutdown(
    stack: Stack, client: Client, start_on_delivery: bool
) -> None:
    started = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        await ctx.checkpoint({"step": 3})
        started.set()
        await asyncio.sleep(60)  # the handler is released by the shutdown below

    worker = Worker(
        stack.target,
        api_key=stack.key_a,
        handlers={"stuck": handler},
        start_on_delivery=start_on_delivery,
    )
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    task = await client.submit("stuck", {}, strict_timing=True)
    await asyncio.wait_for(started.wait(), 15)
    await worker.shutdown(grace_s=0.2)
    await worker.shutdown(grace_s=0.2)  # twice is fine
    await asyncio.wait_for(run, 15)
    after = await client.get(task.id)
    assert after.checkpoint == {"step": 3}
    assert after.state in (TaskState.PRELOADED, TaskState.SCHEDULED, TaskState.DISPATCHED)
    assert after.retry_count == 0


async def test_shutdown_before_run(stack: Stack) -> None:
    worker = Worker(stack.target, api_key=stack.key_a, handlers={"t": lambda ctx: None})
    await worker.shutdown()
    await worker.shutdown()
    await asyncio.wait_for(worker.run(), 5)  # returns at once


async def test_bad_api_key_is_fatal_for_worker(stack: Stack) -> None:
    from scheduler.client import Unauthenticated

    worker = Worker(stack.target, api_key="nope", handlers={"t": lambda ctx: None})
    with pytest.raises(Unauthenticated):
        await asyncio.wait_for(worker.run(), 15)
    await worker.shutdown()


async def test_scheduled_task_runs_when_due(stack: Stack, client: Client) -> None:
    ran = asyncio.Event()
    lateness: list[float] = []

    async def handler(ctx: TaskContext) -> None:
        lateness.append((datetime.now(UTC) - ctx.due_at).total_seconds())
        ran.set()

    async with running(stack, {"later": handler}):
        due = datetime.now(UTC) + timedelta(seconds=1)
        task = await client.submit("later", {}, scheduled_at=due, strict_timing=True)
        assert task.due_at == task.scheduled_at
        await asyncio.wait_for(ran.wait(), 15)
    assert lateness[0] >= -0.1


async def test_worker_reconnects_after_server_restart(stack: Stack, client: Client) -> None:
    from scheduler.server import Server, ServerConfig
    from scheduler.worker import ReconnectConfig

    done = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        done.set()

    other = Server(stack.engine, ServerConfig(listen="127.0.0.1:0"))
    port = await other.start()
    worker = Worker(
        f"127.0.0.1:{port}",
        api_key=stack.key_a,
        handlers={"after-restart": handler},
        reconnect=ReconnectConfig(initial_backoff_s=0.05, max_backoff_s=0.2),
    )
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        await other.stop(0)
        other = Server(stack.engine, ServerConfig(listen=f"127.0.0.1:{port}"))
        await other.start()
        task = await client.submit("after-restart", {}, strict_timing=True)
        await asyncio.wait_for(done.wait(), 15)
        await _state(client, task, TaskState.COMPLETED)
    finally:
        await worker.shutdown(grace_s=1)
        await asyncio.wait_for(run, 15)
        await other.stop(0)


async def test_a_worker_with_the_default_backoff_is_back_soon_after_a_long_outage(
    stack: Stack, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 17: after a node restart its worker came back 3.8-8.9 s late (a 10 s
    backoff ceiling, and gRPC's own channel backoff growing meanwhile). The node is
    gone for 8 s (long enough for both to grow); once it is back, assignments resume.
    How long that took is printed, not asserted (a shared machine)."""
    import time

    from scheduler.server import Server, ServerConfig

    caplog.set_level(logging.INFO, logger="tickwheel.worker")

    ran: list[str] = []
    done = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        ran.append(ctx.payload["when"])
        done.set()

    other = Server(stack.engine, ServerConfig(listen="127.0.0.1:0"))
    port = await other.start()
    worker = Worker(f"127.0.0.1:{port}", api_key=stack.key_a, handlers={"outage": handler})
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        first = await client.submit("outage", {"when": "before"}, strict_timing=True)
        await asyncio.wait_for(done.wait(), 15)
        # The handler has run, but its completion may still be on its way: stopping the
        # node before it commits would leave the task to its lease, and it would run
        # again after the outage (a race of the test, not the behaviour under test).
        await _state(client, first, TaskState.COMPLETED)
        done.clear()
        await other.stop(0)
        await asyncio.sleep(8.0)
        other = Server(stack.engine, ServerConfig(listen=f"127.0.0.1:{port}"))
        await other.start()
        back = time.time()
        task = await client.submit("outage", {"when": "after"}, strict_timing=True)
        await asyncio.wait_for(done.wait(), 30)
        (again,) = [r.created for r in caplog.records if "reconnected" in r.getMessage()]
        print(f"\nworker reconnected {again - back:.2f} s after the node came back")
        await _state(client, task, TaskState.COMPLETED)
        assert ran == ["before", "after"]
    finally:
        await worker.shutdown(grace_s=1)
        await asyncio.wait_for(run, 15)
        await other.stop(0)


async def test_a_result_json_cannot_hold_fails_the_attempt_and_the_stream_goes_on(
    stack: Stack, client: Client
) -> None:
    async def handler(ctx: TaskContext) -> dict[str, Any]:
        return {"ratio": float("nan")} if ctx.payload["bad"] else {"ratio": 0.5}

    async with running(stack, {"ratio": handler}):
        bad = await client.submit("ratio", {"bad": True}, strict_timing=True, max_retries=0)
        dead = await _state(client, bad, TaskState.DEAD_LETTER)
        good = await client.submit("ratio", {"bad": False}, strict_timing=True)
        done = await _state(client, good, TaskState.COMPLETED)
    assert "not JSON" in (dead.last_error or "")
    assert done.result == {"ratio": 0.5}

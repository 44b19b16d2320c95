"""The Celery-style SDK: task functions, handles that wait by long poll, per-task retry
policies and the synchronous client, over the real engine (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import (
    App,
    Client,
    InvalidArgument,
    NotFound,
    RetryPolicy,
    SyncClient,
    Task,
    TaskCancelled,
    TaskFailed,
    TaskHandle,
    TaskSpec,
    TaskState,
)
from scheduler.metrics import MetricsConfig, worker_endpoint
from scheduler.worker import ClusterWorker, TaskContext, Worker
from tests.integration.transport.conftest import Stack, eventually


@pytest.fixture(params=["sqlite", "postgres"])
def any_stack(request: pytest.FixtureRequest) -> Stack:
    """The stack over each store (the retry policy is computed in each store's SQL)."""
    name = "stack" if request.param == "sqlite" else "pg_stack"
    stack: Stack = request.getfixturevalue(name)
    return stack


@contextlib.asynccontextmanager
async def running(worker: Worker | ClusterWorker) -> AsyncIterator[Worker | ClusterWorker]:
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        yield worker
    finally:
        await worker.shutdown(grace_s=2)
        await asyncio.wait_for(run, 15)


def plain_worker(stack: Stack, handlers: Mapping[str, Callable[..., Any]]) -> Worker:
    return Worker(stack.target, api_key=stack.key_a, handlers=handlers, slots=4)


# -- WaitTask and handles -------------------------------------------------------------


async def test_wait_answers_when_the_task_completes(stack: Stack, client: Client) -> None:
    release = asyncio.Event()

    async def slow(ctx: TaskContext) -> dict[str, Any]:
        await release.wait()
        return {"n": ctx.payload["n"] + 1}

    async with running(plain_worker(stack, {"slow": slow})):
        task = await client.submit("slow", {"n": 1})
        waiting = asyncio.create_task(client.wait(task.id, timeout_s=30))
        await eventually(lambda: client.get(task.id), lambda t: t.state is TaskState.RUNNING)
        await asyncio.sleep(0.2)
        assert not waiting.done()  # parked on the server, not answered early
        # One long poll is parked on the engine's waiters while the task runs.
        assert len(stack.engine._waiters) == 1
        release.set()
        done = await waiting
    assert done.state is TaskState.COMPLETED
    assert done.result == {"n": 2}
    assert len(stack.engine._waiters) == 0


async def test_wait_times_out_with_the_current_state(stack: Stack, client: Client) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    task = await client.submit("nobody", {}, scheduled_at=later)
    with pytest.raises(TimeoutError, match=r"still (SCHEDULED|PRELOADED) after 0\.5 s"):
        await client.wait(task.id, timeout_s=0.5)
    # The RPC itself: a bounded long poll answers done = false and the task as it is.
    stub = pbg.SchedulerServiceStub(grpc.aio.insecure_channel(stack.target))  # type: ignore[no-untyped-call]
    resp = await stub.WaitTask(
        pb.WaitTaskRequest(task_id=str(task.id), timeout_s=0.3),
        metadata=(("x-api-key", stack.key_a),),
    )
    assert not resp.done
    assert resp.task.state in (pb.TASK_STATE_SCHEDULED, pb.TASK_STATE_PRELOADED)


async def test_wait_on_a_cancel_and_on_unknown_or_foreign_tasks(
    stack: Stack, client: Client
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    task = await client.submit("nobody", {}, scheduled_at=later)
    handle = TaskHandle(client, task)
    waiting = asyncio.create_task(handle.result(timeout=30))
    await asyncio.sleep(0.2)
    await handle.cancel()
    with pytest.raises(TaskCancelled):
        await waiting
    with pytest.raises(NotFound):
        await client.wait("0190f0c4-0000-7000-8000-000000000009", timeout_s=1)
    other = await stack.client(stack.key_b)
    try:
        with pytest.raises(NotFound):
            await other.wait(task.id, timeout_s=1)
    finally:
        await other.close()
    with pytest.raises(InvalidArgument, match="timeout_s"):
        await stack.engine.wait_task(__import__("uuid").UUID(stack.tenant_a), task.id, float("nan"))


# -- per-task retry policy ------------------------------------------------------------


async def test_a_retry_policy_sets_the_backoff(any_stack: Stack) -> None:
    stack = any_stack
    client = await stack.client()
    failed_at: list[datetime] = []

    def flaky(ctx: TaskContext) -> dict[str, Any]:
        failed_at.append(datetime.now(UTC))
        raise RuntimeError("try later")

    policy = RetryPolicy(initial_backoff_s=40, max_backoff_s=50, max_attempts=2)
    try:
        async with running(plain_worker(stack, {"flaky": flaky})):
            task = await client.submit("flaky", {}, retry_policy=policy)
            assert task.max_retries == 1
            assert task.retry_policy is not None
            assert task.retry_policy.initial_backoff_s == 40
            assert task.retry_policy.max_backoff_s == 50
            assert task.retry_policy.max_attempts == 2
            # RETRYING, then PRELOADED at once (its retry is inside the look-ahead).
            retrying = await eventually(lambda: client.get(task.id), lambda t: t.retry_count == 1)
            assert retrying.state in (TaskState.RETRYING, TaskState.PRELOADED)
    finally:
        await client.close()
    # The server default here is 0.2 s; the task's own base is 40 s (+ up to 25%).
    backoff = (retrying.due_at - failed_at[0]).total_seconds()
    assert 39.0 <= backoff <= 51.0, backoff


async def test_non_retryable_error_types_dead_letter_at_once(any_stack: Stack) -> None:
    """Listed by name on the task: the server matches the worker's error type, even for
    a worker that knows nothing of the policy."""
    stack = any_stack
    client = await stack.client()
    attempts: list[int] = []

    def handler(ctx: TaskContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.payload["kind"] == "key":
            raise KeyError("missing")
        raise RuntimeError("transient")

    policy = RetryPolicy(initial_backoff_s=0.1, non_retryable=["KeyError"])
    try:
        async with running(plain_worker(stack, {"h": handler})):
            fatal = await client.submit("h", {"kind": "key"}, retry_policy=policy)
            dead = await eventually(
                lambda: client.get(fatal.id), lambda t: t.state is TaskState.DEAD_LETTER
            )
            transient = await client.submit("h", {"kind": "other"}, retry_policy=policy)
            await eventually(lambda: client.get(transient.id), lambda t: t.retry_count >= 2)
    finally:
        await client.close()
    assert dead.retry_count == 1  # one attempt, not max_retries + 1
    assert dead.retry_policy is not None
    assert dead.retry_policy.non_retryable == ("KeyError",)


async def test_retry_policy_validation(stack: Stack, client: Client) -> None:
    with pytest.raises(ValueError, match="max_attempts or max_retries"):
        await client.submit("t", {}, max_retries=2, retry_policy=RetryPolicy(max_attempts=3))
    stub = pbg.SchedulerServiceStub(grpc.aio.insecure_channel(stack.target))  # type: ignore[no-untyped-call]
    spec = pb.TaskSpec(type="t", max_retries=2, retry_policy=pb.RetryPolicy(max_attempts=3))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SubmitTask(
            pb.SubmitTaskRequest(task=spec), metadata=(("x-api-key", stack.key_a),)
        )
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "task.retry_policy.max_attempts" in str(err.value.details())
    with pytest.raises(InvalidArgument, match=r"task\.retry_policy\.initial_backoff_s"):
        await client.submit("t", {}, retry_policy=RetryPolicy(initial_backoff_s=90_000))
    with pytest.raises(InvalidArgument, match=r"task\.retry_policy\.max_backoff_s"):
        await client.submit(
            "t", {}, retry_policy=RetryPolicy(initial_backoff_s=10, max_backoff_s=5)
        )
    with pytest.raises(InvalidArgument, match=r"non_retryable_error_types\[0\]"):
        await client.submit("t", {}, retry_policy=RetryPolicy(non_retryable=["has space"]))
    with pytest.raises(InvalidArgument, match=r"task\.retry_policy\.max_attempts"):
        await client.submit("t", {}, retry_policy=RetryPolicy(max_attempts=500))
    with pytest.raises(ValueError, match=r"RetryPolicy\.initial_backoff_s"):
        RetryPolicy(initial_backoff_s=-1)
    one_shot = await client.submit("t", {}, retry_policy=RetryPolicy(max_attempts=1))
    assert one_shot.max_retries == 0


# -- the App decorator ----------------------------------------------------------------


class CardDeclined(Exception):
    pass


def make_app(stack: Stack) -> App:
    app = App(stack.target, stack.key_a)

    @app.task(type="sdk.add")
    def add(x: int, y: int = 1) -> int:
        return x + y

    @app.task(type="sdk.echo")
    async def echo(value: Any) -> Any:
        return value

    @app.task(
        type="sdk.charge",
        retry=RetryPolicy(initial_backoff_s=0.1, max_attempts=5, non_retryable=[CardDeclined]),
    )
    async def charge(amount: int, ctx: TaskContext) -> dict[str, Any]:
        if amount < 0:
            raise CardDeclined(f"declined {amount}")
        return {"charged": amount, "attempt": ctx.attempt}

    return app


async def test_app_task_functions_delay_and_run_on_the_apps_worker(stack: Stack) -> None:
    app = make_app(stack)
    add, charge = app.tasks["sdk.add"], app.tasks["sdk.charge"]
    assert add(2, y=3) == 5  # a plain call runs here and now
    assert add.payload(2) == {"x": 2}
    with pytest.raises(TypeError):
        add.payload(1, 2, 3)
    try:
        async with running(app.worker(slots=4)):
            # From a script (a thread without a loop): .delay blocks and gives a handle.
            handle = await asyncio.to_thread(add.delay, 40, y=2)
            assert handle.task.type == "sdk.add"
            assert handle.task.payload == {"x": 40, "y": 2}
            # The function's own return value; the stored result stays a JSON object.
            assert await asyncio.to_thread(handle.result, 30) == 42
            assert (await client_task(stack, handle.id)).result == {"result": 42}
            # From async code.
            paid = await charge.adelay(7)
            assert await paid.result(timeout=30) == {"charged": 7, "attempt": 1}
            # A listed exception dead-letters at once (the SDK says not retryable).
            declined = await charge.asubmit((-1,), delay=0)
            with pytest.raises(TaskFailed, match="declined -1"):
                await declined.result(timeout=30)
            task = await declined.get()
            assert task.state is TaskState.DEAD_LETTER
            assert task.retry_count == 1
            assert task.max_retries == 4  # max_attempts 5
    finally:
        await app.aclose()


async def test_the_apps_worker_reaches_every_node_by_default(stack: Stack) -> None:
    """``app.worker()`` is a ClusterWorker (issue 42); on a single node it streams to
    the app's target alone with every slot, and its metrics add up its streams.
    ``one_node=True`` is the one-stream Worker."""
    app = make_app(stack)
    add = app.tasks["sdk.add"]
    assert isinstance(app.worker(one_node=True), Worker)
    worker = app.worker(slots=4)
    assert isinstance(worker, ClusterWorker)
    endpoint = worker_endpoint(worker, MetricsConfig(port=0))
    try:
        async with running(worker):
            handle = await add.adelay(1, y=2)
            assert await handle.result(timeout=30) == 3
            assert worker.members == {"seed": stack.target}
            # Alone, nothing to share with: every free slot is the node's credit.
            await eventually(lambda: _async(worker.credit.split.granted("seed")), lambda n: n == 4)
            text = endpoint.scrape().decode()
            completed = 'outcome="completed",type="sdk.add"} 1.0'
            assert any(
                line.startswith("tickwheel_worker_tasks_handled_total") and completed in line
                for line in text.splitlines()
            ), text
            assert "tickwheel_worker_slots_free 4.0" in text
    finally:
        await app.aclose()


async def _async(value: int) -> int:
    return value


async def client_task(stack: Stack, task_id: Any) -> Task:
    client = await stack.client()
    try:
        return await client.get(task_id)
    finally:
        await client.close()


async def test_a_task_functions_handle_gives_back_what_it_returned(stack: Stack) -> None:
    app = make_app(stack)
    echo = app.tasks["sdk.echo"]
    values: list[Any] = [None, 5, "five", [1, 2], {}, {"a": 1}, {"result": 1}, {"result": None}]
    try:
        async with running(app.worker(slots=4)):
            handles = [await echo.adelay(v) for v in values]
            assert [await h.result(timeout=30) for h in handles] == values
            synced = await asyncio.to_thread(echo.delay, [3])
            assert await asyncio.to_thread(synced.result, 30) == [3]
    finally:
        await asyncio.to_thread(app.close_sync)
        await app.aclose()


async def test_app_submit_options(stack: Stack) -> None:
    app = make_app(stack)
    add = app.tasks["sdk.add"]
    try:
        later = await asyncio.to_thread(
            lambda: add.submit((1,), delay=timedelta(hours=1), idempotency_key="once")
        )
        again = await asyncio.to_thread(
            lambda: add.submit((1,), delay=3600, idempotency_key="once")
        )
        assert again.id == later.id
        assert later.task.due_at == later.task.scheduled_at  # a delay: no jitter
        assert later.task.scheduled_at > datetime.now(UTC) + timedelta(minutes=59)
        with pytest.raises(ValueError, match="already"):
            app.task(type="sdk.add")(lambda: 1)
        with pytest.raises(ValueError, match="no task function"):
            app.worker(types=["nope"])
    finally:
        await asyncio.to_thread(app.close_sync)
        await app.aclose()


# -- the synchronous client -----------------------------------------------------------


def _script(stack: Stack) -> dict[str, Any]:
    """What a user's script does, in a thread of its own (no event loop)."""
    out: dict[str, Any] = {}
    with SyncClient(stack.target, api_key=stack.key_a) as client:
        h = client.submit("sync.echo", {"v": 1})
        out["result"] = h.result(timeout=30)
        out["got"] = client.get(h.id)
        out["waited"] = client.wait(h.id, timeout=5)
        later = client.submit("sync.echo", {"v": 2}, delay=3600)
        out["later"] = later.task
        out["cancelled"] = later.cancel()
        try:
            later.result(timeout=5)
        except TaskCancelled as exc:
            out["cancel_error"] = exc
        out["listed"] = client.list(type="sync.echo")
        out["limited"] = client.list(limit=1)
        out["many"] = client.submit_many([TaskSpec(type="sync.echo", payload={"v": 3})])
        try:
            client.wait("not-a-uuid", timeout=1)
        except InvalidArgument as exc:
            out["bad_id_error"] = exc
    return out


async def test_sync_client_for_scripts(stack: Stack) -> None:
    def echo(ctx: TaskContext) -> dict[str, Any]:
        return {"echo": ctx.payload["v"]}

    async with running(plain_worker(stack, {"sync.echo": echo})):
        out = await asyncio.to_thread(_script, stack)
    assert out["result"] == {"echo": 1}
    got: Task = out["got"]
    assert got.state is TaskState.COMPLETED
    assert out["waited"].id == got.id
    assert out["later"].due_at == out["later"].scheduled_at
    assert out["cancelled"].state is TaskState.CANCELLED
    assert isinstance(out["cancel_error"], TaskCancelled)
    assert str(out["cancel_error"]) == f"task {out['later'].id} (sync.echo) was cancelled"
    assert {t.id for t in out["listed"]} >= {got.id, out["later"].id}
    assert len(out["limited"]) == 1
    assert len(out["many"]) == 1
    assert "task_id" in str(out["bad_id_error"])


async def test_a_sync_wait_that_times_out_names_its_task(stack: Stack) -> None:
    """Issue 40: a SyncClient timeout said only "SyncClient call timed out" (the wait's
    own TimeoutError, which names the task, was caught as the call's)."""

    def script() -> tuple[Task, list[str]]:
        with SyncClient(stack.target, api_key=stack.key_a) as client:
            later = datetime.now(UTC) + timedelta(hours=1)
            handle = client.submit("sync.nobody", {}, scheduled_at=later)
            errors = []
            for wait in (
                lambda: handle.result(timeout=0.3),
                lambda: client.wait(handle.id, timeout=0.3),
                lambda: client.result(str(handle.id), timeout=0.3),
            ):
                with pytest.raises(TimeoutError) as info:
                    wait()
                errors.append(str(info.value))
            return client.get(handle.id), errors

    task, errors = await asyncio.to_thread(script)
    for error in errors:
        assert error.startswith(f"task {task.id} (sync.nobody) still "), error
        assert "after 0.3 s of waiting for it to finish (COMPLETED, CANCELLED or DEAD_LETTER)" in (
            error
        )
        assert f"due_at {task.due_at.isoformat(timespec='milliseconds')}" in error


async def test_sync_client_refuses_a_running_loop(stack: Stack) -> None:
    client = await asyncio.to_thread(SyncClient, stack.target, api_key=stack.key_a)
    try:
        with pytest.raises(RuntimeError, match="running event loop"):
            client.get("0190f0c4-0000-7000-8000-000000000009")
    finally:
        client.close()

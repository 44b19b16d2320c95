"""Batch handlers through the worker SDK against a real server (issue 43): up to N
tasks of one type per call, each with its own token, outcome and retries."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.client import App, Pool, TaskSpec, TaskState
from scheduler.worker import ApplicationError, Batch, TaskContext, Worker
from tests.integration.worker_lifecycle.conftest import Stack
from tests.integration.worker_lifecycle.test_drain import state_of, worker_running


async def test_tasks_arrive_in_batches_and_each_completes_under_its_own_token(
    stack: Stack,
) -> None:
    calls: list[list[str]] = []

    async def rows(ctxs: list[TaskContext]) -> list[dict[str, Any]]:
        calls.append([str(c.task_id) for c in ctxs])
        return [{"row": c.payload["row"], "token": c.fencing_token} for c in ctxs]

    # 5 slots and batches of 5: a batch goes when it is full, which is when every
    # slot is taken, never by its (long) wait.
    handlers = {"rows": Batch(rows, size=5, max_wait_s=30)}
    async with worker_running(stack, handlers, slots=5) as (worker, _run):
        specs = [TaskSpec(type="rows", payload={"row": i}, strict_timing=True) for i in range(10)]
        tasks = await stack.client.submit_many(specs)
        done = [await stack.client.wait(t.id, timeout_s=60) for t in tasks]
        assert worker.batches["rows"].calls == 2
    assert sorted(len(c) for c in calls) == [5, 5]
    assert {t for c in calls for t in c} == {str(t.id) for t in tasks}
    for i, (submitted, task) in enumerate(zip(tasks, done, strict=True)):
        assert task.state is TaskState.COMPLETED
        # Each task's own dispatch token reached the handler and its commit.
        assert task.result == {"row": i, "token": submitted.fencing_token + 1}
        assert task.retry_count == 0


async def test_each_task_of_a_batch_fails_and_retries_on_its_own(stack: Stack) -> None:
    calls: list[list[tuple[str, int]]] = []

    async def rows(ctxs: list[TaskContext]) -> list[Any]:
        calls.append([(c.payload["kind"], c.attempt) for c in ctxs])
        out: list[Any] = []
        for c in ctxs:
            kind = c.payload["kind"]
            if kind == "flaky" and c.attempt == 1:
                out.append(ConnectionError("try again"))
            elif kind == "bad":
                out.append(ApplicationError("malformed row", non_retryable=True))
            else:
                out.append({"kind": kind, "attempt": c.attempt})
        return out

    # The retry comes alone: its batch goes once it has waited max_wait_s.
    handlers = {"rows": Batch(rows, size=3, max_wait_s=0.2)}
    async with worker_running(stack, handlers, slots=3):
        ok, flaky, bad = await stack.client.submit_many(
            [
                TaskSpec(type="rows", payload={"kind": k}, strict_timing=True, max_retries=3)
                for k in ("ok", "flaky", "bad")
            ]
        )
        done_ok = await state_of(stack, ok, TaskState.COMPLETED)
        done_flaky = await state_of(stack, flaky, TaskState.COMPLETED)
        done_bad = await state_of(stack, bad, TaskState.DEAD_LETTER)
    assert done_ok.result == {"kind": "ok", "attempt": 1}
    assert done_ok.retry_count == 0
    # The flaky one alone was retried, and completed on its second attempt under a
    # newer token; the bad one dead-lettered at once without touching the others.
    assert done_flaky.result == {"kind": "flaky", "attempt": 2}
    assert done_flaky.retry_count == 1
    assert done_flaky.fencing_token == flaky.fencing_token + 2  # two dispatches
    assert done_ok.fencing_token == ok.fencing_token + 1  # one
    assert done_bad.retry_count == 1  # its one failed attempt, never run again
    assert "malformed row" in (done_bad.last_error or "")
    seen = [item for call in calls for item in call]
    assert sorted(seen) == [("bad", 1), ("flaky", 1), ("flaky", 2), ("ok", 1)]
    assert seen[-1] == ("flaky", 2)


async def test_an_app_batch_task_function(stack: Stack) -> None:
    app = App(stack.target, api_key=stack.key)

    @app.task(type="sum", pool=Pool.BULK, batch_size=4, batch_max_wait_s=30)
    async def total(ctxs: list[TaskContext]) -> list[Any]:
        return [sum(c.payload["xs"]) for c in ctxs]

    worker = app.worker(one_node=True, slots=4)
    run = asyncio.create_task(worker.run(), name="test-app-batch-worker")
    try:
        handles = [await total.asubmit(kwargs={"xs": [i, i]}) for i in range(4)]
        assert [await h.result(timeout=60) for h in handles] == [0, 2, 4, 6]
        assert isinstance(worker, Worker)
        assert worker.batches["sum"].calls == 1
    finally:
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(run, 15)
        await app.aclose()

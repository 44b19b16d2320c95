"""The batch gate alone (``scheduler.worker._batch``): what joins a batch, when it is
called, and how its answer is shared out. Real contexts, no server."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler.worker import ApplicationError, Batch, BatchMismatch, Interrupted, batch
from scheduler.worker._batch import BatchGate
from scheduler.worker._context import CANCELLED, DRAIN, TaskContext, cancel

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ctx(n: int) -> TaskContext:
    async def no_checkpoint(_ctx: TaskContext, _data: Any) -> None: ...

    return TaskContext(
        task_id=uuid.UUID(int=n),
        type="t",
        attempt=1,
        max_retries=3,
        payload={"n": n},
        fencing_token=100 + n,
        checkpoint_data=None,
        trace_context=None,
        scheduled_at=T0,
        due_at=T0,
        timeout_s=0.0,
        received_at=T0,
        loop=asyncio.get_running_loop(),
        checkpointer=no_checkpoint,
    )


class Recorder:
    """An async batch handler that records each call's contexts."""

    def __init__(self, answer: Any = None) -> None:
        self.calls: list[list[int]] = []
        self.answer = answer

    async def __call__(self, ctxs: list[TaskContext]) -> Any:
        self.calls.append([c.payload["n"] for c in ctxs])
        if callable(self.answer):
            return self.answer(ctxs)
        return self.answer


def gate(fn: Any, *, size: int, max_wait_s: float = 60.0, slots: int = 100) -> BatchGate:
    async def run(ctxs: list[TaskContext]) -> Any:
        return await fn(ctxs)

    return BatchGate(Batch(run, size=size, max_wait_s=max_wait_s), slots)


async def test_a_full_batch_is_called_at_once_and_each_task_gets_its_own_result() -> None:
    rec = Recorder(lambda ctxs: [{"n": c.payload["n"], "token": c.fencing_token} for c in ctxs])
    g = gate(rec, size=3)
    results = await asyncio.gather(*(g.run(ctx(n)) for n in range(6)))
    assert rec.calls == [[0, 1, 2], [3, 4, 5]]
    assert results == [{"n": n, "token": 100 + n} for n in range(6)]


async def test_a_partial_batch_goes_when_its_first_task_waited_max_wait() -> None:
    rec = Recorder()
    g = gate(rec, size=10, max_wait_s=0.0)
    assert await asyncio.gather(g.run(ctx(1)), g.run(ctx(2))) == [None, None]
    assert rec.calls == [[1, 2]]


async def test_a_worker_of_fewer_slots_calls_with_as_many_tasks_as_it_has() -> None:
    rec = Recorder()
    g = gate(rec, size=10, slots=2)
    assert await asyncio.gather(*(g.run(ctx(n)) for n in range(4))) == [None] * 4
    assert rec.calls == [[0, 1], [2, 3]]


async def test_an_exception_in_the_list_fails_that_task_alone() -> None:
    boom = ApplicationError("bad row", non_retryable=True)
    g = gate(Recorder(lambda ctxs: [{"ok": 1}, boom, ValueError("retry me")]), size=3)
    out = await asyncio.gather(*(g.run(ctx(n)) for n in range(3)), return_exceptions=True)
    assert out[0] == {"ok": 1}
    assert out[1] is boom
    assert isinstance(out[2], ValueError)


async def test_a_raising_handler_fails_every_task_of_its_batch() -> None:
    def explode(_ctxs: list[TaskContext]) -> Any:
        raise RuntimeError("redis down")

    g = gate(Recorder(explode), size=2)
    out = await asyncio.gather(g.run(ctx(1)), g.run(ctx(2)), return_exceptions=True)
    assert [type(e) for e in out] == [RuntimeError, RuntimeError]
    assert [str(e) for e in out] == ["redis down", "redis down"]
    assert out[0] is not out[1]  # each task raises its own (one traceback each)


@pytest.mark.parametrize(
    ("answer", "message"),
    [([1], "returned 1 outcomes for 2 tasks"), ({"a": 1}, "not dict"), ("ab", "not str")],
)
async def test_an_answer_that_is_not_one_outcome_per_task_fails_them_all(
    answer: Any, message: str
) -> None:
    g = gate(Recorder(answer), size=2)
    out = await asyncio.gather(g.run(ctx(1)), g.run(ctx(2)), return_exceptions=True)
    for e in out:
        assert isinstance(e, BatchMismatch)
        assert message in str(e)


async def test_a_task_cancelled_while_it_waits_leaves_the_batch() -> None:
    rec = Recorder()
    g = gate(rec, size=3)
    first, second = ctx(1), ctx(2)
    waiting = asyncio.create_task(g.run(first))
    other = asyncio.create_task(g.run(second))
    cancel(first, CANCELLED)  # before or after it joined: it leaves either way
    # The batch fills without it, and it is told to stop.
    assert await asyncio.gather(g.run(ctx(3)), g.run(ctx(4))) == [None, None]
    assert await other is None
    assert rec.calls == [[2, 3, 4]]
    with pytest.raises(Interrupted) as caught:
        await waiting
    assert caught.value.reason == CANCELLED


async def test_a_lone_task_drained_while_it_waits_is_interrupted_by_max_wait() -> None:
    rec = Recorder()
    g = gate(rec, size=10, max_wait_s=0.0)
    alone = ctx(1)
    cancel(alone, DRAIN)
    with pytest.raises(Interrupted) as caught:
        await g.run(alone)
    assert caught.value.reason == DRAIN
    assert rec.calls == []


async def test_a_task_timed_out_while_it_waits_leaves_the_batch() -> None:
    rec = Recorder()
    g = gate(rec, size=2)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):
            await g.run(ctx(1))
    assert await asyncio.gather(g.run(ctx(2)), g.run(ctx(3))) == [None, None]
    assert rec.calls == [[2, 3]]


async def test_a_running_batch_sees_each_tasks_cancellation() -> None:
    started = asyncio.Event()
    go_on = asyncio.Event()

    async def slow(ctxs: list[TaskContext]) -> Any:
        started.set()
        await go_on.wait()
        return [{"stopped": c.cancel_reason} for c in ctxs]

    g = BatchGate(Batch(slow, size=2), 100)
    a, b = ctx(1), ctx(2)
    runs = asyncio.gather(g.run(a), g.run(b))
    await started.wait()
    cancel(a, DRAIN)
    go_on.set()
    assert await runs == [{"stopped": DRAIN}, {"stopped": None}]


async def test_a_sync_batch_handler_runs_in_a_thread() -> None:
    @batch(size=2, max_wait_s=60)
    def double(ctxs: list[TaskContext]) -> list[int]:
        return [c.payload["n"] * 2 for c in ctxs]

    g = BatchGate(double, 100)
    assert await asyncio.gather(g.run(ctx(1)), g.run(ctx(2))) == [2, 4]


async def test_close_cancels_the_calls_in_flight() -> None:
    started = asyncio.Event()

    async def forever(_ctxs: list[TaskContext]) -> Any:
        started.set()
        await asyncio.Event().wait()

    g = BatchGate(Batch(forever, size=1), 100)
    run = asyncio.create_task(g.run(ctx(1)))
    await started.wait()
    await g.close()
    with pytest.raises(asyncio.CancelledError):
        await run


def test_batch_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="size must be >= 1"):
        Batch(lambda c: None, size=0)
    with pytest.raises(ValueError, match="max_wait_s must be >= 0"):
        Batch(lambda c: None, max_wait_s=-1)
    with pytest.raises(TypeError, match="callable"):
        Batch(42)  # type: ignore[arg-type]

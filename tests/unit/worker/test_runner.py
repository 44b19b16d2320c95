"""The handler runner, alone: a fake stream and drain flag, the real slots.

Pins the fencing rules (every write carries the token the attempt was assigned; an
attempt that lost its lease commits nothing), ack-first vs start-on-delivery, and the
heartbeat of held tasks when a stream (re)connects."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from scheduler._errors import Unavailable
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker import Interrupted, TaskContext
from scheduler.worker._answers import Answer as TaskAnswer
from scheduler.worker._answers import Answers
from scheduler.worker._outbox import Completed
from scheduler.worker._runner import HandlerRunner
from scheduler.worker._slots import Slots
from tests.unit.worker.fakes import FakeDrain, FakeStream, all_ok, all_stale

Handler = Callable[[TaskContext], Any]


def _runner(
    handler: Handler, stream: FakeStream, *, start_on_delivery: bool = False, slots: int = 4
) -> tuple[HandlerRunner, Slots, FakeDrain]:
    drain = FakeDrain()
    table = Slots(slots, send=stream.send, stopping=lambda: drain.stopping)
    runner = HandlerRunner(
        {"t": handler},
        stream=stream,
        slots=table,
        drain=drain,
        kafka_mode=False,
        start_on_delivery=start_on_delivery,
        tracer_provider=None,
    )
    runner.bind(asyncio.get_running_loop())
    return runner, table, drain


def _assignment(token: int = 7, type: str = "t") -> pb.Assignment:
    return pb.Assignment(task_id=str(uuid.uuid4()), type=type, fencing_token=token, attempt=1)


async def _finish(table: Slots, a: pb.Assignment) -> None:
    task = table.held[uuid.UUID(a.task_id)].task
    assert task is not None
    await asyncio.wait_for(task, 5.0)


async def _done(ctx: TaskContext) -> dict[str, int]:
    return {"n": 1}


async def test_ack_first_then_complete_with_the_assigned_token() -> None:
    stream = FakeStream()
    runner, table, _ = _runner(_done, stream)
    a = _assignment(token=7)
    runner.on_assignments([a])
    assert [m.WhichOneof("kind") for m in stream.requested] == ["ack"]
    assert [r.fencing_token for r in stream.requested[0].ack.tasks] == [7]
    await _finish(table, a)
    (completion,) = stream.committed
    assert isinstance(completion, pb.Completion)
    assert (completion.task.task_id, completion.task.fencing_token) == (a.task_id, 7)
    assert orjson.loads(completion.result_json) == {"n": 1}  # the SDK sends bytes
    assert table.held == {}


async def test_a_rejected_ack_never_runs_the_handler() -> None:
    ran = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        ran.set()

    stream = FakeStream(all_stale)
    runner, table, _ = _runner(handler, stream)
    a = _assignment()
    runner.on_assignments([a])
    await _finish(table, a)
    assert not ran.is_set()
    assert stream.committed == []


async def test_start_on_delivery_sends_no_ack_and_the_task_is_running_at_once() -> None:
    stream = FakeStream()
    runner, table, _ = _runner(_done, stream, start_on_delivery=True)
    a = _assignment(token=3)
    runner.on_assignments([a])
    assert table.held[uuid.UUID(a.task_id)].acked
    await _finish(table, a)
    assert stream.requested == []
    (completion,) = stream.committed
    assert isinstance(completion, pb.Completion)
    assert completion.task.fencing_token == 3


async def test_a_task_whose_lease_was_lost_is_not_completed() -> None:
    async def handler(ctx: TaskContext) -> None:
        await ctx.cancelled.wait()
        raise Interrupted(ctx.cancel_reason)

    stream = FakeStream()
    runner, table, drain = _runner(handler, stream, start_on_delivery=True)
    a = _assignment()
    runner.on_assignments([a])
    ctx = table.held[uuid.UUID(a.task_id)].ctx
    stream.answer = all_stale  # the heartbeat finds another attempt owns the task
    await runner.heartbeat()
    assert ctx.cancel_reason == "lease_lost"
    await _finish(table, a)
    assert stream.committed == []
    assert drain.tally["rejected"] == 1


async def test_a_failure_carries_the_assigned_token() -> None:
    async def handler(ctx: TaskContext) -> None:
        raise RuntimeError("boom")

    stream = FakeStream()
    runner, table, _ = _runner(handler, stream, start_on_delivery=True)
    a = _assignment(token=11)
    runner.on_assignments([a])
    await _finish(table, a)
    (failure,) = stream.committed
    assert isinstance(failure, pb.WorkerMessage)
    assert (failure.failure.task.fencing_token, failure.failure.error) == (11, "boom")
    assert failure.failure.retryable


async def test_on_reconnect_the_held_tasks_are_heartbeaten_at_once() -> None:
    release = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        await release.wait()

    stream = FakeStream()
    runner, table, _ = _runner(handler, stream, start_on_delivery=True, slots=4)
    a, b = _assignment(token=5), _assignment(token=6)
    runner.on_assignments([a, b])
    runner.on_welcome(announced=table.free())
    assert stream.kinds() == ["heartbeat"]
    assert sorted(r.fencing_token for r in stream.sent[0].heartbeat.tasks) == [5, 6]
    tasks = [h.task for h in table.held.values() if h.task is not None]
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5.0)
    assert table.held == {}


async def test_on_welcome_a_draining_worker_says_so_and_takes_no_credit() -> None:
    stream = FakeStream()
    runner, _, drain = _runner(_done, stream)
    runner.on_welcome(announced=0)
    assert stream.kinds() == ["credit"]  # the slots freed while disconnected
    assert stream.sent[0].credit.slots == 4
    stream.sent.clear()
    drain.stopping = True
    runner.on_welcome(announced=0)
    assert stream.kinds() == ["drain"]


async def test_what_cannot_run_here_is_given_back() -> None:
    stream = FakeStream()
    runner, table, drain = _runner(_done, stream, start_on_delivery=True)
    unknown = _assignment(type="other")
    runner.on_assignments([unknown])
    drain.stopping = True
    late = _assignment()
    runner.on_assignments([late])
    assert stream.kinds() == ["release", "release"]
    assert [m.release.task.task_id for m in stream.sent] == [unknown.task_id, late.task_id]
    assert table.held == {}


async def test_a_client_cancel_reaches_only_the_attempt_it_names() -> None:
    async def handler(ctx: TaskContext) -> None:
        await ctx.cancelled.wait()
        raise Interrupted(ctx.cancel_reason)

    stream = FakeStream()
    runner, table, _ = _runner(handler, stream, start_on_delivery=True)
    a = _assignment(token=4)
    runner.on_assignments([a])
    ctx = table.held[uuid.UUID(a.task_id)].ctx
    runner.on_cancel(pb.TaskRef(task_id=a.task_id, fencing_token=3))  # an older attempt
    assert not ctx.is_cancelled
    runner.on_cancel(pb.TaskRef(task_id=a.task_id, fencing_token=4))
    await _finish(table, a)
    (confirmed,) = stream.committed
    assert isinstance(confirmed, pb.WorkerMessage)
    assert confirmed.cancel_confirmed.task.fencing_token == 4


async def test_a_checkpoint_is_fenced_with_the_attempts_token() -> None:
    async def handler(ctx: TaskContext) -> dict[str, int]:
        await ctx.checkpoint({"row": 10})
        return {"row": 10}

    stream = FakeStream(all_ok)
    runner, table, _ = _runner(handler, stream, start_on_delivery=True)
    a = _assignment(token=8)
    runner.on_assignments([a])
    await _finish(table, a)
    (checkpoint,) = stream.requested
    assert checkpoint.checkpoint.task.fencing_token == 8
    assert orjson.loads(checkpoint.checkpoint.data_json) == {"row": 10}


async def test_a_finished_attempt_leaves_no_reference_cycle() -> None:
    """What a task's attempt built (its held entry, context, asyncio task) is freed by
    reference counting when the attempt ends: left in a cycle, it waited for the
    collector, and the young-generation passes that found thousands of such attempts
    paused the worker for 17-27 ms every 0.7 s at 5,000 tasks/s (docs/benchmarks.md)."""
    import gc

    from scheduler.worker._slots import Held

    stream = FakeStream()
    runner, table, _ = _runner(_done, stream, slots=50)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for start_on_delivery in (False, True):
            runner._start_on_delivery = start_on_delivery
            batch = [_assignment() for _ in range(20)]
            runner.on_assignments(batch)
            tasks = [table.held[uuid.UUID(a.task_id)].task for a in batch]
            await asyncio.wait_for(asyncio.gather(*tasks), 5.0)
            del tasks
            assert await table.wait_empty(5.0)  # the completions' answers came
            await asyncio.sleep(0)  # the tasks' done callbacks
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, Held | asyncio.Task)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


async def test_a_task_pushed_ahead_is_acked_at_once_and_starts_at_its_due_instant() -> None:
    """``start_in_us``: the ack goes at once (before the due instant), the handler not
    before that long after the push arrived, by the loop's clock."""
    loop = asyncio.get_running_loop()
    started: list[float] = []

    async def handler(ctx: TaskContext) -> None:
        started.append(loop.time())

    stream = FakeStream()
    runner, table, _ = _runner(handler, stream)
    a = _assignment()
    a.start_in_us = 30_000
    arrived = loop.time()
    runner.on_assignments([a])
    assert [m.WhichOneof("kind") for m in stream.requested] == ["ack"]
    await _finish(table, a)
    assert started
    assert started[0] >= arrived + 0.030


async def test_a_task_cancelled_before_it_starts_never_runs_and_confirms_the_cancel() -> None:
    """A CancelRequest for a task held to its due instant: the handler never runs
    (the cancel is confirmed), and another attempt's cancel does not touch it."""
    ran = asyncio.Event()

    async def handler(ctx: TaskContext) -> None:
        ran.set()

    stream = FakeStream()
    runner, table, _ = _runner(handler, stream)
    a = _assignment(token=5)
    a.start_in_us = 50_000
    runner.on_assignments([a])
    runner.on_cancel(pb.TaskRef(task_id=a.task_id, fencing_token=5))
    await _finish(table, a)
    assert not ran.is_set()
    (confirmed,) = stream.committed
    assert isinstance(confirmed, pb.WorkerMessage)
    assert confirmed.cancel_confirmed.task.fencing_token == 5


class _OneBatch(FakeStream):
    """Completions join one batch whose answer (or failure) the test sets."""

    def __init__(self) -> None:
        super().__init__()
        loop = asyncio.get_running_loop()
        self.result: asyncio.Future[list[pb.TaskResult]] = loop.create_future()
        self.batch = Answers(loop, 5.0)
        self.batch.follow(self.result)
        self.joined: list[str] = []

    def complete(
        self, completion: Completed, answered: Callable[[Any, TaskAnswer], None], arg: Any
    ) -> bool:
        if not self.connected:
            return False
        self.joined.append(completion.task_id)
        self.batch.on_answer(completion.task_id, answered, arg)
        return True


async def _sent_completion(stream: _OneBatch, table: Slots, a: pb.Assignment) -> None:
    """The handler ran and its completion joined the batch: its task is over, its row
    waits for the answer with its slot free already."""
    await _finish(table, a)
    held = table.held[uuid.UUID(a.task_id)]
    assert held.committing
    assert stream.joined == [a.task_id]
    assert table.free() == table.capacity


async def test_a_completion_is_answered_without_a_task_waiting_for_it() -> None:
    stream = _OneBatch()
    runner, table, _ = _runner(_done, stream, start_on_delivery=True)
    a = _assignment(token=9)
    runner.on_assignments([a])
    await _sent_completion(stream, table, a)
    stream.result.set_result([pb.TaskResult(task_id=a.task_id, ok=True)])
    assert await table.wait_empty(5.0)
    assert runner.stats.handled[("t", "completed")] == 1
    assert stream.committed == []  # nothing went through commit


async def test_a_completion_whose_batch_failed_is_committed_again() -> None:
    stream = _OneBatch()
    runner, table, _ = _runner(_done, stream, start_on_delivery=True)
    a = _assignment(token=9)
    runner.on_assignments([a])
    await _sent_completion(stream, table, a)
    stream.result.set_exception(Unavailable("worker stream closed"))  # a reconnect
    assert await table.wait_empty(5.0)
    (again,) = stream.committed  # through commit, which waits for the next stream
    assert isinstance(again, pb.Completion)
    assert (again.task.task_id, again.task.fencing_token) == (a.task_id, 9)
    assert runner.stats.handled[("t", "completed")] == 1


async def test_a_completion_whose_batch_failed_as_the_worker_closes_is_uncommitted() -> None:
    stream = _OneBatch()
    runner, table, _ = _runner(_done, stream, start_on_delivery=True)
    a = _assignment()
    runner.on_assignments([a])
    await _sent_completion(stream, table, a)
    stream.closing.set()
    stream.result.set_exception(Unavailable("worker stream closed"))
    assert await table.wait_empty(5.0)
    assert stream.committed == []
    assert runner.stats.handled[("t", "uncommitted")] == 1


async def test_with_no_stream_up_a_completion_waits_for_one_in_commit() -> None:
    stream = _OneBatch()
    stream.connected = False
    runner, table, _ = _runner(_done, stream, start_on_delivery=True)
    a = _assignment()
    runner.on_assignments([a])
    await _finish(table, a)
    assert table.held == {}
    assert stream.joined == []
    assert len(stream.committed) == 1
    assert runner.stats.handled[("t", "completed")] == 1

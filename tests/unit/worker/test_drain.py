"""The drain, alone: a fake stream, the real slots, rows whose handlers are plain
asyncio tasks."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import orjson

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker import DrainReport, TaskContext
from scheduler.worker._drain import Drain
from scheduler.worker._slots import Held, Slots
from tests.unit.worker.fakes import FakeStream


def _drain(stream: FakeStream, *, started: bool = True) -> tuple[Drain, Slots, list[str]]:
    calls: list[str] = []
    done = asyncio.Event()
    done.set()  # the facade's run() already ended: no wait for the stream to close
    holder: list[Drain] = []
    slots = Slots(4, send=stream.send, stopping=lambda: holder[0].stopping)
    drain = Drain(
        worker_id="w",
        stream=stream,
        slots=slots,
        kafka=None,
        started=lambda: started,
        done=done,
        abandon=lambda: calls.append("abandon"),
    )
    holder.append(drain)
    return drain, slots, calls


async def _no_checkpoints(ctx: TaskContext, data: dict[str, int]) -> None:
    raise AssertionError("no checkpoint expected")


def _hold(slots: Slots, token: int, checkpoint: dict[str, int] | None) -> Held:
    now = datetime.now(UTC)
    task_id = uuid.uuid4()
    ctx = TaskContext(
        task_id=task_id,
        type="t",
        attempt=1,
        max_retries=3,
        payload={},
        fencing_token=token,
        checkpoint_data=checkpoint,
        trace_context=None,
        scheduled_at=now,
        due_at=now,
        timeout_s=0,
        received_at=now,
        loop=asyncio.get_running_loop(),
        checkpointer=_no_checkpoints,
    )
    ref = pb.TaskRef(task_id=str(task_id), fencing_token=token)
    held = Held(ref=ref, ctx=ctx, ref_bytes=ref.SerializeToString(), acked=True)
    slots.held[task_id] = held
    return held


async def test_a_drain_before_run_reports_nothing_and_abandons_the_pool() -> None:
    stream = FakeStream()
    drain, _, calls = _drain(stream, started=False)
    assert await drain.shutdown(5.0) == DrainReport()
    assert drain.stopping
    assert stream.closing.is_set()
    assert calls == ["abandon"]
    assert await drain.shutdown(1.0) == DrainReport()  # safe twice
    assert calls == ["abandon"]


async def test_at_the_deadline_a_running_task_is_released_with_its_checkpoint() -> None:
    stream = FakeStream()
    drain, slots, _ = _drain(stream)
    held = _hold(slots, token=12, checkpoint={"row": 450_000})
    never = asyncio.Event()
    held.task = asyncio.create_task(never.wait())
    report = await drain.shutdown(0.0)
    assert report == DrainReport(released_at_deadline=1)
    assert stream.kinds() == ["drain"]
    (release,) = stream.requested
    assert release.release.task.fencing_token == 12
    # The SDK sends JSON as bytes (docs/clients.md).
    assert orjson.loads(release.release.checkpoint_json) == {"row": 450_000}
    assert not release.release.HasField("checkpoint")
    assert held.released
    assert held.ctx.cancel_reason == "drain"
    assert held.task.cancelled()
    assert stream.finished


async def test_handlers_see_the_drain_and_a_task_that_ends_in_time_is_not_released() -> None:
    stream = FakeStream()
    drain, slots, _ = _drain(stream)
    held = _hold(slots, token=1, checkpoint=None)

    async def handler() -> None:
        await held.ctx.cancelled.wait()
        drain.count("completed")  # what the runner tallies for a completion

    held.task = asyncio.create_task(handler())
    report = await drain.shutdown(30.0)
    assert report == DrainReport(completed=1)
    assert held.ctx.drain_deadline is not None
    assert stream.requested == []
    assert not held.released

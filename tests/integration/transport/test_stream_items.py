"""One bad item on the worker stream is refused in its Result; the stream stays open
(issue #15, case 6). Only protocol violations end the stream, with a named status."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from tests.integration.transport.conftest import Stack

INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]


class Wire:
    """One raw worker stream: results by request id, assignments as they come."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.assignments: asyncio.Queue[pb.Assignment] = asyncio.Queue()
        self.results: dict[int, pb.Result] = {}
        self._arrived = asyncio.Event()
        self.error: grpc.aio.AioRpcError | None = None
        self.ended = asyncio.Event()

    async def pump(self) -> None:
        try:
            while True:
                msg = await self.call.read()
                if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
                    return
                kind = msg.WhichOneof("kind")
                if kind == "assignments":
                    for a in msg.assignments.tasks:
                        self.assignments.put_nowait(a)
                elif kind == "result":
                    self.results[msg.result.request_id] = msg.result
                    self._arrived.set()
        except grpc.aio.AioRpcError as exc:
            self.error = exc
        finally:
            self.ended.set()
            self._arrived.set()

    async def ask(self, msg: pb.WorkerMessage) -> pb.Result:
        await self.call.write(msg)
        async with asyncio.timeout(10):
            while msg.request_id not in self.results:
                if self.ended.is_set():
                    raise AssertionError(f"stream ended: {self.error}")
                self._arrived.clear()
                await self._arrived.wait()
        return self.results.pop(msg.request_id)


@pytest.fixture
async def wire(stack: Stack) -> AsyncIterator[Wire]:
    async with grpc.aio.insecure_channel(stack.target) as channel:
        call = pbg.WorkerServiceStub(channel).Connect(metadata=(("x-api-key", stack.key_a),))
        await call.write(
            pb.WorkerMessage(hello=pb.Hello(worker_id="w1", task_types=["email"], slots=4))
        )
        welcome = await call.read()
        assert welcome.WhichOneof("kind") == "welcome"
        w = Wire(call)
        pump = asyncio.create_task(w.pump())
        try:
            yield w
        finally:
            call.cancel()
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
            w.ended.set()


async def _held(stack: Stack, wire: Wire) -> pb.TaskRef:
    """One task pushed to the stream and acked: its ref."""
    client = await stack.client()
    try:
        await client.submit("email", {}, strict_timing=True)
    finally:
        await client.close()
    a = await asyncio.wait_for(wire.assignments.get(), 10)
    ref = pb.TaskRef(task_id=a.task_id, fencing_token=a.fencing_token, scheduled_at=a.scheduled_at)
    res = await wire.ask(pb.WorkerMessage(request_id=1000, ack=pb.Ack(tasks=[ref])))
    assert res.code == 0
    assert [r.ok for r in res.results] == [True]
    return ref


_ids = iter(range(1, 1_000_000))


async def _still_open(wire: Wire, ref: pb.TaskRef) -> None:
    res = await wire.ask(
        pb.WorkerMessage(request_id=next(_ids), heartbeat=pb.Heartbeat(tasks=[ref]))
    )
    assert res.code == 0, res
    assert [r.ok for r in res.results] == [True], res
    assert not wire.ended.is_set()


def _no_stamp(ref: pb.TaskRef) -> pb.TaskRef:
    out = pb.TaskRef()
    out.CopyFrom(ref)
    out.ClearField("scheduled_at")
    return out


def _bad_cases(ref: pb.TaskRef) -> list[tuple[pb.WorkerMessage, str]]:
    other = pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=1, scheduled_at=ref.scheduled_at)
    return [
        (pb.WorkerMessage(), "kind"),
        (pb.WorkerMessage(credit=pb.Credit(slots=0)), "credit.slots"),
        (pb.WorkerMessage(ack=pb.Ack(tasks=[_no_stamp(ref)])), "ack.tasks[0].scheduled_at"),
        (
            pb.WorkerMessage(heartbeat=pb.Heartbeat(tasks=[ref, _no_stamp(ref)])),
            "heartbeat.tasks[1].scheduled_at",
        ),
        (pb.WorkerMessage(heartbeat=pb.Heartbeat(tasks=[ref, ref])), "heartbeat[1].task_id"),
        (
            pb.WorkerMessage(completion=pb.Completion(task=pb.TaskRef(task_id="nope"))),
            "completion.task.task_id",
        ),
        (pb.WorkerMessage(completion=pb.Completion()), "completion.task"),
        (
            pb.WorkerMessage(failure=pb.Failure(task=pb.TaskRef(**_fields(other, 0)))),
            "failure.task.fencing_token",
        ),
        (pb.WorkerMessage(checkpoint=pb.Checkpoint()), "checkpoint.task"),
        (pb.WorkerMessage(release=pb.Release()), "release.task"),
        (pb.WorkerMessage(cancel_confirmed=pb.CancelConfirmed()), "cancel_confirmed.task"),
    ]


def _fields(ref: pb.TaskRef, token: int) -> dict[str, Any]:
    return {"task_id": ref.task_id, "fencing_token": token, "scheduled_at": ref.scheduled_at}


async def test_each_bad_item_is_refused_in_its_result_and_the_stream_stays_open(
    stack: Stack, wire: Wire
) -> None:
    ref = await _held(stack, wire)
    for msg, field in _bad_cases(ref):
        msg.request_id = next(_ids)
        res = await wire.ask(msg)
        assert (res.code, res.field) == (INVALID, field), (msg, res)
        assert res.message.startswith(f"{field}:"), res
        assert list(res.results) == []
        await _still_open(wire, ref)


async def test_a_refusal_is_answered_even_without_a_request_id(stack: Stack, wire: Wire) -> None:
    ref = await _held(stack, wire)
    await wire.call.write(pb.WorkerMessage(credit=pb.Credit(slots=0)))
    res = await wire.ask(pb.WorkerMessage(request_id=0))  # waits for request id 0
    assert (res.code, res.field) == (INVALID, "credit.slots")
    await _still_open(wire, ref)


async def test_unknown_task_and_stale_token_come_back_per_task(stack: Stack, wire: Wire) -> None:
    ref = await _held(stack, wire)
    unknown = pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=1, scheduled_at=ref.scheduled_at)
    stale = pb.TaskRef(**_fields(ref, ref.fencing_token + 5))
    res = await wire.ask(
        pb.WorkerMessage(request_id=next(_ids), heartbeat=pb.Heartbeat(tasks=[unknown, stale]))
    )
    assert res.code == 0
    assert [(r.ok, r.reason) for r in res.results] == [
        (False, "not_found"),
        (False, "stale_fencing_token"),
    ]
    done = pb.Completion(task=stale)
    res = await wire.ask(pb.WorkerMessage(request_id=next(_ids), completion=done))
    assert [(r.ok, r.reason) for r in res.results] == [(False, "stale_fencing_token")]
    await _still_open(wire, ref)
    ok = await wire.ask(pb.WorkerMessage(request_id=next(_ids), completion=pb.Completion(task=ref)))
    assert [r.ok for r in ok.results] == [True]


async def test_one_bad_message_in_a_coalesced_run_refuses_only_itself(
    stack: Stack, wire: Wire
) -> None:
    """Heartbeats written back to back are applied as one engine call; the bad one
    among them is refused alone."""
    ref = await _held(stack, wire)
    first, bad, last = next(_ids), next(_ids), next(_ids)
    for rid, tasks in ((first, [ref]), (bad, [_no_stamp(ref)]), (last, [ref])):
        await wire.call.write(pb.WorkerMessage(request_id=rid, heartbeat=pb.Heartbeat(tasks=tasks)))
    res = await wire.ask(pb.WorkerMessage(request_id=next(_ids), drain=pb.Drain()))
    assert res.code == 0
    assert [r.ok for r in wire.results.pop(first).results] == [True]
    assert wire.results.pop(bad).code == INVALID
    assert [r.ok for r in wire.results.pop(last).results] == [True]


async def test_a_second_hello_ends_the_stream_with_invalid_argument(
    stack: Stack, wire: Wire
) -> None:
    await wire.call.write(
        pb.WorkerMessage(hello=pb.Hello(worker_id="w1", task_types=["email"], slots=1))
    )
    await asyncio.wait_for(wire.ended.wait(), 10)
    assert wire.error is not None
    assert wire.error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (wire.error.details() or "").startswith("hello:")

"""Slots and credit, alone: free slots, the held table, credit batched per loop turn."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import orjson
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker._context import TaskContext
from scheduler.worker._shared_credit import SharedCredit
from scheduler.worker._slots import Held, Slots


class _Sent:
    def __init__(self) -> None:
        self.messages: list[pb.WorkerMessage] = []
        self.arrived = asyncio.Event()

    def __call__(self, msg: pb.WorkerMessage) -> None:
        self.messages.append(msg)
        self.arrived.set()


def _held(task_id: uuid.UUID, token: int = 1, checkpoint: dict[str, int] | None = None) -> Held:
    now = datetime.now(UTC)
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
    return Held(ref=ref, ctx=ctx, ref_bytes=ref.SerializeToString())


async def _no_checkpoints(ctx: TaskContext, data: dict[str, int]) -> None:
    raise AssertionError("no checkpoint expected")


async def test_free_slots_count_the_held_tasks() -> None:
    slots = Slots(3, send=_Sent(), stopping=lambda: False)
    assert slots.free() == 3
    for _ in range(4):
        task_id = uuid.uuid4()
        slots.held[task_id] = _held(task_id)
    assert slots.free() == 0  # never negative


async def test_credit_given_back_in_one_loop_turn_rides_in_one_message() -> None:
    sent = _Sent()
    slots = Slots(10, send=sent, stopping=lambda: False)
    for _ in range(3):
        slots.give_back(1)
    assert sent.messages == []  # not yet: at the end of the turn
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=3))]


async def test_a_dropped_task_gives_its_slot_back_unless_draining() -> None:
    stopping = False
    sent = _Sent()
    slots = Slots(2, send=sent, stopping=lambda: stopping)
    first, second = uuid.uuid4(), uuid.uuid4()
    slots.held[first] = a = _held(first)
    slots.held[second] = b = _held(second)
    slots.drop(a)
    assert list(slots.held) == [second]
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=1))]
    stopping = True
    slots.drop(b)
    assert slots.held == {}
    assert slots.free() == 2
    assert len(sent.messages) == 1  # a draining worker asks for nothing more


async def test_a_superseded_row_is_not_dropped_by_the_old_attempt() -> None:
    slots = Slots(2, send=_Sent(), stopping=lambda: True)
    task_id = uuid.uuid4()
    old, new = _held(task_id, token=1), _held(task_id, token=2)
    slots.held[task_id] = new
    slots.drop(old)
    assert slots.held[task_id] is new


async def test_in_kafka_mode_a_freed_slot_wakes_the_consumer() -> None:
    sent = _Sent()
    wakeup = asyncio.Event()
    slots = Slots(1, send=sent, stopping=lambda: False, wakeup=wakeup)
    slots.give_back(1)
    assert wakeup.is_set()
    assert sent.messages == []


async def test_a_release_carries_the_attempts_token_and_last_checkpoint() -> None:
    task_id = uuid.uuid4()
    msg = _held(task_id, token=9, checkpoint={"row": 450_000}).release_message()
    assert msg.release.task.fencing_token == 9
    assert orjson.loads(msg.release.checkpoint_json) == {"row": 450_000}  # sent as bytes
    empty = _held(task_id).release_message().release
    assert not empty.HasField("checkpoint")
    assert not empty.checkpoint_json


async def test_a_slot_goes_back_when_its_handler_ends_not_when_its_outcome_is_answered() -> None:
    sent = _Sent()
    slots = Slots(2, send=sent, stopping=lambda: False)
    task_id = uuid.uuid4()
    slots.held[task_id] = held = _held(task_id)
    assert slots.free() == 1
    slots.handler_ended(held)
    slots.handler_ended(held)  # once only
    assert slots.free() == 2  # the row stays (its outcome is in flight), the slot is free
    assert list(slots.held) == [task_id]
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=1))]
    sent.arrived.clear()
    slots.drop(held)  # the outcome's answer: the row goes, no second credit
    assert slots.held == {}
    assert slots.free() == 2
    await asyncio.sleep(0.01)
    assert len(sent.messages) == 1


async def test_early_slots_are_capped_at_the_capacity() -> None:
    """A server slow to answer outcomes: at most ``capacity`` rows hold a slot that went
    back early; the next handler's slot waits for its own outcome's answer."""
    sent = _Sent()
    slots = Slots(2, send=sent, stopping=lambda: False)
    rows = []
    for _ in range(3):
        task_id = uuid.uuid4()
        slots.held[task_id] = held = _held(task_id)
        rows.append(held)
    for held in rows:
        slots.handler_ended(held)
    assert [h.freed for h in rows] == [True, True, False]
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=2))]
    sent.arrived.clear()
    slots.drop(rows[2])  # its slot goes back now
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages[-1] == pb.WorkerMessage(credit=pb.Credit(slots=1))
    slots.drop(rows[0])
    slots.handler_ended(rows[1])
    assert slots.free() == 2


async def test_no_early_slot_while_draining() -> None:
    sent = _Sent()
    slots = Slots(2, send=sent, stopping=lambda: True)
    task_id = uuid.uuid4()
    slots.held[task_id] = held = _held(task_id)
    slots.handler_ended(held)
    slots.drop(held)
    await asyncio.sleep(0.01)
    assert sent.messages == []
    assert not held.freed


def _holding(slots: Slots, n: int) -> list[Held]:
    rows = []
    for _ in range(n):
        task_id = uuid.uuid4()
        slots.held[task_id] = held = _held(task_id)
        rows.append(held)
    return rows


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_credit_waits_while_the_server_holds_half_the_slots_or_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flat stream's handlers end every start-grid step: while the server still holds
    more than half this worker's slots in credit, what they free waits (at most
    ``CREDIT_LINGER_S``) to go in one ``Credit`` with what the next steps free."""
    monkeypatch.setattr("scheduler.worker._slots.CREDIT_LINGER_S", 0.05)
    sent = _Sent()
    slots = Slots(10, send=sent, stopping=lambda: False)
    rows = _holding(slots, 3)
    slots.drop(rows[0])  # the server holds 10 - 3 = 7 credits, more than half
    await _turns()
    slots.drop(rows[1])
    await _turns()
    assert sent.messages == []
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=2))]


async def test_credit_goes_at_the_end_of_the_turn_once_the_server_runs_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At half the slots or fewer in the server's hands (a burst took them), freed
    slots go at the end of the loop turn, and a credit already waiting goes with them:
    a busy worker, or a worker of one slot, never waits for the linger."""
    monkeypatch.setattr("scheduler.worker._slots.CREDIT_LINGER_S", 3600.0)
    sent = _Sent()
    slots = Slots(10, send=sent, stopping=lambda: False)
    rows = _holding(slots, 1)
    slots.drop(rows[0])  # 10 free: the credit waits
    await _turns()
    assert sent.messages == []
    rows = _holding(slots, 9)  # pushed 9 more: the server holds 1 + 0 owed
    slots.drop(rows[0])
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=2))]
    one = Slots(1, send=(sent_one := _Sent()), stopping=lambda: False)
    one.drop(_holding(one, 1)[0])
    await asyncio.wait_for(sent_one.arrived.wait(), 1.0)
    assert sent_one.messages == [pb.WorkerMessage(credit=pb.Credit(slots=1))]


async def test_credit_owed_to_a_lost_stream_is_not_granted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new stream's Hello announces every free slot, those owed included: the
    waiting credit is forgotten, so the server never holds more than the slots."""
    monkeypatch.setattr("scheduler.worker._slots.CREDIT_LINGER_S", 0.01)
    sent = _Sent()
    slots = Slots(10, send=sent, stopping=lambda: False)
    slots.drop(_holding(slots, 1)[0])
    slots.forget_credit()
    assert slots.free() == 10  # what the Hello announces
    await asyncio.sleep(0.05)
    assert sent.messages == []


async def test_shared_slots_wait_only_while_the_nodes_hold_more_than_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster worker's member: what the nodes hold is the split's grants, not this
    member's free slots (the other members' tasks take slots too)."""
    monkeypatch.setattr("scheduler.worker._slots.CREDIT_LINGER_S", 3600.0)
    sent = _Sent()
    shared = SharedCredit(10)
    handle = shared.handle("a", sent, reports=False)
    slots = Slots(10, send=sent, stopping=lambda: False)
    slots.credit = handle
    handle.welcome(handle.hello(), reports=False)  # alone: every slot granted
    handle.pushed(3)
    rows = _holding(slots, 3)
    slots.drop(rows[0])  # the node holds 7 of 10
    await _turns()
    assert sent.messages == []
    handle.pushed(5)  # the node holds 2: short
    rows += _holding(slots, 5)
    slots.drop(rows[1])
    await asyncio.wait_for(sent.arrived.wait(), 1.0)
    assert sent.messages == [pb.WorkerMessage(credit=pb.Credit(slots=2))]


async def test_wait_empty_returns_once_the_last_row_is_dropped() -> None:
    slots = Slots(4, send=_Sent(), stopping=lambda: False)
    assert await slots.wait_empty(0.0)
    rows = _holding(slots, 2)
    assert not await slots.wait_empty(0.01)
    waiting = asyncio.ensure_future(slots.wait_empty(5.0))
    slots.drop(rows[0])
    await _turns()
    assert not waiting.done()
    slots.drop(rows[1])
    assert await asyncio.wait_for(waiting, 1.0)

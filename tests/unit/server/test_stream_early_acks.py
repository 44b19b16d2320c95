"""An ack the session answers from memory goes out of its turn on the stream: it is
answered while the writes sent before it are still being applied, unless one of them
names the same task (``scheduler.server._worker_messages.receive``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.server._stream_wire import WorkerMessage, Writes
from scheduler.server._worker_messages import Inbox, _ack_at_once, apply_inbox, receive
from scheduler.types import Completion, FencedWrite, Outcome, TaskKey

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class SlowSession:
    """Completions wait for ``commit``; acks are answered from memory when
    ``early`` says so (as ``WorkerSession.ack_at_once``), else in their turn."""

    def __init__(self, *, early: bool = True) -> None:
        self.early = early
        self.commit = asyncio.Event()
        self.calls: list[tuple[str, list[uuid.UUID]]] = []

    def seen(self) -> None:
        pass

    def ack_at_once(self, items: Sequence[FencedWrite]) -> bool:
        if self.early:
            self.calls.append(("ack_at_once", [w.key.id for w in items]))
        return self.early

    async def ack(self, items: Sequence[FencedWrite]) -> list[Outcome]:
        self.calls.append(("ack", [w.key.id for w in items]))
        return [Outcome.OK] * len(items)

    async def complete(self, items: Sequence[Completion]) -> list[Outcome]:
        self.calls.append(("complete", [c.key.id for c in items]))
        await self.commit.wait()
        return [Outcome.OK] * len(items)

    async def fail(self, items: Sequence[Any]) -> list[Outcome]:
        self.calls.append(("fail", [f.key.id for f in items]))
        return [Outcome.OK] * len(items)

    async def heartbeat(self, items: Sequence[FencedWrite]) -> list[Outcome]:
        self.calls.append(("heartbeat", [w.key.id for w in items]))
        return [Outcome.OK] * len(items)

    def grant(self, slots: int) -> None:
        self.calls.append(("grant", []))


def _key() -> TaskKey:
    return TaskKey(uuid.uuid4(), NOW)


def _ack(request_id: int, *keys: TaskKey) -> Writes:
    items = [FencedWrite(key=k, token=1) for k in keys]
    return Writes(request_id, "ack", items, [str(k.id).encode() for k in keys])


def _heartbeat(request_id: int, *keys: TaskKey) -> Writes:
    items = [FencedWrite(key=k, token=1) for k in keys]
    return Writes(request_id, "heartbeat", items, [str(k.id).encode() for k in keys])


def _completions(request_id: int, *keys: TaskKey) -> Writes:
    items = [Completion(key=k, token=1) for k in keys]
    return Writes(request_id, "completions", items, [str(k.id).encode() for k in keys])


async def _stream(
    session: SlowSession, msgs: Sequence[WorkerMessage]
) -> tuple[list[int], asyncio.Event, asyncio.Task[None]]:
    """Send ``msgs`` on a stream read by ``receive`` and applied by ``apply_inbox``.
    Returns the request ids answered so far (filled as answers come), an event set
    once every message was read, and the task applying them."""
    answered: list[int] = []
    read = asyncio.Event()

    async def requests() -> AsyncIterator[WorkerMessage]:
        for m in msgs:
            yield m
            await asyncio.sleep(0)  # one message a loop turn, as the wire gives them
        read.set()

    def reply(r: pb.ServerMessage | bytes) -> None:
        msg = pb.ServerMessage.FromString(r) if isinstance(r, bytes) else r
        answered.append(msg.result.request_id)

    inbox = Inbox(maxsize=100)

    async def run() -> None:
        await asyncio.gather(
            receive(requests(), inbox, session, reply), apply_inbox(session, inbox, reply)
        )  # type: ignore[arg-type]

    return answered, read, asyncio.create_task(run())


async def _settle(read: asyncio.Event) -> None:
    await read.wait()
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_ack_is_answered_while_the_completions_before_it_commit() -> None:
    session = SlowSession()
    a, b = _key(), _key()
    answered, read, task = await _stream(session, [_completions(1, a), _ack(2, b)])
    await _settle(read)
    assert session.calls == [("complete", [a.id]), ("ack_at_once", [b.id])]
    assert answered == [2]  # the completion's commit is still under way
    session.commit.set()
    await task
    assert answered == [2, 1]


async def test_an_ack_naming_a_task_with_a_write_waiting_takes_its_turn() -> None:
    session = SlowSession()
    a, b = _key(), _key()
    answered, read, task = await _stream(session, [_completions(1, a), _ack(2, b, a)])
    await _settle(read)
    assert session.calls == [("complete", [a.id])]
    assert answered == []
    session.commit.set()
    await task
    assert session.calls == [("complete", [a.id]), ("ack", [b.id, a.id])]
    assert answered == [1, 2]


async def test_an_ack_behind_a_message_not_looked_into_takes_its_turn() -> None:
    """A failure is read by the generated class: which task it names is not looked
    into, so an ack behind it waits."""
    session = SlowSession()
    a, b, c = _key(), _key(), _key()
    failure = pb.WorkerMessage(
        request_id=2,
        failure=pb.Failure(
            task=pb.TaskRef(
                task_id=str(b.id), fencing_token=1, scheduled_at=cconv.to_timestamp(NOW)
            ),
            error="boom",
        ),
    )
    answered, read, task = await _stream(session, [_completions(1, a), failure, _ack(3, c)])
    await _settle(read)
    assert answered == []
    session.commit.set()
    await task
    assert [kind for kind, _ in session.calls] == ["complete", "fail", "ack"]
    assert answered == [1, 2, 3]


async def test_an_ack_the_session_cannot_answer_from_memory_takes_its_turn() -> None:
    session = SlowSession(early=False)
    a, b = _key(), _key()
    answered, read, task = await _stream(session, [_completions(1, a), _ack(2, b)])
    await _settle(read)
    assert answered == []
    session.commit.set()
    await task
    assert session.calls == [("complete", [a.id]), ("ack", [b.id])]
    assert answered == [1, 2]


async def test_an_ack_naming_a_task_twice_takes_its_turn_and_is_refused() -> None:
    session = SlowSession()
    a = _key()
    session.commit.set()
    answered, _read, task = await _stream(session, [_ack(7, a, a)])
    await task
    assert session.calls == []  # refused before the engine: INVALID_ARGUMENT in its Result
    assert answered == [7]


async def test_a_credit_waiting_does_not_keep_an_ack_in_its_turn() -> None:
    """A worker sends a credit after each Result: it names no task, so an ack behind
    it still goes at once."""
    session = SlowSession()
    a, b = _key(), _key()
    credit = pb.WorkerMessage(credit=pb.Credit(slots=1))
    answered, read, task = await _stream(session, [_completions(1, a), credit, _ack(3, b)])
    await _settle(read)
    assert answered == [3]
    session.commit.set()
    await task
    assert answered == [3, 1]


async def test_an_ack_never_overtakes_the_message_read_ahead_of_a_group() -> None:
    """``apply_inbox`` reads one message past the group it applies (another kind): that
    message is still waiting, and an ack naming its task takes its turn."""
    session = SlowSession()
    a, b = _key(), _key()
    inbox = Inbox(maxsize=100)
    inbox.put_nowait(_completions(1, a))
    inbox.put_nowait(_heartbeat(2, b))  # read ahead: not a completion
    applier = asyncio.create_task(apply_inbox(session, inbox, lambda _r: None))  # type: ignore[arg-type]
    for _ in range(5):
        await asyncio.sleep(0)
    assert inbox.empty()  # both taken out; the completion's commit is under way
    assert not _ack_at_once(session, inbox, _ack(3, b))  # type: ignore[arg-type]
    assert _ack_at_once(session, inbox, _ack(4, _key()))  # type: ignore[arg-type]
    session.commit.set()
    inbox.put_nowait(None)
    await applier
    assert [kind for kind, _ in session.calls] == ["complete", "ack_at_once", "heartbeat"]

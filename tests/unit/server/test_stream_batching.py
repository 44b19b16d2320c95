"""Consecutive fenced writes on one stream become one engine call, answered per message."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.server._worker_messages import apply_inbox, handle_message, handle_messages
from scheduler.types import Completion, Outcome

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class FakeSession:
    def __init__(self, outcomes: list[Outcome]) -> None:
        self.calls: list[tuple[str, list[Any]]] = []
        self.outcomes = outcomes
        self.granted = 0
        self.drained = False

    async def complete(self, items: Sequence[Completion]) -> list[Outcome]:
        self.calls.append(("complete", list(items)))
        return self.outcomes[: len(items)]

    async def ack(self, items: Sequence[Any]) -> list[Outcome]:
        self.calls.append(("ack", list(items)))
        return self.outcomes[: len(items)]

    def grant(self, slots: int) -> None:
        self.granted += slots

    def drain(self) -> None:
        self.drained = True


def _read(replies: Sequence[pb.ServerMessage | bytes]) -> list[pb.ServerMessage]:
    """The replies as messages (a Result is written as bytes)."""
    return [pb.ServerMessage.FromString(r) if isinstance(r, bytes) else r for r in replies]


def _ref(token: int = 1) -> pb.TaskRef:
    return pb.TaskRef(
        task_id=str(uuid.uuid4()), fencing_token=token, scheduled_at=cconv.to_timestamp(NOW)
    )


async def test_completions_share_one_engine_call() -> None:
    session = FakeSession([Outcome.OK, Outcome.STALE, Outcome.NOT_FOUND])
    msgs = [
        pb.WorkerMessage(request_id=i + 1, completion=pb.Completion(task=_ref())) for i in range(3)
    ]
    replies = _read(await handle_messages(session, msgs))  # type: ignore[arg-type]
    assert [c[0] for c in session.calls] == ["complete"]
    assert len(session.calls[0][1]) == 3
    assert [r.result.request_id for r in replies] == [1, 2, 3]
    assert [(r.result.results[0].ok, r.result.results[0].reason) for r in replies] == [
        (True, ""),
        (False, "stale_fencing_token"),
        (False, "not_found"),
    ]


async def test_acks_split_per_message_and_request_id_zero_gets_no_result() -> None:
    session = FakeSession([Outcome.OK] * 3)
    msgs = [
        pb.WorkerMessage(request_id=7, ack=pb.Ack(tasks=[_ref(), _ref()])),
        pb.WorkerMessage(ack=pb.Ack(tasks=[_ref()])),
    ]
    replies = _read(await handle_messages(session, msgs))  # type: ignore[arg-type]
    assert len(session.calls) == 1
    assert len(replies) == 1
    assert replies[0].result.request_id == 7
    assert len(replies[0].result.results) == 2


async def test_credit_drain_and_bad_messages() -> None:
    session = FakeSession([])
    assert await handle_message(session, pb.WorkerMessage(credit=pb.Credit(slots=3))) is None  # type: ignore[arg-type]
    assert session.granted == 3
    await handle_message(session, pb.WorkerMessage(drain=pb.Drain()))  # type: ignore[arg-type]
    assert session.drained
    # A bad item is refused in its Result (the stream stays open, issue #15 case 6).
    for msg, field in [
        (pb.WorkerMessage(request_id=7, credit=pb.Credit(slots=0)), "credit.slots"),
        (pb.WorkerMessage(request_id=7), "kind"),
        (pb.WorkerMessage(request_id=7, checkpoint=pb.Checkpoint()), "checkpoint.task"),
    ]:
        answer = await handle_message(session, msg)  # type: ignore[arg-type]
        assert answer is not None
        (reply,) = _read([answer])
        assert (reply.result.request_id, reply.result.code, reply.result.field) == (7, 3, field)
    # A protocol violation ends the stream.
    with pytest.raises(InvalidArgument) as info:
        await handle_message(session, pb.WorkerMessage(hello=pb.Hello(worker_id="w")))  # type: ignore[arg-type]
    assert info.value.field == "hello"


class OrderedSession(FakeSession):
    """A FakeSession that logs grants and drains in the order of every call."""

    def grant(self, slots: int) -> None:
        super().grant(slots)
        self.calls.append(("grant", [slots]))

    def drain(self) -> None:
        super().drain()
        self.calls.append(("drain", []))


async def _apply_all(session: FakeSession, msgs: list[pb.WorkerMessage]) -> list[pb.ServerMessage]:
    """``msgs`` all waiting in a stream's inbox at once, applied by ``apply_inbox``."""
    inbox: asyncio.Queue[pb.WorkerMessage | None] = asyncio.Queue()
    for m in [*msgs, None]:
        inbox.put_nowait(m)
    replies: list[pb.ServerMessage | bytes] = []
    await apply_inbox(session, inbox, replies.append)  # type: ignore[arg-type]
    return _read(replies)


async def test_credits_between_waiting_completions_do_not_split_their_write() -> None:
    """A worker sends a credit after each Result that frees slots, so its completions
    and credits interleave on the wire; the completions waiting together still make one
    engine call (one store write), and the credits are granted before it."""
    session = OrderedSession([Outcome.OK] * 3)
    msgs = [
        pb.WorkerMessage(request_id=1, completion=pb.Completion(task=_ref())),
        pb.WorkerMessage(credit=pb.Credit(slots=1)),
        pb.WorkerMessage(request_id=3, completion=pb.Completion(task=_ref())),
        pb.WorkerMessage(request_id=9, credit=pb.Credit(slots=2)),
        pb.WorkerMessage(request_id=4, completion=pb.Completion(task=_ref())),
    ]
    replies = await _apply_all(session, msgs)
    assert [(name, len(items)) for name, items in session.calls] == [
        ("grant", 1),
        ("grant", 1),
        ("complete", 3),
    ]
    assert session.calls[1][1] == [2]
    # Every request is answered; the credit's Result first (it was applied first).
    assert [r.result.request_id for r in replies] == [9, 1, 3, 4]


async def test_a_credit_behind_a_drain_is_not_taken_before_it() -> None:
    """Drain ends the group and is applied in its turn: a credit sent after it is
    never granted before the drain (a draining stream ignores credit)."""
    session = OrderedSession([Outcome.OK] * 2)
    msgs = [
        pb.WorkerMessage(request_id=1, completion=pb.Completion(task=_ref())),
        pb.WorkerMessage(credit=pb.Credit(slots=1)),
        pb.WorkerMessage(drain=pb.Drain()),
        pb.WorkerMessage(credit=pb.Credit(slots=5)),
        pb.WorkerMessage(request_id=2, completion=pb.Completion(task=_ref())),
    ]
    await _apply_all(session, msgs)
    assert session.calls == [
        ("grant", [1]),
        ("complete", session.calls[1][1]),
        ("drain", []),
        ("grant", [5]),
        ("complete", session.calls[4][1]),
    ]
    assert [len(session.calls[i][1]) for i in (1, 4)] == [1, 1]


async def test_other_kinds_still_end_a_group_in_order() -> None:
    """An ack between completions is not moved: fenced writes keep their order."""
    session = OrderedSession([Outcome.OK] * 2)
    msgs = [
        pb.WorkerMessage(request_id=1, completion=pb.Completion(task=_ref())),
        pb.WorkerMessage(request_id=2, ack=pb.Ack(tasks=[_ref()])),
        pb.WorkerMessage(request_id=3, completion=pb.Completion(task=_ref())),
    ]
    replies = await _apply_all(session, msgs)
    assert [name for name, _ in session.calls] == ["complete", "ack", "complete"]
    assert [r.result.request_id for r in replies] == [1, 2, 3]

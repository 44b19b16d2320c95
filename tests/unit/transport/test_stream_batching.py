"""Consecutive fenced writes on one stream become one engine call, answered per message."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.server._worker import handle_message, handle_messages
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


def _ref(token: int = 1) -> pb.TaskRef:
    return pb.TaskRef(
        task_id=str(uuid.uuid4()), fencing_token=token, scheduled_at=cconv.to_timestamp(NOW)
    )


async def test_completions_share_one_engine_call() -> None:
    session = FakeSession([Outcome.OK, Outcome.STALE, Outcome.NOT_FOUND])
    msgs = [
        pb.WorkerMessage(request_id=i + 1, completion=pb.Completion(task=_ref())) for i in range(3)
    ]
    replies = await handle_messages(session, msgs)  # type: ignore[arg-type]
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
    replies = await handle_messages(session, msgs)  # type: ignore[arg-type]
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
        reply = await handle_message(session, msg)  # type: ignore[arg-type]
        assert reply is not None
        assert (reply.result.request_id, reply.result.code, reply.result.field) == (7, 3, field)
    # A protocol violation ends the stream.
    with pytest.raises(InvalidArgument) as info:
        await handle_message(session, pb.WorkerMessage(hello=pb.Hello(worker_id="w")))  # type: ignore[arg-type]
    assert info.value.field == "hello"

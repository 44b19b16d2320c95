"""Fakes of the worker parts' neighbours (not of servers): a stream that records what
it is asked to send and answers from a script, and a drain flag with its tally."""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import Callable
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.worker import _outbox as outbox
from scheduler.worker._answers import Answer as TaskAnswer
from scheduler.worker._answers import Answers
from scheduler.worker._outbox import Completed, Encoded

Answer = Callable[[pb.WorkerMessage], list[pb.TaskResult]]


def read(msg: pb.WorkerMessage | Encoded) -> pb.WorkerMessage:
    """A message the runner wrote as bytes (``_outbox``), read back."""
    return msg.message() if isinstance(msg, Encoded) else msg


def all_ok(msg: pb.WorkerMessage | Encoded) -> list[pb.TaskResult]:
    """Every task the message names is accepted."""
    msg = read(msg)
    kind = msg.WhichOneof("kind")
    body = getattr(msg, str(kind))
    refs = list(body.tasks) if hasattr(body, "tasks") else [body.task]
    return [pb.TaskResult(task_id=r.task_id, ok=True) for r in refs]


def all_stale(msg: pb.WorkerMessage | Encoded) -> list[pb.TaskResult]:
    """Every task the message names has moved on to another attempt."""
    return [pb.TaskResult(task_id=r.task_id, ok=False, reason="stale") for r in all_ok(msg)]


class FakeStream:
    """Stands in for ``_stream.Stream``: records, answers with ``answer``."""

    def __init__(self, answer: Answer = all_ok) -> None:
        self.answer = answer
        self.request_timeout_s = 1.0
        self.closing = asyncio.Event()
        self.sent: list[pb.WorkerMessage] = []
        self.requested: list[pb.WorkerMessage] = []
        """Requests and batches, read back when written as bytes."""
        self.committed: list[pb.WorkerMessage | pb.Completion] = []
        """Fenced writes, a completion read back from its bytes."""
        self.finished = False
        self.commit_seen = asyncio.Event()
        self.connected = True
        """Whether :meth:`complete` takes a completion (else the runner commits it)."""

    def send(self, msg: pb.WorkerMessage) -> None:
        self.sent.append(msg)

    def ack(self, refs: list[bytes]) -> Answers:
        return self.start_batch(outbox.ack(refs))

    def start_batch(self, msg: pb.WorkerMessage | Encoded) -> Answers:
        msg = read(msg)
        self.requested.append(msg)
        answers = Answers(asyncio.get_running_loop(), self.request_timeout_s)
        request: asyncio.Future[list[pb.TaskResult]] = asyncio.get_running_loop().create_future()
        request.set_result(self.answer(msg))
        answers.follow(request)
        return answers

    async def request(
        self, msg: pb.WorkerMessage, timeout_s: float | None = None
    ) -> list[pb.TaskResult]:
        self.requested.append(msg)
        return self.answer(msg)

    async def commit(
        self, msg: pb.WorkerMessage | Completed, task_id: uuid.UUID
    ) -> pb.TaskResult | None:
        if isinstance(msg, Completed):
            completion = msg.message()
            self.committed.append(completion)
            self.commit_seen.set()
            return self.answer(pb.WorkerMessage(completion=completion))[0]
        self.committed.append(msg)
        self.commit_seen.set()
        return self.answer(msg)[0]

    def complete(
        self, completion: Completed, answered: Callable[[Any, TaskAnswer], None], arg: Any
    ) -> bool:
        """As the stream's: joins a batch whose answer comes on a later loop turn (the
        fake's one-completion batch); False while ``connected`` is off."""
        if not self.connected:
            return False
        answers = self.start_batch(pb.WorkerMessage(completion=completion.message()))
        self.requested.pop()  # a fenced write, recorded as one
        self.committed.append(completion.message())
        self.commit_seen.set()
        answers.on_answer(completion.task_id, answered, arg)
        return True

    def finish(self) -> None:
        self.finished = True
        self.closing.set()

    def kinds(self) -> list[str]:
        """The kinds of the messages sent fire-and-forget, in order."""
        return [str(m.WhichOneof("kind")) for m in self.sent]


class FakeDrain:
    """Stands in for ``_drain.Drain``: the ``stopping`` flag and the tally."""

    def __init__(self) -> None:
        self.stopping = False
        self.tally: collections.Counter[str] = collections.Counter()

    def count(self, what: str) -> None:
        self.tally[what] += 1

"""The per-task answers of one batched request: :class:`Answers`.

An ack of a push's tasks and a ``Completions`` message each name many tasks and get one
``Result``; each task's own answer is handed out from it, to a future
(:meth:`Answers.wait`, an ack a handler task waits for) or to a function
(:meth:`Answers.on_answer`, a completion: no coroutine waits for it).

May call: nothing in the worker SDK (the request future it follows is the stream's).
Called by: the stream (makes and follows them), the handler runner (waits, or is called
back) and the unit tests' fake stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from scheduler._errors import Unavailable
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb

_log = logging.getLogger("tickwheel.worker")

Results = asyncio.Future[list[pb.TaskResult]]
"""The per-task results of one request, in the order the server sent them."""

Answer = pb.TaskResult | None | BaseException
"""A task's answer: its Result, None when the batch's answer did not name it, or the
batch's failure (:class:`~scheduler._errors.Unavailable`)."""


class Answers:
    """The per-task answers of one batched request (an ack, a ``Completions``
    message), handed to each task's own waiter by one callback for the whole batch.

    A waiter that is cancelled (its handler task was) leaves the batch and the other
    waiters alone, as ``asyncio.shield`` did; shield cost a future and two callbacks
    per task, and a second indexed future per batch. One timer fails the whole batch
    with Unavailable after ``timeout_s`` (an ``asyncio.timeout`` per task awaiting it
    was a tenth of the worker's CPU in a burst); a late answer then changes nothing.
    """

    __slots__ = ("_calls", "_loop", "_outcome", "_timer", "_waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self._loop = loop
        self._waiters: list[tuple[str, asyncio.Future[pb.TaskResult | None]]] = []
        self._calls: list[tuple[str, Callable[[Any, Answer], None], Any]] = []
        self._outcome: dict[str, pb.TaskResult] | BaseException | None = None
        self._timer = loop.call_later(timeout_s, self._expire)

    def _expire(self) -> None:
        self._settle(Unavailable("no answer from the server in time"))

    @property
    def done(self) -> bool:
        """Whether the answers (or the batch's failure) are in."""
        return self._outcome is not None

    def follow(self, request: Results) -> None:
        """Take the answers from ``request`` (the batch's Result) when it is done."""
        request.add_done_callback(self._from_request)

    def _from_request(self, request: Results) -> None:
        if request.cancelled():
            self._settle(Unavailable("worker stream closed"))
        elif (exc := request.exception()) is not None:
            self._settle(exc)
        else:
            self._settle({r.task_id: r for r in request.result()})

    def _settle(self, outcome: dict[str, pb.TaskResult] | BaseException) -> None:
        if self._outcome is not None:  # the first of the answer and the timer wins
            return
        self._outcome = outcome
        self._timer.cancel()
        waiters, self._waiters = self._waiters, []
        for task_id, waiter in waiters:
            if not waiter.done():  # a cancelled waiter is left alone
                self._give(waiter, task_id)
        calls, self._calls = self._calls, []
        for task_id, fn, arg in calls:
            self._call(fn, arg, task_id)

    def _answer(self, task_id: str) -> Answer:
        outcome = self._outcome
        assert outcome is not None
        return outcome if isinstance(outcome, BaseException) else outcome.get(task_id)

    def _give(self, waiter: asyncio.Future[pb.TaskResult | None], task_id: str) -> None:
        answer = self._answer(task_id)
        if isinstance(answer, BaseException):
            waiter.set_exception(answer)
        else:
            waiter.set_result(answer)

    def _call(self, fn: Callable[[Any, Answer], None], arg: Any, task_id: str) -> None:
        try:
            fn(arg, self._answer(task_id))
        except Exception:  # one task's bookkeeping must not keep the others' answers
            _log.exception("task %s: handling its answer failed", task_id)

    def wait(self, task_id: str) -> asyncio.Future[pb.TaskResult | None]:
        """A future of the answer for ``task_id`` (None if the batch named it not),
        or of the batch's failure; cancelling it touches nothing else."""
        waiter: asyncio.Future[pb.TaskResult | None] = self._loop.create_future()
        if self._outcome is None:
            self._waiters.append((task_id, waiter))
        else:
            self._give(waiter, task_id)
        return waiter

    def on_answer(self, task_id: str, fn: Callable[[Any, Answer], None], arg: Any) -> None:
        """Call ``fn(arg, answer)`` with the :data:`Answer` for ``task_id`` once it is
        in (at once if it is): :meth:`wait` without a future, nor a coroutine waiting
        on one (a completion's, thousands at a time in a busy worker: each coroutine,
        task and future was more for every garbage collection to walk)."""
        if self._outcome is None:
            self._calls.append((task_id, fn, arg))
        else:
            self._call(fn, arg, task_id)

"""Batch handlers: one call of a handler for up to N tasks of one type.

Owns :class:`Batch` (what an application registers: the handler, the batch size and
how long a batch waits to fill) and :class:`BatchGate` (per task type: the tasks
waiting for the next call, the timer of the one that waits longest, the calls in
flight). The gate is the runner's handler of the type: each task's attempt calls
:meth:`BatchGate.run` with its own context and waits there for its own share of the
batch's outcome, so every task keeps its own fencing token, ack, heartbeats, timeout,
completion or failure and retries: the runner commits each one exactly as it commits
a task of a single-task handler (docs/flow-control.md, "Batch handlers").

A batch goes to the handler when ``size`` tasks wait (or as many as the worker has
slots, if it has fewer: no more could arrive), or when the first of them has waited
``max_wait_s``. A task cancelled, drained or timed out while it waits
leaves the batch before the call (when the batch is made up); once the call began,
its context's ``cancelled`` tells the handler, as for a single task.

May call: the handler (sync ones in a thread). Called by: the handler runner (``run``
is an ordinary async handler) and the :class:`~scheduler.worker.Worker` facade, which
makes one gate per batch type.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from scheduler.worker._context import Interrupted, TaskContext

BatchFn = Callable[[list[TaskContext]], Any]
"""``fn(ctxs)``, sync or async: returns one outcome per context, in order (a result, or
an exception instance that fails that task alone), or None (every task completes with
``{}``); raising fails every task of the batch."""


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """A batch handler: register it in ``Worker(handlers={type: Batch(...)})``.

    ``fn`` receives up to ``size`` contexts of its type at once and returns a list of
    as many outcomes, in the same order: a value (stored as the task's result, as a
    single handler's return value is) or an exception instance (that task's attempt
    fails: it retries, or dead-letters for a non-retryable error, on its own). Raising
    fails every task of the batch. ``max_wait_s`` bounds how long the first task of a
    batch waits for others. Give the worker at least ``size`` slots: a batch never
    holds more tasks than the worker has slots (a worker of fewer slots calls it with
    as many as it has).
    """

    fn: BatchFn
    size: int = 100
    max_wait_s: float = 0.05

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError("Batch.fn must be callable")
        if self.size < 1:
            raise ValueError("Batch.size must be >= 1")
        if self.max_wait_s < 0:
            raise ValueError("Batch.max_wait_s must be >= 0")


def batch(*, size: int = 100, max_wait_s: float = 0.05) -> Callable[[BatchFn], Batch]:
    """Decorator form of :class:`Batch`::

    @batch(size=100, max_wait_s=0.05)
    async def send(ctxs: list[TaskContext]) -> list[object]: ...

    Worker(target, api_key=key, handlers={"send": send})
    """

    def wrap(fn: BatchFn) -> Batch:
        return Batch(fn, size=size, max_wait_s=max_wait_s)

    return wrap


class BatchMismatch(TypeError):
    """A batch handler returned something other than one outcome per task."""


class _Waiter:
    __slots__ = ("ctx", "future")

    def __init__(self, ctx: TaskContext, future: asyncio.Future[Any]) -> None:
        self.ctx = ctx
        self.future = future


class BatchGate:
    """The tasks of one type waiting for the next call of its batch handler."""

    def __init__(self, spec: Batch, slots: int) -> None:
        self.spec = spec
        self.size = max(1, min(spec.size, slots))
        """Tasks per full batch: ``spec.size``, or the worker's slots if fewer."""
        self._is_async = inspect.iscoroutinefunction(spec.fn)
        self._waiting: list[_Waiter] = []
        self._timer: asyncio.TimerHandle | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self.calls = 0
        """Calls of the handler so far (for tests and figures)."""

    async def run(self, ctx: TaskContext) -> Any:
        """One task's attempt: join the next batch, return this task's result (or raise
        its exception). The runner's handler of the type.

        No task or timer of its own per task: a future, awaited. A task cancelled,
        drained or whose lease was lost while it waits is dropped (Interrupted) when
        its batch is made up, at the latest ``max_wait_s`` after it joined; a task
        whose await is cancelled (its timeout, the worker stopping) leaves at once."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(ctx, loop.create_future())
        waiting = self._waiting
        waiting.append(waiter)
        if len(waiting) >= self.size:
            self._drop_cancelled()
            if len(waiting) >= self.size:
                self._flush()
        if waiting and self._timer is None:
            self._timer = loop.call_later(self.spec.max_wait_s, self._flush)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            self._leave(waiter)
            raise

    def _drop_cancelled(self) -> None:
        """Tasks told to stop before their batch was called: Interrupted, out of it."""
        if not any(w.ctx.is_cancelled for w in self._waiting):
            return
        keep: list[_Waiter] = []
        for w in self._waiting:
            if w.ctx.is_cancelled:
                if not w.future.done():
                    w.future.set_exception(Interrupted(w.ctx.cancel_reason))
            else:
                keep.append(w)
        self._waiting[:] = keep

    def _leave(self, waiter: _Waiter) -> None:
        """``waiter``'s attempt gave up: out of the next batch (a running batch skips
        its outcome, its future being cancelled)."""
        if waiter in self._waiting:
            self._waiting.remove(waiter)
        if not self._waiting and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _flush(self) -> None:
        """Call the handler with the tasks waiting (``size`` at most a call); a timer
        for the rest, which start the next batch."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._drop_cancelled()
        while self._waiting:
            taken = self._waiting[: self.size]
            del self._waiting[: self.size]
            self.calls += 1
            call = asyncio.create_task(self._call(taken), name=f"tickwheel-batch-{self.calls}")
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)
            if len(self._waiting) < self.size:
                break
        if self._waiting:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.spec.max_wait_s, self._flush)

    async def _call(self, taken: list[_Waiter]) -> None:
        ctxs = [w.ctx for w in taken]
        try:
            if self._is_async:
                outcomes = await self.spec.fn(ctxs)
            else:
                run = functools.partial(contextvars.copy_context().run, self.spec.fn, ctxs)
                outcomes = await asyncio.get_running_loop().run_in_executor(None, run)
                if inspect.isawaitable(outcomes):
                    outcomes = await outcomes
            values = _per_task(outcomes, len(ctxs))
        except asyncio.CancelledError:
            for w in taken:
                if not w.future.done():
                    w.future.cancel()
            raise
        except Exception as exc:
            for w in taken:
                if not w.future.done():
                    w.future.set_exception(_fresh(exc))
            return
        seen: set[int] = set()
        for w, value in zip(taken, values, strict=True):
            if w.future.done():
                continue
            if isinstance(value, BaseException):
                # One instance per task: raised in each task's attempt, a shared one
                # would gather every task's frames in its traceback.
                w.future.set_exception(_fresh(value) if id(value) in seen else value)
                seen.add(id(value))
            else:
                w.future.set_result(value)

    async def close(self) -> None:
        """Cancel the calls in flight (the worker stops) and wait for them."""
        for call in list(self._calls):
            call.cancel()
        await asyncio.gather(*self._calls, return_exceptions=True)


def _fresh(exc: BaseException) -> BaseException:
    """A copy of ``exc`` for one task (its traceback so far kept), or ``exc`` itself
    when it cannot be copied."""
    try:
        twin = copy.copy(exc)
    except Exception:
        return exc
    if type(twin) is not type(exc):
        return exc
    twin.__traceback__ = exc.__traceback__
    twin.__cause__ = exc.__cause__
    return twin


def _per_task(outcomes: Any, n: int) -> Sequence[Any]:
    """The handler's answer as one outcome per task (None: every task completes)."""
    if outcomes is None:
        return [None] * n
    if isinstance(outcomes, str | bytes) or not isinstance(outcomes, Sequence):
        raise BatchMismatch(
            f"a batch handler returns a list of {n} outcomes, not {type(outcomes).__name__}"
        )
    if len(outcomes) != n:
        raise BatchMismatch(f"a batch handler returned {len(outcomes)} outcomes for {n} tasks")
    return outcomes
